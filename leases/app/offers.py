"""The price book and quotes for planned work: `zuka offer add/list/edit/delete` (the offers
a lab collects from providers, book `offer`: leases.ledger.books) and `zuka plan job`
(a job priced under every offer still valid and every current lease of its GPU model:
leases.money.quote). Each use case once, with its result and its words."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from leases.config.sections import Config
from leases.core import fields
from leases.core.errors import InputError
from leases.core.gpumodels import gpu_key, same_model
from leases.core.i18n import N_, _
from leases.core.models import BillingType, Lease
from leases.core.textsafe import visible
from leases.ledger.books import Record
from leases.ledger.store import Ledger
from leases.money import quote
from leases.money.amounts import money, price
from leases.money.words import billing_word

# An offer's fields as the command line names them: record key -> flag.
OFFER_FLAGS = {
    "provider": "--provider",
    "channel": "--channel",
    "gpu_model": "--gpu-model",
    "gpus": "--gpus",
    "billing_type": "--billing",
    "unit_price": "--price",
    "currency": "--currency",
    "min_term": "--min-term",
    "deposit": "--deposit",
    "region": "--region",
    "quoted_on": "--quoted",
    "valid_until": "--valid-until",
    "notes": "--notes",
}
# `zuka plan job`'s.
JOB_FLAGS = {
    "model": "--model",
    "cards": "--cards",
    "hours": "--hours",
    "within": "--within",
    "project": "--project",
    "region": "--region",
}


def flagged(exc: InputError) -> InputError:
    """An offer's (or a job's) error naming the flag a person typed (--min-term, not
    min_term)."""
    flag = OFFER_FLAGS.get(exc.field) or JOB_FLAGS.get(exc.field)
    return InputError(flag, exc.value, exc.reason) if flag else exc


def today_in(ledger: Ledger, config: Config) -> date:
    """Today in the billing time zone."""
    tz = fields.timezone(config.billing.tz, "billing.tz")
    return ledger.clock().astimezone(tz).date()


def valid_on(offer: Mapping[str, Any], day: date) -> bool:
    """Valid that day: quoted on or before it, and no end or valid_until on or after it."""
    until, quoted = offer.get("valid_until"), offer.get("quoted_on")
    if quoted is not None and str(quoted) > day.isoformat():
        return False
    return until is None or str(until) >= day.isoformat()


def add_offer(ledger: Ledger, rec: Mapping[str, Any], today: date) -> tuple[Record, str]:
    """`zuka offer add`: the offer as recorded (quoted today unless said) and its words."""
    full = {"quoted_on": today.isoformat(), **{k: v for k, v in rec.items() if v is not None}}
    try:
        added = ledger.add_book("offer", full)
    except InputError as exc:
        raise flagged(exc) from None
    return added, _("added offer {id}: {offer}").format(id=added["id"], offer=describe(added))


def edit_offer(ledger: Ledger, offer_id: int, changes: Mapping[str, Any]) -> tuple[Record, str]:
    if not changes:
        raise InputError("offer edit", offer_id, _("nothing to change: give at least one option"))
    before = _one(ledger, offer_id)
    try:
        edited = ledger.edit_book("offer", offer_id, changes)
    except InputError as exc:
        raise flagged(exc) from None
    same = {k: v for k, v in edited.items() if k != "id"} == before
    word = (
        _("nothing changed: offer {id} is already so: {offer}")
        if same
        else _("updated offer {id}: {offer}")
    )
    return edited, word.format(id=offer_id, offer=describe(edited))


def delete_offer(ledger: Ledger, offer_id: int) -> tuple[Record, str]:
    _one(ledger, offer_id)
    gone = ledger.delete_book("offer", offer_id)
    return gone, _("deleted offer {id}: {offer} (zuka undo puts it back)").format(
        id=offer_id, offer=describe(gone)
    )


def _one(ledger: Ledger, offer_id: int) -> Record:
    rows = ledger.book_rows("offer", "id = ?", [offer_id])
    if not rows:
        raise InputError("id", offer_id, _("no offer of that id (see `zuka offer list --all`)"))
    return {k: v for k, v in rows[0].items() if k != "id"}


def describe(offer: Mapping[str, Any]) -> str:
    cards = f"{offer['gpus']}x " if offer.get("gpus") else ""
    return (
        f"{visible(offer['provider'], 60)} {cards}{visible(offer['gpu_model'], 40)}"
        f" {billing_word(str(offer['billing_type']))}"
        f" {price(Decimal(str(offer['unit_price'])), str(offer['currency']))}"
    )


@dataclass(frozen=True)
class OfferRow:
    offer: Record  # with its id
    valid: bool  # still valid on the day listed


def list_offers(ledger: Ledger, day: date, *, everything: bool = False) -> list[OfferRow]:
    """The offers valid on `day` (with --all, the expired ones too, marked)."""
    rows = [OfferRow(r, valid_on(r, day)) for r in ledger.book_rows("offer")]
    return rows if everything else [r for r in rows if r.valid]


# -- zuka plan job ------------------------------------------------------------------------


def offer_option(r: Mapping[str, Any]) -> quote.Option:
    return quote.Option(
        label=_("offer {id}").format(id=r["id"]),
        provider=str(r["provider"]),
        channel=str(r["channel"]),
        gpu_model=str(r["gpu_model"]),
        billing_type=BillingType(r["billing_type"]),
        unit_price=Decimal(r["unit_price"]),
        currency=str(r["currency"]),
        gpus=r["gpus"],
        min_term=r["min_term"],
        deposit=None if r["deposit"] is None else Decimal(r["deposit"]),
        region=str(r["region"]),
    )


RENTED = N_("already rented (its cards are in use: this prices more cards on the same terms)")


def _lease_terms(le: Lease) -> str:
    """A current lease's own terms in words: RENTED, then its term and deposit."""
    words = [_(RENTED)]
    if le.end is not None:
        words.append(
            _("{billing} {start} to {end}").format(
                billing=billing_word(le.billing_type.value),
                start=le.start.date(),
                end=le.end.date(),
            )
        )
    if le.min_commitment is not None:
        words.append(
            _("minimum {count:,} {units}").format(
                count=le.min_commitment, units=quote.unit_plural(le.billing_type)
            )
        )
    if le.deposit is not None:
        words.append(_("deposit {amount}").format(amount=money(le.deposit, le.currency)))
    return _(", ").join(words)


def lease_options(ledger: Ledger, model: str, at: datetime) -> list[quote.Option]:
    """What the lab pays now for the model: its current leases, priced on their own terms
    (the minimum commitment and deposit of the lease: more cards on them would be a new
    contract), marked already rented."""
    nodes = {n.id: n for n in ledger.nodes() if n.id is not None}
    providers = {p.name: p for p in ledger.providers()}
    out: list[quote.Option] = []
    for le in billing_at(ledger, at):
        node = nodes.get(le.node_id) if le.node_id is not None else None
        if node is None or not same_model(node.gpu_model, model):
            continue
        prov = providers.get(node.provider or "")
        out.append(
            quote.Option(
                label=_("lease {node}").format(node=le.node),
                provider=prov.name if prov is not None else "-",
                channel=prov.kind.value if prov is not None else "-",
                gpu_model=node.gpu_model,
                billing_type=le.billing_type,
                unit_price=le.unit_price,
                currency=le.currency,
                gpus=le.cards_billed or node.gpu_count or None,
                min_term=le.min_commitment,
                deposit=le.deposit,
                region=prov.region if prov is not None else "",
                rented=_lease_terms(le),
            )
        )
    return out


def billing_at(ledger: Ledger, at: datetime) -> list[Lease]:
    """The leases billing at `at` (started, and neither ended nor past their end)."""
    far = datetime.max.replace(tzinfo=UTC)
    return [le for le in ledger.leases() if le.start <= at < (le.ended_at or le.end or far)]


def _known_models(ledger: Ledger, at: datetime) -> list[str]:
    nodes = {n.id: n for n in ledger.nodes() if n.id is not None}
    typed = [str(r["gpu_model"]) for r in ledger.book_rows("offer")]
    typed += [
        nodes[le.node_id].gpu_model
        for le in billing_at(ledger, at)
        if le.node_id in nodes and nodes[le.node_id].gpu_model
    ]
    first: dict[str, str] = {}
    for t in typed:
        first.setdefault(gpu_key(t), visible(t.strip(), 40))
    first.pop("", None)
    return [first[k] for k in sorted(first)]  # as first typed ("RTX 4090", not "4090")


def allowed_regions(
    config: Config, project: str | None, region: str | None
) -> tuple[tuple[str, ...] | None, str]:
    """The data regions a job may use, and who says so: the project's [projects.NAME]
    regions, narrowed to --region when given (which must then be one of them); --region
    alone allows only that region."""
    regions: tuple[str, ...] | None = None
    rule = ""
    if project is not None:
        known = set(config.projects.values()) | set(config.project_regions)
        if project not in known:
            said = ", ".join(sorted(known)) or _("none in the config")
            raise InputError(
                "project", project, _("unknown project (known: {known})").format(known=said)
            )
        regions = config.project_regions.get(project)
        rule = _("project {project}").format(project=project) if regions is not None else ""
    if region is not None:
        wanted = fields.text("region", region, 100).strip()
        if regions is not None and wanted.casefold() not in {r.casefold() for r in regions}:
            raise InputError(
                "region",
                region,
                _("is not one of {rule}'s: {regions}").format(
                    rule=rule, regions=", ".join(regions)
                ),
            )
        regions, rule = (wanted,), (f"{rule}, --region {wanted}" if rule else f"--region {wanted}")
    return regions, rule


def quote_job(
    ledger: Ledger,
    config: Config,
    *,
    model: str,
    work: quote.Job,
    day: date,
    at: datetime,
    project: str | None = None,
    region: str | None = None,
) -> quote.Quote:
    """`zuka plan job`: the job priced under every offer valid on `day` and every lease
    current at `at` of the model (matched by leases.core.gpumodels), in the lab's currency."""
    name = fields.text("model", model, 100).strip()
    if not gpu_key(name):
        raise InputError("model", model, _("is required (H800, A100...)"))
    regions, rule = allowed_regions(config, project, region)
    offers = [r for r in ledger.book_rows("offer") if same_model(str(r["gpu_model"]), name)]
    valid = [r for r in offers if valid_on(r, day)]
    options = [offer_option(r) for r in valid] + lease_options(ledger, name, at)
    if not options:
        if offers and all(str(r["quoted_on"]) > day.isoformat() for r in offers):
            first = min(str(r["quoted_on"]) for r in offers)
            raise InputError(
                "model",
                model,
                _(
                    "no offer for it was quoted by {day} (the first on"
                    " {first}) and no current lease has it"
                ).format(day=day, first=first),
            )
        if offers:
            last = max(str(r["valid_until"]) for r in offers if r["valid_until"] is not None)
            raise InputError(
                "model",
                model,
                _(
                    "every offer for it expired (the last on {last})"
                    " and no current lease has it: add a fresh quote"
                ).format(last=last),
            )
        known = ", ".join(_known_models(ledger, at)) or _("none yet (zuka offer add)")
        raise InputError(
            "model",
            model,
            _("no offer and no current lease has it; models: {known}").format(known=known),
        )
    return quote.quote(
        work, name, options, currency=config.billing.currency, regions=regions, rule=rule
    )


def job_from(cards: str | int, hours: str, within: str | None) -> quote.Job:
    """A job from the flags as typed (hours read as every typed number is: 1,5 refused)."""
    n = fields.count("cards", cards, minimum=1, maximum=quote.MAX_CARDS)
    h = fields.number("hours", hours)
    w = None if within is None else fields.count("within", within, maximum=quote.MAX_DAYS)
    return quote.job(n, h, w)


def offer_changes(given: Mapping[str, Any]) -> dict[str, Any]:
    """The record keys given on the command line (None: not given)."""
    return {k: v for k, v in given.items() if v is not None and k in OFFER_FLAGS}


def offer_ids(value: str) -> int:
    return fields.count("id", value, minimum=1, maximum=10**12)
