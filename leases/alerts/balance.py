"""The `balance_low` alert: a provider account's prepaid balance runs out within
`[alerts] balance_days` at the burn rate now (leases.money.balances). The one alert of a
provider rather than a node: it carries no node id (as edited_outside_zuka does), its key
names the provider, and the collector's check (leases.alerts.watch) adds it beside the
nodes' alerts. Warning; critical under a day left or once the balance is at or below 0.
It holds (no new alert, an open one stays) up to a day above the threshold, so a balance
hovering at it does not flap, and clears once a top-up or a reading lifts it past that.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from decimal import Decimal

from leases.alerts.alert import Alert, AlertKind, Level
from leases.alerts.said import Said, call, joined, phrase, plain, say
from leases.config.sections import AlertsConfig
from leases.core import fields
from leases.core.errors import InputError
from leases.core.i18n import N_
from leases.core.severity import Severity
from leases.core.textsafe import visible
from leases.ledger.accounts import Account, account, account_names
from leases.ledger.store import Ledger
from leases.money.amounts import fen
from leases.money.balances import Runway

HOLD_DAYS = Decimal(1)  # above the threshold by less than this, an open alert stays open


# What a prepaid charge the balance cannot pay is (leases.money.balances.unpaid), in words.
_CHARGES = {
    "renewal": N_("renewal"),
    "instalment": N_("instalment"),
    "prepaid charge": N_("prepaid charge"),
}


def _stops(run: Runway, cur: str) -> Said:
    """The nodes that stop when it runs out (leases.money.balances.stops_said's words,
    said again in each language): the running pay-as-you-go ones, then each prepaid
    charge it cannot pay; "" when none."""
    owed = {node for node, _what, _amount in run.unpaid}
    parts: list[Said] = []
    running = [plain(visible(n, 80)) for n in run.stops if n not in owed]
    if running:
        parts.append(joined(N_(", "), *running))
    parts += [
        say(
            N_("{node}'s {what} of {money} cannot be paid"),
            node=visible(node, 80),
            what=phrase(_CHARGES.get(what, what)),
            money=call("money", amount, cur),
        )
        for node, what, amount in run.unpaid
    ]
    return joined(N_("; "), *parts)


def balance_low(acc: Account, config: AlertsConfig, now: datetime) -> Iterator[Alert]:
    """The alert of one account, if its balance runs out soon (pure)."""
    b, run = acc.balance, acc.runway
    if run.days_left is None:
        return
    threshold = Decimal(str(config.balance_days))
    if run.days_left >= threshold + HOLD_DAYS:
        return
    level = Level.RAISE if run.days_left < threshold else Level.HOLD
    critical = b.amount <= 0 or run.days_left < 1
    name = visible(acc.provider)
    cur = acc.currency
    stops = _stops(run, cur) or say(N_("no running pay-as-you-go node of zuka's"))
    if b.amount <= 0:
        said = say(N_("has run out ({money})"), money=call("money", b.amount, cur))
    else:
        assert run.runs_out is not None
        days = run.days_left.quantize(Decimal("0.01"))
        said = say(
            N_(
                "has {money} left, burning {per_day}/day: it runs out in {days} days, at {at}"
                " ({tz})"
            ),
            money=call("money", b.amount, cur),
            per_day=call("money", run.per_day, cur),
            days=call("days", str(days)),
            at=fields.shown(run.runs_out, acc.tz),
            tz=acc.tz,
        )
    yield Alert(
        AlertKind.BALANCE_LOW,
        Severity.CRITICAL if critical else Severity.WARNING,
        acc.provider,
        None,  # a provider's, not a node's
        None,
        None,
        f"provider:{acc.provider}",
        say(
            N_(
                "prepaid balance of {name} {said}; then stops: {stops} (worked out by zuka from"
                " the reading at {since})"
            )
            if b.reading is not None
            else N_(
                "prepaid balance of {name} {said}; then stops: {stops} (worked out by zuka"
                " from the first top-up at {since})"
            ),
            name=name,
            said=said,
            stops=stops,
            since=fields.shown(b.since, acc.tz),
        ),
        say(
            N_(
                "top up (zuka provider topup {name} --amount X) or read the console's figure"
                " (zuka provider balance {name} --set AMOUNT)"
            ),
            name=name,
        ),
        fen(b.amount),
        level,
        cur,
    )


BALANCE_RULE = "the balance rule: "


def unjudged_balances(alerts: list[Alert]) -> set[tuple[int | None, str]]:
    """(None, balance_low) when some provider's balance could not be worked out this time:
    the open balance_low alerts stay open (a provider's alert carries no node id, so all
    of them do) rather than clear because nobody judged them."""
    failed = any(a.kind is AlertKind.UNEVALUATED and a.key.startswith(BALANCE_RULE) for a in alerts)
    return {(None, AlertKind.BALANCE_LOW.value)} if failed else set()


def provider_alerts(ledger: Ledger, config: AlertsConfig, now: datetime) -> list[Alert]:
    """The balance_low alerts of every provider account with balance entries, at `now`.
    An account that cannot be worked out (a lease without its cards) is said as a
    "cannot evaluate" alert of that provider; the others still speak."""
    out: list[Alert] = []
    for name in account_names(ledger):
        try:
            acc = account(ledger, name, now)
        except Exception as exc:  # one provider's rows cost its own alert, not the check
            why = f"{exc.field}: {exc.reason}" if isinstance(exc, InputError) else repr(exc)
            out.append(Alert(
                AlertKind.UNEVALUATED, Severity.WARNING, name, None, None, None,
                f"{BALANCE_RULE}{name}",
                say(N_("cannot evaluate the prepaid balance of {name}: {why}"),
                    name=visible(name), why=phrase(visible(why, 300))),
                say(N_("correct the leases at {name} (zuka lease list; zuka node show)"),
                    name=visible(name)),
            ))  # fmt: skip
            continue
        if acc is not None:
            out += balance_low(acc, config, now)
    return out
