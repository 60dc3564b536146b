"""The ledger's commands in Chinese (part B of issue 25): their tables, messages and
refusals under zh_CN say Chinese words and leave no English that is not data; their
--json is the same bytes in both languages; tables of Chinese words align by cells."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from rich.cells import cell_len

from leases.core.i18n import ZH, using
from tests.conftest import Cli
from tests.support.english import stray_english

ZH_ARGS = ("--lang", "zh_CN")
# Data the seeded ledger holds (node, provider, notes, ids, models, record keys a change
# names), and words of other parts' messages met on the way (the error printer's prefix).
DATA = ["a800-1", "阿里云", "机房三楼", "d-123", "A800", "root", "CNY", "nvidia-smi"]
OTHERS = ["error", "got"]


def _seed(cli: Cli) -> None:
    steps = [
        ("provider", "add", "阿里云", "--kind", "cloud"),
        ("node", "add", "a800-1", "--ssh", "ssh -p 30022 root@10.0.0.9", "--gpus", "8",
         "--gpu-model", "A800", "--provider", "阿里云", "--notes", "机房三楼"),
        ("lease", "add", "a800-1", "--billing", "monthly", "--price", "12000",
         "--start", "2026-11-01", "--end", "2026-12-01", "--deposit", "5000"),
        ("lease", "renew", "a800-1", "--until", "2027-01-01"),
        ("resource", "add", "a800-1", "--kind", "disk", "--id", "d-123",
         "--lease-start", "2026-12-01"),
        ("lease", "stop", "a800-1", "--at", "2026-11-20"),
        ("lease", "resume", "a800-1", "--at", "2026-11-21"),
    ]  # fmt: skip
    for step in steps:
        r = cli(*step)
        assert r.code == 0, (step, r.err)


def _zh(cli: Cli, *args: str, ledger: Path | None = None) -> str:
    r = cli(*args, *ZH_ARGS, ledger=ledger)
    return r.out + r.err


def _clean(text: str, *data: str) -> list[str]:
    text = re.sub(r"\b[0-9a-f]{64}\b", " ", text)  # a hash (the audit log's head)
    return stray_english(text, data=[*DATA, *data], extra=OTHERS)


# -- the listings and messages ---------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("node", "list"), ["名称", "渠道", "公有云", "包月", "在用"]),
        (("lease", "list"), ["节点", "计费", "包月", "已续费", "当前计费"]),
        (("provider", "list"), ["渠道", "余额", "公有云"]),
        (("resource", "list"), ["租约开始", "云盘"]),
        (("log",), ["时间为", "操作者", "已添加"]),
        (("audit", "verify"), ["审计日志正常", "链头"]),
    ],
)
def test_listings_speak_chinese(cli: Cli, args: tuple[str, ...], words: list[str]) -> None:
    _seed(cli)
    text = _zh(cli, *args)
    for word in words:
        assert word in text, (word, text)
    # Record keys and actions a change names (`ended_at`, `lease.add`) are data.
    assert _clean(text, "ended_at", "end", "provider.add", "node.add", "lease.add",
                  "lease.renew", "resource.add", "stop.add", "stop.resume", "head") == []  # fmt: skip


def test_node_show_labels_its_fields_in_chinese(cli: Cli) -> None:
    _seed(cli)
    text = _zh(cli, "node", "show", "a800-1")
    for word in ("供应商", "SSH 主机", "状态", "在用", "备注", "当前计费", "押金", "租约", "资源"):
        assert word in text, word
    # The cost line is the money part's (leases.money.leasecost): left out here.
    mine = "\n".join(line for line in text.splitlines() if not line.startswith("cost:"))
    assert _clean(mine, "SSH", "Gbps") == []


def test_messages_of_changes_speak_chinese(cli: Cli, tmp_path: Path) -> None:
    said = [
        _zh(cli, "provider", "add", "腾讯云", "--kind", "platform"),
        _zh(cli, "node", "add", "h20-1", "--ssh", "ssh root@10.0.0.7", "--provider", "腾讯云"),
        _zh(cli, "lease", "add", "h20-1", "--billing", "hourly", "--price", "9",
            "--start", "2026-11-01T00:00"),
        _zh(cli, "lease", "stop", "h20-1", "--at", "2026-11-02"),
        _zh(cli, "lease", "resume", "h20-1", "--at", "2026-11-03"),
        _zh(cli, "node", "edit", "h20-1", "--notes", "备用"),
        _zh(cli, "node", "edit", "h20-1", "--notes", "备用"),
        _zh(cli, "provider", "edit", "腾讯云", "--region", "ap-shanghai"),
        _zh(cli, "undo"),
    ]  # fmt: skip
    text = "\n".join(said)
    for word in ("已添加供应商", "已添加节点", "已为 h20-1 添加租约", "关机", "重新运行",
                 "已更新节点", "未改动", "已撤销"):  # fmt: skip
        assert word in text, (word, text)
    assert _clean(text, "h20-1", "腾讯云", "备用", "ap-shanghai", "node.edit",
                  "provider.edit") == []  # fmt: skip
    dump = tmp_path / "d.json"
    assert cli("export", "-o", str(dump)).code == 0
    imported = _zh(cli, "import", str(dump), ledger=tmp_path / "o.db")
    assert "已导入" in imported and "节点" in imported
    assert _clean(imported, str(tmp_path)) == []


def test_config_show_and_check_speak_chinese(cli: Cli, tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[billing]\ncurrency = "CNY"\n')
    config.chmod(0o600)
    shown = _zh(cli, "config", "show", "--config", str(config))
    assert "默认" in shown and "配置文件" in shown
    # The settings' keys and values are what the file holds: data.
    keys = [line.split(" = ")[0] for line in shown.splitlines() if " = " in line]
    values = [
        line.split(" = ", 1)[1].split("  (")[0] for line in shown.splitlines() if " = " in line
    ]
    assert _clean(shown, *keys, *values, str(tmp_path), "/etc/zuka") == []
    checked = _zh(cli, "config", "check", "--config", str(config))
    assert "正常" in checked
    assert _clean(checked, str(tmp_path), "/etc/zuka") == []


def test_doctor_speaks_chinese(cli: Cli, ledger_path: Path) -> None:
    _seed(cli)
    text = _zh(cli, "doctor")
    assert "路径" in text and "台账" in text
    assert any(w in text for w in ("一切正常", "项需修复"))
    assert _clean(text, str(ledger_path.parent), "SSH_AUTH_SOCK", "id_ed25519") == []


def test_ps_with_nothing_read_speaks_chinese(cli: Cli) -> None:
    _seed(cli)
    text = _zh(cli, "ps")
    assert "没有 GPU 进程" in text
    assert _clean(text) == []


# -- --json is the same bytes in both languages ------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("node", "list"),
        ("node", "show", "a800-1"),
        ("lease", "list"),
        ("provider", "list"),
        ("resource", "list"),
        ("log",),
        ("audit", "verify"),
        ("ps",),
    ],
)
def test_json_is_the_same_in_both_languages(cli: Cli, args: tuple[str, ...]) -> None:
    _seed(cli)
    english = cli(*args, "--json", "--lang", "en")
    chinese = cli(*args, "--json", *ZH_ARGS)
    assert english.code == chinese.code == 0, chinese.err
    assert english.out == chinese.out
    json.loads(english.out)


def test_a_change_with_json_is_the_same_in_both_languages(cli: Cli, ledger_path: Path) -> None:
    _seed(cli)
    en = cli("node", "edit", "a800-1", "--notes", "x", "--json", "--lang", "en")
    zh = cli("node", "edit", "a800-1", "--notes", "x", "--json", *ZH_ARGS)
    assert en.code == zh.code == 0
    assert en.out == zh.out


# -- refusals ------------------------------------------------------------------------------

# The refusals of tests/cli/test_cli_ledger.py's table (and test_cli_ux.py's) whose words
# are this part's: said in Chinese, no English but the data and the option typed.
BAD = [
    (["node", "add", "n2"], "请给出 --ssh", ["ssh", "n2"]),
    (["node", "add", "n2", "--ssh", "ssh h", "--provider", "Nowhere"], "未知供应商", ["provider", "Nowhere"]),
    (["node", "add", "n2", "--ssh", "ssh h", "--channel", "cloud"], "--channel 需与 --provider",
     ["channel", "cloud"]),
    (["node", "edit", "a800-1"], "没有要修改的内容", ["node edit"]),
    (["lease", "edit", "a800-1"], "没有要修改的内容", ["lease edit"]),
    (["provider", "edit", "阿里云"], "没有要修改的内容", ["provider edit"]),
    (["lease", "renew", "a800-1", "--until", " "], "为空", ["until"]),
    (["log", "--archived"], "归档历史", ["archived"]),
    (["audit", "verify", "--anchor", "nope"], "ID:HASH", ["anchor", "nope"]),
    (["export", "-o", "x.txt"], "无法从扩展名", ["--output", "x.txt"]),
    (["sim", "--nodes", "0"], "须在 1 到 1000 之间", ["nodes"]),
    (["kill", "a800-1", "77", "--yes-i-typed", "77"], "最近读数中", ["pid"]),
]  # fmt: skip


@pytest.mark.parametrize(("args", "words", "data"), BAD)
def test_refusals_speak_chinese(cli: Cli, args: list[str], words: str, data: list[str]) -> None:
    """Each refusal in Chinese; the field it names (an option, the command's words) and
    the value typed are data."""
    _seed(cli)
    r = cli(*args, *ZH_ARGS)
    assert r.code != 0
    text = r.out + r.err
    assert words in text, text
    assert _clean(text, *data) == []


def test_bad_config_values_speak_chinese(cli: Cli, tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(
        '[alerts]\nunderuse_threshold = 7\nquiet = "now"\n[lab]\nledger = "/x"\n[nosuch]\na = 1\n'
    )
    config.chmod(0o600)
    r = cli("config", "check", "--config", str(config), *ZH_ARGS)
    assert r.code == 2
    for word in ("须大于 0 且不超过 1", "比例", "只从系统配置中读取", "未知的节"):
        assert word in r.err, (word, r.err)
    keys = ["alerts.underuse_threshold", "alerts.quiet", "underuse_threshold", "quiet",
            "nosuch", "lab", "now", "off", "daily", "at", "HH:MM", "such"]  # fmt: skip
    # "did you mean" words and the HH:MM pattern are the value's own spelling.
    assert _clean(r.err, str(tmp_path), *keys) == []


# -- tables of Chinese words align by cells --------------------------------------------------


def _starts(line: str, cells: list[str]) -> list[int]:
    """The cell at which each of cells begins in line (found left to right)."""
    out, at = [], 0
    for text in cells:
        i = line.index(text, at)
        out.append(cell_len(line[:i]))
        at = i + len(text)
    return out


@pytest.mark.parametrize("columns", [80, 120])
def test_chinese_headers_and_values_align_at_80_and_120(columns: int) -> None:
    from tui.cli import output

    with using(ZH):
        headers = ("名称", "渠道", "供应商", "GPU", "状态")
        rows = [
            ("训练节点-一号", "算力租赁平台", "恒源云", "8x A800", "在用"),
            ("a800-2", "公有云", "阿里云华东二区", "4x H100", "退租中"),
            ("推理-3", "机房托管", "IDC", "1x L40S", "已释放"),
        ]
        out = io.StringIO()
        output.fit_table(headers, rows, out, columns=columns)
    lines = out.getvalue().splitlines()
    assert len(lines) == 4
    assert all(cell_len(line) <= columns for line in lines)
    starts = [_starts(lines[0], list(headers))]
    starts += [_starts(line, list(row)) for line, row in zip(lines[1:], rows, strict=True)]
    assert all(s == starts[0] for s in starts), starts


def test_a_table_too_wide_for_80_keeps_its_chinese_whole() -> None:
    from tui.cli import output

    headers = ("节点", "变更")
    rows = [("a800-1", "已添加 " + "很长的中文说明" * 20)]
    out = io.StringIO()
    output.fit_table(headers, rows, out, columns=80, below=("变更",))
    lines = out.getvalue().splitlines()
    assert all(cell_len(line) <= 80 for line in lines)
    assert "".join(x.strip() for x in lines[1:]).count("很长的中文说明") == 20


def test_width_is_measured_by_rich() -> None:
    from tui.cli.output import width

    assert width("名称") == 4 == cell_len("名称")
    assert width("a800-1 在用") == cell_len("a800-1 在用")


# -- tests/test_config.py's bad file, again under zh_CN ----------------------------------

_BAD_CONFIG = """
[billing]
currency = "yuan"
tz = "Mars/Olympus"
[alerts]
lease_end_notice_days = [7, -1, "3"]
underuse_window_days = 0
underuse_threshold = 1.5
forgotten_idle_hours = "two"
starved_minutes = true
starved_util = 140
unreachable_minutes = 2.5
temprature_c = 80
[notify]
urls = ["https://example.com/hook", 42]
min_severity = "loud"
rate_limit_per_hour = -3
digest = "weekly"
retry_hours = -1
[users]
"bad user!" = "X"
carol = ""
[billing_x]
a = 1
"""


def test_every_bad_key_and_value_is_named_in_chinese(tmp_path: Path) -> None:
    from leases.config.load import load_config
    from leases.core.errors import ConfigError

    path = tmp_path / "c.toml"
    path.write_text(_BAD_CONFIG)
    path.chmod(0o600)
    with using(ZH), pytest.raises(ConfigError) as caught:
        load_config(
            path, env={"ZUKA_ALERTS_STARVED_MINUTES": "soon", "ZUKA_ALERTS_STARVD_UTIL": "3"}
        )
    found = list(caught.value.problems)
    assert len(found) >= 19
    values = ["yuan", "Mars/Olympus", "two", "True", "loud", "weekly", "bad user!", "carol",
              "soon", "ZUKA_ALERTS_STARVED_MINUTES", "ZUKA_ALERTS_STARVD_UTIL",
              "ZUKA_ALERTS_STARVED_UTIL", "daily", "info", "warning", "critical"]  # fmt: skip
    for line in found:
        if "notify.urls[0]" in line:
            continue  # a URL's refusal is the notifications' part (leases.notify)
        assert re.search(r"[\u4e00-\u9fff]", line), line
        section = (
            ["users", "billing_x", "billing"] if "users" in line or "billing_x" in line else []
        )
        assert _clean(line, str(path), *values, *section, "Unix") == [], line
