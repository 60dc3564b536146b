"""The collector records the stops it sees (issue 17, what to build 3): a node names its EC2
instance, its provider's region and credentials read it at a real moto server, a stopped
instance becomes a stop with source ec2, a running one resumes it; a stop recorded by hand,
an unknown instance, a denied call or another account's answer change nothing. The money
then applies the stop. Real SQLite files and a real moto server; the clock is injected
where the figures must not depend on when the test runs."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from leases.config.sections import Config
from leases.ledger.store import Ledger
from leases.offboard.plan import facts_for, make_plan
from leases.offboard.wiring import PLANNERS
from leases.telemetry import cloudstate
from tests.support.cli import Cli
from tests.support.cloudfixtures import ENVIRON, MOTO_ACCOUNT, REGION, client

SH = ZoneInfo("Asia/Shanghai")
LOG = logging.getLogger("test_cloudstate")


def _instance(endpoint: str) -> str:
    made = client("ec2", endpoint).run_instances(ImageId="ami-12345678", MinCount=1, MaxCount=1)
    return str(made["Instances"][0]["InstanceId"])


def _node(
    cli: Cli,
    endpoint: str,
    instance: str,
    *lease: str,
    account: str = MOTO_ACCOUNT,
    credential_ref: str = "env:TESTCLOUD",
) -> None:
    added = cli("provider", "add", "aws", "--kind", "cloud", "--region", REGION,
                "--account-id", account, "--credential-ref", credential_ref)  # fmt: skip
    assert added.code == 0, added.err
    added = cli("node", "add", "n", "--ssh", "ssh root@10.0.0.1", "--provider", "aws",
                "--gpus", "8", "--instance-id", instance, "--instance-endpoint", endpoint)  # fmt: skip
    assert added.code == 0, added.err
    done = cli("lease", "add", "n", *(lease or ("--billing", "hourly", "--price", "10",
                                                 "--start", "2020-01-01")))  # fmt: skip
    assert done.code == 0, done.err


async def _run(path: Path, clock: Any = None) -> list[cloudstate.Decision]:
    kw = {} if clock is None else {"clock": clock}
    with Ledger.open(path, create=False, **kw) as ledger:
        return await cloudstate.run_once(
            ledger, Config(), clock=ledger.clock, environ=ENVIRON, log=LOG
        )


def _stops(path: Path) -> list[Any]:
    with Ledger.open(path, create=False) as ledger:
        return ledger.stops()


async def test_a_stop_and_a_start_of_the_instance_are_recorded(
    cli: Cli, ledger_path: Path, endpoint: str
) -> None:
    instance = _instance(endpoint)
    _node(cli, endpoint, instance)
    assert await _run(ledger_path) == []  # running, no stop: nothing to record
    ec2 = client("ec2", endpoint)
    ec2.stop_instances(InstanceIds=[instance])
    [done] = await _run(ledger_path)
    assert done.action == "stop"
    [stop] = _stops(ledger_path)
    # From the time EC2 gives in StateTransitionReason, to the second, source ec2.
    described = ec2.describe_instances(InstanceIds=[instance])["Reservations"][0]["Instances"][0]
    assert stop.start == cloudstate.transition_time(described["StateTransitionReason"])
    assert stop.source == "ec2" and stop.end is None
    assert await _run(ledger_path) == []  # still stopped: not recorded twice
    ec2.start_instances(InstanceIds=[instance])
    [done] = await _run(ledger_path)
    assert done.action == "resume"
    [stop] = _stops(ledger_path)
    assert stop.end is not None and stop.end > stop.start
    log = cli("log", "n")
    assert "stop" in log.out, log.out


async def test_a_stop_recorded_by_hand_is_left_alone(
    cli: Cli, ledger_path: Path, endpoint: str
) -> None:
    instance = _instance(endpoint)
    _node(cli, endpoint, instance)
    assert cli("lease", "stop", "n", "--at", "2020-02-01").code == 0
    # Running at EC2, stopped by a person's word: the collector does not resume it.
    assert await _run(ledger_path) == []
    client("ec2", endpoint).stop_instances(InstanceIds=[instance])
    assert await _run(ledger_path) == []  # nor adds a second stop
    [stop] = _stops(ledger_path)
    assert stop.source == "hand" and stop.end is None
    assert stop.start == datetime(2020, 2, 1, tzinfo=SH)


async def test_an_unknown_instance_changes_nothing(
    cli: Cli, ledger_path: Path, endpoint: str, caplog: pytest.LogCaptureFixture
) -> None:
    client("ec2", endpoint).stop_instances(InstanceIds=[_instance(endpoint)])
    _node(cli, endpoint, "i-0123456789abcdef0")  # not this account's, not anyone's
    with caplog.at_level(logging.WARNING, logger=LOG.name):
        assert await _run(ledger_path) == []
    assert _stops(ledger_path) == []
    assert "i-0123456789abcdef0 not found" in caplog.text


async def test_another_accounts_answer_changes_nothing(
    cli: Cli, ledger_path: Path, endpoint: str, caplog: pytest.LogCaptureFixture
) -> None:
    instance = _instance(endpoint)
    client("ec2", endpoint).stop_instances(InstanceIds=[instance])
    _node(cli, endpoint, instance, account="999999999999")
    with caplog.at_level(logging.WARNING, logger=LOG.name):
        assert await _run(ledger_path) == []
    assert _stops(ledger_path) == []
    assert "not the provider's 999999999999" in caplog.text


class _Denying(BaseHTTPRequestHandler):
    """An EC2-compatible endpoint that refuses every call as EC2 does (moto checks no
    permissions: this is the one answer it cannot give)."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = (
            b'<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error>'
            b"<Code>UnauthorizedOperation</Code><Message>You are not authorized to perform"
            b" this operation.</Message></Error></Errors><RequestID>x</RequestID></Response>"
        )
        self.send_response(403)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


async def test_a_denied_call_changes_nothing(
    cli: Cli, ledger_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Denying)
    thread = Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        _node(cli, f"http://127.0.0.1:{server.server_address[1]}", "i-0123456789abcdef0")
        with caplog.at_level(logging.WARNING, logger=LOG.name):
            assert await _run(ledger_path) == []
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert _stops(ledger_path) == []
    assert "UnauthorizedOperation" in caplog.text


async def test_no_credentials_changes_nothing(
    cli: Cli, ledger_path: Path, endpoint: str, caplog: pytest.LogCaptureFixture
) -> None:
    instance = _instance(endpoint)
    client("ec2", endpoint).stop_instances(InstanceIds=[instance])
    _node(cli, endpoint, instance, credential_ref="env:NOSUCHKEYS")
    with caplog.at_level(logging.WARNING, logger=LOG.name):
        assert await _run(ledger_path) == []
    assert _stops(ledger_path) == []
    assert "NOSUCHKEYS_ACCESS_KEY_ID" in caplog.text


class _Clock:
    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


async def test_the_money_applies_a_stop_the_collector_recorded(
    cli: Cli, ledger_path: Path, endpoint: str
) -> None:
    instance = _instance(endpoint)
    _node(cli, endpoint, instance, "--billing", "hourly", "--price", "10",
          "--start", "2020-06-01", "--stopped-billing", "none")  # fmt: skip
    assert cli("lease", "end", "n", "--at", "2020-06-03T00:00").code == 0
    ec2 = client("ec2", endpoint)
    ec2.stop_instances(InstanceIds=[instance])
    # Seen stopped at 12:00 on 1 June (the injected clock). EC2's own transition time is
    # today's, after the seen time: not believed, the stop is from when it was seen.
    clock = _Clock(datetime(2020, 6, 1, 12, tzinfo=SH))
    [done] = await _run(ledger_path, clock)
    assert done.action == "stop" and done.at == clock.at
    ec2.start_instances(InstanceIds=[instance])
    clock.at = datetime(2020, 6, 2, 12, tzinfo=SH)
    [done] = await _run(ledger_path, clock)
    assert done.action == "resume" and done.at == clock.at
    result = cli("report", "--month", "2020-06", "--json")
    assert result.code == 0, result.err
    [row] = json.loads(result.out)["leases"]
    # 48 h leased, 24 h of them stopped, nothing billed then: 24 h x ¥10 = ¥240.00
    # (without the stop: 48 h x ¥10 = ¥480.00)
    assert row["cost"] == "240.00"


async def test_a_stop_is_never_recorded_before_the_lease_started(
    cli: Cli, ledger_path: Path, endpoint: str
) -> None:
    instance = _instance(endpoint)
    client("ec2", endpoint).stop_instances(InstanceIds=[instance])
    # Rented (recorded) from 1 December 2026 00:00 UTC+8; EC2 says stopped before that.
    _node(cli, endpoint, instance, "--billing", "hourly", "--price", "10",
          "--start", "2026-12-01", "--tz", "Asia/Shanghai")  # fmt: skip
    seen = cloudstate.Seen(
        cloudstate.Target(_ledger_node(ledger_path), instance, _provider(ledger_path), REGION, ""),
        datetime(2026, 12, 2, tzinfo=UTC),
        "stopped",
        datetime(2026, 11, 20, tzinfo=UTC),
    )
    with Ledger.open(ledger_path, create=False) as ledger:
        decision = cloudstate.decide(seen, [], ledger.leases("n"))
    assert decision is not None and decision.at == datetime(2026, 12, 1, tzinfo=SH)


def _ledger_node(path: Path) -> Any:
    with Ledger.open(path, create=False) as ledger:
        return ledger.node("n")


def _provider(path: Path) -> Any:
    with Ledger.open(path, create=False) as ledger:
        return ledger.provider("aws")


def test_offboarding_never_plans_to_delete_the_instance(cli: Cli, ledger_path: Path) -> None:
    _node(cli, "https://ec2.idc.example", "i-0123456789abcdef0")
    disk = cli("resource", "add", "n", "--kind", "disk", "--id", "vol-0123456789abcdef0")
    assert disk.code == 0, disk.err
    with Ledger.open(ledger_path, create=False) as ledger:
        node = ledger.node("n")
        plan = make_plan(facts_for(ledger, node, Config()), PLANNERS)
    said = json.dumps([[s.key, s.target, s.describe, s.params] for s in plan.steps])
    assert "vol-0123456789abcdef0" in said  # the recorded resource is planned
    assert "i-0123456789abcdef0" not in said  # the instance never is


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("User initiated (2026-11-02 03:04:05 GMT)", datetime(2026, 11, 2, 3, 4, 5, tzinfo=UTC)),
        ("User initiated (2026-11-02 03:04:05 UTC)", datetime(2026, 11, 2, 3, 4, 5, tzinfo=UTC)),
        ("Server.SpotInstanceTermination (2026-11-02 03:04:05)",
         datetime(2026, 11, 2, 3, 4, 5, tzinfo=UTC)),
        ("User initiated (2026-02-30 03:04:05 GMT)", None),  # no such day
        ("User initiated (2026-11-02 25:04:05 GMT)", None),
        ("User initiated", None),
        ("", None),
        (None, None),
        (12345, None),
        ("\x1b[31m(2026-11-02 03:04:05 GMT)" + "x" * 10, datetime(2026, 11, 2, 3, 4, 5, tzinfo=UTC)),
        ("x" * 400 + "(2026-11-02 03:04:05 GMT)", None),  # past the bound read
        ("(２０２６-11-02 03:04:05 GMT)", None),  # full-width digits are not a time
    ],
)  # fmt: skip
def test_the_transition_time_is_read_as_hostile_text(reason: object, expected: object) -> None:
    assert cloudstate.transition_time(reason) == expected


def test_a_bad_instance_id_is_refused_naming_the_field(cli: Cli) -> None:
    assert cli("provider", "add", "aws", "--kind", "cloud").code == 0
    for bad in ("-rf", "i-1 i-2", "i-$(reboot)", "../x"):
        added = cli("node", "add", "n", "--ssh", "ssh root@10.0.0.1", f"--instance-id={bad}")
        assert added.code != 0 and "--instance-id" in added.err, (bad, added.err)
    bad_place = cli("node", "add", "n", "--ssh", "ssh root@10.0.0.1",
                    "--instance-endpoint", "http://169.254.169.254")  # fmt: skip
    assert bad_place.code != 0 and "endpoint" in bad_place.err
    assert cli("node", "list", "--json").out.strip() in ("[]", "")


async def test_the_dashboard_polling_in_place_of_a_collector_records_a_stop(
    cli: Cli, ledger_path: Path, endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only `zuka collect` read the instances' states: a lab that keeps the dashboard open
    instead (it polls when no collector does) never had its stops recorded."""
    from tests.support.waiting import wait_until
    from tui.dashboard.app import ZukaApp

    for key, value in ENVIRON.items():
        monkeypatch.setenv(key, value)
    instance = _instance(endpoint)
    _node(cli, endpoint, instance)
    client("ec2", endpoint).stop_instances(InstanceIds=[instance])
    app = ZukaApp(ledger_path, refresh_s=0.2, interval_s=0.5, cloud_every_s=0.5)
    async with app.run_test(size=(150, 40)) as pilot:
        await wait_until(lambda: len(_stops(ledger_path)) == 1, what="the stop recorded")
        await pilot.press("q")
    [stop] = _stops(ledger_path)
    assert stop.source == "ec2" and stop.end is None


def test_zuka_collect_reads_the_instances_on_its_timer(
    cli: Cli, ledger_path: Path, endpoint: str
) -> None:
    """`zuka collect --cloud-every S`: the real process records the stop it reads, and the
    resume after it, each on a later tick of its timer."""
    import os
    import signal
    import subprocess
    import sys

    from tests.support.waiting import wait_until_sync

    instance = _instance(endpoint)
    _node(cli, endpoint, instance)
    ec2 = client("ec2", endpoint)
    ec2.stop_instances(InstanceIds=[instance])
    collector = subprocess.Popen(
        [sys.executable, "-m", "tui.cli.main", "collect", "--ledger", str(ledger_path),
         "--interval", "1", "--cloud-every", "0.5"],
        env={**os.environ, **ENVIRON}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        wait_until_sync(lambda: len(_stops(ledger_path)) == 1, timeout=60,
                        what="the stop recorded")  # fmt: skip
        ec2.start_instances(InstanceIds=[instance])
        wait_until_sync(lambda: _stops(ledger_path)[0].end is not None, timeout=60,
                        what="the resume recorded")  # fmt: skip
    finally:
        collector.send_signal(signal.SIGTERM)
        _, err = collector.communicate(timeout=60)
    assert collector.returncode == 0, err
