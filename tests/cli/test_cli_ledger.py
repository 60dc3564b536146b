"""The `zuka` ledger commands end to end, on a real SQLite file."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.support.cli import Cli

NODE_ARGS = [
    "node", "add", "colo-a800",
    "--ssh",
    "ssh -p 2222 -i ~/.ssh/lab_ed25519 -J ops@jump.lab.cn lab@202.102.77.10 -L 8888:localhost:8888",
    "--provider", "Jiangning IDC 江宁", "--channel", "colo",
    "--gpu-model", "A800 80GB SXM", "--gpus", "8", "--vram", "80",
    "--interconnect", "nvlink", "--nvlinks", "8", "--ib-rate", "200", "--tags", "base,nanjing", "--notes", "rack B3, 2 PSUs",
    "--instance-id", "i-0123456789abcdef0", "--instance-endpoint", "https://ec2.idc.example",
    "--source", "prometheus", "--url", "https://prom.lab:9090/",
    "--match", '{Hostname="gpu-7",gpu=~"0|1"}', "--token-file", "~/.config/zuka/prom.token",
]  # fmt: skip
LEASE_ARGS = [
    "lease", "add", "colo-a800",
    "--billing", "contract", "--price", "36000.50", "--currency", "cny", "--cards", "8",
    "--start", "2026-06-01T09:00", "--end", "2027-06-01", "--tz", "Asia/Shanghai",
    "--auto-renew", "--min-commitment", "12", "--deposit", "72000",
    "--deposit-paid-on", "2026-05-20", "--deposit-refund", "pending",
    "--contract", "NJ-IDC-2026-0417", "--notice-days", "30", "--on-expiry", "renews",
    "--release-after-stopped-days", "7", "--notes", "paid quarterly",
    "--stopped-billing", "storage_only", "--month-count", "30_days", "--partial-unit", "day",
    "--renew-charge-days", "9", "--hourly-price", "60.5", "--refund-rule", "prorated_days",
    "--rounding", "charge", "--payment-schedule", "quarterly",
]  # fmt: skip


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A home holding the private token file NODE_ARGS names (checked when given)."""
    home = tmp_path / "home"
    (home / ".config" / "zuka").mkdir(parents=True)
    token = home / ".config" / "zuka" / "prom.token"
    token.write_text("s3cr3t\n")
    token.chmod(0o600)
    monkeypatch.setenv("HOME", str(home))


def _seed(cli: Cli) -> None:
    assert cli(*NODE_ARGS).code == 0
    assert cli(*LEASE_ARGS).code == 0


def test_every_node_field_round_trips_through_json(cli: Cli) -> None:
    added = cli(*NODE_ARGS, "--json")
    assert added.code == 0, added.err
    shown = json.loads(cli("node", "show", "colo-a800", "--json").out)
    assert shown["node"] == json.loads(added.out)
    assert shown["node"] == {
        "name": "colo-a800",
        "provider": "Jiangning IDC 江宁",
        "ssh_host": "202.102.77.10",
        "ssh_port": 2222,
        "ssh_user": "lab",
        "ssh_key_path": "~/.ssh/lab_ed25519",
        "ssh_jump": "ops@jump.lab.cn",
        "ssh_alias": False,
        "ssh_tunnels": ["-L 8888:localhost:8888"],
        "gpu_model": "A800 80GB SXM",
        "gpu_count": 8,
        "vram_gib": 80,
        "interconnect": "nvlink",
        "nvlinks": 8,
        "ib_gbps": 200,
        "tags": ["base", "nanjing"],
        "state": "active",
        "local": False,
        "notes": "rack B3, 2 PSUs",
        "instance_id": "i-0123456789abcdef0",
        "instance_endpoint": "https://ec2.idc.example",
        "reading_source": "prometheus",
        "prom_url": "https://prom.lab:9090",
        "prom_match": 'Hostname="gpu-7", gpu=~"0|1"',
        "prom_token_file": "~/.config/zuka/prom.token",
    }
    assert (
        shown["ssh_command"]
        == "ssh -p 2222 -i ~/.ssh/lab_ed25519 -J ops@jump.lab.cn lab@202.102.77.10"
    )
    listed = json.loads(cli("node", "list", "--json").out)
    assert listed[0]["channel"] == "colo" and listed[0]["lease"] is None


def test_every_lease_field_round_trips_through_json(cli: Cli) -> None:
    assert cli(*NODE_ARGS).code == 0
    added = cli(*LEASE_ARGS, "--json")
    assert added.code == 0, added.err
    lease = json.loads(added.out)
    assert lease == {
        "node": "colo-a800",
        "billing_type": "contract",
        "unit_price": "36000.50",
        "currency": "CNY",
        "cards_billed": 8,
        "start": "2026-06-01T09:00:00+08:00",
        "end": "2027-06-01T00:00:00+08:00",
        "billing_tz": "Asia/Shanghai",
        "auto_renew": True,
        "min_commitment": 12,
        "deposit": "72000",
        "deposit_paid_on": "2026-05-20",
        "deposit_refund": "pending",
        "deposit_refunded_on": None,
        "contract_no": "NJ-IDC-2026-0417",
        "notice_days": 30,
        "on_expiry": "renews",
        "release_after_stopped_days": 7,
        "notes": "paid quarterly",
        "ended_at": None,
        "stopped_billing": "storage_only",
        "month_count": "30_days",
        "partial_unit": "day",
        "renew_charge_days": 9,
        "hourly_price": "60.5",
        "refund_rule": "prorated_days",
        "rounding": "charge",
        "payment_schedule": "quarterly",
    }
    # lease list adds what it knows of the renewal chain beside the record.
    # Paid quarterly in 30-day months from 2026-06-01 09:00: each instalment pays 90 days,
    # to 08-30, 11-28, 2027-02-26, 05-27, then the rest to the end 2027-06-01 00:00; paid
    # until the end of the last one charged by now (the clock is today's: which one it is
    # depends on the day the test runs, the boundaries do not).
    ends = ["2026-08-30T09:00:00+08:00", "2026-11-28T09:00:00+08:00",
            "2027-02-26T09:00:00+08:00", "2027-05-27T09:00:00+08:00", lease["end"]]  # fmt: skip
    starts = [lease["start"], *ends[:-1]]
    now = datetime.now(UTC)
    charged = [e for s, e in zip(starts, ends, strict=True) if datetime.fromisoformat(s) <= now]
    paid = charged[-1] if charged else ends[0]
    chain = {"renews": None, "paid_until": paid, "bills_now": True}
    listed = json.loads(cli("lease", "list", "--json").out)
    # It renews by itself (auto_renew): next at its end, until that end has passed.
    next_renewal = listed[0].pop("next_renewal")
    assert next_renewal == lease["end"] or now >= datetime.fromisoformat(lease["end"])
    assert listed == [{**lease, **chain}]
    assert json.loads(cli("node", "list", "--json").out)[0]["lease"] == lease


def test_resources_and_the_audit_log(cli: Cli) -> None:
    _seed(cli)
    res = cli(
        "resource", "add", "colo-a800", "--kind", "scratch_path", "--id", "/data/scratch",
        "--notes", "checkpoints", "--json",
    )  # fmt: skip
    assert res.code == 0, res.err
    assert json.loads(res.out)["lease_start"] == "2026-06-01T09:00:00+08:00"
    assert cli("resource", "add", "colo-a800", "--kind", "disk", "--id", "d-1").code == 0
    listed = json.loads(cli("resource", "list", "colo-a800", "--json").out)
    assert [(r["kind"], r["native_id"]) for r in listed] == [
        ("disk", "d-1"),
        ("scratch_path", "/data/scratch"),
    ]
    assert cli("node", "edit", "colo-a800", "--tags", "base", "--gpus", "4").code == 0
    log = json.loads(cli("log", "colo-a800", "--json").out)
    assert [e["action"] for e in log] == [
        "node.add", "lease.add", "resource.add", "resource.add", "node.edit",
    ]  # fmt: skip
    edit = log[-1]
    assert edit["before"]["gpu_count"] == 8 and edit["after"]["gpu_count"] == 4
    assert edit["before"]["tags"] == ["base", "nanjing"] and edit["after"]["tags"] == ["base"]
    human = cli("log", "colo-a800").out
    assert "gpu_count: 8 -> 4" in human and "node.edit" in human


def test_renew_end_edit_archive(cli: Cli) -> None:
    assert cli("node", "add", "m1", "--ssh", "ssh root@10.0.0.1").code == 0
    r = cli("lease", "add", "m1", "--billing", "monthly", "--price", "50000",
            "--start", "2026-10-15", "--end", "2026-11-15", "--deposit", "1000")  # fmt: skip
    assert r.code == 0, r.err
    r = cli("lease", "renew", "m1", "--until", "2026-12-15", "--price", "48000", "--json")
    assert r.code == 0, r.err
    renewed = json.loads(r.out)
    assert renewed["start"] == "2026-11-15T00:00:00+08:00"
    assert renewed["unit_price"] == "48000" and renewed["deposit"] is None
    leases = json.loads(cli("lease", "list", "m1", "--json").out)
    assert [le["ended_at"] for le in leases] == ["2026-11-15T00:00:00+08:00", None]
    assert cli("node", "archive", "m1").code == 2  # open lease
    r = cli("lease", "edit", "m1", "--notes", "idle weekends", "--json")
    assert json.loads(r.out)["notes"] == "idle weekends"
    assert cli("lease", "end", "m1", "--at", "2026-11-20T18:00").code == 0
    assert json.loads(cli("lease", "list", "m1", "--open", "--json").out) == []
    assert cli("node", "archive", "m1").code == 0
    assert json.loads(cli("node", "list", "--json").out) == []
    assert json.loads(cli("node", "list", "--all", "--json").out)[0]["state"] == "released"


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_export_import_export_is_identical(cli: Cli, tmp_path: Path, fmt: str) -> None:
    demo = Path(__file__).parent.parent.parent / "leases" / "data" / "demo_fleet.json"
    assert cli("import", str(demo)).code == 0
    _seed(cli)
    cli("resource", "add", "colo-a800", "--kind", "bucket", "--id", "lab-ckpt",
        "--region", "cn-east", "--endpoint", "https://oss.example.cn", "--created", "2026-06-02")  # fmt: skip
    first = cli("export", "--format", fmt).out
    assert "colo-a800" in first and "lab-ckpt" in first
    dump = tmp_path / f"dump.{fmt}"
    dump.write_text(first)
    second_ledger = tmp_path / "second.db"
    imported = cli("import", str(dump), ledger=second_ledger)
    assert imported.code == 0, imported.err
    assert "13 nodes" in imported.out
    again = cli("export", "--format", fmt, ledger=second_ledger).out
    assert again == first


def test_csv_template_imports(cli: Cli) -> None:
    template = Path(__file__).parent.parent.parent / "leases" / "data" / "ledger-template.csv"
    r = cli("import", str(template))
    assert r.code == 0, r.err
    assert "2 nodes" in r.out


def test_import_is_all_or_nothing(cli: Cli, tmp_path: Path, ledger_path: Path) -> None:
    _seed(cli)
    before = ledger_path.read_bytes()
    doc = json.loads(cli("export").out)
    doc["nodes"][0]["name"] = "fresh-node"
    doc["providers"] = []
    doc["leases"][0]["node"] = "fresh-node"
    doc["leases"].append({**doc["leases"][0], "end": "2020-01-01"})  # end before start
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "zuka-ledger", "version": 1, **doc}))
    r = cli("import", str(bad))
    assert r.code == 2
    assert f"lease 2 in {bad}: end" in r.err
    assert ledger_path.read_bytes() == before
    assert [n["name"] for n in json.loads(cli("node", "list", "--json").out)] == ["colo-a800"]


def test_ledger_file_is_private_and_wal(cli: Cli, ledger_path: Path) -> None:
    _seed(cli)
    assert stat.S_IMODE(os.stat(ledger_path).st_mode) == 0o600
    import sqlite3

    with sqlite3.connect(ledger_path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_read_only_commands_do_not_create_a_ledger(cli: Cli, ledger_path: Path) -> None:
    assert cli("node", "list").code == 1
    assert cli("node", "show", "ghost").code == 1
    assert not ledger_path.exists()


def test_ledger_location_from_environment(tmp_path: Path) -> None:
    """The installed `zuka` script, with ZUKA_LEDGER instead of --ledger."""
    env = {**os.environ, "ZUKA_LEDGER": str(tmp_path / "env.db")}
    cmd = [sys.executable, "-m", "tui.cli.main"]
    add = [*cmd, "node", "add", "n1", "--ssh", "ssh -p 30022 root@connect.example.cn"]
    subprocess.run(add, env=env, check=True, capture_output=True)
    done = subprocess.run([*cmd, "node", "list", "--json"], env=env, capture_output=True, text=True)
    assert json.loads(done.stdout)[0]["ssh_port"] == 30022
    assert (tmp_path / "env.db").exists()


def _bad_inputs() -> list[tuple[list[str], str]]:
    lease = ["lease", "add", "colo-a800", "--billing", "monthly", "--price", "100",
             "--start", "2026-12-01", "--end", "2027-01-01"]  # fmt: skip

    def with_(flag: str, value: str) -> list[str]:
        out = list(lease)
        if flag in out:
            out[out.index(flag) + 1] = value
        else:
            out += [flag, value]
        return out

    return [
        (with_("--start", "2026-02-30"), "start: has day 30: February 2026 has 28 days"),
        (with_("--start", "yesterday"), "start: is not a valid date"),
        (with_("--end", "2026-11-01"), "end: must be after the start"),
        (with_("--end", "2026-12-01"), "end: must be after the start"),
        (with_("--price", "-3"), "unit_price (--price): must not be negative (got '-3')"),
        (with_("--price", "abc"), "unit_price (--price): is not a number (got 'abc')"),
        (with_("--price", "NaN"), "unit_price (--price): is not a number"),
        (with_("--billing", "fortnightly"), "billing_type (--billing): must be one of"),
        (with_("--currency", "XYZ"), "currency: unknown currency"),
        (with_("--tz", "Mars/Olympus"), "billing_tz (--tz): unknown time zone"),
        (with_("--cards", "0"), "cards_billed (--cards): must be at least 1"),
        (with_("--deposit", "-100"), "deposit: must not be negative"),
        (with_("--deposit-refund", "maybe"), "--deposit-refund: must be one of"),
        (with_("--deposit-refunded-on", "2026-12-02"), "--deposit-refunded-on: set only for a refunded"),
        ([*lease[:-2]], "end: a monthly lease is prepaid and needs an end date"),
        (["lease", "add", "ghost", "--billing", "hourly", "--price", "3"], "node: no node of that name"),
        (["lease", "add", "colo-a800", "--billing", "hourly", "--price", "3", "--start", "2026-08-01"],
         "start: overlaps the lease from 2026-06-01 09:00"),
        (["node", "add", "colo-a800", "--ssh", "ssh root@h"], "name: a node of that name already exists"),
        (["node", "add", "n2", "--ssh", "ssh -p 70000 root@h"], "ssh: port must be a number from 1 to 65535"),
        (["node", "add", "n2", "--ssh", "ssh -Z root@h"], "ssh: unknown ssh option -Z"),
        (["node", "add", "n2", "--ssh", "ssh root@h 'rm -rf /'"], "ssh: has words after the login"),
        (["node", "add", "n2"], "ssh: give --ssh"),
        (["node", "add", "bad name", "--ssh", "ssh h"], "name: must be 1-63 letters"),
        (["node", "add", "n2", "--ssh", "ssh h", "--gpus", "eight"], "gpu_count (--gpus): is not a whole number"),
        (["node", "add", "n2", "--ssh", "ssh h", "--interconnect", "infiniband"], "interconnect: must be one of"),
        (["node", "add", "n2", "--ssh", "ssh h", "--provider", "Nowhere"], "provider: unknown provider"),
        (["node", "add", "n2", "--ssh", "ssh h", "--provider", "P", "--channel", "moon"], "channel: must be one of cloud"),
        (["node", "edit", "ghost", "--gpus", "2"], "node: no node of that name"),
        (["lease", "end", "colo-a800", "--at", "2099-01-01"], "at: is in the future"),
        (["lease", "add", "colo-a800", "--billing", "hourly", "--price", "3", "--start", "2028-01-01", "--cards", "9"],
         "cards_billed (--cards): colo-a800 has only 8 GPUs"),
        (["node", "show", "ghost"], "node: no node of that name"),
        (["resource", "add", "colo-a800", "--kind", "tape", "--id", "t1"], "kind: must be one of disk | snapshot"),
        (["resource", "add", "colo-a800", "--kind", "scratch_path", "--id", "tmp"], "absolute, normalised path"),
        (["provider", "add", "X", "--kind", "cloud", "--credential-ref", "LTAI5tSecretKeyValue123"],
         "--credential-ref: looks like an access key or token"),
    ]  # fmt: skip


@pytest.mark.parametrize(("args", "message"), _bad_inputs())
def test_bad_input_is_refused_and_changes_nothing(
    cli: Cli, ledger_path: Path, args: list[str], message: str
) -> None:
    _seed(cli)
    before = ledger_path.read_bytes()
    files_before = sorted(p.name for p in ledger_path.parent.iterdir())
    r = cli(*args)
    assert r.code == 2, (r.out, r.err)
    assert message in r.err
    assert r.err.startswith("zuka: error: ")
    assert ledger_path.read_bytes() == before
    assert sorted(p.name for p in ledger_path.parent.iterdir()) == files_before


def test_import_of_garbage_is_refused(cli: Cli, tmp_path: Path, ledger_path: Path) -> None:
    _seed(cli)
    before = ledger_path.read_bytes()
    for name, text, message in [
        ("a.json", "{not json", "a.json: is not valid JSON"),
        ("b.json", '{"format": "other"}', "format: is not a zuka-ledger export"),
        ("c.csv", "record,name\nwidget,x\n", "line 2: record: must be one of"),
        ("d.csv", "record,colour\n", "header: unknown column"),
    ]:
        path = tmp_path / name
        path.write_text(text)
        r = cli("import", str(path))
        assert r.code == 2 and message in r.err, r.err
    assert cli("import", str(tmp_path / "missing.json")).code == 2
    assert ledger_path.read_bytes() == before


def _reused_name(cli: Cli) -> None:
    """A archived with an ended lease and a disk, then a new live A with its own lease."""
    assert cli("node", "add", "A", "--ssh", "ssh root@10.0.0.1").code == 0
    assert cli("lease", "add", "A", "--billing", "hourly", "--price", "9",
               "--start", "2025-01-01T00:00").code == 0  # fmt: skip
    assert cli("resource", "add", "A", "--kind", "disk", "--id", "old-disk").code == 0
    assert cli("lease", "end", "A", "--at", "2025-02-01").code == 0
    assert cli("node", "archive", "A").code == 0
    assert cli("node", "add", "A", "--ssh", "ssh root@10.0.0.2").code == 0
    assert cli("lease", "add", "A", "--billing", "hourly", "--price", "7",
               "--start", "2025-03-01T00:00").code == 0  # fmt: skip


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_export_import_keeps_an_archived_nodes_leases_apart(
    cli: Cli, tmp_path: Path, fmt: str
) -> None:
    _reused_name(cli)
    dump = tmp_path / f"r.{fmt}"
    assert cli("export", "--format", fmt, "-o", str(dump)).code == 0
    other = tmp_path / "r2.db"
    r = cli("import", str(dump), ledger=other)
    assert r.code == 0, r.err
    live = json.loads(cli("node", "show", "A", "--json", ledger=other).out)
    assert [le["unit_price"] for le in live["leases"]] == ["7"]
    assert live["resources"] == []
    assert live["node"]["ssh_host"] == "10.0.0.2"
    again = cli("export", "--format", fmt, ledger=other).out
    assert again == cli("export", "--format", fmt).out


def test_import_of_a_released_node_beside_a_live_one_keeps_its_leases(
    cli: Cli, tmp_path: Path
) -> None:
    _reused_name(cli)
    doc = json.loads(cli("export").out)
    doc["nodes"] = [n for n in doc["nodes"] if n["state"] == "released"]
    doc["leases"] = [le for le in doc["leases"] if le["unit_price"] == "9"]
    only_old = tmp_path / "old.json"
    only_old.write_text(json.dumps(doc))
    other = tmp_path / "r2.db"
    assert cli("node", "add", "A", "--ssh", "ssh root@10.0.0.3", ledger=other).code == 0
    r = cli("import", str(only_old), ledger=other)
    assert r.code == 0, r.err
    live = json.loads(cli("node", "show", "A", "--json", ledger=other).out)
    assert live["leases"] == [] and live["resources"] == []
    assert live["node"]["ssh_host"] == "10.0.0.3"


def test_an_old_export_with_a_reused_name_is_refused_as_ambiguous(cli: Cli, tmp_path: Path) -> None:
    _reused_name(cli)
    doc = json.loads(cli("export").out)
    for plural in ("nodes", "leases", "resources"):
        for rec in doc[plural]:
            rec.pop("node_key", None)
    doc["version"] = 1
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc))
    other = tmp_path / "r2.db"
    r = cli("import", str(old), ledger=other)
    assert r.code == 2
    assert "more than one node named A" in r.err and "node_key" in r.err
    assert (
        not other.exists()
        or json.loads(cli("node", "list", "--all", "--json", ledger=other).out) == []
    )


def test_provider_edit_changes_the_account_is_audited_and_undone(cli: Cli) -> None:
    assert cli("provider", "add", "Aliyun 阿里云", "--kind", "cloud").code == 0
    nothing = cli("provider", "edit", "Aliyun 阿里云")
    assert nothing.code == 2 and "nothing to change" in nothing.err
    r = cli("provider", "edit", "Aliyun 阿里云", "--account-id", "1234", "--region",
            "cn-hangzhou", "--credential-ref", "env:ALI", "--account-alias", "lab")  # fmt: skip
    assert r.code == 0 and "updated provider Aliyun 阿里云" in r.out, r.err
    (p,) = json.loads(cli("provider", "list", "--json").out)
    assert (p["account_id"], p["region"], p["credential_ref"], p["account_alias"]) == (
        "1234",
        "cn-hangzhou",
        "env:ALI",
        "lab",
    )
    again = cli("provider", "edit", "Aliyun 阿里云", "--account-id", "1234")
    assert again.code == 0 and "nothing changed" in again.out
    secret = cli("provider", "edit", "Aliyun 阿里云", "--credential-ref", "AKIA x y")
    assert secret.code == 2 and "--credential-ref" in secret.err and "AKIA" not in secret.err
    assert cli("provider", "edit", "nope", "--region", "x").code == 2
    assert "provider.edit" in cli("log").out
    assert cli("undo").code == 0
    (p,) = json.loads(cli("provider", "list", "--json").out)
    assert p["account_id"] == "" and p["region"] == ""


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_stops_round_trip_through_export_and_import(
    cli: Cli, tmp_path: Path, ledger_path: Path, fmt: str
) -> None:
    from datetime import datetime
    from zoneinfo import ZoneInfo

    from leases.ledger.store import Ledger

    sh = ZoneInfo("Asia/Shanghai")
    assert cli("node", "add", "n", "--ssh", "ssh root@10.0.0.1").code == 0
    assert cli("lease", "add", "n", "--billing", "hourly", "--price", "10",
               "--start", "2026-11-01", "--stopped-billing", "none").code == 0  # fmt: skip
    assert cli("lease", "stop", "n", "--at", "2026-11-02").code == 0
    assert cli("lease", "resume", "n", "--at", "2026-11-03").code == 0
    with Ledger.open(ledger_path, create=False) as ledger:  # as the collector records one
        ledger.stop_node("n", datetime(2026, 11, 5, 8, 30, tzinfo=sh), source="ec2")
        before = [(s.node, s.start, s.end, s.source, s.who) for s in ledger.stops()]
        spans = ledger.stop_spans()
    first = cli("export", "--format", fmt).out
    assert "ec2" in first
    dump = tmp_path / f"dump.{fmt}"
    dump.write_text(first)
    second = tmp_path / "second.db"
    imported = cli("import", str(dump), ledger=second)
    assert imported.code == 0, imported.err
    assert "2 stops" in imported.out
    with Ledger.open(second, create=False) as ledger:
        assert [(s.node, s.start, s.end, s.source, s.who) for s in ledger.stops()] == before
        assert list(ledger.stop_spans().values()) == list(spans.values())
    assert cli("export", "--format", fmt, ledger=second).out == first
    # Billed alike: 5 Nov 08:30 UTC+8 to now is stopped in both, 2 to 3 Nov too.
    month = [cli("report", "--month", "2026-11", "--json", ledger=p).out
             for p in (ledger_path, second)]  # fmt: skip
    assert json.loads(month[0])["leases"] == json.loads(month[1])["leases"]


def test_an_imported_stop_before_its_lease_is_refused(cli: Cli, tmp_path: Path) -> None:
    assert cli("node", "add", "n", "--ssh", "ssh root@10.0.0.1").code == 0
    assert cli("lease", "add", "n", "--billing", "hourly", "--price", "10",
               "--start", "2026-11-01").code == 0  # fmt: skip
    assert cli("lease", "stop", "n", "--at", "2026-11-02").code == 0
    doc = json.loads(cli("export").out)
    doc["stops"][0]["start"] = "2026-10-30T00:00:00.000000+00:00"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    third = tmp_path / "third.db"
    r = cli("import", str(bad), ledger=third)
    assert r.code != 0 and "stop 1 in" in r.err and "before its lease's start" in r.err, r.err
    assert not third.exists() or json.loads(cli("node", "list", "--json", ledger=third).out) == []
