"""Acceptance, SSH and the simulated fleet in Chinese: a run on simulated nodes (the ones
tests/accept uses) said in Chinese as it runs, in its markdown report and read back with
--last, with no English left but data; the run stored in English, its --json the same
bytes in both languages; the SSH refusals of tests/ssh's tables said in Chinese."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from leases.accept.engine import Sold
from leases.accept.retell import retold
from leases.app.acceptreport import status_words
from leases.core.acceptance import CheckResult, Evidence, Level, Status, Verdict
from leases.core.errors import InputError
from leases.core.i18n import EN, ZH, using
from leases.ledger.store import Ledger
from leases.sim.ledger import register_sim_nodes, serve_ledger_nodes
from leases.ssh.faults import classify
from leases.ssh.login import parse_ssh_command
from leases.ssh.pasted import dropped_from
from tests.conftest import Cli
from tests.support.english import stray_english

CJK = re.compile(r"[\u4e00-\u9fff]")

# What a simulated node prints that is its own (not zuka's words): sshd's settings and
# their values, methods, file systems and devices, topology cells, process names.
NODE_WORDS = [
    "PasswordAuthentication", "KbdInteractiveAuthentication", "PermitRootLogin",
    "AuthorizedKeysFile", "AuthenticationMethods", "UsePAM", "without-password",
    "prohibit-password", "publickey", "keyboard-interactive", "password", "authorized_keys",
    "authorized_keys2", "ssh-ed25519", "NVIDIA", "GeForce", "SXM4", "PCIE", "None", "yes",
    "dmesg", "ext4", "xfs", "overlay", "nvme0n1p2", "NODE", "PIX", "SYS", "python",
    "SimPlatform", "Asia/Shanghai", "Gen3", "Gen4", "x16", "sshd", "SW power cap",
    "Pass-Through", "Virtualization Mode", "Clocks Event Reasons", "memory.total",
    "allocated_bytes", "name,pci.device_id", "--query-gpu", "topo", "nvlink", "ibstat",
    "libvgpu", "--level standard", "Match", "Include", "tests", "Out of bounds values", "all_reduce_perf",
    "nvbandwidth", "dcgmi", "diag", "curl", "kernels", "Jupyter", "vast.ai", "Azure",
    "HAMi", "CUDA_DEVICE_MEMORY_LIMIT", "CUDA_DEVICE_SM_LIMIT", "LD_PRELOAD", "Xid",
    "Xids", "LinkUp", "Active", "RoCE", "Ethernet", "BF16", "GDDR", "NVLinks", "df",
    "ss", "proc", "tcp", "Initializing", "unknown", "Disabled", "Enabled", "N/A",
]  # fmt: skip


@dataclass
class Fleet:
    path: Path
    fake: str  # an A100 80GB showing 24564 MiB, HAMi on it
    open_sshd: str  # password login on, root login on
    a100: str  # an 8x A100 SXM box as sold (NV12)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    path = tmp_path_factory.mktemp("zh-accept") / "ledger.db"
    with Ledger.open(path) as ledger:
        nodes = register_sim_nodes(ledger, 8, datetime.now(UTC))
        ledger.update_node(nodes[0].name, {"tags": ["sim:busy", "sim-trap:password_sshd"]})
        ledger.update_node(nodes[1].name, {"tags": ["sim:busy"], "nvlinks": 12})
        nodes = [ledger.node(n.name) for n in nodes]
        runner = serve_ledger_nodes(ledger, path, nodes)
    try:
        yield Fleet(path, nodes[7].name, nodes[0].name, nodes[1].name)
    finally:
        runner.stop()


def _data(fleet: Fleet, text: str) -> list[str]:
    """The data of an output: check ids, node names, fingerprints, models as the node names
    them; the longest first (a shorter one is often part of it)."""
    found = re.findall(r"SHA256:\S+|'[^']*'|sim-\d+|(?<![/\w.])[a-z]+\.[a-z_-]+(?::\S+)?", text)
    return sorted({*found, fleet.fake, fleet.open_sshd, *NODE_WORDS}, key=len, reverse=True)


def _plain(markdown: str) -> str:
    """The words of a markdown report, its escapes undone."""
    return re.sub(r"\\([\\`*_|<>\[\]#])", r"\1", markdown)


def test_a_run_is_told_in_chinese_as_it_runs(cli: Cli, fleet: Fleet) -> None:
    ran = cli("accept", fleet.fake, "--lang", "zh_CN", ledger=fleet.path)
    assert ran.code == 1, ran.err
    out = ran.out
    assert "正在检查：配置与租约核对" in out
    assert "每卡显存" in out and "24564 MiB" in out and "不通过" in out
    assert "GPU 共享限制器" in out
    assert stray_english(out, data=_data(fleet, out)) == []


def test_the_report_and_the_stored_run_read_back_are_chinese(cli: Cli, fleet: Fleet) -> None:
    ran = cli("accept", fleet.open_sshd, "--lang", "zh_CN", "--report", "md", ledger=fleet.path)
    assert ran.code == 1, ran.err
    report = ran.out
    assert report.startswith(f"# {fleet.open_sshd} 交付验收报表")
    assert "## 检查结果" in report and "## 未通过与警告检查项的证据" in report
    assert "**不通过** 密码登录" in report
    # The evidence blocks are the node's own output: left out of the check.
    words = _plain(report.split("## 未通过与警告检查项的证据")[0])
    assert stray_english(words, data=_data(fleet, words)) == []
    # Read back from the ledger, judged again from the stored evidence: Chinese too.
    last = cli("accept", fleet.open_sshd, "--last", "--lang", "zh_CN", ledger=fleet.path)
    assert "不通过      密码登录：sshd 允许任何知道密码的人登录" in last.out
    assert "拒绝仅密码登录：不提供密钥的登录时，节点要求输入密码" in last.out
    assert stray_english(last.out, data=_data(fleet, last.out)) == []
    again = cli("accept", fleet.open_sshd, "--last", "--report", "md", "--lang", "zh_CN",
                ledger=fleet.path)  # fmt: skip
    head = _plain(again.out.split("## 未通过与警告检查项的证据")[0])
    assert "传输速度：节点 → zuka 主机" in head
    assert stray_english(head, data=_data(fleet, head)) == []


def test_the_heavy_checks_are_chinese(cli: Cli, fleet: Fleet) -> None:
    ran = cli("accept", fleet.a100, "--level", "standard", "--lang", "zh_CN", ledger=fleet.path)
    assert ran.code in (0, 1), ran.err
    out = ran.out
    assert "正在检查：GPU 负载：矩阵乘、DCGM、拷贝、NCCL" in out
    assert "BF16 矩阵乘与 CUDA 可分配显存（torch）" in out and "NCCL all-reduce 总线带宽" in out
    testcases = ["host_to_device_memcpy_ce", "device_to_host_memcpy_ce", "all-reduce"]
    data = [*_data(fleet, out), *re.findall(r"mlx\w+", out), *testcases]
    assert stray_english(out, data=sorted(set(data), key=len, reverse=True)) == []


def test_the_run_is_stored_in_english_and_its_json_is_the_same_in_both(
    cli: Cli, fleet: Fleet
) -> None:
    assert cli("accept", fleet.fake, "--lang", "zh_CN", ledger=fleet.path).code == 1
    en = cli("accept", fleet.fake, "--last", "--json", "--lang", "en", ledger=fleet.path)
    zh = cli("accept", fleet.fake, "--last", "--json", "--lang", "zh_CN", ledger=fleet.path)
    assert en.out == zh.out
    run = json.loads(en.out)
    assert run["status"] == "failed"
    said = " ".join(r["title"] + r["words"] + r["expected"] + r["found"] for r in run["results"])
    assert not CJK.search(said)
    assert any("24564 MiB" in r["words"] for r in run["results"] if r["check"] == "inventory.vram")


def test_english_is_unchanged(cli: Cli, fleet: Fleet) -> None:
    # A run of its own: under pytest-xdist another test's run may be on another worker.
    ran = cli("accept", fleet.open_sshd, "--lang", "en", ledger=fleet.path)
    last = cli("accept", fleet.open_sshd, "--last", "--lang", "en", ledger=fleet.path)
    for out in (ran.out, last.out):
        assert "  failed      Password login: sshd lets anyone with a password log in" in out
        assert not CJK.search(out)


def _verdict(*results: CheckResult, evidence: tuple[Evidence, ...] = ()) -> Verdict:
    at = datetime(2026, 12, 3, tzinfo=UTC)
    return Verdict("n", Level.QUICK, at, at, results, evidence)


def test_a_finding_zuka_cannot_judge_again_is_shown_as_stored() -> None:
    from leases.accept.registry import checks

    odd = CheckResult("inventory.count", "GPU count", Status.PASSED, "said by an older zuka")
    unreached = CheckResult(
        "inventory.run",
        "Inventory against the lease",
        Status.NOT_CHECKED,
        "not checked: the node could not be reached (connection refused)",
    )
    with using(ZH):
        told = retold(_verdict(odd, unreached), Sold("n"), checks())
    assert told[0] == odd
    assert told[1].title == "配置与租约核对"
    assert told[1].words == "未检查：无法连接节点（连接被拒绝）"
    with using(EN):
        assert retold(_verdict(odd), Sold("n"), checks()) == (odd,)


@pytest.mark.parametrize("status", list(Status))
def test_every_status_has_chinese_words(status: Status) -> None:
    with using(ZH):
        assert CJK.search(status_words(status))


# tests/ssh/test_sshcmd.py's tables of what is not a login, and what zuka does not honour.
BAD_LOGINS = [
    "", "ssh", "ssh -p", "ssh -p 0 root@h", "ssh -p abc root@h", "ssh -Z root@h",
    "ssh root@h nvidia-smi", "ssh 'root@h", "scp root@h:/x .", "ssh root@bad_host!",
    "ssh 'ro ot'@host", "ssh -L /tmp/sock:h:1 root@host", "ssh -CNgL 0:127.0.0.1:6006 root@host",
    "ssh -F /tmp/x root@host", "ssh -W h:22 root@host", "ssh -o ProxyCommand='sh -c id' h",
    "ssh -oProxyCommand=nc h", "ssh -o HostName=evil h", "ssh -o LocalCommand=id h",
    "ssh -o PermitLocalCommand=yes h", "ssh -o StrictHostKeyChecking=maybe h",
    "ssh -o ServerAliveInterval='30 x' h", "ssh -G h", "ssh -o 'Pro%xy=1' h",
    "ssh root@-oProxyCommand=x", "ssh -- -oProxyCommand=x", "ssh -l -oProxy root@h",
    "ssh 'h;id'", "ssh 'h%h'", "ssh '[fe80::1%eth0]'", "ssh h:22", "ssh -J '-oProxyCommand=x' h",
    "ssh -J 'a b' h", "ssh -i '-oProxyCommand=x' h", "ssh -i 'a\x1b[2Jb' h", "ssh x.invalid",
    "ssh root@h\nrm -rf /", "ssh -p 1 " + "a" * 5000, "ssh -J admin:S3cretPw@jump.lab h",
    "ssh://root:S3cretPw@h:22", "ssh root:S3cretPw@h", "sshpass -p S3cretPw ssh root@h",
    "ssh -p 1 root@h\npassword: S3cretPw\nextra line",
    "ssh -i '-----BEGIN OPENSSH PRIVATE KEY-----S3cretPw' h", "ssh -ip /k root@h",
    "ssh -vZp 22 root@h", "ssh -vG root@h", "ssh -vS /tmp/ctl root@h", "ssh -vp",
]  # fmt: skip
# Option names and values of the commands, said back as they were typed.
LOGIN_DATA = sorted(
    ["ProxyCommand", "HostName", "LocalCommand", "PermitLocalCommand", "ServerAliveInterval",
     "StrictHostKeyChecking", "Option=value", "ProxyJump", "bind_address", "hostport",
     "port", "host", "Pro%xy", "bad_host", "invalid", "user:password@", "sshpass",
     # core.secrets names a token's kind in English.
     "an access key or token"],
    key=len, reverse=True,
)  # fmt: skip
# Written the same in Chinese (proposed for tests/support/english.py's WORDS).
LOGIN_WORDS = ["stdio", "IPv"]  # IPv4, IPv6


@pytest.mark.parametrize("command", BAD_LOGINS)
def test_ssh_refusals_are_chinese(command: str) -> None:
    with using(ZH), pytest.raises(InputError) as err:
        parse_ssh_command(command)
    reason = err.value.reason
    assert CJK.search(reason), reason
    assert stray_english(reason, data=LOGIN_DATA, extra=LOGIN_WORDS) == [], reason


def test_ssh_connection_failures_and_pasted_passwords_are_chinese() -> None:
    with using(ZH):
        _health, words, _offered = classify(ConnectionRefusedError(111, "refused"), 10)
        assert words == "连接被拒绝"
        _health, timed, _offered = classify(TimeoutError(), 10)
        assert timed == "无响应：10 秒后连接超时"
        dropped = dropped_from("ssh -p 2222 root@h\npassword: x")
        assert dropped is not None and dropped.startswith("已丢弃粘贴内容中的密码行")
    with using(EN):
        assert classify(ConnectionRefusedError(111, "refused"), 10)[1] == "connection refused"


# tests/metrics/test_listen.py's table of addresses the exporter refuses.
BAD_LISTENS = ["", "9400", ":9400", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:65536",
               "127.0.0.1:-1", "127.0.0.1:９４００", "127.0.0.1:94 00", "localhost:9400",
               "::1:9400", "[::1]9400", "[::ffff:127.0.0.1]:9400", "unix:",
               "unix:/" + "a" * 200, "127.0.0.1:94\x1b[2J"]  # fmt: skip


@pytest.mark.parametrize("text", BAD_LISTENS)
def test_metrics_address_refusals_are_chinese(text: str) -> None:
    from leases.metrics.listen import parse_listen

    with using(ZH), pytest.raises(InputError) as err:
        parse_listen(text)
    assert err.value.field == "--metrics-listen"
    assert CJK.search(err.value.reason), err.value.reason
    said = err.value.reason.replace("localhost", " ")
    assert stray_english(said, extra=["IPv", "unix", "PORT"]) == [], said


def test_a_node_that_cannot_be_reached_is_said_in_chinese(cli: Cli) -> None:
    assert cli("node", "add", "far", "--ssh", "ssh -p 1 root@127.0.0.1", "--gpus", "8").code == 0
    ran = cli("accept", "far", "--lang", "zh_CN")
    assert ran.code == 3, ran.err
    assert "未检查：无法连接节点（节点 root@127.0.0.1:1：连接被拒绝）" in ran.out
    assert "far：未检查（未检查 6 项；级别 快速，第 1 次）" in ran.out
    data = ["far", "root@127.0.0.1:1", "Asia/Shanghai"]
    assert stray_english(ran.out, data=data) == []
    last = cli("accept", "far", "--last", "--lang", "zh_CN")
    assert stray_english(last.out, data=data) == []
    stored = json.loads(cli("accept", "far", "--last", "--json").out)
    assert "node root@127.0.0.1:1: connection refused" in stored["results"][1]["words"]
