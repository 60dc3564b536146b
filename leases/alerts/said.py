"""Alert words that can be said again in another language.

An alert's message and action are stored in the ledger (alerts, alert_outbox) by whichever
process evaluates first (the collector, `zuka alerts`, the dashboard) and shown later by
another, maybe in another language (a Chinese dashboard, an English collector's DingTalk
message). So the rules write them as `Said`: a str, the text in the language in use when it
was made (callers and tests read it as text), that keeps what it was made of: a catalogue
message id and its named arguments, which may themselves be Said (a clause, an amount of
money, a span of time). The ledger stores `encode(text)`, a language-neutral JSON form
behind PREFIX; `decode` says it again in the language in use. Text stored before (plain
English) or made of plain words is shown as it is. `--json` writes it under English, so
its "message" and "action" are the English they always were.

A message id is marked where it is written: `say(N_("{name}: no readings for {span}"),
name=name, span=...)`.
"""

from __future__ import annotations

import functools
import json
import re
import string
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from leases.core import spoken
from leases.core.i18n import EN, _, catalogue, is_chinese, ngettext
from leases.money import amounts

PREFIX = "zuka-said:1:"
# A stored form is read from a ledger others may write: at most this deep (a Said in a
# Said...), its message ids the catalogue's own, its fields plain names with a short
# format spec ("{cost:,}", "{pct:.0f}"): never "{name:>400000000}" or "{a.__class__}".
MAX_DEPTH = 8
_SPEC_RE = re.compile(r"[<>^]?#?[0-9]{0,2},?(?:\.[0-9]{1,2})?[a-z%]?")
_FIELD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,40}")


class _Refused(ValueError):
    """A stored form zuka would not have written."""


@functools.lru_cache(maxsize=4096)
def _template(text: str) -> str:
    """text, when every field in it is a plain name with a short format spec."""
    for _literal, field, spec, conversion in string.Formatter().parse(text):
        if field is None:
            continue
        plain = _FIELD_RE.fullmatch(field) and _SPEC_RE.fullmatch(spec or "")
        if conversion not in (None, "r", "s") or not plain:
            raise _Refused(f"not a message zuka writes: {text[:80]!r}")
    return text


def _known(msgid: str, plural: bool) -> None:
    """Refuse a stored message id the catalogue does not hold (when it can be read)."""
    known = getattr(catalogue(EN), "_catalog", None)
    if known is not None and ((msgid, 0) if plural else msgid) not in known:
        raise _Refused(f"not a message id of zuka's: {msgid[:80]!r}")


Arg = Any  # str | int | float | Decimal | Said | None


def _duration(seconds: float) -> str:
    """ "1.6 hours" in English (as ever); "1小时36分钟" in Chinese (a fraction of an
    hour or a day is not how Chinese says a span)."""
    from datetime import timedelta

    from leases.alerts.wording import duration

    if is_chinese():
        return spoken.about(seconds)
    return duration(timedelta(seconds=seconds))


def _days(days: str) -> str:
    """A number of days as a balance alert says it: "1.37" (the message says "days") in
    English; "1天8小时" in Chinese (its message has no unit of its own)."""
    if is_chinese():
        return spoken.about(float(Decimal(days)) * 86400)
    return days


def _money(x: Decimal | None, currency: str) -> str:
    return amounts.money(x, currency)


def _price(x: Decimal, currency: str) -> str:
    return amounts.price(x, currency)


def _billing(value: str) -> str:
    from leases.alerts.wording import billing_word

    return billing_word(value)


def _health(value: str) -> str:
    from leases.telemetry.words import health_word

    return health_word(value)


def _reason(value: str) -> str:
    from leases.telemetry.words import reason

    return reason(value)


def _stopped(value: str) -> str:
    from leases.telemetry.words import stopped_word

    return stopped_word(value)


def _detail(value: str) -> str:
    from leases.telemetry.words import detail_said

    return detail_said(value)


# What a Said may call to say a value (registered by name: the name is stored).
CALLS: dict[str, Callable[..., str]] = {
    "duration": _duration,
    "days": _days,
    "money": _money,
    "price": _price,
    "span": spoken.span,
    "ends_in": spoken.ends_in,
    "gpus": spoken.gpus,
    "nodes": spoken.nodes,
    "billing": _billing,
    "health": _health,
    "reason": _reason,
    "stopped": _stopped,
    "detail": _detail,
}


class Said(str):
    """Text in the language in use when made, and its form (to say it again)."""

    form: dict[str, Any]

    def __new__(cls, text: str, form: dict[str, Any]) -> Said:
        made = super().__new__(cls, text)
        made.form = form
        return made

    def again(self) -> str:
        """The text in the language in use now."""
        return _render(self.form)


def _value(v: Arg) -> Arg:
    """An argument as format() gets it: a Said said again now."""
    if isinstance(v, Said):
        return v.again()
    return v


def _args(args: Mapping[str, Arg]) -> dict[str, Arg]:
    return {k: _value(v) for k, v in args.items()}


def say(msgid: str, /, **args: Arg) -> Said:
    """msgid (marked N_ where written) in the language in use, with its named arguments."""
    form = {"m": msgid, "a": dict(args)}
    return Said(_render(form), form)


def say_n(singular: str, plural: str, n: int, /, **args: Arg) -> Said:
    """The form for n (ngettext; marked where written by the ngettext call's strings)."""
    form = {"m": singular, "p": plural, "n": n, "a": dict(args)}
    return Said(_render(form), form)


def call(name: str, *args: Arg) -> Said:
    """A value said by one of CALLS: call("money", amount, "CNY"), call("duration", seconds)."""
    form = {"f": name, "v": list(args)}
    return Said(_render(form), form)


def plain(text: str) -> Said:
    """Words said the same in every language (data): kept as they are."""
    form = {"t": str(text)}
    return Said(str(text), form)


def phrase(text: str) -> Said:
    """A fixed English phrase another module made: said through the catalogue when it is
    exactly one of its message ids, else as it is."""
    form = {"g": str(text)}
    return Said(_render(form), form)


def joined(sep: str, *parts: Arg) -> Said:
    """Clauses one after another with a separator (marked N_ where written: "; " is "；"
    in Chinese)."""
    form = {"j": sep, "v": list(parts)}
    return Said(_render(form), form)


def _render(form: Mapping[str, Any]) -> str:
    if "t" in form:
        return str(form["t"])
    if "g" in form:
        return _(str(form["g"]))
    if "j" in form:
        return _(str(form["j"])).join(str(_value(v)) for v in form["v"])
    if "f" in form:
        return CALLS[str(form["f"])](*[_value(v) for v in form["v"]])
    args = _args(form.get("a", {}))
    if "p" in form:
        said = ngettext(str(form["m"]), str(form["p"]), int(form["n"]))
        return _template(said).format(**args)
    return _template(_(str(form["m"]))).format(**args)


# -- stored form ---------------------------------------------------------------------------


def _to_json(v: Arg) -> Any:
    if isinstance(v, Said):
        return {"s": _form_json(v.form)}
    if isinstance(v, Decimal):
        return {"d": str(v)}
    if v is None or isinstance(v, (bool, int, float)):
        return v
    return str(v)


def _form_json(form: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(form)
    if "a" in out:
        out["a"] = {k: _to_json(v) for k, v in out["a"].items()}
    if "v" in out:
        out["v"] = [_to_json(v) for v in out["v"]]
    return out


def _from_json(v: Any, depth: int) -> Arg:
    if isinstance(v, dict):
        if "s" in v:
            form = _form_back(v["s"], depth + 1)
            return Said(_render(form), form)
        if "d" in v:
            return Decimal(str(v["d"]))
    return v


def _form_back(form: Mapping[str, Any], depth: int = 0) -> dict[str, Any]:
    if depth > MAX_DEPTH:
        raise _Refused("a stored form nested too deep")
    out = dict(form)
    if "m" in out:
        _known(str(out["m"]), "p" in out)
    if "a" in out:
        out["a"] = {str(k): _from_json(v, depth) for k, v in dict(out["a"]).items()}
    if "v" in out:
        out["v"] = [_from_json(v, depth) for v in list(out["v"])]
    return out


def encode(text: str) -> str:
    """What the ledger stores for an alert's message or action: a Said's form (PREFIX and
    JSON), or plain text as it is."""
    if isinstance(text, Said):
        return PREFIX + json.dumps(_form_json(text.form), ensure_ascii=False, sort_keys=True)
    return str(text)


def decode(stored: str) -> str:
    """Stored text said in the language in use (plain text as it is; a form that cannot
    be read, or one a newer zuka wrote, in the English it keeps, else as stored)."""
    if not stored.startswith(PREFIX):
        return stored
    try:
        form = _form_back(json.loads(stored[len(PREFIX) :]))
        return Said(_render(form), form)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, ArithmeticError):
        return stored
    except RecursionError:  # JSON nested deeper than the parser goes
        return stored
