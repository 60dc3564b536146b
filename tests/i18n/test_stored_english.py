"""What the poller and an offboarding store stays English whoever runs them, and is told in
the reader's language when shown: an SSH fault raised while a Chinese user runs them (its
message is made in the language in use) is kept as the English one, so that the evidence,
the audit chain and the poll gaps read the same to every reviewer."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from leases.core.i18n import ZH, using
from leases.core.models import Node, NodeHealth, SshTarget
from leases.ssh.pool import SshPool
from leases.telemetry.poller import Poller
from leases.telemetry.words import detail_said
from tests.conftest import Cli
from tests.support.sshd import free_port
from tests.support.sshfixtures import TestKeys, node_options

HAN = re.compile(r"[\u4e00-\u9fff]")


async def test_the_poller_stores_english_and_tells_chinese(tmp_path: Path, keys: TestKeys) -> None:
    node = Node("n1", SshTarget("127.0.0.1", free_port(), "root"), "A100", 8)
    poller = Poller([node], pool=SshPool(node_options(keys, tmp_path)))
    try:
        with using(ZH):  # the dashboard's or `zuka collect --lang zh_CN`'s language
            status = (await poller.sweep())["n1"]
            told = detail_said(status.detail)
    finally:
        await poller.close()
    assert status.health is NodeHealth.UNREACHABLE
    assert status.detail.endswith(": connection refused") and not HAN.search(status.detail)
    assert told.startswith("节点 root@127.0.0.1:") and told.endswith("：连接被拒绝"), told


def test_an_offboarding_run_in_chinese_stores_english(cli: Cli, ledger_path: Path) -> None:
    port = free_port()  # nothing listens: every login is refused
    for step in (
        ("node", "add", "n1", "--ssh", f"ssh -p {port} root@127.0.0.1"),
        ("lease", "add", "n1", "--billing", "hourly", "--price", "10", "--start", "2026-12-01"),
    ):
        assert cli(*step).code == 0
    assert cli("offboard", "n1").code == 0  # the plan, read first
    run = cli("offboard", "n1", "--execute", "--confirm", "n1", "--lang", "zh_CN")
    assert run.code == 1, run.out + run.err
    assert "连接被拒绝" in run.out and "connection refused" not in run.out
    with sqlite3.connect(ledger_path) as db:
        details = [d for (d,) in db.execute("SELECT detail FROM offboard_steps") if d]
        audit = [a for (a,) in db.execute("SELECT after FROM audit") if a]
    assert details and any("connection refused" in d for d in details)
    assert not any(HAN.search(d) for d in details), details
    assert not any(HAN.search(a) for a in audit)
    zh = cli("offboard", "n1", "--report", "--lang", "zh_CN").out
    en = cli("offboard", "n1", "--report").out
    assert "节点 root&#64;127.0.0.1" in zh and "连接被拒绝" in zh  # @ written as markdown safe
    assert "node root&#64;127.0.0.1" in en and "connection refused" in en and not HAN.search(en)
