"""Which nodes are read from Prometheus, and where: a provider's reading source filled in
on its nodes (a node's own setting wins), and the target one node is read at
(leases.telemetry.promread reads it). A node whose Prometheus settings (or its provider's)
were changed outside zuka is not read with a token: somebody able to write the ledger file
could point the URL and the token file anywhere (leases.ledger.rowaudit finds the edit)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from leases.core.errors import InputError
from leases.core.models import Node, Provider
from leases.core.promsource import (
    HOSTNAME_LABEL,
    Matcher,
    PromTarget,
    ReadingSource,
    parse_matchers,
)
from leases.ledger import rowaudit
from leases.ledger.store import Ledger


def inherit(nodes: Sequence[Node], providers: Sequence[Provider]) -> list[Node]:
    """Nodes with their provider's reading source, URL, matchers and token file where
    they have none of their own. The provider's token goes only with the provider's URL: a
    node with a URL of its own is read with its own token file or none."""
    by_name = {p.name: p for p in providers}
    out = []
    for node in nodes:
        prov = by_name.get(node.provider or "")
        if prov is None or node.local or node.reading_source is ReadingSource.SSH:
            out.append(node)
            continue
        out.append(
            replace(
                node,
                reading_source=node.reading_source or prov.reading_source,
                prom_url=node.prom_url or prov.prom_url,
                prom_match=node.prom_match or provider_match(prov.prom_match, node.name),
                prom_token_file=node.prom_token_file
                or ("" if node.prom_url else prov.prom_token_file),
            )
        )
    return out


# An edit of these makes a token-bearing node refused; a node moved to another provider
# (its provider column) takes that provider's URL and token.
_PROM_FIELDS = frozenset(
    {"reading_source", "prom_url", "prom_match", "prom_token_file", "provider"}
)


def ledger_nodes(ledger: Ledger, nodes: Sequence[Node]) -> list[Node]:
    """inherit() with the ledger's providers, and a node read from Prometheus with a token
    whose own or provider's Prometheus fields were changed outside zuka refused (its
    `problem` says why and how to take the change): it is listed, never read."""
    providers = ledger.readable_providers()[0]
    out = inherit(nodes, providers)
    if not any(is_prometheus(n) and n.prom_token_file for n in out):
        return out  # no token to send: the drift check is not needed (an SSH fleet)
    drifted: set[tuple[str, int]] = set()
    for d in rowaudit.drifted_since(ledger):
        fields = {f for f, _, _ in d.fields}
        if d.entity not in ("node", "provider") or d.what == "removed":
            continue
        if d.what == "added" or d.problem or fields & _PROM_FIELDS:
            drifted.add((d.entity, d.entity_id))
    ids = {p.name: p.id for p in providers}
    for i, n in enumerate(out):
        if not is_prometheus(n) or not n.prom_token_file or n.id is None:
            continue
        prov = ids.get(n.provider or "")
        if ("node", n.id) in drifted:
            which = f"node {n.id}"
        elif prov is not None and ("provider", prov) in drifted:
            which = f"provider {prov}"
        else:
            continue
        out[i] = replace(
            n,
            problem=f"not read from Prometheus with its token: the Prometheus settings of"
            f" {which} were changed outside zuka (`zuka audit verify` shows how); once"
            f" checked, `zuka audit accept {which}`",
        )
    return out


def provider_match(text: str, node: str) -> str:
    """A provider's matchers as one node's: with Hostname="NODE" added unless they name
    the Hostname label themselves."""
    if not text:
        return ""
    matchers = parse_matchers(text)
    if any(m.name == HOSTNAME_LABEL for m in matchers):
        return text
    return ", ".join(m.promql() for m in (*matchers, Matcher(HOSTNAME_LABEL, "=", node)))


def is_prometheus(node: Node) -> bool:
    return node.reading_source is ReadingSource.PROMETHEUS and not node.local


def target_of(node: Node) -> PromTarget:
    """Where a Prometheus-read node is read. Raises InputError when it has no URL."""
    if not node.prom_url:
        raise InputError(
            "prom_url",
            None,
            "readings from Prometheus need a URL: give --url on the node or its provider",
        )
    matchers = (
        parse_matchers(node.prom_match, hostname_added=True)
        if node.prom_match
        else (Matcher(HOSTNAME_LABEL, "=", node.name),)
    )
    return PromTarget(node.prom_url, matchers, node.prom_token_file)


def source_line(node: Node) -> str:
    """`readings: Prometheus http://prom:9090 {Hostname="gpu-07"}` or `readings: SSH`."""
    if node.local:
        return "readings: NVML on this machine"
    if not is_prometheus(node):
        return "readings: SSH (nvidia-smi)"
    try:
        return f"readings: {target_of(node).shown()}"
    except InputError as exc:
        return f"readings: Prometheus, but {exc.reason}"
