"""Hostile values through every way in: `--ssh` pastes, `node add/edit`, JSON and CSV import.

Each is either refused (exit 2, the ledger file byte for byte as it was) or stored as a
value that passes sshcmd's validator; a ~/.ssh/config ProxyCommand with %h never gets a
hostile value to run; a row written before the checks is read, flagged and never polled.
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leases.core import fields, secrets
from leases.core.errors import InputError
from leases.core.models import Node, SshTarget
from leases.ledger import records, transfer
from leases.ledger.store import Ledger
from leases.ssh.login import check_target, parse_ssh_command
from tui.cli.main import main

PIECES = [
    "'", '"', " ", "\t", "%", "%h", "-o", "-oProxyCommand=touch MARKER", "ProxyCommand=",
    "\n", "\r", "\x00", "\x1b[2J", "\x1b]0;pwned\x07", "\x85", "\x9b", "\u202e", "\u2066",
    "[/]", "[b]", ";", "`", "$(", ")", "|", "&", "<", ">", "*", "?", "@", ":", ",", "[",
    "]", "/", "~", "a", "h", "1", "root", "ssh ", "-", "=", "密码：", "LTAI5tSecretKeyValue1",
    "-----BEGIN OPENSSH PRIVATE KEY-----", "none", "ssh://", "2001:db8::1", ".invalid",
]  # fmt: skip
hostile = st.one_of(
    st.lists(st.sampled_from(PIECES), min_size=1, max_size=8).map("".join),
    st.text(max_size=30),
    st.sampled_from(["a" * 3000, "h" * 300, "-" + "x" * 5000, "a\n" * 500]),
)
SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
# A ~/.ssh/config whose ProxyCommand would run `touch MARKER` if a host value could add
# words to it (the CVE-2023-51385 class). For a valid host it just fails the connect.
PROXY_CONFIG = "Host *\n  ProxyCommand sh -c 'exit 1' %h\n  ConnectTimeout 2\n"
INJECTIONS = [
    "x;touch MARKER", "$(touch MARKER)", "`touch MARKER`", "x' 'y;touch MARKER",
    "-oProxyCommand=touch MARKER", "x touch MARKER", "x\ntouch MARKER", "x|touch MARKER",
    "x&&touch MARKER", "x%htouch",
]  # fmt: skip


def run(*args: str) -> int:
    try:
        return main(list(args), out=io.StringIO())
    except SystemExit as exc:  # argparse refusals
        return int(exc.code or 0)


def snapshot(path: Path) -> dict[str, bytes]:
    """The ledger's bytes on disk, WAL included."""
    return {
        p.name: p.read_bytes() for p in (path, path.with_name(path.name + "-wal")) if p.exists()
    }


def sql(path: Path, statement: str, params: list[object] | None = None) -> None:
    """A raw write, closed at once so SQLite folds its WAL back into the file."""
    db = sqlite3.connect(path)
    try:
        with db:
            db.execute(statement, params or [])
    finally:
        db.close()


def assert_valid(node: Node) -> None:
    """What the ledger holds passes the validator of every way in."""
    assert node.problem == ""
    if not node.local:
        assert check_target(node.ssh) == node.ssh
    fields.text("gpu_model", node.gpu_model, 100)
    fields.text("notes", node.notes, multiline=True)
    secrets.refuse_secret("notes", node.notes)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    config = PROXY_CONFIG.replace("MARKER", str(home / "MARKER"))
    (home / ".ssh" / "config").write_text(config)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    yield home


@pytest.fixture
def seeded(tmp_path: Path, home: Path) -> Path:
    path = tmp_path / "ledger.db"
    assert run("node", "add", "base", "--ssh", "ssh -p 2222 root@gw.example.cn", "--ledger",
               str(path)) == 0  # fmt: skip
    return path


def check_refused_or_valid(path: Path, code: int, before: dict[str, bytes]) -> None:
    assert code in (0, 2)
    if code == 2:
        assert snapshot(path) == before
    with Ledger.open(path, create=False) as ledger:
        for node in ledger.nodes():
            assert_valid(node)


# -- pasted commands ---------------------------------------------------------------------


@SETTINGS
@given(value=hostile, form=st.sampled_from(["{}", "ssh {}", "ssh -J {} h", "ssh -i {} h",
                                            "ssh -o {} h", "ssh -l {} h", "ssh root@{}",
                                            "登录指令：ssh -p 6666 {}"]))  # fmt: skip
def test_a_pasted_command_is_refused_or_gives_a_valid_target(value: str, form: str) -> None:
    command = form.format(value)
    try:
        target = parse_ssh_command(command)
    except InputError as exc:
        message = str(exc)
        assert "\x1b" not in message and "\n" not in message
        assert "LTAI5tSecretKeyValue1" not in message
        assert "PRIVATE KEY" not in message
        return
    assert check_target(target) == target


# -- node add / edit ---------------------------------------------------------------------


@SETTINGS
@given(value=hostile, option=st.sampled_from(["--ssh", "--notes", "--gpu-model", "--tags",
                                              "--provider"]))  # fmt: skip
def test_node_add_is_refused_or_stores_valid_values(seeded: Path, value: str, option: str) -> None:
    before = snapshot(seeded)
    args = ["node", "add", "n1", option, value, "--ledger", str(seeded)]
    if option != "--ssh":
        args += ["--ssh", "ssh h1"]
    if option == "--provider":
        args += ["--channel", "cloud"]
    code = run(*args)
    check_refused_or_valid(seeded, code, before)
    if code == 0:
        assert run("node", "archive", "n1", "--ledger", str(seeded)) == 0
        sql(seeded, "UPDATE nodes SET name = 'gone-' || id WHERE name = 'n1'")


@SETTINGS
@given(value=hostile, option=st.sampled_from(["--ssh", "--notes", "--gpu-model", "--rename"]))
def test_node_edit_is_refused_or_stores_valid_values(seeded: Path, value: str, option: str) -> None:
    before = snapshot(seeded)
    code = run("node", "edit", "base", option, value, "--ledger", str(seeded))
    check_refused_or_valid(seeded, code, before)
    if code == 0:
        sql(seeded, "UPDATE nodes SET name = 'base'")


# -- import ------------------------------------------------------------------------------

NODE_FIELDS = ["name", "ssh_host", "ssh_user", "ssh_jump", "ssh_key_path", "ssh_port",
               "gpu_model", "notes", "provider"]  # fmt: skip


def node_doc(field: str, value: str) -> dict[str, object]:
    rec: dict[str, object] = {"name": "imp", "ssh_host": "h2", field: value}
    return {"format": transfer.FORMAT, "version": transfer.VERSION, "nodes": [rec]}


@SETTINGS
@given(value=hostile, field=st.sampled_from(NODE_FIELDS), fmt=st.sampled_from(["json", "csv"]))
def test_import_is_refused_or_stores_valid_values(
    seeded: Path, tmp_path: Path, value: str, field: str, fmt: str
) -> None:
    doc = node_doc(field, value)
    if fmt == "json":
        text = json.dumps(doc)
    else:
        # Written as a hostile file would be: no neutralising quote added.
        buf = io.StringIO()
        import csv

        w = csv.writer(buf, lineterminator="\n")
        w.writerow(transfer.CSV_COLUMNS)
        rec = doc["nodes"][0]  # type: ignore[index]
        w.writerow(["node", *(str(rec.get(c, "")) for c in transfer.CSV_COLUMNS[1:])])
        text = buf.getvalue()
    src = tmp_path / f"in.{fmt}"
    src.write_text(text, encoding="utf-8")
    before = snapshot(seeded)
    code = run("import", str(src), "--ledger", str(seeded))
    check_refused_or_valid(seeded, code, before)
    if code == 0:
        sql(seeded, "DELETE FROM nodes WHERE name != 'base'")


def test_injections_are_refused_at_import_and_poll_runs_nothing(
    seeded: Path, tmp_path: Path, home: Path
) -> None:
    marker = home / "MARKER"
    for i, payload in enumerate(INJECTIONS):
        for field in ("ssh_host", "ssh_user", "ssh_jump", "ssh_key_path"):
            src = tmp_path / f"in-{i}-{field}.json"
            src.write_text(json.dumps(node_doc(field, payload.replace("MARKER", str(marker)))))
            before = snapshot(seeded)
            assert run("import", str(src), "--ledger", str(seeded)) == 2, (payload, field)
            assert snapshot(seeded) == before
        assert run("node", "add", f"p{i}", "--ssh", f"ssh root@{payload}",
                   "--ledger", str(seeded)) == 2  # fmt: skip
        assert run("node", "add", f"p{i}", "--ssh", f"ssh -J '{payload}' h",
                   "--ledger", str(seeded)) == 2  # fmt: skip
    # The valid node is polled through the hostile config: zuka reads ~/.ssh/config itself
    # and refuses a node that a ProxyCommand would reach, so no node answers (exit 1) and
    # nothing runs.
    assert run("poll", "--once", "--force", "--ledger", str(seeded)) == 1
    assert not marker.exists()


# -- CSV safety and round trip -----------------------------------------------------------

formula_text = st.lists(
    st.sampled_from(["=", "+", "-", "@", "\t", "'", "''", "=cmd|' /C calc'!A0", "SUM(1)",
                     "a", " ", ",", '"', "1", "\n", "\r\n", "HYPERLINK(\"x\")"]),
    min_size=1, max_size=6,
).map("".join)  # fmt: skip


@given(notes=formula_text, model=formula_text)
def test_csv_export_is_formula_safe_and_round_trips(notes: str, model: str) -> None:
    model = model.replace("\n", "").replace("\r", "").replace("\t", "")
    try:
        node = records.node_from({"name": "n", "ssh_host": "h", "notes": notes,
                                  "gpu_model": model, "tags": ["+a", "-b", "@c"]})  # fmt: skip
    except InputError:
        return
    data = {"nodes": [records.node_record(node)]}
    text = transfer.to_csv(data)
    import csv

    for row in csv.reader(io.StringIO(text)):
        for cell in row:
            assert not cell.startswith(("=", "+", "-", "@", "\t", "\r"))
    back = transfer.from_csv(text)["nodes"][0]
    assert records.node_record(records.node_from(back)) == data["nodes"][0]


# -- files written -----------------------------------------------------------------------


def test_export_file_is_private_replaces_loose_files_and_refuses_links(
    seeded: Path, tmp_path: Path
) -> None:
    out = tmp_path / "export.csv"
    out.write_text("old")
    out.chmod(0o644)
    assert run("export", "--format", "csv", "-o", str(out), "--ledger", str(seeded)) == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert "gw.example.cn" in out.read_text()
    fresh = tmp_path / "fresh.json"
    assert run("export", "--format", "json", "-o", str(fresh), "--ledger", str(seeded)) == 0
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o600
    target = tmp_path / "target"
    target.write_text("keep")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert run("export", "-o", str(link), "--ledger", str(seeded)) == 2
    assert target.read_text() == "keep" and link.is_symlink()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


# -- secrets -----------------------------------------------------------------------------

SECRETS = [
    (["node", "add", "s1", "--ssh", "ssh -J ops:Pa55word9@jump h"], "Pa55word9"),
    (["node", "add", "s1", "--ssh", "ssh://root:Pa55word9@h:22"], "Pa55word9"),
    (["node", "add", "s1", "--ssh", "ssh -p 1 root@h\n密码：Pa55word9\nmore"], "Pa55word9"),
    (["node", "add", "s1", "--ssh", "ssh -i '-----BEGIN OPENSSH PRIVATE KEY-----Pa55' h"],
     "Pa55"),
    (["node", "add", "s1", "--ssh", "ssh h", "--notes", "-----BEGIN RSA PRIVATE KEY-----\nQk"],
     "Qk"),
    (["node", "add", "s1", "--ssh", "ssh h", "--notes", "ak LTAI5tAbCdEfGh12345678"],
     "AbCdEf"),
    (["node", "add", "s1", "--ssh", "ssh h", "--notes", "root password: Pa55word9"],
     "Pa55word9"),
    (["node", "add", "s1", "--ssh", "ssh h", "--gpu-model", "-----BEGIN PRIVATE KEY-----x"],
     "PRIVATE"),
    (["provider", "add", "P", "--kind", "cloud", "--credential-ref", "AKIAIOSFODNN7EXAMPLE"],
     "IOSFODNN"),
    (["provider", "add", "P", "--kind", "cloud", "--credential-ref",
      "AKIDz8krbsJ5yKBZQpn74WFkmLPx3EXAMPLE"], "z8krbs"),
    (["provider", "add", "P", "--kind", "cloud", "--credential-ref",
      "q8Zr2Lw0Xv7Nb5Yt3Kp1Mh9Jg4Fd6Sa0Qe"], "q8Zr2"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "secret"), SECRETS)
def test_secrets_are_refused_and_never_repeated(
    seeded: Path, capsys: pytest.CaptureFixture[str], args: list[str], secret: str
) -> None:
    before = snapshot(seeded)
    assert run(*args, "--ledger", str(seeded)) == 2
    err = capsys.readouterr().err
    assert secret not in err and "(hidden)" in err
    assert snapshot(seeded) == before


def test_a_password_line_is_dropped_and_never_stored(seeded: Path) -> None:
    assert run("node", "add", "p1", "--ssh", "登录指令：ssh -p 6666 root@gw\n密码：Pa55word9",
               "--ledger", str(seeded)) == 0  # fmt: skip
    assert b"Pa55word9" not in b"".join(snapshot(seeded).values())
    out = io.StringIO()
    main(["export", "--ledger", str(seeded)], out=out)
    assert "Pa55word9" not in out.getvalue()
    with Ledger.open(seeded, create=False) as ledger:
        node = ledger.node("p1")
    assert (node.ssh.host, node.ssh.port, node.ssh.user) == ("gw", 6666, "root")


def test_environment_variable_names_and_ids_are_not_taken_for_secrets() -> None:
    for ref in ("ALIBABA_CLOUD_ACCESS_KEY_ID", "aliyun-lab", "TENCENTCLOUD_SECRET_ID"):
        records.provider_from({"name": "P", "kind": "cloud", "credential_ref": ref})
    for note in (
        "snapshot s-bp1ahz3n9f0q5m6kdd2c",
        "contract NJ-IDC-2026-0417",
        "uuid 0b8f6c1e-4a5d-4c1e-9f3a-2b7d8e9f0a1b",
        "Asia Pacific datacenter",
    ):
        records.node_from({"name": "n", "ssh_host": "h", "notes": note})  # fmt: skip


# -- a row written before the checks -----------------------------------------------------


def test_a_stored_row_with_refused_values_is_listed_flagged_not_polled_and_fixable(
    seeded: Path, home: Path
) -> None:
    marker = home / "MARKER"
    key_text = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA\n"
    sql(
        seeded,
        "UPDATE nodes SET ssh_host = ?, ssh_key_path = ?, notes = ? WHERE name = 'base'",
        [f"x;touch {marker}", key_text, "\x1b]0;pwned\x07 [/]"],
    )
    out = io.StringIO()
    assert main(["node", "list", "--ledger", str(seeded)], out=out) == 0
    assert "refused value" in out.getvalue()
    out = io.StringIO()
    assert main(["node", "show", "base", "--json", "--ledger", str(seeded)], out=out) == 0
    shown = json.loads(out.getvalue())
    assert "ssh_host" in shown["problem"] and "\x1b" not in shown["problem"]
    assert "PRIVATE KEY" not in out.getvalue() and "touch" not in shown["ssh_command"]
    # Polling leaves it out (and says so); trusting it is refused; nothing runs.
    assert run("poll", "--once", "--force", "--ledger", str(seeded)) == 0
    assert run("poll", "--once", "--force", "base", "--ledger", str(seeded)) == 2
    assert run("node", "trust", "base", "--ledger", str(seeded)) == 2
    assert not marker.exists()
    # Any edit but a new target is refused, naming the field; --ssh (and --notes) fix it.
    assert run("node", "edit", "base", "--gpu-model", "A100", "--ledger", str(seeded)) == 2
    assert run("node", "edit", "base", "--ssh", "ssh root@fixed.example.cn", "--notes", "ok",
               "--ledger", str(seeded)) == 0  # fmt: skip
    with Ledger.open(seeded, create=False) as ledger:
        node = ledger.node("base")
        history = ledger.history("base")
    assert_valid(node)
    assert node.ssh.host == "fixed.example.cn"
    assert all("PRIVATE KEY" not in json.dumps(e.before) for e in history)


def test_ledger_files_keep_their_mode(seeded: Path) -> None:
    assert stat.S_IMODE(os.stat(seeded).st_mode) == 0o600


def test_stored_node_reads_any_row_and_says_what_is_wrong() -> None:
    base = {"name": "n", "ssh_host": "h", "ssh_port": 22, "tags": []}
    node = records.stored_node({**base, "notes": "a\x9b[2Jb", "gpu_model": "A100\nfake"})
    assert node.ssh.host == "h" and node.notes == "" and node.gpu_model == ""
    assert "notes" in node.problem and "gpu_model" in node.problem
    assert "\x9b" not in node.problem and "\n" not in node.problem
    node = records.stored_node({**base, "name": "bad name\x1b", "ssh_jump": "a b"})
    assert node.name == "bad name\x1b"  # the row's own key, so that edit can find it
    assert node.ssh == SshTarget(records.QUARANTINED_HOST)
    assert "name" in node.problem and "ssh_jump" in node.problem
    assert records.stored_node(base).problem == ""
    with pytest.raises(InputError, match="--ssh"):
        records.node_from(records.node_record(node) | {"name": "n"})


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda v: records.provider_from({"name": "P", "kind": "cloud", "region": v}), "region"),
        (lambda v: records.lease_from({"node": "n", "billing_type": "hourly", "unit_price": 1,
                                       "start": "2026-01-01", "notes": v}), "notes"),
        (lambda v: records.lease_from({"node": "n", "billing_type": "hourly", "unit_price": 1,
                                       "start": "2026-01-01", "contract_no": v}), "contract_no"),
        (lambda v: records.resource_from({"kind": "disk", "native_id": v}, 1, "UTC"),
         "native_id"),
        (lambda v: records.resource_from({"kind": "disk", "native_id": "d-1", "notes": v}, 1,
                                         "UTC"), "notes"),
    ],
)  # fmt: skip
def test_key_text_is_refused_in_every_record(make: Any, field: str) -> None:
    with pytest.raises(InputError) as err:
        make("-----BEGIN EC PRIVATE KEY-----MHcCAQEE")
    assert err.value.field == field and err.value.value == secrets.HIDDEN
    assert "MHcCAQEE" not in str(err.value)


async def test_the_dashboard_starts_on_a_ledger_with_a_refused_row(seeded: Path) -> None:
    from textual.widgets import DataTable

    from tests.support.waiting import wait_until
    from tui.dashboard.app import ZukaApp

    assert run("node", "add", "good", "--ssh", "ssh g.example.cn", "--ledger", str(seeded)) == 0
    sql(seeded, "UPDATE nodes SET ssh_host = '[/]x y', notes = '[/]' WHERE name = 'base'")
    app = ZukaApp(seeded, poll=False)
    async with app.run_test(size=(150, 40)) as pilot:
        await wait_until(lambda: app.data is not None, what="the first refresh")
        await pilot.pause()
        table = app.query_one("#fleet", DataTable)
        rows = {str(table.get_row_at(i)[0]): table.get_row_at(i) for i in range(table.row_count)}
        # The refused node is listed, with its state, and never polled.
        assert set(rows) == {"base", "good"}
        assert any("refused" in str(cell) for cell in rows["base"])
        assert app.refused["base"]
        await pilot.press("q")


@pytest.mark.parametrize(
    ("kind", "bad"),
    [
        ("scratch_path", "/"), ("scratch_path", "//"), ("scratch_path", "/data/../../"),
        ("scratch_path", "/data/*"), ("scratch_path", "/data; rm -rf ~"),
        ("scratch_path", "/data $(id)"), ("scratch_path", "/data/"), ("scratch_path", "tmp"),
        ("snapshot", "*"), ("snapshot", "s-1 s-2"), ("snapshot", "-rf"),
        ("bucket", "oss://b/..;x"), ("bucket", "B"), ("bucket_prefix", "bucket/../x"),
        ("disk", "d-1\nd-2"),
    ],
)  # fmt: skip
def test_resource_ids_are_allow_listed(seeded: Path, kind: str, bad: str) -> None:
    _with_lease(seeded)
    before = snapshot(seeded)
    assert run("resource", "add", "base", "--kind", kind, f"--id={bad}",
               "--ledger", str(seeded)) == 2  # fmt: skip
    assert snapshot(seeded) == before


def _with_lease(path: Path) -> None:
    assert run("lease", "add", "base", "--billing", "hourly", "--price", "1",
               "--start", "2026-11-01", "--ledger", str(path)) == 0  # fmt: skip


def test_good_resource_ids_are_kept(seeded: Path) -> None:
    _with_lease(seeded)
    for kind, good in (("scratch_path", "/root/autodl-tmp/ckpt"), ("snapshot", "s-bp1ahz3n9"),
                       ("bucket", "lab-burst-ckpt"), ("bucket_prefix", "lab-ablation/run-1130/"),
                       ("disk", "d-bp1g6zv0ce8oxr2x7r9k"),
                       ("ssh_key", "SHA256:usXxwJnEn744VTUGS4u+obi9pYl4qmFuca1c0/R2Lss")):  # fmt: skip
        assert run("resource", "add", "base", "--kind", kind, "--id", good,
                   "--ledger", str(seeded)) == 0, (kind, good)  # fmt: skip


@pytest.mark.parametrize("value", ["bad \ud800 note", "\udc80", "end \udfff"])
def test_a_lone_surrogate_is_refused_by_name(value: str) -> None:
    # From undecodable bytes in argv (surrogateescape) or a browser's JSON in `zuka web`:
    # SQLite cannot store it, so it is refused where every text enters, naming the field.
    with pytest.raises(InputError) as caught:
        fields.text("notes", value, multiline=True)
    assert caught.value.field == "notes" and "control characters" in caught.value.reason


@pytest.mark.parametrize(
    "value",
    ["\u0301lead", "aliyun \u0301", "x" + "\u0300" * 30, "note\n\u0308line", "aliyun\u2800"],
)
def test_marks_on_nothing_stacked_marks_and_blanks_are_refused(value: str) -> None:
    """A combining mark on no letter draws over the column before; thirty on one letter
    over the rows above and below; a blank Braille pattern draws nothing, so two
    providers would print alike."""
    with pytest.raises(InputError) as caught:
        fields.text("notes", value, multiline=True)
    assert caught.value.field == "notes"


@pytest.mark.parametrize("value", ["café", "cafe\u0301", "Tie\u0302\u0301ng Vie\u0323\u0302t"])
def test_accents_on_letters_are_text(value: str) -> None:
    assert fields.text("notes", value, multiline=True) == value
