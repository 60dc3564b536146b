"""A form field's name (a record key: unit_price) in words, in the language in use: the
English words are the key's ("unit price"), as the forms always showed them."""

from __future__ import annotations

from leases.core.i18n import N_, _

FIELD_WORDS = {
    "name": N_("name"),
    "provider": N_("provider"),
    "ssh": N_("ssh"),
    "gpu_model": N_("gpu model"),
    "gpu_count": N_("gpu count"),
    "vram_gib": N_("vram gib"),
    "interconnect": N_("interconnect"),
    "nvlinks": N_("nvlinks"),
    "ib_gbps": N_("ib gbps"),
    "tags": N_("tags"),
    "state": N_("state"),
    "local": N_("local"),
    "notes": N_("notes"),
    "instance_id": N_("instance id"),
    "instance_endpoint": N_("instance endpoint"),
    "reading_source": N_("reading source"),
    "prom_url": N_("prom url"),
    "prom_match": N_("prom match"),
    "prom_token_file": N_("prom token file"),
    "node": N_("node"),
    "billing_type": N_("billing type"),
    "unit_price": N_("unit price"),
    "currency": N_("currency"),
    "cards_billed": N_("cards billed"),
    "start": N_("start"),
    "end": N_("end"),
    "billing_tz": N_("billing tz"),
    "auto_renew": N_("auto renew"),
    "min_commitment": N_("min commitment"),
    "deposit": N_("deposit"),
    "deposit_paid_on": N_("deposit paid on"),
    "deposit_refund": N_("deposit refund"),
    "deposit_refunded_on": N_("deposit refunded on"),
    "contract_no": N_("contract no"),
    "notice_days": N_("notice days"),
    "on_expiry": N_("on expiry"),
    "release_after_stopped_days": N_("release after stopped days"),
    "stopped_billing": N_("stopped billing"),
    "month_count": N_("month count"),
    "partial_unit": N_("partial unit"),
    "renew_charge_days": N_("renew charge days"),
    "hourly_price": N_("hourly price"),
    "refund_rule": N_("refund rule"),
    "rounding": N_("rounding"),
    "payment_schedule": N_("payment schedule"),
    "lease_start": N_("lease start"),
    "kind": N_("kind"),
    "native_id": N_("native id"),
    "region": N_("region"),
    "endpoint": N_("endpoint"),
    "created": N_("created"),
    "price": N_("price"),
    "price_per": N_("price per"),
}


def field_words(key: str) -> str:
    """'unit price' / '单价'; a key not listed as its words."""
    known = FIELD_WORDS.get(key)
    return _(known) if known else key.replace("_", " ")
