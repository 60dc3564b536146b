"""Which nodes are read from Prometheus, and where: a provider's reading source filled in
on its nodes (a node's own setting wins), and the target one node is read at
(leases.telemetry.promread reads it)."""

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


def inherit(nodes: Sequence[Node], providers: Sequence[Provider]) -> list[Node]:
    """Nodes with their provider's reading source, URL, matchers and token file where
    they have none of their own."""
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
                prom_token_file=node.prom_token_file or prov.prom_token_file,
            )
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
        parse_matchers(node.prom_match)
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
