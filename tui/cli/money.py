"""`zuka report` and `zuka plan`: the month's money, and what to rent next."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, TextIO

from leases.app import monthreport
from leases.config.load import load_user_config
from leases.config.sections import Config
from leases.core import fields
from leases.core.errors import InputError
from leases.core.i18n import EN, _, pgettext, using
from leases.core.models import Lease, Node
from leases.core.textsafe import visible
from leases.ledger.store import Ledger
from leases.ledger.transfer import write_private
from leases.money import billing, plan, renewals, report, reportcsv, reportjson, reportmarkdown
from leases.money.amounts import fen, fen_json, figure_json, money_words
from leases.money.words import billing_word
from leases.telemetry.rollups import HistoryStore
from tui.cli import output
from tui.cli.opening import open_ledger, trusted


def _config(args: argparse.Namespace) -> Config:
    config = load_user_config(args.config)
    for warning in config.warnings:
        print(_("zuka: warning: {warning}").format(warning=visible(warning)), file=sys.stderr)
    return config


def _open(args: argparse.Namespace) -> Ledger:
    """Read only; a mistyped --ledger is refused (an empty month would look like ¥0), and
    so is a ledger holding rows changed outside zuka (a price edited with sqlite3 would be
    in every figure)."""
    return trusted(open_ledger(args, readonly=True), _("the figures"))


def money_report(args: argparse.Namespace, out: TextIO) -> int:
    fmt = "json" if args.json else args.format
    if fmt in ("json", "csv"):  # what scripts read never changes with the language
        with using(EN):
            return _money_report(args, out, fmt)
    return _money_report(args, out, fmt)


def _money_report(args: argparse.Namespace, out: TextIO, fmt: str) -> int:
    config = _config(args)
    with _open(args) as ledger:
        window = report.month_window(args.month, config.billing.tz, ledger.clock())[0]
        rep = monthreport.month_report(ledger, args.month, config)  # invoiced too (issue 20)
        owner_hours = (
            HistoryStore(ledger).busy_by_owner(*window) if args.by in ("user", "project") else []
        )
    if args.by == "lease":
        data = reportjson.report_json(rep)
        if fmt == "md":
            text = reportmarkdown.to_markdown(rep)
        else:
            text = reportcsv.to_csv(rep) if fmt == "csv" else ""
    else:
        att = report.attribute(rep, owner_hours, args.by, config.users, config.projects)
        data = reportjson.attribution_json(rep, att)
        if fmt == "md":
            text = reportmarkdown.attribution_markdown(rep, att)
        else:
            text = reportcsv.attribution_csv(rep, att) if fmt == "csv" else ""
    if fmt == "json":
        if args.output:
            text = reportjson.dumps(data)
        else:
            output.dump_json(data, out)
            return 0
    if args.output:
        write_private(Path(args.output), text)
    else:
        out.write(text)
    return 0


# -- zuka plan ----------------------------------------------------------------------------


def _decimal(name: str, value: str | None) -> Decimal | None:
    """A plan flag's number, read as every number a person types is (fields.number)."""
    return None if value is None else fields.number(name, value)


def _days(args: argparse.Namespace) -> int:
    days = int(args.days)
    if not 1 <= days <= 366:
        raise InputError("days", str(args.days), _("must be from 1 to 366"))
    return days


def _nodes(ledger: Ledger, model: str | None) -> dict[int, Node]:
    """The nodes of the GPU model (every node for None), released ones too, by id: a
    released node's name may be reused by another."""
    return {n.id: n for n in ledger.nodes() if n.id is not None and plan.model_matches(n, model)}


def demand(
    store: HistoryStore,
    nodes: Mapping[int, Node],
    leases: list[Lease],
    since: datetime,
    until: datetime,
    stops: Mapping[int, Sequence[billing.Stop]] | None = None,
) -> plan.Demand:
    """Busy cards in each known clock hour of [since, until), summed over the nodes; an
    hour history does not cover is unknown, never no demand (leases.money.plan's rule). A
    recorded stop (stops by lease id, Ledger.stop_spans) is no paid time: no demand."""
    lo, hi = int(since.timestamp()) // 3600, int(until.timestamp()) // 3600
    spans: dict[int, list[tuple[int, int]]] = {i: [] for i in nodes}
    cards = {i: n.gpu_count for i, n in nodes.items()}
    for le in leases:
        if le.node_id not in spans:
            continue
        try:
            paid = billing.billed_spans(le, until, (stops or {}).get(le.id or 0, ()))
        except (AssertionError, InputError):  # a prepaid lease without an end: as it runs
            paid = [(le.start, le.ended_at or until)]
        spans[le.node_id] += [(int(a.timestamp()), int(b.timestamp())) for a, b in paid]
        cards[le.node_id] = cards[le.node_id] or le.cards_billed or 0
    history = {}
    for i, n in nodes.items():
        rows = store.hours(n.name, since, until, node_id=i)
        per_hour = {h.hour: (h.busy_card_minutes, h.known_card_minutes) for h in rows}
        history[str(i)] = plan.NodeHistory(cards[i], tuple(spans[i]), per_hour)
    return plan.measured_demand(history, lo, hi)


def _hour_at(hour: int) -> str:
    return datetime.fromtimestamp(hour * 3600, UTC).strftime("%Y-%m-%d %H:00 UTC")


def _price_source(p: plan.PerCard | None) -> str:
    if p is None:
        return ""
    le = p.lease
    return _(" (from the {billing} lease of {node})").format(
        billing=billing_word(le.billing_type.value), node=visible(le.node)
    )


def _given_prices(args: argparse.Namespace) -> tuple[Decimal | None, Decimal | None]:
    hourly = _decimal("hourly", args.hourly)
    monthly = _decimal("monthly", args.monthly)
    for name, given in (("hourly", hourly), ("monthly", monthly)):
        if given is not None:
            plan.check_price(name, given)
    return monthly, hourly


def _prices(
    args: argparse.Namespace,
    ledger: Ledger,
    nodes: Mapping[int, Node],
    model: str | None,
    currency: str,
) -> tuple[Decimal, Decimal, str, str]:
    monthly, hourly = _given_prices(args)
    if hourly is not None and monthly is not None:
        return monthly, hourly, _(" (given)"), _(" (given)")
    got_m, got_h = plan.lease_prices(ledger.leases(), nodes, model, currency)
    what = (
        _("GPU model {model} in {currency}").format(model=visible(model), currency=currency)
        if model
        else _("the fleet in {currency}").format(currency=currency)
    )
    if monthly is None:
        if got_m is None:
            raise InputError(
                "monthly", None, _("no monthly lease of {what} to price from: give --monthly PRICE"
                " (a card's price for a month)").format(what=what),
            )  # fmt: skip
        monthly = got_m.price
    if hourly is None:
        if got_h is None:
            raise InputError(
                "hourly", None, _("no hourly lease of {what} to price from: give --hourly PRICE"
                " (a card's price for an hour)").format(what=what),
            )  # fmt: skip
        hourly = got_h.price
    m_src = _(" (given)") if args.monthly is not None else _price_source(got_m)
    h_src = _(" (given)") if args.hourly is not None else _price_source(got_h)
    return monthly, hourly, m_src, h_src


def _models(nodes: Mapping[int, Node]) -> list[tuple[str, dict[int, Node]]]:
    """The fleet's nodes by GPU model as recorded, case aside (a card of one model is no
    card of another), in order; nodes without a model are a group of their own ("")."""
    groups: dict[str, dict[int, Node]] = {}
    label: dict[str, str] = {}
    for i, n in sorted(nodes.items()):
        key = n.gpu_model.strip().casefold()
        label.setdefault(key, n.gpu_model.strip())
        groups.setdefault(key, {})[i] = n
    return sorted((label[k], g) for k, g in groups.items())


def plan_hybrid(args: argparse.Namespace, out: TextIO) -> int:
    config = _config(args)
    days = _days(args)
    monthly, hourly = _given_prices(args)
    with _open(args) as ledger:
        now = ledger.clock()
        nodes = _nodes(ledger, args.gpu_model)
        if not nodes:
            raise InputError("gpu-model", args.gpu_model, _("no node has this GPU model"))
        currency = plan.plan_currency(
            args.currency,
            (le.currency for le in ledger.leases() if le.node_id in nodes),
            config.billing.currency,
        )
        until = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
        since = until - timedelta(days=days)
        models = [m for m, _group in _models(nodes) if m]
        # Several GPU models and prices to read from the leases: each model is planned on
        # its own (a card of one model is no card of another). Both prices given: the
        # fleet's cards are priced alike, one plan, as asked.
        if args.gpu_model is None and len(models) > 1 and (monthly is None or hourly is None):
            if monthly is not None or hourly is not None:
                raise InputError(
                    "hourly" if hourly is not None else "monthly", None,
                    _("the fleet has several GPU models: give both --hourly and --monthly, or"
                    " --gpu-model M with one of them, or neither (each model priced from its"
                    " own leases)"),
                )  # fmt: skip
            return _plan_models(args, out, config, ledger, nodes, since, until, currency)
        made = _hybrid(args, config, ledger, nodes, args.gpu_model, since, until, currency)
    if isinstance(made, str):
        print(_("zuka: plan: {why}").format(why=made), file=sys.stderr)
        return 1
    doc, lines = made
    if args.json:
        output.dump_json(doc, out)
    else:
        out.write("\n".join(lines) + "\n")
    return 0


def _plan_models(
    args: argparse.Namespace,
    out: TextIO,
    config: Config,
    ledger: Ledger,
    nodes: Mapping[int, Node],
    since: datetime,
    until: datetime,
    currency: str,
) -> int:
    """plan_hybrid for each GPU model of the fleet, a section (a JSON object) each, priced
    from its own leases; a model that cannot be planned says why. Exit 0 when one was."""
    docs: list[dict[str, Any]] = []
    texts: list[str] = []
    for model, group in _models(nodes):
        label = visible(model) if model else _("GPU model not recorded")
        try:
            made = _hybrid(args, config, ledger, group, model or None, since, until, currency)
        except InputError as exc:
            made = _not_priced(exc, model)
        if isinstance(made, str):
            names = sorted(n.name for n in group.values())
            docs.append({"gpu_model": model, "nodes": names, "not_planned": made})
            texts.append(
                f"## {label}\n\n" + _("Not planned: {why}").format(why=visible(made)) + "\n"
            )
        else:
            docs.append({"gpu_model": model, **made[0]})
            texts.append(f"## {label}\n\n" + "\n".join(made[1]) + "\n")
    if args.json:
        output.dump_json({"currency": currency, "days": _days(args), "models": docs}, out)
    else:
        out.write("\n".join(texts))
    return 0 if any("not_planned" not in d for d in docs) else 1


def _not_priced(exc: InputError, model: str) -> str:
    """Why a model of the fleet was not planned. A price missing (--monthly, --hourly) is
    said with the billing type's display word ("包月价格"), never the stored word; English
    reads as before ("monthly: no monthly lease of ...")."""
    if exc.field in ("monthly", "hourly"):
        if not model:
            return pgettext("price missing", "{billing}: {reason}").format(
                billing=billing_word(exc.field), reason=exc.reason
            )
        return pgettext(
            "price missing",
            "{billing}: {reason} with --gpu-model '{model}' (plans this model alone)",
        ).format(billing=billing_word(exc.field), reason=exc.reason, model=model)
    if not model:
        return f"{exc.field}: {exc.reason}"
    return _("{field}: {reason} with --gpu-model '{model}' (plans this model alone)").format(
        field=exc.field, reason=exc.reason, model=model
    )


def _hybrid(
    args: argparse.Namespace,
    config: Config,
    ledger: Ledger,
    nodes: Mapping[int, Node],
    model: str | None,
    since: datetime,
    until: datetime,
    currency: str,
) -> tuple[dict[str, Any], list[str]] | str:
    """One hybrid plan over `nodes` (priced from the leases of `model` unless both prices
    are given): its JSON and its text, or why there is too little history to plan from."""
    days = _days(args)
    monthly, hourly, m_src, h_src = _prices(args, ledger, nodes, model, currency)
    d = demand(HistoryStore(ledger), nodes, ledger.leases(), since, until, ledger.stop_spans())
    if len(d.hours) < plan.MIN_KNOWN_HOURS:
        return _(
            "only {known} known hours of demand in the last {days} days ({unknown}"
            " of {window} hours have no history for the leased cards): need at least"
            " {least} (7 days) to plan from; keep the collector running"
        ).format(
            known=len(d.hours), days=days, unknown=d.unknown, window=d.window,
            least=plan.MIN_KNOWN_HOURS,
        )  # fmt: skip
    cards = list(d.cards)
    if not any(cards):
        raise InputError("days", str(days), _("no busy card-hour in the window: nothing to plan"))
    h = plan.hybrid(cards, monthly, hourly)
    doc = {
        "currency": currency,
        "days": days,
        "since": since.isoformat(),
        "until": until.isoformat(),
        "hours": h.hours,
        "window_hours": d.window,
        "unknown_hours": d.unknown,
        "hours_before_history": d.before_history,
        "known_since": datetime.fromtimestamp(d.hours[0] * 3600, UTC).isoformat(),
        "nodes": sorted(n.name for n in nodes.values()),
        "monthly_per_card": str(monthly),
        "hourly_per_card": str(hourly),
        "threshold_share": figure_json(h.threshold),
        "peak_cards": h.peak,
        "base_cards": h.best.k,
        "cost_per_month": fen_json(h.best.total),
        "all_hourly_per_month": fen_json(h.all_hourly.total),
        "all_monthly_per_month": fen_json(h.all_monthly.total),
        "saves_against_hourly": fen_json(h.saves_against_hourly),
        "saves_against_monthly": fen_json(h.saves_against_monthly),
        "curve": [
            {
                "k": c.k,
                "base": fen_json(c.base),
                "burst": fen_json(c.burst),
                "total": fen_json(c.total),
            }
            for c in h.curve
        ],
        "demand_cards_per_hour": cards,
    }
    share_above = sum(1 for c in cards if c > h.best.k) * 100 / len(cards)
    demand_said = (
        _(
            "Demand: busy cards per hour over the last {days} days ({hours} known hours,"
            " {nodes} nodes, {model}); peak {peak} cards."
        )
        if model
        else _(
            "Demand: busy cards per hour over the last {days} days ({hours} known hours,"
            " {nodes} nodes); peak {peak} cards."
        )
    )
    lines = [
        demand_said.format(
            days=days, hours=h.hours, nodes=len(nodes), model=visible(model or ""), peak=h.peak
        ),
        *_unknown_lines(d),
        _("Prices a card: {monthly} a month{monthly_from}, {hourly} an hour{hourly_from}.").format(
            monthly=money_words(monthly, currency),
            monthly_from=m_src,
            hourly=money_words(hourly, currency),
            hourly_from=h_src,
        ),
        "",
        *plan.load_duration_chart(cards, h.best.k),
        "",
        _(
            "Rent {base_cards} card(s) monthly and the rest by the hour: {total} a month"
            " ({base} base + {burst} burst; demand went above the base in {share:.0f} % of"
            " hours)."
        ).format(
            base_cards=h.best.k,
            total=money_words(h.best.total, currency),
            base=money_words(h.best.base, currency),
            burst=money_words(h.best.burst, currency),
            share=share_above,
        ),
        _threshold_line(h.threshold),
        _("  saves {saves} a month against all hourly ({all_hourly})").format(
            saves=money_words(h.saves_against_hourly, currency),
            all_hourly=money_words(h.all_hourly.total, currency),
        ),
        _("  saves {saves} a month against all monthly ({peak} cards, {all_monthly})").format(
            saves=money_words(h.saves_against_monthly, currency),
            peak=h.peak,
            all_monthly=money_words(h.all_monthly.total, currency),
        ),
        _("(a month is 730 hours; an hour with 2.3 busy cards on average counts as 3 cards)"),
    ]
    return doc, lines


def _threshold_line(threshold: Decimal) -> str:
    """What the hybrid's threshold (a monthly card's price over a card by the hour around
    the clock) means to a reader: when one more monthly card pays."""
    if threshold >= 1:
        return _(
            "A card a month costs {times:.1f}x a card by the hour around the clock:"
            " renting it monthly never pays here; rent by the hour."
        ).format(times=threshold)
    return _(
        "A card rented monthly pays for itself when it is busy in more than"
        " {share:.0f} % of the hours; below that, rent it by the hour."
    ).format(share=threshold * 100)


def _unknown_lines(d: plan.Demand) -> list[str]:
    """What the window left out: hours without history are unknown, not idle."""
    if not d.unknown:
        return []
    lines = [
        _(
            "{unknown:,} of the {window:,} hours are unknown (no history for the leased"
            " cards) and left out: the plan is scaled from the known hours to a month."
        ).format(unknown=d.unknown, window=d.window)
    ]
    if d.before_history:
        lines.append(
            _("The window was cut: history starts {start} ({hours:,} hours before it).").format(
                start=_hour_at(d.lo + d.before_history), hours=d.before_history
            )
        )
    return lines


def plan_buy(args: argparse.Namespace, out: TextIO) -> int:
    config = _config(args)
    days = _days(args)
    typed_u = args.utilisation
    given_u = None if typed_u is None else plan.utilisation_share("utilisation", typed_u)
    for attr in ("card_price", "life_years", "power_w", "kwh", "hosting"):
        _need(args, attr)  # every flag checked before the ledger is read
    with _open(args) as ledger:
        now = ledger.clock()
        window = (now - timedelta(days=days), now)
        rep = monthreport.build(
            ledger, _("last {days} days").format(days=days), window, True, config, args.gpu_model
        )
        rented = _rented_now(ledger, _nodes(ledger, args.gpu_model), now)
    # One currency's leases: the renting price is theirs, the prices given are read in it.
    currency = plan.plan_currency(
        args.currency, (r.currency for r in rep.rows), config.billing.currency
    )
    t = report.totals(r for r in rep.rows if r.currency == currency)
    if not t.paid or not t.busy:
        raise InputError(
            "days",
            str(days),
            _("no paid and busy card-hours measured in the window to compare with"),
        )
    # Over the card-hours history knows: an unknown hour is never idle (nor busy).
    measured_u = t.busy / t.known
    utilisation = given_u if given_u is not None else measured_u
    rent_paid_hour = t.usage_cost / t.paid
    cards = int(args.cards) if args.cards is not None else rented or 1
    r = plan.buy_vs_rent(
        card_price=_need(args, "card_price"),
        life_years=_need(args, "life_years"),
        power_w=_need(args, "power_w"),
        kwh=_need(args, "kwh"),
        hosting_month=_need(args, "hosting"),
        cards=cards,
        utilisation=utilisation,
        renting_per_busy_hour=rent_paid_hour / utilisation,
    )
    if args.json:
        output.dump_json(
            {
                "currency": currency,
                "days": days,
                "cards": r.cards,
                "utilisation": figure_json(r.utilisation),
                "measured_utilisation": figure_json(measured_u),
                "known_card_hours": figure_json(t.known),
                "unknown_card_hours": figure_json(t.unknown),
                "renting_per_paid_card_hour": fen_json(rent_paid_hour),
                "owning_per_busy_card_hour": fen_json(r.owning_per_busy_hour),
                "renting_per_busy_card_hour": fen_json(r.renting_per_busy_hour),
                "owning_per_month": fen_json(r.owning_month),
                "renting_per_month": fen_json(r.renting_month),
                "renting_share_of_owning": figure_json(r.ratio),
            },
            out,
        )
        return 0
    src = _("given") if given_u is not None else _("measured over {days} days").format(days=days)
    unknown_line = _(
        "{unknown:,} of {paid:,} paid card-hours unknown (no history), left out of the utilisation."
    ).format(unknown=fen(t.unknown), paid=fen(t.paid))
    lines = [
        _(
            "{cards} card(s) at {utilisation} % utilisation ({source};"
            " measured {measured} % busy of {known:,} known card-hours)."
        ).format(
            cards=r.cards,
            utilisation=fen(r.utilisation * 100),
            source=src,
            measured=fen(measured_u * 100),
            known=fen(t.known),
        ),
        *([unknown_line] if t.unknown else []),
        _(
            "Owning:  {per_hour} per busy card-hour ({month} a month: cards {cards},"
            " power {power}, hosting {hosting})"
        ).format(
            per_hour=money_words(r.owning_per_busy_hour, currency),
            month=money_words(r.owning_month, currency),
            cards=money_words(r.capex_month, currency),
            power=money_words(r.power_month, currency),
            hosting=money_words(r.hosting_month, currency),
        ),
        _(
            "Renting: {per_hour} per busy card-hour ({per_paid} per paid card-hour at the"
            " current leases; {month} a month)"
        ).format(
            per_hour=money_words(r.renting_per_busy_hour, currency),
            per_paid=money_words(rent_paid_hour, currency),
            month=money_words(r.renting_month, currency),
        ),
        _verdict(r, _need(args, "card_price") * r.cards, _need(args, "life_years")),
    ]
    out.write("\n".join(lines) + "\n")
    return 0


def _verdict(r: plan.BuyVsRent, bought: Decimal, life_years: Decimal) -> str:
    """Renting against owning as a reader acts on it: how many times owning renting costs,
    and when buying pays for itself."""
    months = life_years * 12
    payback = plan.payback_months(r, bought)
    if payback is None:
        back = _("buying never pays for itself: renting costs less than running owned cards")
    elif payback > months:
        back = _(
            "buying would pay for itself after {payback:.0f} months, past the cards' life"
        ).format(payback=payback)
    else:
        back = _("buying pays for itself after {months} months").format(months=math.ceil(payback))
    if r.ratio >= 1:
        return _(
            "Renting costs {ratio:.1f}x what owning would over the cards' {months:.0f} months:"
            " {payback}."
        ).format(ratio=r.ratio, months=months, payback=back)
    less = fen((1 - r.ratio) * 100)
    return _(
        "Renting costs {ratio:.2f}x what owning would ({less} % less) over the cards'"
        " {months:.0f} months: {payback}."
    ).format(ratio=r.ratio, less=less, months=months, payback=back)


def _rented_now(ledger: Ledger, nodes: Mapping[int, Node], now: datetime) -> int:
    """The cards rented now: of each node (by id) whose lease bills now, the lease's cards
    billed, else the node's GPUs. Not the window's: a lease ended last week rents none."""
    by_node: dict[int, list[Lease]] = {}
    for le in ledger.leases(node_ids=list(nodes)):
        if le.node_id is not None:
            by_node.setdefault(le.node_id, []).append(le)
    cards = 0
    for node_id, leases in by_node.items():
        b = renewals.billing_now(sorted(leases, key=lambda le: le.start), now)
        if b is not None and b.bills:
            cards += b.lease.cards_billed or nodes[node_id].gpu_count
    return cards


def _need(args: argparse.Namespace, attr: str) -> Decimal:
    name = attr.replace("_", "-")
    value = _decimal(name, getattr(args, attr))
    if value is None:
        raise InputError(name, None, _("give --{option}").format(option=name))
    return value
