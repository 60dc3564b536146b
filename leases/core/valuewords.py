"""The words of values stored in English (in the ledger, `--json`, CSV, filters: a billing
type, a provider's channel, a deposit's refund, a resource's kind, a node's health...): the
one place they are said, per enum, in the language in use (English: the value itself, so
English tables read as they always did; docs/GLOSSARY.md for the Chinese).

Every front end shows a stored value through here (`word`, or `shown` when the enum is not
known), and every parser of a choice (leases.core.fields.choice, the command line's
choices) takes, besides the value, its word in Chinese or in English (`parse`), whatever the
language in use: a user who reads 包月 may type 包月. A word two values of one enum share is
taken for neither. The stored value never changes."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from enum import Enum

from leases.core.i18n import EN, N_, ZH, _, is_chinese, pgettext, speaking, translations

Table = Callable[[], dict[str, str]]


def _billing() -> dict[str, str]:
    return {
        "per_second": pgettext("billing type", "per_second"),
        "hourly": pgettext("billing type", "hourly"),
        "card_hour": pgettext("billing type", "card_hour"),
        "daily": pgettext("billing type", "daily"),
        "weekly": pgettext("billing type", "weekly"),
        "monthly": pgettext("billing type", "monthly"),
        "contract": pgettext("billing type", "contract"),
    }


def _channel() -> dict[str, str]:
    return {
        "cloud": pgettext("channel", "cloud"),
        "platform": pgettext("channel", "platform"),
        "colo": pgettext("channel", "colo"),
    }


def _refund() -> dict[str, str]:
    return {
        "none": pgettext("refund", "none"),
        "pending": pgettext("refund", "pending"),
        "refunded": pgettext("refund", "refunded"),
        "forfeited": pgettext("refund", "forfeited"),
    }


def _deposit() -> dict[str, str]:
    """A deposit's state as leases.money.deposits.state_word says it (a refund's state, or
    "partly back"); "none" there is a deposit paid and not back, which `zuka lease
    refunds` (leases.app.deposits) says "held"."""
    return {
        "none": pgettext("deposit state", "none"),
        "held": pgettext("deposit state", "held"),
        "pending": pgettext("deposit state", "pending"),
        "refunded": pgettext("deposit state", "refunded"),
        "forfeited": pgettext("deposit state", "forfeited"),
        "partly back": pgettext("deposit state", "partly back"),
    }


def _resource() -> dict[str, str]:
    return {
        "disk": pgettext("resource", "disk"),
        "snapshot": pgettext("resource", "snapshot"),
        "image": pgettext("resource", "image"),
        "bucket": pgettext("resource", "bucket"),
        "bucket_prefix": pgettext("resource", "bucket_prefix"),
        "ssh_key": pgettext("resource", "ssh_key"),
        "scratch_path": pgettext("resource", "scratch_path"),
        "eip": pgettext("resource", "eip"),
    }


def _node_state() -> dict[str, str]:
    return {
        "active": pgettext("value", "active"),
        "offboarding": pgettext("value", "offboarding"),
        "released": pgettext("value", "released"),
    }


def _expiry() -> dict[str, str]:
    """What the provider does at a lease's end (释放: the node is released then, not
    already; a node's state "released" is 已释放)."""
    return {
        "released": pgettext("expiry action", "released"),
        "hourly": pgettext("expiry action", "hourly"),
        "renews": pgettext("expiry action", "renews"),
    }


def _schedule() -> dict[str, str]:
    return {
        "upfront": pgettext("schedule", "upfront"),
        "monthly": pgettext("schedule", "monthly"),
        "quarterly": pgettext("schedule", "quarterly"),
    }


def _period() -> dict[str, str]:
    return {
        "hour": pgettext("period", "hour"),
        "day": pgettext("period", "day"),
        "month": pgettext("period", "month"),
    }


def _partial_unit() -> dict[str, str]:
    return {
        "second": pgettext("partial unit", "second"),
        "minute": pgettext("partial unit", "minute"),
        "hour": pgettext("partial unit", "hour"),
        "day": pgettext("partial unit", "day"),
        "whole": pgettext("partial unit", "whole"),
    }


def _rounding() -> dict[str, str]:
    return {
        "bill": pgettext("rounding", "bill"),
        "charge": pgettext("rounding", "charge"),
    }


def _month_count() -> dict[str, str]:
    return {
        "calendar": pgettext("month count", "calendar"),
        "30_days": pgettext("month count", "30 days"),
    }


def _report_by() -> dict[str, str]:
    """What `zuka report --by` groups a month's cost by."""
    return {
        "lease": pgettext("report by", "lease"),
        "user": pgettext("report by", "user"),
        "project": pgettext("report by", "project"),
    }


def _role() -> dict[str, str]:
    """A lab member's role (leases.lab.roles.Role)."""
    return {
        "view": pgettext("role", "view"),
        "edit": pgettext("role", "edit"),
        "offboard": pgettext("role", "offboard"),
    }


def _entity() -> dict[str, str]:
    """A kind of ledger row, as `zuka audit accept` takes it (leases.ledger.rowaudit)."""
    return {
        "provider": pgettext("entity", "provider"),
        "node": pgettext("entity", "node"),
        "lease": pgettext("entity", "lease"),
        "resource": pgettext("entity", "resource"),
        "stop": pgettext("entity", "stop"),
        "deposit_refund": pgettext("entity", "deposit_refund"),
        "invoice": pgettext("entity", "invoice"),
        "balance": pgettext("entity", "balance"),
        "bill": pgettext("entity", "bill"),
        "offer": pgettext("entity", "offer"),
    }


def _ps_sort() -> dict[str, str]:
    """What `zuka ps --sort` orders by: its table's columns."""
    return {
        "node": pgettext("ps sort", "node"),
        "user": pgettext("ps sort", "user"),
        "memory": pgettext("ps sort", "memory"),
        "share": pgettext("ps sort", "share"),
        "elapsed": pgettext("ps sort", "elapsed"),
        "command": pgettext("ps sort", "command"),
    }


def _collect_mode() -> dict[str, str]:
    """How `zuka collect --mode` reads a node's GPUs."""
    return {
        "stream": pgettext("collect mode", "stream"),
        "exec": pgettext("collect mode", "exec"),
    }


def _invoice() -> dict[str, str]:
    return {
        "special": pgettext("invoice kind", "special"),
        "ordinary": pgettext("invoice kind", "ordinary"),
        "other": pgettext("invoice kind", "other"),
    }


def _stopped() -> dict[str, str]:
    return {
        "full": pgettext("stopped billing", "full"),
        "storage_only": pgettext("stopped billing", "storage only"),
        "none": pgettext("stopped billing", "none"),
    }


def _interconnect() -> dict[str, str]:
    return {
        "nvlink": pgettext("interconnect", "nvlink"),
        "pcie": pgettext("interconnect", "pcie"),
        "unknown": pgettext("interconnect", "unknown"),
    }


def _health() -> dict[str, str]:
    return {
        "ok": pgettext("health", "ok"),
        "connecting": pgettext("health", "connecting"),
        "unreachable": pgettext("health", "unreachable"),
        "timeout": pgettext("health", "timeout"),
        "auth_failed": pgettext("health", "auth failed"),
        "untrusted": pgettext("health", "untrusted"),
        "hostkey_changed": pgettext("health", "hostkey changed"),
        "no_nvidia_smi": pgettext("health", "no nvidia smi"),
        "driver_not_loaded": pgettext("health", "driver not loaded"),
        "driver_mismatch": pgettext("health", "driver mismatch"),
        "nvml_library_missing": pgettext("health", "nvml library missing"),
        "nvml_permission": pgettext("health", "nvml permission"),
        "gpu_lost": pgettext("health", "gpu lost"),
        "garbage": pgettext("health", "garbage"),
        "no_nvml": pgettext("health", "no nvml"),
        "refused": pgettext("health", "refused"),
    }


def _acceptance_level() -> dict[str, str]:
    return {
        "quick": pgettext("acceptance level", "quick"),
        "standard": pgettext("acceptance level", "standard"),
        "burn": pgettext("acceptance level", "burn"),
    }


def _severity() -> dict[str, str]:
    return {
        "info": pgettext("severity", "info"),
        "warning": pgettext("severity", "warning"),
        "critical": pgettext("severity", "critical"),
    }


def _alert_state() -> dict[str, str]:
    return {
        "open": pgettext("alert state", "open"),
        "acked": pgettext("alert state", "acked"),
        "snoozed": pgettext("alert state", "snoozed"),
        "cleared": pgettext("alert state", "cleared"),
    }


# An alert's kind (leases.alerts.alert.AlertKind) in words; the value stays in the ledger.
ALERT_KINDS = {
    "lease_ending": N_("lease ending"),
    "underused": N_("underused"),
    "forgotten": N_("forgotten"),
    "starved": N_("starved"),
    "release_soon": N_("release soon"),
    "deposit_not_refunded": N_("deposit not refunded"),
    "autorenew_soon": N_("auto-renew soon"),
    "hourly_after_end": N_("hourly after end"),
    "unreachable": N_("unreachable"),
    "stopped_question": N_("stopped?"),
    "login_failed": N_("login failed"),
    "hostkey_changed": N_("host key changed"),
    "temperature": N_("temperature"),
    "ecc_errors": N_("ECC errors"),
    "cannot_evaluate": N_("cannot evaluate"),
    "edited_outside_zuka": N_("edited outside zuka"),
    "bill_mismatch": N_("bill mismatch"),
    "bill_unmatched": N_("bill unmatched"),
    "balance_low": N_("balance low"),
    "acceptance_failed": N_("acceptance failed"),
    "disk_full": N_("disk full"),
    "ram_full": N_("RAM full"),
}


def _alert_kind() -> dict[str, str]:
    return {kind: _(said) for kind, said in ALERT_KINDS.items()}


def _audit_action() -> dict[str, str]:
    """An audit entry's action id as the ledger writes it (`self.audit(conn, "node.add"...`,
    `zuka log`, the dashboard's audit views); --json keeps the id, English shows it."""
    return {
        "import": pgettext("audit action", "import"),
        "node.trust": pgettext("audit action", "node.trust"),
        "stop.add": pgettext("audit action", "stop.add"),
        "stop.resume": pgettext("audit action", "stop.resume"),
        "offboard.plan": pgettext("audit action", "offboard.plan"),
        "offboard.finish": pgettext("audit action", "offboard.finish"),
        "offboard.recheck": pgettext("audit action", "offboard.recheck"),
        "offboard.inspect": pgettext("audit action", "offboard.inspect"),
        "accept.run": pgettext("audit action", "accept.run"),
        "lab.init": pgettext("audit action", "lab.init"),
        "lab.repair": pgettext("audit action", "lab.repair"),
        "lab.add-user": pgettext("audit action", "lab.add-user"),
        "lab.remove-user": pgettext("audit action", "lab.remove-user"),
        "process.term": pgettext("audit action", "process.term"),
        "process.kill": pgettext("audit action", "process.kill"),
        "process.gone": pgettext("audit action", "process.gone"),
        "process.failed": pgettext("audit action", "process.failed"),
        "process.refused": pgettext("audit action", "process.refused"),
    }


def _audit_verb() -> dict[str, str]:
    return {
        "add": pgettext("audit verb", "add"),
        "edit": pgettext("audit verb", "edit"),
        "delete": pgettext("audit verb", "delete"),
        "restore": pgettext("audit verb", "restore"),
        "renew": pgettext("audit verb", "renew"),
        "end": pgettext("audit verb", "end"),
        "reopen": pgettext("audit verb", "reopen"),
    }


def action_word(action: str) -> str:
    """An audit entry's action id in words in the language in use: "node.add" -> "添加节点"
    (the table "audit action", else its entity's and verb's words), "undo #12" -> "撤销 #12";
    English (and an id without words) as it is written."""
    if not is_chinese():
        return action
    table = _audit_action()
    if action in table:
        return table[action]
    if action.startswith("undo #"):
        return _("undo #{id}").format(id=action.removeprefix("undo #"))
    entity, dot, verb = action.partition(".")
    entities = {**_entity(), "offboard": pgettext("audit entity", "offboarding")}
    said_entity, said_verb = entities.get(entity), _audit_verb().get(verb)
    if dot and said_entity and said_verb:
        return _("{verb} {entity}").format(verb=said_verb, entity=said_entity)
    if dot and said_entity:
        return _("{entity}: {event}").format(entity=said_entity, event=verb)
    return action


# Each enum's table, by the enum's module and name (this module imports no model: the
# models' own modules use it). Names that are not enums: deposit states, and choices of
# the command line that are no stored value (report --by, audit accept, ps --sort...).
TABLES: dict[str, Table] = {
    "leases.core.models.BillingType": _billing,
    "leases.core.models.ProviderKind": _channel,
    "leases.core.models.RefundState": _refund,
    "leases.core.models.ResourceKind": _resource,
    "leases.core.models.NodeState": _node_state,
    "leases.core.models.ExpiryAction": _expiry,
    "leases.core.models.PaymentSchedule": _schedule,
    "leases.core.models.StoragePeriod": _period,
    "leases.core.models.StoppedBilling": _stopped,
    "leases.core.models.Interconnect": _interconnect,
    "leases.core.models.PartialUnit": _partial_unit,
    "leases.core.models.ChargeRounding": _rounding,
    "leases.core.models.MonthCount": _month_count,
    "leases.lab.roles.Role": _role,
    "leases.core.readings.NodeHealth": _health,
    "leases.ledger.books.InvoiceKind": _invoice,
    "leases.core.acceptance.Level": _acceptance_level,
    "leases.core.severity.Severity": _severity,
    "leases.alerts.state.State": _alert_state,
    "leases.alerts.alert.AlertKind": _alert_kind,
    "deposit state": _deposit,
    "report by": _report_by,
    "audit entity": _entity,
    "ps sort": _ps_sort,
    "collect mode": _collect_mode,
    "audit action": _audit_action,
}
# A value whose enum is not known (`shown`): looked up in these, the first that has it
# (a billing type's "monthly" before a schedule's, a refund's "none" before a stop's).
_ANY = (
    _billing,
    _channel,
    _node_state,
    _expiry,
    _refund,
    _resource,
    _health,
    _interconnect,
)


def _name(enum: type[Enum] | str) -> str:
    return enum if isinstance(enum, str) else f"{enum.__module__}.{enum.__qualname__}"


# Tables made, by name and the translations they were made with: a table asks pgettext
# for every value, and a fleet table asks for a word of every node each refresh.
_MADE: dict[tuple[str, object], dict[str, str]] = {}


def _made(name: str, make: Callable[[], dict[str, str]]) -> dict[str, str]:
    key = (name, translations())
    found = _MADE.get(key)
    if found is None:
        found = _MADE[key] = make()
    return found


def _any_table() -> dict[str, str]:
    merged: dict[str, str] = {}
    for table in reversed(_ANY):  # the first table that has a value gives its word
        merged.update(table())
    return merged


def words(enum: type[Enum] | str) -> Mapping[str, str]:
    """value -> word in the language in use for every value of enum that has one (one
    table kept per language, shared: read, never changed)."""
    name = _name(enum)
    table = TABLES.get(name)
    return _made(name, table) if table is not None else {}


def word(value: object, enum: type[Enum] | str | None = None) -> str:
    """A stored value (an enum member or its text) in the language in use: "monthly" ->
    "包月" under zh_CN, "monthly" in English; a value without a word as it is."""
    text = str(getattr(value, "value", value))
    if enum is None and isinstance(value, Enum):
        enum = type(value)
    if enum is not None:
        return words(enum).get(text, text)
    return shown(text)


def shown(value: object) -> str:
    """A stored value whose enum is not known, as a text table shows it."""
    text = str(getattr(value, "value", value))
    return _made("", _any_table).get(text, text)


def _values(enum: type[Enum] | str) -> list[str]:
    if isinstance(enum, str):
        return list(words(enum))
    return [str(m.value) for m in enum]


# Full-width brackets (and the ideographic space) as a Chinese input method types them.
_FOLD = str.maketrans({"（": "(", "）": ")", "\u3000": " "})


def _folded(text: str) -> str:
    return text.translate(_FOLD)


def parse(enum: type[Enum] | str, typed: str) -> str | None:
    """The value of enum a person typed: the value itself (any case), or its word in
    Chinese or in English (English words in any case), whatever the language in use.
    Brackets full-width or not are one ("按量（秒）" is "按量(秒)": a Chinese input method
    types the first). None: none, or a word two of its values share."""
    raw = _folded(typed.strip())
    values = _values(enum)
    lowered = {v.lower(): v for v in values}
    if raw.lower() in lowered:
        return lowered[raw.lower()]
    found: set[str] = set()
    for lang in (ZH, EN):
        with speaking(lang):  # this task only: other threads keep theirs
            for value, said in words(enum).items():
                said = _folded(said)
                if said == raw or (lang == EN and said.lower() == raw.lower()):
                    found.add(value)
    return found.pop() if len(found) == 1 else None


def listed(enum: type[Enum] | str, values: Iterable[str] | None = None) -> str:
    """An enum's values as a refusal or help lists them: "cloud | platform | colo" in
    English, "cloud（公有云） | platform（算力租赁平台） | colo（机房托管）" in Chinese."""
    return " | ".join(with_word(v, enum) for v in (values or _values(enum)))


def with_word(value: str, enum: type[Enum] | str) -> str:
    """A value with its Chinese word beside it in Chinese ("monthly（包月）"); the value
    alone in English, or where its word is itself."""
    said = words(enum).get(value, value) if is_chinese() else value
    if said.lower() == value.lower():
        return value
    return f"{value}（{said}）"  # Chinese only: English never has a word beside


def enum_of(values: Iterable[str]) -> str | None:
    """The enum whose values are exactly these (an argparse choice list), or None."""
    wanted = set(values)
    for name, table in TABLES.items():
        if set(table()) == wanted:
            return name
    return None
