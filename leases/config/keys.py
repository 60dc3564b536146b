"""Every setting of the config's fixed sections: its key, the parser that checks and types
its value, and the environment variable that overrides it (ZUKA_<SECTION>_<KEY>). A value
refused says why (BadValue), naming the key, the value and where it came from."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import time
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from leases.core.errors import InputError
from leases.core.i18n import N_, _
from leases.core.severity import Severity
from leases.core.textsafe import is_clean, visible

ENV_PREFIX = "ZUKA_"
# Bounds on what a config may hold, so that a hostile file costs a clear message.
MAX_URLS = 50
MAX_URL_CHARS = 2048


class BadValue(Exception):
    """A value refused by a key's parser; the message says why. `items` are problems of
    single entries ("[1]: reason (got ...)") that already show their (masked) values."""

    def __init__(self, reason: str = "", items: list[str] | None = None) -> None:
        super().__init__(reason)
        self.items = items or []


# -- value parsers --------------------------------------------------------------------


def _int(lo: int, hi: int) -> Callable[[Any], int]:
    def parse(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            raise BadValue(_("must be a whole number from {lo} to {hi}").format(lo=lo, hi=hi))
        if not lo <= v <= hi:
            raise BadValue(_("must be from {lo} to {hi}").format(lo=lo, hi=hi))
        return v

    return parse


def _num(lo: float, hi: float, *, lo_open: bool = False, hint: str = "") -> Callable[[Any], float]:
    def said(number: bool) -> str:
        """The refusal, in the language in use (the table is built before it is known)."""
        bounds = {"lo": f"{lo:g}", "hi": f"{hi:g}"}
        if number:
            said = (
                _("must be a number above {lo} and up to {hi}")
                if lo_open
                else _("must be a number from {lo} to {hi}")
            )
        else:
            said = (
                _("must be above {lo} and up to {hi}")
                if lo_open
                else _("must be from {lo} to {hi}")
            )
        return said.format(**bounds) + (_(" ({hint})").format(hint=_(hint)) if hint else "")

    def parse(v: Any) -> float:
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise BadValue(said(True))
        if (v <= lo if lo_open else v < lo) or v > hi:
            raise BadValue(said(False))
        return float(v)

    return parse


def _days_list(v: Any) -> tuple[int, ...]:
    if not isinstance(v, list) or not v:
        raise BadValue(_("must be a non-empty list of whole days, such as [7, 3, 1]"))
    bad = [x for x in v if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x <= 365]
    if bad:
        shown = ", ".join(visible(repr(x), 40) for x in bad)
        raise BadValue(
            _("every entry must be a whole number of days from 0 to 365; not {shown}").format(
                shown=shown
            )
        )
    return tuple(sorted(set(v), reverse=True))


def _currency(v: Any) -> str:
    from leases.core.fields import CURRENCIES

    if isinstance(v, str) and v.strip().upper() == "RMB":
        raise BadValue(_("is not an ISO 4217 code: did you mean CNY?"))
    if not isinstance(v, str) or v not in CURRENCIES:
        known = ", ".join(sorted(CURRENCIES))
        raise BadValue(_("must be an ISO 4217 code that zuka knows: {known}").format(known=known))
    return v


def _lang(v: Any) -> str:
    from leases.core.i18n import LANGS, parse_lang

    found = parse_lang(v) if isinstance(v, str) else None
    if found is None:
        raise BadValue(
            _("must be a language zuka speaks: {langs}").format(
                langs=_("{first} or {second}").format(first=LANGS[0], second=LANGS[1])
            )
        )
    return found


def _tz(v: Any) -> str:
    if not isinstance(v, str) or not v:
        raise BadValue(_("must be an IANA time zone name such as Asia/Shanghai or UTC"))
    try:
        ZoneInfo(v)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise BadValue(_("is not a known IANA time zone (such as Asia/Shanghai or UTC)")) from exc
    return v


def _severity(v: Any) -> Severity:
    try:
        return Severity(v)
    except ValueError as exc:
        raise BadValue(
            _("must be one of {severity}").format(severity=", ".join(s.value for s in Severity))
        ) from exc


def _digest(v: Any) -> time | None:
    text = v.strip().lower() if isinstance(v, str) else None
    if text == "off":
        return None
    m = re.fullmatch(r"daily(?: at)? ([01]?\d|2[0-3]):([0-5]\d)", text or "")
    if m is None:
        raise BadValue(_('must be "off" or "daily at HH:MM", such as "daily at 09:00"'))
    return time(int(m.group(1)), int(m.group(2)))


def _urls(v: Any) -> tuple[str, ...]:
    if not isinstance(v, list):
        raise BadValue(_("must be a list of notification URLs"))
    if len(v) > MAX_URLS:
        raise BadValue(
            _("must hold at most {max_urls} URLs (got {count})").format(
                max_urls=MAX_URLS, count=len(v)
            )
        )
    # Imported here: apprise is only loaded when there are URLs to check.
    from leases.notify.url import mask_url, parse_target

    reasons: list[str] = []
    for i, url in enumerate(v):
        if not isinstance(url, str):
            reasons.append(
                _("[{i}]: must be a string (got {url})").format(i=i, url=visible(repr(url), 60))
            )
            continue
        if len(url) > MAX_URL_CHARS:
            shown = visible(mask_url(url[:200]), 120)
            reasons.append(
                _("[{i}]: must be at most {max_url_chars} characters (got {shown})").format(
                    i=i, max_url_chars=MAX_URL_CHARS, shown=shown
                )
            )
            continue
        try:
            parse_target(url)
        except InputError as exc:
            reasons.append(
                _("[{i}]: {reason} (got {mask_url})").format(
                    i=i, reason=exc.reason, mask_url=visible(mask_url(url), 200)
                )
            )
    if reasons:
        raise BadValue(items=reasons)
    return tuple(v)


def _words(what: str) -> Callable[[Any], tuple[str, ...]]:
    def parse(v: Any) -> tuple[str, ...]:
        if not isinstance(v, list):
            raise BadValue(_("must be a list of strings, each {what}").format(what=_(what)))
        for i, item in enumerate(v):
            if not isinstance(item, str) or not item.strip() or not is_clean(item):
                raise BadValue(
                    _("[{i}]: must be {what}: one line, not empty{got}").format(
                        i=i, what=_(what), got=got(item)
                    )
                )
            if len(item) > 256:
                raise BadValue(_("[{i}]: must be at most 256 characters").format(i=i))
        return tuple(item.strip() for item in v)

    return parse


def _roots(v: Any) -> tuple[str, ...]:
    roots = _words(N_("an absolute path"))(v)
    for i, root in enumerate(roots):
        parts = root.split("/")
        if not root.startswith("/") or root.rstrip("/") == "" or ".." in parts:
            raise BadValue(
                _("[{i}]: must be an absolute path below / without '..'{got}").format(
                    i=i, got=got(root)
                )
            )
    return tuple(r.rstrip("/") for r in roots)


def _ports(v: Any) -> tuple[int, ...]:
    if not isinstance(v, list):
        raise BadValue(_("must be a list of TCP ports, such as [22, 6006]"))
    bad = [x for x in v if isinstance(x, bool) or not isinstance(x, int) or not 1 <= x <= 65535]
    if bad:
        shown = ", ".join(visible(repr(x), 40) for x in bad[:5])
        raise BadValue(
            _("every entry must be a port from 1 to 65535; not {shown}").format(shown=shown)
        )
    return tuple(sorted(set(v)))


def _port_range(v: Any) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d{1,5})\s*-\s*(\d{1,5})\s*", v) if isinstance(v, str) else None
    lo, hi = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
    if m is None or not 1 <= lo <= hi <= 65535:
        raise BadValue(_('must be a range of TCP ports "FIRST-LAST", such as "8000-9000"'))
    return lo, hi


def _paths(v: Any) -> tuple[str, ...]:
    paths = _words(N_("an absolute path"))(v)
    for i, path in enumerate(paths):
        if not path.startswith("/") or ".." in path.split("/"):
            raise BadValue(
                _("[{i}]: must be an absolute path without '..'{got}").format(i=i, got=got(path))
            )
    return tuple(p.rstrip("/") or "/" for p in paths)


@dataclass(frozen=True)
class _Spec:
    section: str
    name: str
    parse: Callable[[Any], Any]
    is_list: bool = False
    # The dataclass field, where it differs from the key's name.
    dest: str = ""
    # May hold a token (a notification URL's): refused in the system config, which every
    # user of the host reads; its place is the secrets file or the user's own.
    secret: bool = False

    @property
    def attr(self) -> str:
        return self.dest or self.name

    @property
    def key(self) -> str:
        return f"{self.section}.{self.name}"

    @property
    def env(self) -> str:
        return f"{ENV_PREFIX}{self.section}_{self.name}".upper()


SPECS = (
    _Spec("billing", "currency", _currency),
    _Spec("billing", "tz", _tz),
    _Spec("ui", "lang", _lang),
    _Spec("alerts", "lease_end_notice_days", _days_list, is_list=True),
    _Spec("alerts", "underuse_window_days", _int(1, 90)),
    _Spec(
        "alerts", "underuse_threshold", _num(0, 1, lo_open=True, hint=N_("a share: 0.5 is 50 %"))
    ),
    _Spec("alerts", "forgotten_idle_hours", _num(0, 720, lo_open=True)),
    _Spec("alerts", "starved_minutes", _int(1, 1440)),
    _Spec("alerts", "starved_util", _num(0, 100, lo_open=True, hint=N_("percent"))),
    _Spec("alerts", "unreachable_minutes", _int(1, 10080)),
    _Spec("alerts", "stopped_question_hours", _num(0, 24 * 30, lo_open=True)),
    _Spec("alerts", "deposit_refund_days", _int(1, 365)),
    _Spec("alerts", "autorenew_notice_days", _int(0, 60)),
    _Spec("alerts", "release_notice_days", _int(0, 60)),
    _Spec("alerts", "temperature_c", _num(40, 120)),
    _Spec("alerts", "disk_full_pct", _num(50, 100, hint=N_("percent used"))),
    _Spec("alerts", "ram_free_pct", _num(0, 50, lo_open=True, hint=N_("percent available"))),
    _Spec("alerts", "balance_days", _num(0, 365, lo_open=True)),
    _Spec("notify", "urls", _urls, is_list=True, secret=True),
    _Spec("notify", "min_severity", _severity),
    _Spec("notify", "rate_limit_per_hour", _int(1, 3600)),
    _Spec("notify", "digest", _digest, dest="digest_at"),
    _Spec("notify", "dedupe_hours", _num(0, 24 * 30)),
    _Spec("notify", "retry_hours", _num(0, 24 * 7)),
    _Spec("notify", "timeout_s", _num(0, 120, lo_open=True)),
    _Spec("offboard", "blocked_accounts", _words(N_("an account id")), is_list=True),
    _Spec("offboard", "scratch_roots", _roots, is_list=True),
    _Spec("offboard", "verify_timeout_s", _num(0, 86400, lo_open=True)),
    _Spec("accept", "vram_tolerance", _num(0, 0.5, hint=N_("a share: 0.03 is 3 %"))),
    _Spec("accept", "matmul_pass", _num(0, 1, lo_open=True, hint=N_("a share: 0.7 is 70 %"))),
    _Spec("accept", "ports", _ports, is_list=True),
    _Spec("accept", "training_ports", _port_range),
    _Spec("accept", "data_paths", _paths, is_list=True),
    _Spec("accept", "min_free_gib", _int(0, 1_000_000)),
    _Spec("accept", "burn_seconds", _int(10, 86400)),
    _Spec("accept", "young_days", _int(1, 365)),
)
BY_KEY = {s.key: s for s in SPECS}
BY_ENV = {s.env: s for s in SPECS}
MAPPINGS = ("users", "projects", "keys")


def shown(value: Any, mask: bool) -> Any:
    """A typed value back in the shape the file takes."""
    if isinstance(value, time):
        return f"daily at {value:%H:%M}"
    if value is None:
        return "off"
    if isinstance(value, Severity):
        return value.value
    if isinstance(value, tuple):
        if value and all(isinstance(v, str) for v in value) and mask:
            from leases.notify.url import mask_url

            return [mask_url(v) for v in value]
        return list(value)
    return value


def suggest(name: str, choices: list[str], prefix: str = "") -> str:
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.7)
    return (
        _("; did you mean {prefix}{close}?").format(prefix=prefix, close=close[0]) if close else ""
    )


def got(value: Any) -> str:
    return _(" (got {value})").format(value=visible(repr(value), 200))
