"""`zuka offboard` in Chinese: the plan, a run against a real node (the in-process SSH
server) and a cloud (moto), the stop at the console step, the finish, the report, the
inspection and the recheck, each said in Chinese with no English left but data (node
names, step keys, paths, bucket and snapshot ids, endpoints) and the commands a step
runs; the same commands with --json give the same bytes in both languages; the
offboarding's refusals, the tests' tables of bad input, said in Chinese. What is stored
(a plan's descriptions, a step's detail, the evidence) stays English: only shown
translated."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from leases.core.errors import InputError
from leases.core.i18n import ZH, using
from leases.core.retold import shown
from leases.offboard import paths
from leases.offboard.cloud.cmd import load_templates
from tests.offboard import test_offboard_e2e as e2e
from tests.offboard.test_offboard_e2e import Lab
from tests.support.cli import Cli
from tests.support.cloudfixtures import MOTO_ACCOUNT, RecordingProxy
from tests.support.english import stray_english
from tests.support.sshfixtures import TestKeys

cloud = e2e.cloud  # the moto cloud behind a recording proxy (a fixture)


@pytest.fixture
def lab(
    cli: Cli, tmp_path: Path, keys: TestKeys, cloud: RecordingProxy, ledger_path: Path
) -> Iterator[Lab]:
    """The end-to-end test's lab: node n1 served over SSH, its bucket and snapshot in moto."""
    made = e2e.make_lab(cli, tmp_path, keys, cloud, ledger_path, MOTO_ACCOUNT)
    try:
        yield made
    finally:
        made.served.close()


ZH_ARGS = ("--lang", "zh_CN")
# The words of the commands and API calls a step runs (shown as they are sent), and
# the names of the things they touch, as the plan says them.
COMMANDS = [
    "shred", "findmnt", "lsblk", "unlink", "find", "execdir", "xdev", "mv", "python3",
    "DeleteBucket", "ExpectedBucketOwner", "DeleteSnapshot", "SnapshotId", "query",
    "compute", "apps", "noheader", "nounits", "csv", "pid", "process_name", "used_memory",
    "gpu_uuid", "used_gpu_memory", "sshd", "AuthorizedKeysFile", "authorized_keys",
    "authorized_keys2", "endpoint", "TEXT", "KIND", "NODE", "PATH", "HOW", "ID",
    "scratch_path", "bash_history", "zuka-offboard", "gpu", "uuid", "process", "name", "used",
    "memory", "python", "authorized", "keys", "Compat", "btrfs", "zfs", "reflink", "ARN",
    "data", "journal", "ext",
]  # fmt: skip
HAN = re.compile(r"[\u4e00-\u9fff]")
# A fact in the report's evidence: "- NAME: VALUE" (a sentence of the report's own has a
# full-width colon).
FACT = re.compile(r"^- ([^:：]+): .*$")


def _data(lab: Lab, keys: list[str]) -> tuple[list[str], list[str]]:
    """(data, extra): the values a test's output may hold in English, and the words of
    the step keys (a key may be shown cut)."""
    data = [*keys, lab.snapshot, lab.other_snapshot, lab.proxy.endpoint, "lab-ckpt", "n1"]
    # The cloud's and the node's own words: the caller's ARN, a snapshot's state, a file
    # system's type.
    data += ["us-east-1", "123456789012", "arn:aws:sts::123456789012:user/moto", "completed"]
    data += ["ext4", "overlay", "tmpfs", "xfs"]
    words = {w for k in keys for w in re.findall(r"[A-Za-z][A-Za-z0-9_-]*", k)}
    return sorted(data, key=len, reverse=True), [*COMMANDS, *words]


def _check(text: str, lab: Lab, keys: list[str]) -> None:
    data, extra = _data(lab, keys)
    # A key's fingerprint first, whole: a random one may hold a value below ("n1"), and
    # replacing that first would leave the fingerprint's tail as letters of no word.
    text = re.sub(r"SHA256:[A-Za-z0-9+/=]+", " ", text)
    # Paths next, whole, a path wrapped over two lines joined again: what a long
    # temporary path leaves on the next line ("eys" of authorized_keys) is no word of zuka's.
    text = re.sub(r"(/[\w.@-]+)\n +([\w.@-]+)", r"\1\2", text)
    text = re.sub(r"/[\w.@-]+(?:/[\w.@-]+)+", " ", text)
    for value in data:
        text = text.replace(value, " ")
    text = re.sub(r"\b(?:vol|snap|ami)-[0-9a-f]+", " ", text)  # the cloud's ids
    text = re.sub(r"\b[0-9a-f]{12,64}\b", " ", text)  # hashes
    # The SSH layer's own words for a node that no longer answers (leases.ssh's).
    text = re.sub(r"node \S+: connection refused", " ", text)
    text = re.sub(r"\w+(?:=\w+)?(?:,\w+(?:=\w+)?){2,}", " ", text)  # a mount's options
    found = stray_english(text, extra=extra)
    assert found == [], (
        " ".join(sorted(set(found))),
        [x for x in text.splitlines() if any(w in x for w in found)],
    )


def test_plan_run_report_inspect_recheck_are_said_in_chinese(cli: Cli, lab: Lab) -> None:
    cfg = ("--config", str(lab.config))
    en = cli("offboard", "n1", *cfg, "--json")
    assert en.code == 0, en.err
    planned = json.loads(en.out)
    keys = [s["key"] for s in planned["steps"]] + [planned["hash"], planned["hash"][:12]]

    plan = cli("offboard", "n1", *cfg, *ZH_ARGS)
    assert plan.code == 0, plan.err
    assert "退租计划" in plan.out and "预演" in plan.out and "每个步骤做什么" in plan.out
    assert "待执行" in plan.out and "阶段" in plan.out
    _check(plan.out, lab, keys)

    inspect = cli("offboard", "n1", *cfg, "--inspect", *ZH_ARGS)
    assert inspect.code == 0, inspect.out + inspect.err
    assert "检视" in inspect.out and "正常" in inspect.out
    _check(inspect.out, lab, keys)

    first = cli("offboard", "n1", *cfg, "--execute", "--confirm", "n1", *ZH_ARGS)
    assert first.code == 1, first.out + first.err
    assert "在 manual:release-instance 等待你操作" in first.out, first.out
    assert "已核实" in first.out and "控制台" in first.out
    _check(first.out, lab, keys)

    lab.served.release()
    done = cli("offboard", "n1", *cfg, "--execute", "--confirm", "n1",
               "--did", "manual:release-instance", *ZH_ARGS)  # fmt: skip
    assert done.code == 0, done.out + done.err
    assert "n1 的退租已完成：所有步骤已核实" in done.out, done.out
    _check(done.out, lab, keys)

    md = cli("offboard", "n1", "--report", *ZH_ARGS)
    assert md.code == 0, md.err
    assert "# n1 的退租" in md.out and "## 证据" in md.out and "审计链：完整" in md.out
    # What the node and the cloud printed is evidence, as it came (the indented blocks);
    # the rest is the report's own words.
    # So are the facts it kept (a mount's options, the lease's billing as stored): their
    # names are the report's words, their values data.
    words = [FACT.sub(r"- \1:", x) for x in md.out.splitlines() if not x.startswith("        ")]
    _check(report_text("\n".join(words)), lab, keys)

    recheck = cli("offboard", "n1", *cfg, "--recheck", *ZH_ARGS)
    assert "全部仍已删除" in recheck.out, recheck.out + recheck.err
    _check(recheck.out, lab, keys)


def report_text(md: str) -> str:
    """The report without Markdown's backslash escapes (a key is escaped in a table)."""
    return md.replace("\\", "")


def test_json_is_the_same_in_both_languages(cli: Cli, lab: Lab) -> None:
    cfg = ("--config", str(lab.config))
    assert cli("offboard", "n1", *cfg, "--json").code == 0  # stored: "new" is false after
    for args in (("--json",), ("--report", "--format", "json"), ("--report", "--json")):
        en = cli("offboard", "n1", *cfg, *args, "--lang", "en")
        zh = cli("offboard", "n1", *cfg, *args, *ZH_ARGS)
        assert en.code == zh.code == 0, (args, en.err, zh.err)
        assert en.out == zh.out, args
        assert not HAN.search(en.out)
    run_en = cli("offboard", "n1", *cfg, "--execute", "--confirm", "n1", "--json", *ZH_ARGS)
    assert not HAN.search(run_en.out), run_en.out  # --json runs in English
    lab.served.release()
    cli("offboard", "n1", *cfg, "--execute", "--confirm", "n1", "--did",
        "manual:release-instance", "--json")  # fmt: skip
    en = cli("offboard", "n1", *cfg, "--recheck", "--json", "--lang", "en")
    zh = cli("offboard", "n1", *cfg, "--recheck", "--json", *ZH_ARGS)
    assert en.out == zh.out and not HAN.search(zh.out)


def test_what_is_stored_stays_english(cli: Cli, lab: Lab, ledger_path: Path) -> None:
    """A plan made under zh_CN hashes as the English one: its words are stored English."""
    cfg = ("--config", str(lab.config))
    zh = json.loads(cli("offboard", "n1", *cfg, "--json", *ZH_ARGS).out)
    assert cli("offboard", "n1", *cfg, *ZH_ARGS).code == 0
    en = json.loads(cli("offboard", "n1", *cfg, "--json").out)
    assert zh["hash"] == en["hash"] and not en["new"]
    assert not any(HAN.search(s["command"]) for s in en["steps"])


# -- the refusals, in Chinese ---------------------------------------------------------------

REFUSALS = [
    ("offboard", "n1", "--keep", "bucket:x"),
    ("offboard", "n1", "--skip", "a", "--never-existed", "b", "--reason", "r"),
    ("offboard", "n1", "--skip", "ledger:release"),
    ("offboard", "n1", "--reason", "r"),
    ("offboard", "n1", "--never-existed", "a", "--reason", "r", "--execute"),
    ("offboard", "n1", "--recheck", "--confirm", "n1"),
    ("offboard", "n1", "--include", "bucket:x", "--execute"),
    ("offboard", "n1", "--include", "bucket:nope"),
    ("offboard", "n1", "--execute", "--confirm", "n2"),
    ("offboard", "n1", "--execute", "--confirm", "n1"),
    ("offboard", "n1", "--recheck"),
    ("offboard", "n1", "--report"),
]


@pytest.mark.parametrize("args", REFUSALS, ids=lambda a: " ".join(a[2:]))
def test_refusals_are_said_in_chinese(cli: Cli, args: tuple[str, ...]) -> None:
    for add in (
        ("provider", "add", "Cloudy", "--kind", "cloud", "--account-id", "111"),
        ("node", "add", "n1", "--ssh", "ssh -p 1 root@127.0.0.1", "--provider", "Cloudy"),
        ("lease", "add", "n1", "--billing", "monthly", "--price", "100",
         "--start", "2025-06-01", "--end", "2030-01-01"),
    ):  # fmt: skip
        assert cli(*add).code == 0
    r = cli(*args, *ZH_ARGS)
    assert r.code != 0, r.out
    said = r.err + r.out
    assert HAN.search(said), said
    # The frame every refusal comes in ("zuka：错误：FIELD：...（输入为 'VALUE'）" in Chinese)
    # is the CLI's own, not the offboarding's: what is checked here is the reason inside it
    # (FIELD is an option's name, never translated).
    framed = re.sub(r"zuka：错误：[^：]+：", " ", said)
    assert framed != said, said
    said = re.sub(r"（输入为 '[^']*'）", " ", framed)
    data = ["n1", "n2", "Cloudy", "bucket:x", "bucket:nope", "ledger:release", "nope"]
    assert stray_english(said, data=data, extra=["TEXT", "KIND", "NODE", "ID"]) == [], said


@pytest.mark.parametrize(
    "choice",
    [
        ("--skip", "preflight:lease", "--reason", "测试"),
        ("--skip", "nosuch:step", "--reason", "测试"),
    ],
    ids=["a preflight skipped", "a key not in the plan"],
)
def test_a_runs_refusal_of_its_choices_is_said_in_chinese(
    cli: Cli, lab: Lab, choice: tuple[str, ...]
) -> None:
    """Refused inside the run, which speaks English for what it stores: said to the user in
    theirs, and nothing run."""
    cfg = ("--config", str(lab.config))
    planned = json.loads(cli("offboard", "n1", *cfg, "--json").out)
    r = cli("offboard", "n1", *cfg, "--execute", "--confirm", "n1", "--hash", planned["hash"],
            *choice, *ZH_ARGS)  # fmt: skip
    assert r.code == 2, (r.out, r.err)
    said = re.sub(r"zuka：错误：[^：]+：", " ", r.err)
    said = re.sub(r"（输入为 '[^']*'）", " ", said)
    keys = [s["key"] for s in planned["steps"]]
    assert HAN.search(said) and stray_english(said, data=keys, extra=COMMANDS) == [], r.err


PATHS = [
    ("/", "整个文件系统"),
    ("/root/autodl-tmpx", "根目录"),
    ("/root", "系统目录"),
    ("/etc/passwd", "系统目录"),
    ("/root/autodl-tmp/.ssh", ".ssh"),
]
ROOTS = ("/root/autodl-tmp", "/data/scratch")


@pytest.mark.parametrize(("path", "words"), PATHS)
def test_refused_paths_are_said_in_chinese(path: str, words: str) -> None:
    with using(ZH), pytest.raises(InputError) as refused:
        paths.check_scratch_path(path, ROOTS)
    reason = refused.value.reason
    assert words in reason and HAN.search(reason), reason
    assert stray_english(reason, data=[path, *ROOTS]) == [], reason


@pytest.mark.parametrize(
    ("words", "why"),
    [
        ('delete = ["ecs", "DeleteSnapshots", "--All"]', "{id}"),
        ('delete = ["ecs", "DeleteSnapshot", "--SnapshotId", "{id}", "--Force", "true"]', "强制"),
        ('delete = ["evs", "delete", "--force={region}", "{id}"]', "强制"),
    ],
)
def test_refused_templates_are_said_in_chinese(tmp_path: Path, words: str, why: str) -> None:
    (tmp_path / "bad.toml").write_text(
        'name = "bad"\nprogram = "bad"\n[whoami]\nargv = ["who"]\naccount = "A"\n'
        f'[snapshot]\n{words}\nverify = ["ls", "{{id}}"]\n'
    )
    with using(ZH), pytest.raises(InputError) as refused:
        load_templates(tmp_path)
    reason = refused.value.reason
    assert why in reason and HAN.search(reason), reason
    assert stray_english(reason) == [], reason


@pytest.mark.parametrize(
    ("stored", "expected"),
    [
        ("every step verified", "所有步骤已核实"),
        ("3 verified", "3 个已核实"),
        (
            "by hand: release the instance in Cloudy's console (its data disk goes with it);"
            " zuka then checks that 10.0.0.5 no longer answers",
            "手动：在 Cloudy 的控制台释放实例（数据盘随之释放）；之后 zuka 检查 10.0.0.5 是否已不再应答",
        ),
        ("/data/a: is a symbolic link: refused, not followed", "/data/a：是符号链接"),
        (
            "the lease is still open; the deposit's refund is not recorded as pending",
            "押金退还未记为待退还",
        ),
        ("output of a tool, not ours", "output of a tool, not ours"),
    ],
)
def test_stored_english_is_shown_in_chinese(stored: str, expected: str) -> None:
    with using(ZH):
        assert expected in shown(stored)
    assert shown(stored) == stored  # English: as it is


def test_a_stop_for_consent_and_a_skip_are_said_in_chinese(
    cli: Cli, ledger_path: Path, tmp_path: Path
) -> None:
    """The simulated node's busy GPUs stop the run for the user's word; going on past
    them and skipping the console step, then the report, all in Chinese."""
    from datetime import UTC, datetime

    from leases.ledger.store import Ledger
    from leases.sim.ledger import register_sim_nodes, serve_ledger_nodes

    config = tmp_path / "config.toml"
    config.write_text('[offboard]\nscratch_roots = ["/data"]\n')
    cfg = ("--config", str(config))
    with Ledger.open(ledger_path) as ledger:
        nodes = register_sim_nodes(ledger, 1, datetime.now(UTC))
        served = serve_ledger_nodes(ledger, ledger_path, nodes)
    try:
        assert cli("resource", "add", "sim-001", "--kind", "scratch_path",
                   "--id", "/data/ckpt").code == 0  # fmt: skip
        planned = json.loads(cli("offboard", "sim-001", *cfg, "--json").out)
        keys = [s["key"] for s in planned["steps"]]
        words = sorted({w for k in keys for w in re.findall(r"[A-Za-z][A-Za-z0-9_-]*", k)})
        first = cli("offboard", "sim-001", *cfg, "--execute", "--confirm", "sim-001", *ZH_ARGS)
        assert first.code == 1 and "停在 gpu-processes" in first.out, first.out
        assert "GPU 进程仍在运行" in first.out and "--go-on" in first.out, first.out
        data = [*keys, "sim-001", planned["hash"][:12], "python", "train"]
        # The processes listed (pid, user, command line) are data.
        said = re.sub(r"(GPU 进程仍在运行：).*", r"\1", first.out)
        assert stray_english(said, data=data, extra=[*COMMANDS, *words]) == [], first.out
        done = cli("offboard", "sim-001", *cfg, "--execute", "--confirm", "sim-001", "--go-on",
                   "--skip", "manual:release-instance", "--reason", "模拟节点", *ZH_ARGS)  # fmt: skip
        assert done.code == 0, done.out + done.err
        assert "个经同意越过" in done.out or "个越过了 GPU 进程" in done.out, done.out
        assert "1 个已跳过（附理由）" in done.out, done.out
    finally:
        served.stop()
