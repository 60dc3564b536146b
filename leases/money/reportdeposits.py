"""Deposits in the month's report (Report.deposits, leases.money.deposits), in each of its
formats: paid out and back in the month, apart from the charges, and every deposit still
outstanding at the month's end with its lease's provider and node."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from leases.core.i18n import N_, _
from leases.money.amounts import fen_json, money, unit
from leases.money.deposits import PAID_ON_ASSUMED, DepositLine, sums
from leases.money.report import Report

TITLE = N_("Deposits (cash apart from the charges)")
CSV_COLUMNS = (
    "deposit_paid_in_month", "deposit_refunded_in_month", "deposit_outstanding",
    "deposit_forfeited",
)  # fmt: skip


def notes(report: Report) -> list[str]:
    """What the deposit figures assume."""
    return [PAID_ON_ASSUMED] if any(x.paid_on_assumed for x in report.deposits) else []


def as_json(report: Report) -> dict[str, Any]:
    """The month's deposits: each lease's line, sums per currency, notes."""
    return {
        "lines": [
            {
                "node": x.node,
                "provider": x.provider,
                "lease_start": x.lease_start,
                "currency": x.currency,
                "deposit": fen_json(x.deposit),
                "paid_on": x.paid_on.isoformat(),
                "paid_on_assumed": x.paid_on_assumed,
                "paid_in_month": fen_json(x.paid),
                "refunded_in_month": fen_json(x.refunded),
                "outstanding": fen_json(x.outstanding),
                "forfeited": fen_json(x.lost),
            }
            for x in report.deposits
        ],
        "by_currency": {
            code: {
                "paid_in_month": fen_json(s["paid"]),
                "refunded_in_month": fen_json(s["refunded"]),
                "outstanding": fen_json(s["outstanding"]),
                "forfeited": fen_json(s["lost"]),
            }
            for code, s in sorted(sums(report.deposits).items())
        },
        "notes": notes(report),
    }


def markdown(report: Report, md: Callable[[Any], str]) -> list[str]:
    """The section's lines (none when no deposit moved or is outstanding)."""
    if not report.deposits:
        return []

    def cells(x: DepositLine) -> list[str]:
        c = x.currency
        paid_on = x.paid_on.isoformat() + (_(" (lease start)") if x.paid_on_assumed else "")
        return [
            md(x.provider), md(x.node), md(x.lease_start), money(x.deposit, c), md(paid_on),
            money(x.paid, c), money(x.refunded, c), money(x.outstanding, c),
            money(x.lost, c) if x.lost else "-",
        ]  # fmt: skip

    head = [_("Provider"), _("Node"), _("Lease start"), _("Deposit"), _("Paid on"),
            _("Paid out in month"), _("Refunded in month"), _("Outstanding at month end"),
            _("Forfeited")]  # fmt: skip
    rows = [cells(x) for x in report.deposits]
    summed = sorted(sums(report.deposits).items())
    for code, s in summed:
        # The cells say their currency (¥10,000.00): the label names it only among others.
        total = (_("**Total**") if len(summed) == 1
                 else _("**Total {currency}**").format(currency=unit(code)))  # fmt: skip
        rows.append([total, "", "", "", "", money(s["paid"], code),
                     money(s["refunded"], code), money(s["outstanding"], code),
                     money(s["lost"], code)])  # fmt: skip
    out = ["", f"## {_(TITLE)}", ""]
    out += ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _h in head) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    out += ["\n" + _("{note}.").format(note=md(_(n))) for n in notes(report)]
    return out


def csv_rows(
    report: Report, header: tuple[str, ...], safe: Callable[[Any], str]
) -> list[list[str]]:
    """A row per lease's deposit and one total per currency, in the report's CSV columns
    (row `deposit` and `deposits_total`); `safe` neutralises text against formulas."""
    out = []
    for x in report.deposits:
        cells = dict.fromkeys(header, "")
        cells |= {
            "row": "deposit", "node": safe(x.node), "provider": safe(x.provider),
            "currency": x.currency, "start": x.lease_start, "deposit": fen_json(x.deposit),
            "deposit_paid_in_month": fen_json(x.paid),
            "deposit_refunded_in_month": fen_json(x.refunded),
            "deposit_outstanding": fen_json(x.outstanding),
            "deposit_forfeited": fen_json(x.lost),
            "notes": safe(f"paid on {x.paid_on.isoformat()}"
                          + (" (its lease's start day)" if x.paid_on_assumed else "")),
        }  # fmt: skip
        out.append(list(cells.values()))
    for code, s in sorted(sums(report.deposits).items()):
        cells = dict.fromkeys(header, "")
        cells |= {
            "row": "deposits_total", "currency": code,
            "deposit_paid_in_month": fen_json(s["paid"]),
            "deposit_refunded_in_month": fen_json(s["refunded"]),
            "deposit_outstanding": fen_json(s["outstanding"]),
            "deposit_forfeited": fen_json(s["lost"]),
        }  # fmt: skip
        out.append(list(cells.values()))
    return out
