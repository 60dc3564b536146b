"""README's "Prometheus and Grafana" section against the code: every gauge named, each
label set written `name{a,b}` the one the exporter gives, and the way for Prometheus (TCP
with a token) shown first, the Unix socket said not to be for it."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

from leases.metrics.gauges import (
    GPU_LABELS,
    GPU_METRICS,
    METRICS,
    NODE_LABELS,
    NODE_METRICS,
    LeaseMoney,
    Money,
    Place,
    money_families,
)

README = Path(__file__).parents[2] / "README.md"


def section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("## Prometheus and Grafana")
    return text[start : text.index("\n## ", start + 1)]


def exported_labels() -> dict[str, set[str]]:
    """Each gauge's label names, as the exporter gives them."""
    out = {name: set(GPU_LABELS) for name in GPU_METRICS}
    out |= {name: set(NODE_LABELS) for name in NODE_METRICS}
    out["zuka_node_health"] = {*NODE_LABELS, "state"}
    end = datetime(2026, 5, 1, tzinfo=UTC)
    money = Money(
        leases=tuple(LeaseMoney("n", "1", Place("cloud", "P"), "monthly", cur, Decimal(1),
                                Decimal(1), end) for cur in ("CNY", "USD")),
        refused=(("m", "2", Place("cloud", "P")),),
    )  # fmt: skip
    for family in money_families(money):
        (labels,) = {frozenset(s.labels) for s in family.samples}
        out[family.name] = set(labels)
    assert set(out) == set(METRICS)
    return out


def test_every_gauge_is_named_with_its_labels() -> None:
    text = section()
    labels = exported_labels()
    for name in METRICS:
        assert re.search(rf"`{name}[`{{]", text), f"README does not name {name}"
    written = re.findall(r"`(zuka_[a-z_]+)\{([a-z_,]+)\}", text)
    assert written, "no label set written out"
    for name, said in written:
        assert set(said.split(",")) == labels[name], (name, said, labels[name])


def test_prometheus_is_shown_the_token_way_first() -> None:
    text = section()
    block = text[text.index("```sh") : text.index("```", text.index("```sh") + 5)]
    commands = [line for line in block.splitlines() if line.startswith("zuka collect")]
    assert "--metrics-token-file" in commands[0]
    assert "unix:" in commands[-1]
    words = " ".join(text.split())
    assert "not for Prometheus" in words and "scrapes HTTP over TCP only" in words
    assert "curl --unix-socket" in words
