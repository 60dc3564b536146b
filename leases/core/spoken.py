"""How a span of time, a lease's end and a count are said in the language in use
(leases.core.i18n): "3 d 4 h" / "3天4小时", "ends in 3 d" / "3天后到期". Money is
written in leases.money.amounts; dates stay ISO 8601 (2026-12-03) in both languages, as
Chinese platforms' own consoles and bills write them."""

from __future__ import annotations

from leases.core.i18n import _, ngettext

_UNITS = ((86400, "d"), (3600, "h"), (60, "min"), (1, "s"))


def _unit(value: int, unit: str) -> str:
    if unit == "d":
        return _("{n} d").format(n=value)
    if unit == "h":
        return _("{n} h").format(n=value)
    if unit == "min":
        return _("{n} min").format(n=value)
    return _("{n} s").format(n=value)


def span(seconds: float, parts: int = 2) -> str:
    """A span to its largest `parts` units: "3 d 4 h", "5 h 12 min", "42 s" (English);
    "3天4小时", "5小时12分钟", "42秒" (Chinese). Negative spans are said as positive."""
    left = int(abs(seconds))
    said: list[str] = []
    for size, unit in _UNITS:
        if left >= size or (unit == "s" and not said):
            value, left = divmod(left, size)
            said.append(_unit(value, unit))
            if len(said) == parts:
                break
        elif said:  # "3 d 0 h" says nothing: a gap ends the span
            break
    return (
        _("{first} {second}").format(first=said[0], second=said[1]) if len(said) == 2 else (said[0])
    )


def about(seconds: float) -> str:
    """A span as an alert says it, to the minute under a day, in whole hours under two
    days, in whole days from two (never more than there is: a balance or a lease runs out
    no later than said): "1 h 36 min", "20 min", "1 d 8 h", "62 d" / "1小时36分钟",
    "20分钟", "1天8小时", "62天" (never "1.6小时")."""
    left = abs(seconds)
    if left >= 2 * 86400:
        return span(int(left // 86400) * 86400, parts=1)
    if left >= 86400:
        return span(int(left // 3600) * 3600)
    minutes = round(left / 60)
    if minutes == 0:
        return _unit(0, "min")
    return span(minutes * 60)


def ends_in(days: int) -> str:
    """When a lease ends, from today in whole days: "ends in 3 d", "ends today", "ended
    2 d ago" / "3天后到期", "今天到期", "已到期2天"."""
    if days > 0:
        return _("ends in {n} d").format(n=days)
    if days == 0:
        return _("ends today")
    return _("ended {n} d ago").format(n=-days)


def nodes(n: int) -> str:
    """ "1 node" / "3 nodes" / "3个节点"."""
    return ngettext("{n} node", "{n} nodes", n).format(n=n)


def gpus(n: int) -> str:
    """ "1 GPU" / "8 GPUs" / "8张卡"."""
    return ngettext("{n} GPU", "{n} GPUs", n).format(n=n)


def elapsed(seconds: int | None) -> str:
    """A process's run time, short enough for a narrow column, in the language in use:
    "3d04h", "2h05m", "55m32s" / "3天04时", "2时05分", "55分32秒"; "?" when unknown."""
    if seconds is None:
        return "?"
    days, rest = divmod(max(seconds, 0), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return _("{days}d{hours:02d}h").format(days=days, hours=hours)
    if hours:
        return _("{hours}h{minutes:02d}m").format(hours=hours, minutes=minutes)
    return _("{minutes}m{seconds:02d}s").format(minutes=minutes, seconds=secs)


def percent(number: str) -> str:
    """A number written as a percent: "67 %" in English (as zuka's tables always wrote
    it), "67%" in Chinese (no space, as Chinese consoles write it)."""
    return _("{number} %").format(number=number)
