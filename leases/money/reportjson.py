"""The money report (leases.money.report) as JSON: Decimals as strings (money to the fen,
card-hours to 0.01, as leases.money.reporttotals shows them), times in ISO 8601.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from leases.money import reportdeposits, shares
from leases.money.amounts import fen_json
from leases.money.report import Attribution, LeaseRow, Report, Totals
from leases.money.reporttotals import (
    HUNDREDTH,
    att_sums,
    by_currency,
    channel_of,
    currencies,
    groups,
    lab_total,
    provider_of,
    row_total,
    to_step,
)


def _h(x: Decimal | None) -> str | None:
    """Card-hours to 0.01, as a string."""
    return None if x is None else str(to_step(x, HUNDREDTH))


def _totals_json(t: Totals, code: str) -> dict[str, Any]:
    return {
        "currency": code,
        "leases": t.leases,
        "cost": fen_json(t.cost),
        "storage": fen_json(t.storage),
        "total": fen_json(t.total),
        "charged_in_month": fen_json(t.charged),
        "paid_card_hours": _h(t.paid),
        "busy_card_hours": _h(t.busy),
        "idle_card_hours": _h(t.idle),
        "unknown_card_hours": _h(t.unknown),
        "idle_yuan": fen_json(t.idle_yuan),
        "yuan_per_busy_card_hour": fen_json(t.price_per_busy_hour),
        "deposits": {k: fen_json(v) for k, v in sorted(t.deposits.items())},
    }


def _head(report: Report) -> dict[str, Any]:
    return {
        "month": report.month,
        "tz": report.tz,
        "since": report.since.isoformat(),
        "until": report.until.isoformat(),
        "complete": report.complete,
        # The leases' one currency; None when they have several (see by_currency).
        "currency": codes[0] if len(codes := currencies(report)) == 1 else None,
    }


def report_json(report: Report) -> dict[str, Any]:
    def row(r: LeaseRow) -> dict[str, Any]:
        u = r.usage
        use: Mapping[str, Any] = (
            {
                "paid_card_hours": _h(u.paid),
                "busy_card_hours": _h(u.busy),
                "idle_card_hours": _h(u.idle),
                "unknown_card_hours": _h(u.unknown),
                "idle_yuan": fen_json(u.idle_yuan),
                "yuan_per_busy_card_hour": fen_json(u.price_per_busy_hour),
            }
            if u is not None
            else {}
        )
        return {
            "node": r.node,
            "channel": r.channel,
            "provider": r.provider,
            "billing_type": r.billing_type,
            "currency": r.currency,
            "start": r.start.isoformat(),
            "end": r.end.isoformat() if r.end else None,
            "leases": r.leases,
            "cost": fen_json(r.cost),
            "storage": fen_json(r.storage),
            "total": fen_json(row_total(r)),
            "charged_in_month": fen_json(r.charged),
            "card_hours_known": u is not None,
            **use,
            "deposit": fen_json(r.deposit),
            "deposit_state": r.deposit_state or None,
            "notes": list(r.notes),
        }

    per = {c: _totals_json(t, c) for c, t in by_currency(report, HUNDREDTH)}
    return {
        **_head(report),
        "leases": [row(r) for r in report.rows],
        # Among several currencies a group is "name (CUR)": never two currencies added.
        "by_channel": {k: _totals_json(t, c) for k, c, t in groups(report, channel_of, HUNDREDTH)},
        "by_provider": {
            k: _totals_json(t, c) for k, c, t in groups(report, provider_of, HUNDREDTH)
        },
        "by_currency": per,
        "total": next(iter(per.values())) if len(per) == 1 else None,
        # None when every lease is in the lab's currency (the config's).
        "in_lab_currency": _lab_json(report),
        **shares_json(report),
        "deposits": reportdeposits.as_json(report),
        # The month's charges against their invoices (leases.money.invoices).
        "invoicing": [
            {"provider": c.provider, "node": c.node, "currency": c.currency,
             "charged_in_month": fen_json(c.charged), "invoiced": fen_json(c.invoiced),
             "uninvoiced": fen_json(c.uninvoiced), "invoiced_over_charged": fen_json(c.over),
             "invoices": list(c.numbers), "notes": c.remark or None}
            for c in report.invoicing
        ],
    }  # fmt: skip


def shares_json(report: Report) -> dict[str, Any]:
    """Each provider's share of the cards billed, and the single-channel risk (or None)."""
    found = shares.provider_shares(report.rows)
    return {
        "provider_shares": [
            {
                "provider": s.provider,
                "card_hours": _h(s.card_hours),
                "percent": str(s.shown),
                "single_channel_risk": s.concentrated,
            }
            for s in found
        ],
        "single_channel_risk": shares.risk_line(found),
    }


def _lab_json(report: Report) -> dict[str, Any] | None:
    lt = lab_total(report)
    if lt is None:
        return None
    return {
        "currency": lt.currency,
        "month": report.month,
        "rates": {c: str(r) for c, r in lt.rates},
        "missing_rates": list(lt.missing),
        "total": fen_json(lt.total),
        "charged_in_month": fen_json(lt.charged),
    }


def attribution_json(report: Report, att: Attribution) -> dict[str, Any]:
    sums = att_sums(report, att, HUNDREDTH)
    one = sums[0] if len(sums) == 1 else None
    return {
        **_head(report),
        "by": att.by,
        "rows": [
            {
                "name": r.name,
                "users": list(r.users),
                "busy_card_hours": _h(r.busy),
                "currency": r.currency,
                "yuan": fen_json(r.yuan),
                "nodes": list(r.nodes),
            }
            for r in att.rows
        ],
        "busy_card_hours": _h(sum((m.busy for m in sums), Decimal(0))),
        # yuan, unattributed_yuan, leases_cost: None among several currencies (by_currency)
        "yuan": fen_json(one.yuan) if one else None,
        "unattributed_yuan": fen_json(one.unattributed) if one else None,
        "storage_yuan": fen_json(one.storage) if one else None,
        # yuan + storage_yuan + unattributed_yuan: the by-lease report's total
        "leases_total": fen_json(one.total) if one else None,
        "outside_leases_card_hours": _h(att.outside_leases),
        "leases_cost": fen_json(one.cost) if one else None,
        "by_currency": {
            m.code: {
                "busy_card_hours": _h(m.busy),
                "yuan": fen_json(m.yuan),
                "unattributed_yuan": fen_json(m.unattributed),
                "storage_yuan": fen_json(m.storage),
                "leases_total": fen_json(m.total),
                "leases_cost": fen_json(m.cost),
            }
            for m in sums
        },
    }


def dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2) + "\n"
