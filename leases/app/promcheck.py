"""A Prometheus URL's host judged as a notification URL's (leases.notify.host): no
link-local or cloud metadata address in any spelling, nor a name resolving to one now
(the reader judges it again at every connect). The ledger checks the rest of the URL.
A token file given is read as the reader will read it (leases.core.tokenfile): a FIFO, a
link, a file others may read is refused when it is given, not at the first poll. A token
goes over https or to this machine only; and --url, --match, --token-file given to a node
(or provider) read over SSH are refused, not stored silently."""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import Any

from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.models import Node, Provider
from leases.core.promsource import (
    ReadingSource,
    check_token_file,
    check_url,
    plain_token_refusal,
)
from leases.core.tokenfile import read_token
from leases.ledger.store import Ledger
from leases.notify.host import resolved_refusal, system_resolver

# The fields only a node read from Prometheus uses, and their options.
_FLAGS = {"prom_url": "--url", "prom_match": "--match", "prom_token_file": "--token-file"}


def refuse_prom_host(changes: Mapping[str, Any], *, resolve: bool = True) -> None:
    """Refuse a record's prom_url whose host zuka must not read from."""
    raw = changes.get("prom_url")
    if raw is None or not str(raw).strip():
        return
    url = check_url(str(raw))
    host = urllib.parse.urlsplit(url).hostname or ""
    said = resolved_refusal(host, None, system_resolver if resolve else None)
    if said is not None:
        raise InputError(
            "prom_url", url, _("zuka does not read from there: {said}").format(said=said)
        )


def refuse_prom_token(changes: Mapping[str, Any]) -> None:
    """Refuse a record's prom_token_file that is not a private token file of this user's."""
    raw = changes.get("prom_token_file")
    if raw is None or not str(raw).strip():
        return
    read_token(check_token_file(str(raw)), "prom_token_file", _("the Prometheus queries"))


def _given(changes: Mapping[str, Any]) -> list[str]:
    return [k for k in _FLAGS if changes.get(k) is not None and str(changes[k]).strip() != ""]


def _source(value: Any) -> str:
    return "" if value is None else str(value).strip().lower()


def _flags(keys: list[str]) -> str:
    return ", ".join(_FLAGS[k] for k in keys)


def _refuse_plain_token(url: Any, token: Any) -> None:
    if url and token:
        said = plain_token_refusal(check_url(str(url)))
        if said is not None:
            raise InputError(
                "prom_url",
                None,
                _("{said}: give an https URL, or no --token-file").format(said=said),
            )


def refuse_node_setting(ledger: Ledger, node: Node, changes: Mapping[str, Any]) -> None:
    """Refuse what a node's Prometheus fields would be after the change (node: as stored;
    at add, as built from changes): --url/--match/--token-file on a node read over SSH,
    and a token sent over plain http."""
    merged = {k: changes.get(k, getattr(node, k)) for k in ("reading_source", *_FLAGS)}
    provider: Provider | None = None
    name = changes.get("provider", node.provider)
    if name:
        try:
            provider = ledger.provider(str(name))
        except InputError:
            provider = None  # a provider --channel creates now: no Prometheus setting yet
    source = _source(merged["reading_source"]) or _source(
        provider.reading_source if provider else None
    )
    given = _given(changes)
    local = bool(changes.get("local", node.local))
    if given and (source != ReadingSource.PROMETHEUS or local):
        if local:
            said = _(
                "node {node} reads its GPUs through NVML (--local): {flags} are for --source"
                " prometheus (give --source prometheus on {where})"
            )
        else:
            said = _(
                "node {node} reads its GPUs over SSH: {flags} are for --source prometheus"
                " (give --source prometheus on {where})"
            )
        if provider:
            where = _("the node or its provider {provider}").format(provider=provider.name)
        else:
            where = _("the node")
        raise InputError(
            given[0], None, said.format(node=node.name, flags=_flags(given), where=where)
        )
    url = merged["prom_url"] or (provider.prom_url if provider else "")
    # As leases.telemetry.promtarget.inherit reads it: the provider's token goes only with
    # the provider's own URL, so a node's own URL carries the node's token or none.
    inherited = "" if merged["prom_url"] or provider is None else provider.prom_token_file
    _refuse_plain_token(url, merged["prom_token_file"] or inherited)


def refuse_provider_setting(ledger: Ledger, provider: Provider, changes: Mapping[str, Any]) -> None:
    """As refuse_node_setting, of a provider: its --url/--match/--token-file are refused
    when neither it nor any of its nodes reads from Prometheus."""
    merged = {k: changes.get(k, getattr(provider, k)) for k in ("reading_source", *_FLAGS)}
    given = _given(changes)
    if given and _source(merged["reading_source"]) != ReadingSource.PROMETHEUS:
        opted = [
            n
            for n in ledger.nodes()
            if n.provider == provider.name and n.reading_source is ReadingSource.PROMETHEUS
        ]
        if not opted:
            raise InputError(
                given[0],
                None,
                _(
                    "provider {provider}'s nodes read their GPUs over SSH: {flags} are for"
                    " --source prometheus (give --source prometheus on the provider, or on the"
                    " nodes that read from Prometheus)"
                ).format(provider=provider.name, flags=_flags(given)),
            )
    _refuse_plain_token(merged["prom_url"], merged["prom_token_file"])
