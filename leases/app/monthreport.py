"""The month's report as every front end builds it: `zuka report`, `zuka plan buy` and the
dashboard's accounts screen (leases.app.accountsview) call these, so the figures are one
build (the maths in leases.money.report; the invoicing by leases.app.invoices)."""

from __future__ import annotations

import dataclasses
from datetime import datetime

from leases.app import invoices
from leases.app.deposits import all_refunds
from leases.config.sections import Config
from leases.ledger.store import Ledger
from leases.money import plan, report
from leases.telemetry.rollups import HistoryStore


def build(ledger: Ledger, month: str, window: tuple[datetime, datetime], complete: bool,
          config: Config, model: str | None = None) -> report.Report:  # fmt: skip
    """The report of `window` over the nodes of the GPU model (every node for None)."""
    nodes = [n for n in ledger.nodes() if plan.model_matches(n, model)]
    ids = {n.id for n in nodes}  # not names: a released node's name may be reused
    stops = ledger.stop_spans()
    return report.build_report(
        month,
        window,
        complete,
        tz=config.billing.tz,
        currency=config.billing.currency,
        leases=[le for le in ledger.leases() if le.node_id in ids],
        nodes=nodes,
        providers=ledger.providers(),
        resources=ledger.resources(),
        usage=HistoryStore(ledger).usage_by(stops),
        stops=stops,
        refunds=all_refunds(ledger),
    )


def month_report(ledger: Ledger, month: str, config: Config,
                 now: datetime | None = None) -> report.Report:  # fmt: skip
    """`zuka report --month M`'s report: the calendar month in the billing zone (cut at
    now when not over), with the month's rates and its invoicing (issue 20)."""
    window, complete = report.month_window(month, config.billing.tz, now or ledger.clock())
    rep = build(ledger, month, window, complete, config)
    rep = dataclasses.replace(rep, rates=config.money.rates.get(month.strip(), {}))
    return invoices.with_invoicing(
        ledger, rep, lambda since, until: build(ledger, month, (since, until), True, config).rows
    )
