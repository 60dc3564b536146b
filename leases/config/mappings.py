"""The config's sections of the user's own names rather than fixed keys: [users] (a Unix
user on a node -> person), [projects] (person or user -> project), [keys] (the dashboard's
key remaps) and [money] rates (month -> currency -> rate)."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from leases.config.keys import BadValue, got, suggest
from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.textsafe import is_clean, visible

_RATE_MONTH = re.compile(r"([0-9]{4})-(0[1-9]|1[0-2])")
MAX_RATE = Decimal(1_000_000)  # KRW to a currency a million times smaller: a typo above it
RATE_PLACES = 8
RATE_YEARS = (2000, 2100)  # the months a report can be asked for (leases.money.report.YEARS)
_UNIX_USER = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?")
_BINDING_ID = re.compile(r"[a-z][a-z0-9-]{0,63}")


def read_mapping(
    section: str, body: dict[str, Any], where: str, into: dict[str, str], sources: dict[str, str]
) -> list[str]:
    problems: list[str] = []
    for name, value in body.items():
        key = f"{section}.{visible(name, 80)}"
        if section == "users" and not _UNIX_USER.fullmatch(name):
            problems.append(
                _("{where}: {section}: {name!r} is not a Unix user name").format(
                    where=where, section=section, name=name
                )
            )
        elif section == "projects" and (not name or not is_clean(name) or len(name) > 64):
            problems.append(
                _("{where}: {section}: {name} is not a usable name").format(
                    where=where, section=section, name=visible(repr(name))
                )
            )
        elif section == "keys" and not _BINDING_ID.fullmatch(name):
            problems.append(
                _("{where}: {section}: {name} is not a binding id").format(
                    where=where, section=section, name=visible(repr(name))
                )
            )
        elif not isinstance(value, str):
            problems.append(
                _("{where}: {key}: must be a string{got}").format(
                    where=where, key=key, got=got(value)
                )
            )
        elif not value.strip():
            problems.append(
                _("{where}: {key}: must not be empty{got}").format(
                    where=where, key=key, got=got(value)
                )
            )
        elif not is_clean(value) or len(value) > 64:
            problems.append(
                _("{where}: {key}: must be one line of at most 64 characters{got}").format(
                    where=where, key=key, got=got(value)
                )
            )
        else:
            into[name] = value
            sources[f"{section}.{name}"] = where
    return problems


def read_money(
    body: dict[str, Any],
    where: str,
    into: dict[str, dict[str, Decimal]],
    sources: dict[str, str],
) -> list[str]:
    """[money]: only `rates`, a table of months, each a table of currency = rate."""
    from leases.core.fields import CURRENCIES

    problems: list[str] = []
    shape = _(' (as [money.rates."2026-11"] USD = 7.12)')
    for name, value in body.items():
        if name != "rates":
            problems.append(
                _("{where}: money.{name}: unknown key{suggest}{got}").format(
                    where=where,
                    name=visible(name, 80),
                    suggest=suggest(name, ["rates"], "money."),
                    got=got(value),
                )
            )
            continue
        if not isinstance(value, dict):
            problems.append(
                _("{where}: money.rates: must be a table of months{shape}{got}").format(
                    where=where, shape=shape, got=got(value)
                )
            )
            continue
        for month, table in value.items():
            key = f'money.rates."{visible(month, 40)}"'
            m = _RATE_MONTH.fullmatch(month)
            if m is None or not RATE_YEARS[0] <= int(m.group(1)) <= RATE_YEARS[1]:
                problems.append(
                    _(
                        "{where}: {key}: must be a month YYYY-MM from {rate_years} to "
                        "{rate_years2}{shape}"
                    ).format(
                        where=where,
                        key=key,
                        rate_years=RATE_YEARS[0],
                        rate_years2=RATE_YEARS[1],
                        shape=shape,
                    )
                )
                continue
            if not isinstance(table, dict):
                problems.append(
                    _("{where}: {key}: must be a table of currency = rate{shape}{got}").format(
                        where=where, key=key, shape=shape, got=got(table)
                    )
                )
                continue
            for code, rate in table.items():
                here = f"{key}.{visible(code, 40)}"
                if code not in CURRENCIES:
                    problems.append(
                        _("{where}: {here}: unknown currency; known: {currencies}").format(
                            where=where, here=here, currencies=", ".join(sorted(CURRENCIES))
                        )
                    )
                    continue
                try:
                    into.setdefault(month, {})[code] = _rate(here, rate)
                    sources[f"money.rates.{month}.{code}"] = where
                except BadValue as exc:
                    problems.append(
                        _("{where}: {here}: {problem}{got}").format(
                            where=where, here=here, problem=exc, got=got(rate)
                        )
                    )
    return problems


def _rate(key: str, v: Any) -> Decimal:
    """A rate: how many of the lab's currency one unit is worth; more than 0, at most
    MAX_RATE, at most RATE_PLACES decimals. A TOML number, or a string read as every typed
    amount is (fields.number)."""
    from leases.core.fields import number

    said = _(
        "must be a number above 0 and at most {max_rate:,}: how many of the "
        "lab's currency one unit was worth"
    ).format(max_rate=MAX_RATE)
    if isinstance(v, bool) or not isinstance(v, int | float | str):
        raise BadValue(said)
    try:
        rate = number(key, str(v) if isinstance(v, float) else v)
    except InputError as exc:
        raise BadValue(exc.reason) from None
    if not rate.is_finite() or not 0 < rate <= MAX_RATE:
        raise BadValue(said)
    if rate.as_tuple().exponent < -RATE_PLACES:  # type: ignore[operator]
        raise BadValue(
            _("has more than {rate_places} decimal places").format(rate_places=RATE_PLACES)
        )
    return rate


def read_project_tables(
    body: dict[str, Any], where: str, into: dict[str, tuple[str, ...]], sources: dict[str, str]
) -> list[str]:
    """[projects.NAME] tables (beside [projects]' person = project lines): a project's
    `regions`, the data regions its work may use (`zuka plan job --project NAME`)."""
    problems: list[str] = []
    shape = _(' (as [projects.llm] regions = ["cn-beijing", "cn-shanghai"])')
    for name, table in body.items():
        if not isinstance(table, dict):
            continue
        here = f"projects.{visible(name, 80)}"
        if not name or not is_clean(name) or len(name) > 64:
            problems.append(
                _("{where}: projects: {name} is not a usable name").format(
                    where=where, name=visible(repr(name))
                )
            )
            continue
        for key, value in table.items():
            if key != "regions":
                problems.append(
                    _("{where}: {here}.{key}: unknown key{suggest}{got}").format(
                        where=where,
                        here=here,
                        key=visible(key, 80),
                        suggest=suggest(key, ["regions"], here + "."),
                        got=got(value),
                    )
                )
                continue
            ok = (
                isinstance(value, list)
                and 0 < len(value) <= 100
                and all(
                    isinstance(r, str) and r.strip() and is_clean(r) and len(r) <= 100
                    for r in value
                )
            )
            if not ok:
                problems.append(
                    _(
                        "{where}: {here}.regions: must be a list of 1 to 100 region "
                        "names{shape}{got}"
                    ).format(where=where, here=here, shape=shape, got=got(value))
                )
                continue
            into[name] = tuple(r.strip() for r in value)
            sources[f"projects.{name}.regions"] = where
    return problems
