"""Every alert zuka raises, as pure rules: (facts about each node, config, now) -> alerts.
Here the one table of rules (RULES) and what runs it; the rules themselves by family in
leases.alerts.lease (a lease's dates and money), leases.alerts.usage (use) and
leases.alerts.health (readings and their absence); the alert itself in leases.alerts.alert.

Facts are read elsewhere (leases.alerts.facts); state, acks and snoozes live in the ledger
(leases.alerts.state). A rule reports an alert at one of two levels: RAISE (the condition
crossed its raise threshold) or HOLD (it is between the clear and the raise threshold:
an open alert stays open, a new one is not raised). An alert a rule does not report at
all is cleared. That gap between the thresholds is what keeps alerts from flapping.

A missing reading is unknown, never idle: a rule that judges use draws no verdict from
minutes it has no readings for.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime

from leases.alerts.acceptance import RULE as ACCEPTANCE_RULE
from leases.alerts.acceptance import acceptance_failed
from leases.alerts.alert import Alert, AlertKind, NodeFacts, make_alert
from leases.alerts.drift import reason
from leases.alerts.health import gap_rules, readings
from leases.alerts.hostrules import host_rules
from leases.alerts.lease import autorenew, deposits, hourly_after_end, lease_end
from leases.alerts.said import Said, phrase, say
from leases.alerts.usage import forgotten, starved, underuse
from leases.config.sections import AlertsConfig
from leases.core import fields
from leases.core.errors import InputError
from leases.core.i18n import N_
from leases.core.models import NodeState
from leases.core.severity import Severity
from leases.core.textsafe import visible


def evaluate(facts: Sequence[NodeFacts], config: AlertsConfig, now: datetime) -> list[Alert]:
    """Every alert that holds at `now`, node by node, in a stable order."""
    out: list[Alert] = []
    for f in facts:
        out.extend(node_alerts(f, config, now))
    return out


EVERY_RULE = N_("every rule")
UNDERUSE_RULE = N_("underuse")
MINUTE_RULES = (N_("forgotten instance"), N_("starved"))
Rule = Callable[["NodeFacts", AlertsConfig, datetime], Iterator[Alert]]


def node_alerts(f: NodeFacts, config: AlertsConfig, now: datetime) -> Iterator[Alert]:
    """One node's alerts, rule by rule: a rule that fails on this node's rows becomes a
    "cannot evaluate" alert of its own, and every other rule (and node) still speaks."""
    unread = {rule: (why, fix) for rule, why, fix in f.unread}
    if EVERY_RULE in unread:
        # Its facts could not be read at all: no rule may take a missing fact for "none".
        yield _unevaluated(f, EVERY_RULE, *unread[EVERY_RULE], shown=phrase(EVERY_RULE))
        return
    released = f.node.state is NodeState.RELEASED
    for rule in RULES:
        if released and not rule.archived:
            continue
        if rule.name in unread:
            yield _unevaluated(f, rule.key, *unread[rule.name], shown=rule.said)
            continue
        try:
            found = list(rule.run(f, config, now))
        except Exception as exc:  # any failure is the rule's on this node, not the fleet's
            yield _unevaluated(f, rule.key, *_failure(f, exc), shown=rule.said)
            continue
        yield from found


def _failure(f: NodeFacts, exc: Exception) -> tuple[Said, Said]:
    """Why a rule failed on a node's rows, and what fixes it."""
    name = visible(f.node.name)
    if isinstance(exc, InputError) and exc.field == "cards_billed":
        lease = next((le for le in reversed(f.leases) if le.bills_node_gpus), None)
        if lease is not None:
            start = fields.shown(lease.start, lease.billing_tz)
            command = f"zuka lease edit {shlex.quote(f.node.name)} --start {shlex.quote(start)}"
            return (
                say(
                    N_(
                        "its card_hour lease from {start} does not say how many cards it pays"
                        " for and the node has no GPU count"
                    ),
                    start=start,
                ),
                say(N_("{command} --cards N"), command=visible(command)),
            )
    if isinstance(exc, InputError):
        return (
            reason(exc),
            say(
                N_("correct it in the ledger (zuka lease list {name}; zuka node show {name})"),
                name=name,
            ),
        )
    return (
        phrase(visible(f"{type(exc).__name__}: {exc}", 300)),
        say(N_("a fault in zuka: report it with this message; the other rules still run")),
    )


def _unevaluated(f: NodeFacts, what: str, why: str, fix: str, *, shown: str = "") -> Alert:
    """`what`: the rule's key (stored: English); `shown`: how the message says it. `why`
    and `fix`: Said (leases.alerts.said) or words read from elsewhere."""
    return make_alert(
        f,
        AlertKind.UNEVALUATED,
        Severity.WARNING,
        say(
            N_("cannot evaluate {name} ({what}): {why} — fix: {fix}"),
            name=visible(f.node.name),
            what=shown or what,
            why=why if isinstance(why, Said) else phrase(why),
            fix=fix if isinstance(fix, Said) else phrase(fix),
        ),
        fix if isinstance(fix, Said) else phrase(fix),
        key=what,  # one alert a rule: it clears when that rule runs again
    )


# -- the rules, in the order node_alerts runs them -----------------------------------------


def _hourly_rule(f: NodeFacts, config: AlertsConfig, now: datetime) -> Iterator[Alert]:
    return hourly_after_end(f, now)


def _underuse_rule(f: NodeFacts, config: AlertsConfig, now: datetime) -> Iterator[Alert]:
    return underuse(f, config)


@dataclass(frozen=True)
class RuleSpec:
    """One rule: its name (in "cannot evaluate NODE (the NAME rule)"), what it runs, the
    kinds it raises (while it cannot be evaluated on a node, its alerts there stay as they
    were, never cleared for want of a judgement), and whether it still runs on an archived
    node (read no more: only its money is open)."""

    name: str
    run: Rule
    kinds: tuple[AlertKind, ...]
    archived: bool = False

    @property
    def key(self) -> str:
        """Its "cannot evaluate" alert's key (stored and compared: English)."""
        return f"the {self.name} rule"

    @property
    def said(self) -> Said:
        """How a message says it: "the deposit rule" / "押金规则"."""
        return say(N_("the {rule} rule"), rule=phrase(self.name))


RULES = (
    RuleSpec(N_("deposit"), deposits, (AlertKind.DEPOSIT,), archived=True),
    RuleSpec(N_("lease end"), lease_end, (AlertKind.LEASE_ENDING,)),
    RuleSpec(N_("auto-renew"), autorenew, (AlertKind.AUTORENEW,)),
    RuleSpec(N_("hourly after end"), _hourly_rule, (AlertKind.HOURLY_AFTER_END,)),
    RuleSpec(UNDERUSE_RULE, _underuse_rule, (AlertKind.UNDERUSED,)),
    RuleSpec(MINUTE_RULES[0], forgotten, (AlertKind.FORGOTTEN,)),
    RuleSpec(MINUTE_RULES[1], starved, (AlertKind.STARVED,)),
    RuleSpec(N_("no readings"), gap_rules, (AlertKind.UNREACHABLE, AlertKind.LOGIN_FAILED,
                                        AlertKind.STOPPED_QUESTION, AlertKind.RELEASE_SOON)),
    RuleSpec(N_("readings"), readings, (AlertKind.HOSTKEY, AlertKind.TEMPERATURE, AlertKind.ECC)),
    RuleSpec(ACCEPTANCE_RULE, acceptance_failed, (AlertKind.ACCEPTANCE_FAILED,)),
    RuleSpec(N_("host"), host_rules, (AlertKind.DISK_FULL, AlertKind.RAM_FULL)),
)  # fmt: skip
_KINDS_OF = {r.key: r.kinds for r in RULES} | {EVERY_RULE: tuple(k for r in RULES for k in r.kinds)}


def unjudged(alerts: Sequence[Alert]) -> set[tuple[int | None, str]]:
    """(node id, kind) of every alert no rule judged this time: those of the rules a
    "cannot evaluate" alert names (all of them for EVERY_RULE)."""
    return {
        (a.node_id, kind.value)
        for a in alerts
        if a.kind is AlertKind.UNEVALUATED
        for kind in _KINDS_OF.get(a.key, ())
    }
