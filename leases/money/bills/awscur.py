"""AWS's Cost and Usage Report (legacy CUR) CSV, read by column name: the columns and their
order depend on the report (its -Manifest.json lists them), so never by position.

The columns and LineItemType values follow AWS's legacy CUR data dictionary, repository
awsdocs/aws-cur-user-guide (archived), doc_source/Lineitem-columns.md and
doc_source/product-columns.md (live: https://docs.aws.amazon.com/cur/latest/userguide/
Lineitem-columns.html); a real 131-column header row is the test constant `csvHeaders` of
cloud-carbon-footprint/cloud-carbon-footprint.

Columns used: lineItem/ResourceId, lineItem/UsageStartDate, lineItem/UsageEndDate
(YYYY-MM-DDTHH:mm:ssZ as documented, or YYYY-MM-DD as some reports write them),
lineItem/UnblendedCost (the amount), lineItem/CurrencyCode, lineItem/LineItemType,
lineItem/ProductCode, lineItem/LineItemDescription, product/region, and
pricing/publicOnDemandCost as the list amount where the report has it.

LineItemType -> line kind: Usage, DiscountedUsage and SavingsPlanCoveredUsage are usage
(the latter at its On-Demand cost); SavingsPlanNegation and any *Discount are discount
(shown apart); Credit is credit, Refund refund, Tax tax; the fees (Fee, RIFee,
SavingsPlanUpfrontFee, SavingsPlanRecurringFee) and any type not documented are other,
kept, never dropped. Credits, refunds and taxes usually name no resource: zuka shows them
as the account's lines, beside the leases.
"""

from __future__ import annotations

from datetime import UTC

from leases.core.i18n import _
from leases.money.bills import table
from leases.money.bills.table import Table

NAME = "aws_cur"
RESOURCE = "lineItem/ResourceId"
START, END = "lineItem/UsageStartDate", "lineItem/UsageEndDate"
COST, CURRENCY, TYPE = "lineItem/UnblendedCost", "lineItem/CurrencyCode", "lineItem/LineItemType"
PRODUCT, DESCRIPTION, REGION = (
    "lineItem/ProductCode",
    "lineItem/LineItemDescription",
    "product/region",
)
LIST = "pricing/publicOnDemandCost"
PERIOD = "bill/BillingPeriodStartDate"  # the first moment (UTC) of the bill's month
REQUIRED = (RESOURCE, START, END, COST, CURRENCY, TYPE)
KINDS = {
    "Usage": "usage",
    "DiscountedUsage": "usage",
    "SavingsPlanCoveredUsage": "usage",
    "SavingsPlanNegation": "discount",
    "Discount": "discount",
    "Credit": "credit",
    "Refund": "refund",
    "Tax": "tax",
}
TZ = "UTC"  # CUR times carry their Z; a bare date is a UTC day


def looks_like(t: Table) -> bool:
    return t.has(COST) and t.has(TYPE)


def parse(t: Table) -> list[dict[str, object]]:
    table.missing(t, REQUIRED, _("an AWS Cost and Usage Report CSV (--format aws_cur)"))
    out: list[dict[str, object]] = []
    for row in t.rows:
        cost = table.amount(row, COST)
        assert cost is not None
        item = row.get(TYPE)
        kind = KINDS.get(item) or ("discount" if item.endswith("Discount") else "other")
        code = row.get(CURRENCY)
        if not code:
            raise table_error(row, CURRENCY)
        billing = None
        if t.has(PERIOD) and row.get(PERIOD):
            billing = (PERIOD, f"{table.moment(row, PERIOD, TZ).astimezone(UTC):%Y-%m}")
        out.append(
            table.line(
                row,
                start=table.moment(row, START, TZ),
                end=table.moment(row, END, TZ),
                amount_text=cost,
                kind=kind,
                currency=code,
                resource_id=table.text(row, RESOURCE, "resource_id"),
                product=table.text(row, PRODUCT if t.has(PRODUCT) else None, "product"),
                description=table.text(
                    row, DESCRIPTION if t.has(DESCRIPTION) else None, "description"
                ),
                region=table.text(row, REGION if t.has(REGION) else None, "region"),
                list_amount=table.amount(row, LIST, required=False) if t.has(LIST) else None,
                billing=billing,
            )
        )
    return out


def table_error(row: table.Row, column: str) -> Exception:
    from leases.core.errors import InputError

    return InputError(table.where(row, column), None, _("is empty"))
