"""Aliyun's (阿里云) bill detail CSV, read by column name (never by position).

The header followed is the one Aliyun pushes to OSS in Chinese (41 columns, the
billing-item detail, UID_BillingItemDetail_YYYYMM), as its own SLS Java SDK reads it:
repository aliyun/aliyun-log-java-sdk, file
src/test/java/com/aliyun/openservices/log/functiontest/IngestionFunctionTest.java (the
checkout's assets/bills/aliyun-2026-11.csv holds it exactly; a file lacking columns is
refused naming all of them). Each
field's meaning: https://help.aliyun.com/document_detail/89133.html ("详单文件格式 /
实例结算周期明细"; English: https://www.alibabacloud.com/help/doc-detail/89133.html). The
line types: https://alibabacloud.com/help/tc/user-center/user-guide/bill-flow (預付費訂單,
後付費賬單, 退款, 調賬); the currencies: the QueryBillOverview API (CNY, USD, JPY).

Columns used: 实例ID (InstanceID: the billing-granularity id, usually the resource's: i-…,
d-…; not always, `cn-hangzhou;snapshot` for a snapshot), 账单开始时间 / 账单结束时间
(UsageStartTime / UsageEndTime; where empty, the month of 账期, BillingCycle), 账单类型
(Item), 应付金额 (PretaxAmount), 代金券抵扣 (DeductedByCashCoupons), 原价 (PretaxGrossAmount)
or 官网价 (what the newer console export calls it), 产品 / 产品明细 / 计费项, 地域, and 币种
where present (the pushed file has no currency column: the currency given, CNY by
default, is used).

Which figure zuka compares: 应付金额, what Aliyun charged for the resource after its
discounts and coupons (优惠金额, 优惠券抵扣) and before vouchers, is the price the lease
recorded, so it is the line's amount. A voucher (代金券抵扣) pays part of that charge but
does not lower it: it becomes a line of its own, kind `credit`, its amount negative, on the
same resource, shown apart by `zuka bill check`.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.textsafe import visible
from leases.money.bills import table
from leases.money.bills.table import Row, Table

NAME = "aliyun"
RESOURCE = "实例ID"
START, END, CYCLE = "账单开始时间", "账单结束时间", "账期"
ITEM = "账单类型"
PAYABLE = "应付金额"
VOUCHER = "代金券抵扣"
LIST_PRICES = ("原价", "官网价")
PRODUCT, DETAIL, BILLING_ITEM = "产品", "产品明细", "计费项"
REGION, CURRENCY = "地域", "币种"
REQUIRED = (RESOURCE, ITEM, PAYABLE, VOUCHER, CYCLE)
# 账单类型 (console words and API words) -> bill line kind.
KINDS = {
    "预付费订单": "subscription",
    "SubscriptionOrder": "subscription",
    "后付费账单": "usage",
    "PayAsYouGoBill": "usage",
    "退款": "refund",
    "Refund": "refund",
    "调账": "other",
    "Adjustment": "other",
}
TZ = "Asia/Shanghai"  # the China site's times are Beijing time


def looks_like(t: Table) -> bool:
    return t.has(RESOURCE) and t.has(PAYABLE)


def parse(t: Table, *, currency: str = "CNY") -> list[dict[str, object]]:
    table.missing(t, REQUIRED, _("an Aliyun bill detail CSV (--format aliyun)"))
    listed = next((c for c in LIST_PRICES if t.has(c)), None)
    out: list[dict[str, object]] = []
    for row in t.rows:
        start, end = _period(row)
        payable = table.amount(row, PAYABLE)
        assert payable is not None
        voucher = table.amount(row, VOUCHER, required=False)
        code = row.get(CURRENCY) if t.has(CURRENCY) and row.get(CURRENCY) else currency
        item = row.get(ITEM)
        kind = KINDS.get(item, "other" if item else "usage")
        cycle = row.get(CYCLE)
        billing = (CYCLE, f"{table.month_span(cycle, TZ, row, CYCLE)[0]:%Y-%m}") if cycle else None
        # 产品明细 · 计费项 · 账单类型: "云服务器ECS-按量付费 · 实例规格 · 后付费账单"
        detail = " · ".join(x for x in (row.get(DETAIL), row.get(BILLING_ITEM), item) if x)
        common = {
            "resource_id": table.text(row, RESOURCE, "resource_id"),
            "product": table.text(row, PRODUCT, "product"),
            "region": table.text(row, REGION if t.has(REGION) else None, "region"),
            "currency": code,
        }
        out.append(
            table.line(
                row,
                start=start,
                end=end,
                amount_text=payable,
                kind=kind,
                description=visible(detail, table.TEXT_BOUNDS["description"]),
                list_amount=table.amount(row, listed, required=False) if listed else None,
                billing=billing,
                **common,
            )
        )
        if voucher is not None and Decimal(voucher) != 0:
            out.append(
                table.line(
                    row,
                    start=start,
                    end=end,
                    amount_text=str(-Decimal(voucher)),
                    kind="credit",
                    description="代金券抵扣 (voucher)",
                    billing=billing,
                    **common,
                )
            )
    return out


def _period(row: Row) -> tuple[datetime, datetime]:
    if row.get(START):
        start = table.moment(row, START, TZ)
        end = table.moment(row, END, TZ) if row.get(END) else start
        return start, end
    if not row.get(CYCLE):
        raise InputError(
            table.where(row, START), None, _("and {column} are both empty").format(column=CYCLE)
        )
    return table.month_span(row.get(CYCLE), TZ, row, CYCLE)
