"""The config's [bills] section: `tolerance` (how far a provider's bill may differ from
zuka's charge before `zuka bill check` and the bill alerts say so), and one table
[bills.NAME] per CSV bill format of the lab's own: the file's column for each field of a
bill line (leases.money.bills.mapped). An unknown key is refused, naming it."""

from __future__ import annotations

from typing import Any

from leases.config.keys import got
from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.textsafe import is_clean, visible
from leases.money.bills import mapped
from leases.money.bills.reconcile import tolerance

PRESETS = ("aliyun", "aws_cur")  # formats zuka reads itself (leases.money.bills)
MAX_FORMATS = 50


def read_bills(
    body: dict[str, Any],
    where: str,
    formats: dict[str, dict[str, str]],
    sources: dict[str, str],
) -> tuple[str, list[str]]:
    """[bills]: returns (tolerance, problems); the formats go into `formats`."""
    problems: list[str] = []
    tol = ""
    for name, value in body.items():
        key = f"bills.{visible(name, 60)}"
        if name == "tolerance":
            if isinstance(value, bool) or not isinstance(value, str | int | float):
                problems.append(
                    _('{where}: {key}: must be an amount (1.5) or a percent ("1%"){got}').format(
                        where=where, key=key, got=got(value)
                    )
                )
                continue
            try:
                tolerance(str(value), key)
            except InputError as exc:
                problems.append(
                    _("{where}: {key}: {reason}{got}").format(
                        where=where, key=key, reason=exc.reason, got=got(value)
                    )
                )
                continue
            tol = str(value)
            sources[key] = where
        elif not isinstance(value, dict):
            problems.append(
                _(
                    "{where}: {key}: unknown key (known: tolerance, and [bills.NAME] tables "
                    "of column names){got}"
                ).format(where=where, key=key, got=got(value))
            )
        elif name in PRESETS or not name or not is_clean(name) or len(name) > 40:
            problems.append(
                _("{where}: {key}: not a usable format name").format(where=where, key=key)
                + (_(" (zuka reads it itself)") if name in PRESETS else "")
            )
        elif len(formats) >= MAX_FORMATS:
            problems.append(
                _("{where}: {key}: more than {max_formats} bill formats").format(
                    where=where, key=key, max_formats=MAX_FORMATS
                )
            )
        else:
            found = mapped.problems(value)
            problems += [f"{where}: {key}.{p}" for p in found]
            if not found:
                formats[name] = {k: visible(v, 200) for k, v in value.items()}
                sources[key] = where
    return tol, problems
