"""assets/grafana-zuka.json: a dashboard whose every PromQL expression names only metrics
the exporter really exports, on the ${DS_PROMETHEUS} data source, filtered by the channel,
provider and node variables."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from leases.metrics.gauges import GPU_METRICS, METRICS, MONEY_METRICS, NODE_METRICS

DASHBOARD = Path(__file__).parents[2] / "assets" / "grafana-zuka.json"
ZUKA_NAME = re.compile(r"\bzuka_[a-zA-Z0-9_:]*")
VARIABLES = ("channel", "provider", "node")


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return loaded


def panels(d: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for p in d["panels"]:
        out.append(p)
        out.extend(p.get("panels", []))
    return out


def exprs(d: dict[str, Any]) -> list[str]:
    """Every PromQL expression: the panels' targets and the variables' queries."""
    found = [t["expr"] for p in panels(d) for t in p.get("targets", [])]
    return found + [v["query"]["query"] for v in d["templating"]["list"]]


def runnable(expr: str) -> str:
    """An expression as Grafana sends it with every variable at All."""
    for name in VARIABLES:
        expr = expr.replace(f"${name}", ".*")
    return expr


def test_every_expression_names_only_exported_metrics() -> None:
    d = dashboard()
    used: set[str] = set()
    for expr in exprs(d):
        names = set(ZUKA_NAME.findall(expr))
        assert names, f"an expression that reads no zuka metric: {expr}"
        assert names <= set(METRICS), f"{expr}: not exported: {names - set(METRICS)}"
        used |= names
    # And the exporter's every gauge has a panel.
    assert used == set(METRICS)
    assert set(METRICS) == {*GPU_METRICS, *NODE_METRICS, *MONEY_METRICS}


def test_a_panel_is_filtered_by_the_variables_on_the_data_source_variable() -> None:
    d = dashboard()
    assert [i["name"] for i in d["__inputs"]] == ["DS_PROMETHEUS"]
    assert [v["name"] for v in d["templating"]["list"]] == list(VARIABLES)
    targets = [(p, t) for p in panels(d) for t in p.get("targets", [])]
    assert len(targets) >= 14
    for p, t in targets:
        assert p["datasource"]["uid"] == t["datasource"]["uid"] == "${DS_PROMETHEUS}", p["title"]
        for name in VARIABLES:
            assert f'{name}=~"${name}"' in t["expr"], (p["title"], t["expr"])
    titles = " ".join(p["title"] for p in panels(d)).lower()
    for word in ("utilisation", "memory", "power", "temperature", "health", "reading age",
                 "cost to date", "idle", "lease end"):  # fmt: skip
        assert word in titles, word
    assert any(p["type"] == "heatmap" for p in panels(d))
    ids = [p["id"] for p in panels(d)]
    assert len(ids) == len(set(ids))


def test_no_panel_overlaps_another() -> None:
    taken: set[tuple[int, int]] = set()
    for p in panels(dashboard()):
        g = p["gridPos"]
        cells = {
            (x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])
        }
        assert g["x"] + g["w"] <= 24 and not cells & taken, p["title"]
        taken |= cells


def test_only_yuan_gauges_are_shown_as_yuan() -> None:
    """A panel in currencyCNY reads only the _yuan gauges (CNY leases); the gauges of
    leases in other currencies are shown in no currency unit, with the currency named."""
    yuan_panels = other_panels = 0
    for p in panels(dashboard()):
        unit = p.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
        for t in p.get("targets", []):
            names = set(ZUKA_NAME.findall(t["expr"]))
            money = {n for n in names if n.startswith("zuka_lease_") and "timestamp" not in n}
            if unit.startswith("currency"):
                assert (
                    unit == "currencyCNY" and money and all(n.endswith("_yuan") for n in names)
                ), (p["title"], t["expr"])
                yuan_panels += 1
            elif money:
                assert not any(n.endswith("_yuan") for n in money), p["title"]
                assert "{{currency}}" in t["legendFormat"], p["title"]
                other_panels += 1
    assert yuan_panels == other_panels == 2
