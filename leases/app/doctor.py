"""`zuka doctor`: what is wrong with this user's zuka, each finding with its fix.

The sections: which ledger and config this user's zuka uses and why; the files' permissions
(a one-user ledger's 0600 rule, or a lab's owners, modes and ACLs); the collector (is
anyone polling, is the service installed and running); SSH keys (the user's own, the
agent, the keys nodes name, the collector's in a lab); and the nodes zuka cannot read for
a reason a person can fix (a key not given, a host key not trusted or changed).

Each check looks and changes nothing. Every figure is read afresh: nothing here is taken
from what a previous run said.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from leases.core.i18n import _
from leases.core.models import NodeHealth


class Level(enum.StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True)
class Finding:
    """One thing doctor looked at: how it stands, in words, and the fix when it is not ok."""

    area: str
    level: Level
    what: str
    fix: str = ""

    def record(self) -> dict[str, str]:
        return {"area": self.area, "level": self.level.value, "what": self.what, "fix": self.fix}


@dataclass(frozen=True)
class Setting:
    """Where doctor looks: the ledger this user's commands open and why, the config files,
    the environment and the clock (injected for tests)."""

    ledger: Path
    ledger_source: str  # "--ledger", "ZUKA_LEDGER", "the lab's system config", "default"
    now: datetime
    env: Mapping[str, str] = field(default_factory=dict)
    home: Path | None = None
    config_path: Path | None = None
    config_problems: tuple[str, ...] = ()
    config_warnings: tuple[str, ...] = ()


Section = Callable[[Setting], Iterable[Finding]]


def diagnose(setting: Setting, sections: Iterable[Section]) -> list[Finding]:
    """Every section's findings, in order. A section that fails is itself a finding: a
    doctor that crashes on the thing it was asked to look at helps nobody."""
    found: list[Finding] = []
    for section in sections:
        try:
            found.extend(section(setting))
        except Exception as exc:  # said, and the other sections still run
            name = getattr(section, "__name__", "a check").strip("_").replace("_", " ")
            said = _("could not be checked: {kind}: {problem}").format(
                kind=type(exc).__name__, problem=exc
            )
            found.append(Finding(name, Level.FAIL, said))
    return found


def worst(findings: Iterable[Finding]) -> Level:
    levels = {f.level for f in findings}
    return Level.FAIL if Level.FAIL in levels else Level.WARN if Level.WARN in levels else Level.OK


def as_json(findings: Iterable[Finding]) -> str:
    return json.dumps([f.record() for f in findings], ensure_ascii=False, indent=2)


# -- the nodes zuka cannot read for a reason a person fixes ------------------------------

# How old the newest reading may be before doctor says nobody is polling: a few of the
# collector's default rounds.
STALE_AFTER = timedelta(minutes=5)


@dataclass(frozen=True)
class NodeSeen:
    """What the ledger holds of one node's last reading (from node_latest)."""

    name: str
    health: NodeHealth
    at: datetime
    detail: str = ""


def node_findings(
    seen: Iterable[NodeSeen],
    *,
    now: datetime,
    polled_by: str | None,
    give_key: str,
    total: int | None = None,
) -> list[Finding]:
    """Pure: the nodes' states a person can fix, and whether anyone polls.

    polled_by says who holds the poller lock ("pid 812 (zuka)"), None when nobody does;
    give_key is how this install gives its polling key to a node (the fix for a refused
    login); total the nodes the ledger has (some may never have been read)."""
    found: list[Finding] = []
    nodes = list(seen)
    fixes = {
        NodeHealth.AUTH_FAILED: (Level.FAIL, _("{name} refused zuka's login"), give_key),
        NodeHealth.UNTRUSTED: (
            Level.WARN,
            _("{name} has a host key nobody has accepted yet"),
            _("check its fingerprint with the provider, then: zuka node trust {name}"),
        ),
        NodeHealth.HOSTKEY_CHANGED: (
            Level.FAIL,
            _(
                "{name} presents a different host key than the one trusted (reinstalled, or"
                " someone in the middle)"
            ),
            _(
                "ask the provider whether it was reinstalled before trusting the new key:"
                " zuka node trust {name} --fingerprint SHA256:..."
            ),
        ),
    }
    for node in sorted(nodes, key=lambda n: n.name):
        if node.health in fixes:
            level, what, fix = fixes[node.health]
            found.append(
                Finding("nodes", level, what.format(name=node.name), fix.format(name=node.name))
            )
    newest = max((n.at for n in nodes), default=None)
    total = len(nodes) if total is None else max(total, len(nodes))
    if polled_by is not None:
        said = _("the fleet is polled by {who}").format(who=polled_by)
        found.append(Finding("collector", Level.OK, said))
    elif total and (newest is None or now - newest > STALE_AFTER):
        if newest is None:
            said = _("nobody is polling the fleet: no node has been read yet")
        else:
            said = _("nobody is polling the fleet: the newest reading is from {age} ago").format(
                age=_age(now - newest)
            )
        found.append(
            Finding(
                "collector",
                Level.WARN,
                said,
                _("run `zuka collect` (or install it as a service: zuka service install)"),
            )
        )
    elif total:
        found.append(Finding("collector", Level.OK, _("readings are recent (a dashboard polls)")))
    return found


def _age(delta: timedelta) -> str:
    """An age in one unit, in leases.core.spoken's words: "90 s", "5 min"."""
    seconds = int(delta.total_seconds())
    if seconds < 120:
        return _("{n} s").format(n=seconds)
    if seconds < 7200:
        return _("{n} min").format(n=seconds // 60)
    if seconds < 172800:
        return _("{n} h").format(n=seconds // 3600)
    return _("{n} d").format(n=seconds // 86400)
