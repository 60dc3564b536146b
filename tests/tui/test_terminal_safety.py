"""Hostile text never drives the terminal: what nodes, SSH peers and ledgers say is shown.

Hostile strings (escape sequences, C1 controls, bidi overrides, Textual markup, newlines,
huge values) go in through the ledger (raw SQL where validation would refuse them: an old
or imported ledger may hold them), a node's nvidia-smi output and stderr, and an SSH peer's
DISCONNECT message and banner. What comes out, through `zuka` in this process (stdout and
stderr as bytes) and through the dashboard under Pilot (every rendered segment), must hold
no ESC, no other C0 control but newline, no C1 control and no bidi control; the dashboard
must keep running; `--json` must still carry the exact values.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import re
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import asyncssh
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from rich.text import Text
from textual.widgets import DataTable

from leases.core.textsafe import visible
from leases.ledger import records
from leases.ledger.store import Ledger
from leases.sim import SimNode
from leases.sim import answer as sim_answer
from leases.sim.keptshell import shell_commands
from leases.ssh.errors import OfferedHostKey
from leases.ssh.hostkeys import HostKeyStatus
from leases.ssh.posixsh import unwrap_sh
from tests.support.sshfixtures import FakeNode, TestKeys, known_hosts_line
from tests.support.waiting import wait_until
from tui.cli.main import main
from tui.dashboard.app import ZukaApp
from tui.screens.fleetview import Cell
from tui.screens.yesno import TrustScreen

KEYS = TestKeys.generate()
PIECES = (
    "\x1b]0;title\x07",
    "\x1b[2J",
    "\x1b[31m",
    "\x9b2J",
    "\x9d0;x\x9c",
    "\u202e",
    "\u2066",
    "[/]",
    "[bold red]",
    "[link=http://x]",
    "\n",
    "\r",
    "\x00",
    "\x7f",
    "\t",
    "\u2028",
)
# Text a terminal would obey or that reorders what a reader sees. Newlines are zuka's own.
UNSAFE = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]"
)
hostile = st.lists(
    st.one_of(st.sampled_from(PIECES), st.text(max_size=8)), min_size=1, max_size=8
).map("".join)
HUGE = "A" * 20_000 + "\x1b]0;title\x07" + "[/]" * 1000
# Every piece at once: each path below gets it as an explicit example on every run, so
# the random examples (fewer where each starts a whole dashboard) only add variety; the
# escaping itself is a property of textsafe.visible, tested over any text in test_textsafe.
EVERY_PIECE = "".join(PIECES)


def assert_safe(shown: str) -> None:
    found = UNSAFE.search(shown)
    assert found is None, f"{found.group()!r} reached the terminal: {shown[:300]!r}"


# -- the command line, captured as bytes ----------------------------------------------------


def run_cli(*argv: str) -> tuple[int, str]:
    """`zuka ARGV` in this process; stdout and stderr as the terminal would get them."""
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="utf-8", write_through=True)
    with contextlib.redirect_stdout(stream), contextlib.redirect_stderr(stream):
        try:
            code = main(list(argv), out=stream)
        except SystemExit as exc:  # argparse
            code = int(exc.code or 0)
    stream.flush()
    data = raw.getvalue()
    assert b"\x1b" not in data
    return code, data.decode("utf-8")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ledger with one of everything, copied for each example and then made hostile."""
    path = tmp_path_factory.mktemp("template") / "ledger.db"
    for argv in (
        ["provider", "add", "p1", "--kind", "platform"],
        ["node", "add", "n1", "--ssh", "ssh -p 6666 root@10.0.0.1", "--provider", "p1",
         "--gpu-model", "A100", "--gpus", "8", "--notes", "clean", "--tags", "a,b"],
        ["lease", "add", "n1", "--billing", "monthly", "--price", "100", "--end", "2030-01-01"],
        ["resource", "add", "n1", "--kind", "disk", "--id", "d-1"],
    ):  # fmt: skip
        code, text = run_cli(*argv, "--ledger", str(path))
        assert code == 0, text
    return path


def _forged_audit_row(c: sqlite3.Connection, v: str) -> None:
    """A row written behind zuka's back (its chain trigger dropped first)."""
    c.execute("DROP TRIGGER audit_chain_only")
    c.execute(
        "INSERT INTO audit (id, at, actor, action, entity, node, before, after) "
        "VALUES ((SELECT max(id) + 1 FROM audit), ?, ?, 'update', 'node', 'n1', ?, ?)",
        (datetime.now(UTC).isoformat(), v, json.dumps({"notes": "x"}), json.dumps({"notes": v})),
    )


# Where a hostile value goes in an old ledger: (table, column, how it is stored).
FIELDS: dict[str, Callable[[sqlite3.Connection, str], None]] = {
    "node notes": lambda c, v: c.execute("UPDATE nodes SET notes = ?", (v,)),
    "gpu_model": lambda c, v: c.execute("UPDATE nodes SET gpu_model = ?", (v,)),
    "tags": lambda c, v: c.execute("UPDATE nodes SET tags = ?", (json.dumps([v]),)),
    "provider name": lambda c, v: c.execute("UPDATE providers SET name = ?", (v,)),
    "lease currency": lambda c, v: c.execute("UPDATE leases SET currency = ?", (v,)),
    "resource id": lambda c, v: c.execute("UPDATE resources SET native_id = ?", (v,)),
    "audit actor and change": lambda c, v: _forged_audit_row(c, v),
}


def in_every_field(value: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """An explicit example per ledger field, all with `value`."""

    def add(test: Callable[..., None]) -> Callable[..., None]:
        for field in sorted(FIELDS):
            test = example(field=field, value=value)(test)
        return test

    return add


@contextlib.contextmanager
def hostile_ledger(template: Path, field: str, value: str) -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger.db"
        shutil.copy(template, path)
        conn = sqlite3.connect(path)
        with conn:
            FIELDS[field](conn, value)
        conn.close()
        yield path


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(field=st.sampled_from(sorted(FIELDS)), value=hostile)
@in_every_field(EVERY_PIECE)
@example(field="gpu_model", value=HUGE)
@example(field="node notes", value="[/] [bold red]x\u202eevil")
def test_cli_shows_hostile_ledger_fields(template: Path, field: str, value: str) -> None:
    with hostile_ledger(template, field, value) as path:
        for argv in (
            ["node", "list", "--all"],
            ["node", "show", "n1"],
            ["provider", "list"],
            ["lease", "list"],
            ["resource", "list"],
            ["log"],
            ["node", "list", "--json"],
            ["log", "--json"],
        ):
            code, shown = run_cli(*argv, "--ledger", str(path))
            assert code in (0, 2), shown  # shown, or refused with a message: never a crash
            assert_safe(shown)


def test_cli_shows_markup_and_bidi_literally(template: Path) -> None:
    value = "[/] [bold red]x\u202eevil\x9b2J"
    with hostile_ledger(template, "node notes", value) as path:
        # A stored value the ledger now refuses makes the node's problem, shown visibly.
        code, shown = run_cli("node", "show", "n1", "--ledger", str(path))
        assert_safe(shown)
        assert code == 0 and "[/] [bold red]x" in shown and "u202eevil" in shown
        code, shown = run_cli("node", "show", "n1", "--json", "--ledger", str(path))
        assert code == 0 and "[/] [bold red]x" in json.loads(shown)["problem"]


@settings(max_examples=30, deadline=None)
@given(value=hostile)
@example(value="-:")  # found by 300 random examples: argparse took it for an option
def test_input_errors_show_the_value_with_controls_visible(template: Path, value: str) -> None:
    # After `--`: a value starting with '-' ('-:') is a name to check, not an option that
    # argparse would take it for ("the following arguments are required: name").
    code, shown = run_cli("node", "show", "--ledger", str(template), "--", value)
    assert code == 2
    assert_safe(shown)
    assert visible(value, 200)[:40] in shown


def test_an_escape_in_an_error_is_shown_as_the_escape_symbol(template: Path) -> None:
    code, shown = run_cli("node", "show", "\x1b]0;title\x07", "--ledger", str(template))
    assert code == 2 and "(got '␛]0;title␇')" in shown


def test_unrecognized_arguments_are_shown_not_obeyed() -> None:
    code, shown = run_cli("node", "list", "\x1b[2J\x9b")
    assert code == 2 and "␛[2J" in shown
    assert_safe(shown)


# -- a hostile node: GPU names, process names, stderr ------------------------------------


class Hostile:
    """What the node says: its GPU name, its process names, its stderr, and whether
    nvidia-smi fails (then stderr is all there is to show)."""

    def __init__(self, gpu: str, proc: str, stderr: str, fail: bool) -> None:
        self.gpu, self.proc, self.stderr, self.fail = gpu, proc, stderr, fail


SIM = SimNode("h", "A100", 2, seed=1)
SIM_GPU = "NVIDIA A100-SXM4-80GB"


def hostile_answer(h: Hostile, cmd: str) -> tuple[str, str, int]:
    out, err, status = sim_answer(SIM, cmd, datetime.now(UTC))
    # The owner query keeps nvidia-smi's output in a variable (leases.telemetry.owners);
    # the GPU query with the owner query after it runs in a subshell (gpuread.with_apps).
    if not cmd.startswith(("nvidia-smi", "(a=$(nvidia-smi", "(nvidia-smi")):
        return out, err, status
    if h.fail:
        return "", h.stderr, 9
    # A process names itself: its command line, as the node's shell reads /proc (NULs and
    # line breaks as spaces, CR as "?"), is what carries the name (nvidia-smi is asked none).
    said = h.proc.translate(str.maketrans("\0\n\r", "  ?"))
    out = re.sub(r"(?m)^(@p [0-9]+ [0-9:-]+ ).*$", lambda m: m[1] + said, out)
    return out.replace(SIM_GPU, h.gpu), h.stderr, status


def hostile_handler(h: Hostile):  # type: ignore[no-untyped-def]
    async def handle(process: asyncssh.SSHServerProcess[str], node: FakeNode) -> None:
        if process.command in (None, "sh"):  # a shell: each command as sh reads it
            async for shell_command in shell_commands(process):
                shell_command.reply(*hostile_answer(h, shell_command.text))
            return
        command = process.command or ""
        # An exec's command comes handed to sh (leases.ssh.posixsh): answer what sh runs.
        out, err, status = hostile_answer(h, unwrap_sh(command) or command)
        process.stdout.write(out)
        process.stderr.write(err)
        process.exit(status)

    return handle


def fleet_ledger(folder: Path, port: int, host_key: asyncssh.SSHKey) -> Path:
    """A ledger with one node at 127.0.0.1:port, its key trusted in zuka's store."""
    path = folder / "ledger.db"
    key_path = folder / "id_ed25519"
    KEYS.client_key.write_private_key(key_path)
    key_path.chmod(0o600)
    (folder / "known_hosts").write_text(known_hosts_line("127.0.0.1", port, host_key))
    with Ledger.open(path) as ledger:
        ledger.add_node(records.node_from({
            "name": "h1", "ssh_host": "127.0.0.1", "ssh_port": port, "ssh_user": "root",
            "ssh_key_path": str(key_path), "gpu_model": "A100", "gpu_count": 2,
        }))  # fmt: skip
    return path


async def _poll_hostile_node(h: Hostile) -> tuple[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        async with FakeNode(KEYS, handler=hostile_handler(h)) as node:
            assert node.host_key is not None
            path = fleet_ledger(Path(tmp), node.port, node.host_key)
            args = ("poll", "--once", "--ledger", str(path))
            # Exit 1 when no node answered (a failing nvidia-smi, or output past the
            # bounds, which makes the node garbage), else 0.
            code, table = await asyncio.to_thread(run_cli, *args)
            assert code in (0, 1), table
            expected = code
            code, as_json = await asyncio.to_thread(run_cli, *args, "--json")
            assert code == expected, as_json
            healthy = json.loads(as_json)[0]["health"] == "ok"
            assert code == (0 if healthy else 1), as_json
    return table, as_json


names = st.one_of(hostile, st.sampled_from(PIECES))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gpu=names, proc=names, stderr=names, fail=st.booleans())
@example(gpu=EVERY_PIECE, proc=EVERY_PIECE, stderr=EVERY_PIECE, fail=False)
@example(gpu=EVERY_PIECE, proc=EVERY_PIECE, stderr=EVERY_PIECE, fail=True)
@example(gpu=HUGE, proc=HUGE, stderr=HUGE, fail=False)
@example(gpu="x", proc="y", stderr="\x1b]0;title\x07NVIDIA-SMI has failed\x1b[2J", fail=True)
def test_poll_shows_a_hostile_node(gpu: str, proc: str, stderr: str, fail: bool) -> None:
    table, as_json = asyncio.run(_poll_hostile_node(Hostile(gpu, proc, stderr, fail)))
    assert_safe(table)
    assert_safe(as_json)
    [status] = json.loads(as_json)
    if status["health"] == "ok":  # read as given ("[...]" whole is nvidia-smi's unknown)
        assert {g["name"] for g in status["gpus"]} <= {gpu.strip(), ""}


def test_poll_json_carries_a_hostile_name_exactly() -> None:
    gpu, proc = "GPU\x1b]0;t\x07 [bold]x\x9b\u202e", "py\x1b[2J [/]"
    table, as_json = asyncio.run(_poll_hostile_node(Hostile(gpu, proc, "", fail=False)))
    [status] = json.loads(as_json)
    assert status["health"] == "ok" and "  ok  " in table
    assert {g["name"] for g in status["gpus"]} == {gpu}
    assert {p["cmdline"] for p in status["processes"]} == {proc}
    assert "\\u001b]0;t\\u0007 [bold]x\\u009b\\u202e" in as_json  # escaped, not raw


# -- an SSH peer: DISCONNECT messages and banners -----------------------------------------


class Disconnecting(asyncssh.SSHServer):
    """Sends a banner and DISCONNECT with the given reason when the client asks to log in,
    or lets it in and disconnects when it opens a session (a command)."""

    def __init__(self, reason: str, at_login: bool) -> None:
        self.reason, self.at_login = reason, at_login
        self.conn: asyncssh.SSHServerConnection | None = None

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self.conn = conn

    def begin_auth(self, username: str) -> bool:
        assert self.conn is not None
        self.conn.send_auth_banner(self.reason + "\n")
        if self.at_login:
            self.conn.disconnect(asyncssh.DISC_NO_MORE_AUTH_METHODS_AVAILABLE, self.reason)
        return self.at_login  # after the login is refused; else no authentication needed

    def session_requested(self) -> bool:
        assert self.conn is not None
        self.conn.disconnect(asyncssh.DISC_BY_APPLICATION, self.reason)
        return False


async def _talk_to_disconnecting_peer(reason: str, at_login: bool) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        server = await asyncssh.create_server(
            lambda: Disconnecting(reason, at_login), "127.0.0.1", 0,
            server_host_keys=[KEYS.host_key],
        )  # fmt: skip
        try:
            port = server.sockets[0].getsockname()[1]
            path = fleet_ledger(Path(tmp), port, KEYS.host_key)
            shown = []
            for argv in (("poll", "--once"), ("node", "trust", "h1", "--fingerprint", "SHA256:x")):
                code, text = await asyncio.to_thread(run_cli, *argv, "--ledger", str(path))
                assert code in (0, 1, 2), text
                shown.append(text)
            return shown
        finally:
            server.close()
            await server.wait_closed()


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reason=hostile, at_login=st.booleans())
@example(reason=EVERY_PIECE, at_login=True)
@example(reason=EVERY_PIECE, at_login=False)
def test_disconnect_messages_and_banners_are_shown_not_obeyed(reason: str, at_login: bool) -> None:
    for shown in asyncio.run(_talk_to_disconnecting_peer(reason, at_login)):
        assert_safe(shown)


def test_a_disconnect_message_is_shown_with_its_escapes_visible() -> None:
    reason = "\x1b]0;title\x07 [/] bye"
    poll, trust = asyncio.run(_talk_to_disconnecting_peer(reason, at_login=True))
    assert "authentication failed: ␛]0;title␇ [/] bye" in poll
    assert "zuka: h1: node root@127.0.0.1:" in trust
    assert "authentication failed: ␛]0;title␇ [/] bye" in trust


# -- the dashboard ----------------------------------------------------------------------


def rendered(app: ZukaApp) -> str:
    """Every character the dashboard would send to the terminal as text (Textual's own
    escape sequences for colours and cursor moves are controls, not text)."""
    update = app.screen._compositor.render_full_update()
    return "\n".join(
        "".join(seg.text for strip in line for seg in strip if not seg.control)
        for line in update.strips
    )


def assert_screen_safe(app: ZukaApp) -> None:
    shown = rendered(app)
    assert_safe(shown)
    for table in app.query(DataTable):
        for row in range(table.row_count):
            for cell in table.get_row_at(row):
                # Never a str, which DataTable would parse as markup.
                assert isinstance(cell, Text | Cell)
                assert_safe(cell.plain)


async def _dashboard_on(path: Path, ready: Callable[[ZukaApp], bool], poll: bool) -> str:
    app = ZukaApp(path, poll=poll, refresh_s=0.1, interval_s=0.2)
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await wait_until(lambda: ready(app), what="the dashboard to show what it read")
        await pilot.pause()
        assert_screen_safe(app)
        await pilot.press("down", "up")  # the detail pane for the first node
        await pilot.press("r")  # reload: a refresh and a notification
        await pilot.pause()
        app.refresh_view()
        await pilot.pause()
        assert app.is_running
        assert_screen_safe(app)
        screen = rendered(app)
        await pilot.press("q")
    return screen


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(field=st.sampled_from(sorted(FIELDS)), value=hostile)
@in_every_field(EVERY_PIECE)
@example(field="gpu_model", value="[/]")
@example(field="node notes", value="\x1b]0;title\x07")
def test_dashboard_shows_hostile_ledger_fields(template: Path, field: str, value: str) -> None:
    with hostile_ledger(template, field, value) as path:
        asyncio.run(_dashboard_on(path, _drawn, poll=False))


def test_a_gpu_model_of_closing_markup_starts_the_dashboard(template: Path) -> None:
    """`[/]` used to stop the dashboard at startup (a Rich MarkupError)."""
    with hostile_ledger(template, "gpu_model", "H100 [/] [bold red]x") as path:
        screen = asyncio.run(_dashboard_on(path, _drawn, poll=False))
    assert "H100 [/] [bold red]x" in screen


def test_an_unreadable_ledger_row_is_a_message_not_a_crash(template: Path) -> None:
    with hostile_ledger(template, "node notes", "\x1b]0;title\x07") as path:
        screen = asyncio.run(_dashboard_on(path, _drawn, poll=False))
    # The node is listed as refused, with its problem; nothing crashed.
    assert "refused" in screen


def _drawn(app: ZukaApp) -> bool:
    """The first refresh has read the ledger (it reads off the UI loop)."""
    return app.data is not None


def _read(app: ZukaApp) -> bool:
    return bool(app._statuses) and all(
        s.health.value != "connecting" for s in app._statuses.values()
    )


async def _dashboard_on_hostile_node(h: Hostile) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        async with FakeNode(KEYS, handler=hostile_handler(h)) as node:
            assert node.host_key is not None
            path = fleet_ledger(Path(tmp), node.port, node.host_key)
            return await _dashboard_on(path, _read, poll=True)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gpu=names, proc=names, stderr=names, fail=st.booleans())
@example(gpu=EVERY_PIECE, proc=EVERY_PIECE, stderr=EVERY_PIECE, fail=False)
@example(gpu=EVERY_PIECE, proc=EVERY_PIECE, stderr=EVERY_PIECE, fail=True)
@example(gpu="[/]", proc="[bold red]", stderr="", fail=False)
@example(gpu=HUGE, proc="p", stderr=HUGE, fail=True)
def test_dashboard_shows_a_hostile_node(gpu: str, proc: str, stderr: str, fail: bool) -> None:
    asyncio.run(_dashboard_on_hostile_node(Hostile(gpu, proc, stderr, fail)))


def test_dashboard_shows_an_escape_laden_gpu_name_as_symbols() -> None:
    h = Hostile("\x1b]0;title\x07GPU\x1b[2J", "p", "", fail=False)
    screen = asyncio.run(_dashboard_on_hostile_node(h))
    assert "␛]0;title␇GPU␛[2J" in screen


async def _trust_modal(name: str, host: str) -> str:
    app = ZukaApp(None, poll=False)
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        offered = OfferedHostKey(host, 22, KEYS.host_key, HostKeyStatus.UNKNOWN)
        app.push_screen(TrustScreen(name, offered))
        await pilot.pause()
        assert isinstance(app.screen, TrustScreen)
        screen = rendered(app)
        assert_safe(screen)
        assert offered.fingerprint in screen
        await pilot.press("n")
        await pilot.pause()
        assert app.is_running and not isinstance(app.screen, TrustScreen)
    return screen


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=hostile, host=hostile)
@example(name=EVERY_PIECE, host=EVERY_PIECE)
def test_trust_modal_shows_hostile_names(name: str, host: str) -> None:
    asyncio.run(_trust_modal(name, host))
