"""Provider use cases: `zuka provider add/edit`, each with its result and what it says of
it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from leases.app.changes import audit_head
from leases.app.promcheck import (
    refuse_prom_host,
    refuse_prom_token,
    refuse_provider_setting,
)
from leases.app.untouched import refuse_provider_edits
from leases.core.i18n import _
from leases.core.models import Provider
from leases.ledger.store import Ledger


def add_provider(ledger: Ledger, provider: Provider) -> tuple[Provider, str]:
    """`zuka provider add NAME`: the provider as recorded and what the command says of it."""
    refuse_prom_host({"prom_url": provider.prom_url})
    refuse_prom_token({"prom_token_file": provider.prom_token_file})
    own = ("reading_source", "prom_url", "prom_match", "prom_token_file")
    refuse_provider_setting(ledger, provider, {k: getattr(provider, k) for k in own})
    added = ledger.add_provider(provider)
    return added, _("added provider {provider}").format(provider=added.name)


def edit_provider(ledger: Ledger, name: str, changes: Mapping[str, Any]) -> tuple[Provider, str]:
    """`zuka provider edit NAME`: the provider as edited and what the command says of it."""
    refuse_provider_edits(ledger, name, changes)
    refuse_prom_host(changes)
    refuse_prom_token(changes)
    refuse_provider_setting(ledger, ledger.provider(name), changes)
    head = audit_head(ledger)
    edited = ledger.update_provider(name, changes)
    same = audit_head(ledger) == head
    message = (
        _("nothing changed: provider {provider} is already so")
        if same
        else _("updated provider {provider}")
    ).format(provider=edited.name)
    return edited, message
