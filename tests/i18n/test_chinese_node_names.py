"""Nodes named in Chinese, as labs name their machines (训练机1): added, listed aligned by
terminal cells, shown, leased, planned for offboarding and drawn on the fleet; while the
look-alikes (full-width letters, compatibility ideographs) that would print like a name
already in the ledger are refused, naming the field and changing nothing."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.cells import cell_len

from leases.core import fields
from leases.core.errors import InputError
from tests.conftest import Cli

NAME = "训练机1"
NOW = datetime(2026, 12, 3, 4, 0, tzinfo=UTC)


def _seed(cli: Cli) -> None:
    steps = [
        ("provider", "add", "恒源云", "--kind", "platform"),
        ("node", "add", NAME, "--ssh", "ssh -p 30022 root@10.0.0.9", "--gpus", "8",
         "--gpu-model", "RTX 4090", "--provider", "恒源云"),
        ("node", "add", "a800-long-name-1", "--ssh", "ssh root@10.0.0.10", "--gpus", "8",
         "--gpu-model", "A800", "--provider", "恒源云"),
        ("lease", "add", NAME, "--billing", "monthly", "--price", "12000",
         "--start", "2026-11-20", "--end", "2026-12-20"),
        ("resource", "add", NAME, "--kind", "disk", "--id", "d-123", "--lease-start",
         "2026-11-20"),
    ]  # fmt: skip
    for step in steps:
        r = cli(*step)
        assert r.code == 0, (step, r.err)


@pytest.mark.parametrize("name", ["训练机1", "a100-节点", "㐀", "训" * 63, "gpu.组-2@机房"])
def test_chinese_names_are_names(name: str) -> None:
    assert fields.node_name(name) == name


@pytest.mark.parametrize(
    "name",
    [
        "ａ100",  # full-width a: prints like a100
        "\uf9a8",  # a compatibility ideograph, NFKC-equal to 令
        "训练 机",  # a space
        "训" * 64,  # too long
        "-训练",  # starts with '-', an option to every command
        "训练\u200b机",  # an invisible character
        "训练：机",  # a full-width colon
    ],
)
def test_look_alikes_and_punctuation_are_refused(name: str) -> None:
    with pytest.raises(InputError) as exc:
        fields.node_name(name)
    assert exc.value.field == "name"
    assert "Chinese characters" in exc.value.reason


def test_a_refused_name_changes_nothing(cli: Cli, ledger_path: Path) -> None:
    _seed(cli)
    r = cli("node", "add", "ａ100", "--ssh", "ssh root@10.0.0.11")
    assert r.code == 2 and "name:" in r.err and "Chinese characters" in r.err
    with sqlite3.connect(ledger_path) as db:
        names = [row[0] for row in db.execute("SELECT name FROM nodes ORDER BY name")]
    assert names == ["a800-long-name-1", NAME]


def test_a_chinese_name_through_the_commands(cli: Cli) -> None:
    _seed(cli)
    listed = cli("node", "list", "--lang", "zh_CN")
    assert listed.code == 0, listed.err
    lines = listed.out.splitlines()
    # Both rows' second column starts at the same cell: 训练机1 is 7 cells, not 4.
    row = next(line for line in lines if line.startswith(NAME))
    other = next(line for line in lines if line.startswith("a800-long-name-1"))
    head = lines[0]
    second = head.split()[1]
    col = cell_len(head[: head.index(second)])
    assert cell_len(row[: row.index("算力租赁平台")]) == col
    assert cell_len(other[: other.index("算力租赁平台")]) == col

    shown = cli("node", "show", NAME, "--json")
    assert shown.code == 0, shown.err
    assert json.loads(shown.out)["node"]["name"] == NAME

    leases = cli("lease", "list", "--json")
    assert [le["node"] for le in json.loads(leases.out)] == [NAME]

    plan = cli("offboard", NAME)
    assert plan.code == 0, plan.err
    assert NAME in plan.out and "d-123" in plan.out

    missing = cli("node", "show", "训练机2")
    assert missing.code != 0 and "训练机2" in missing.err


async def test_a_chinese_name_on_the_fleet(cli: Cli, ledger_path: Path) -> None:
    from tests.support.waiting import wait_until
    from tui.dashboard.app import ZukaApp

    _seed(cli)
    app = ZukaApp(ledger_path, clock=lambda: NOW, poll=False, refresh_s=3600)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(lambda: app._reads >= 1, what="the first read")
        await app.workers.wait_for_complete()
        await pilot.pause()
        text = app.export_screenshot()
    assert NAME in text


@pytest.mark.parametrize(
    ("first", "second"),
    [("gpu-1", "gpu一1"), ("gpu一1", "gpu-1"), ("机房口1", "机房囗1"), ("日志机", "曰志机"),
     ("a100l1", "a100丨1"), ("己机", "已机"), ("gpu丨", "gpuI"), ("gpuI", "gpu1"),
     ("gpu-O", "gpu-0"), ("gpu-l", "gpu-1")],
)  # fmt: skip
def test_a_look_alike_of_a_live_node_is_refused(
    cli: Cli, ledger_path: Path, first: str, second: str
) -> None:
    assert cli("node", "add", first, "--ssh", "ssh root@10.0.0.1").code == 0
    r = cli("node", "add", second, "--ssh", "ssh root@10.0.0.2")
    assert r.code == 2 and f"looks like the node {first}" in r.err, r.err
    with sqlite3.connect(ledger_path) as db:
        assert [n for (n,) in db.execute("SELECT name FROM nodes")] == [first]
    # Renamed into a look-alike: refused too; renamed to a name of its own: fine.
    assert cli("node", "add", "其他", "--ssh", "ssh root@10.0.0.3").code == 0
    moved = cli("node", "edit", "其他", "--rename", second)
    assert moved.code == 2 and f"looks like the node {first}" in moved.err, moved.err
    assert cli("node", "edit", "其他", "--rename", "训练机9").code == 0


def test_an_archived_look_alike_is_not_restored_beside_a_live_node(cli: Cli) -> None:
    assert cli("node", "add", "gpu一1", "--ssh", "ssh root@10.0.0.1").code == 0
    assert cli("node", "archive", "gpu一1").code == 0
    assert cli("node", "add", "gpu-1", "--ssh", "ssh root@10.0.0.2").code == 0
    r = cli("node", "restore", "gpu一1")
    assert r.code == 2 and "looks like the node gpu-1" in r.err, r.err
    listed = json.loads(cli("node", "list", "--json").out)
    assert [n["name"] for n in listed] == ["gpu-1"]


def test_different_chinese_names_are_two_nodes(cli: Cli) -> None:
    for name in ("训练机1", "训练机2", "推理机1", "gpu-1", "gpu-2"):
        assert cli("node", "add", name, "--ssh", "ssh root@10.0.0.1").code == 0, name
