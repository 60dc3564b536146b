"""Gaps an attacker found in the sshd check (issue 21 review): what zuka could not read
must never come out "passed"."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from leases.accept.checks import ports, sshd
from leases.accept.engine import Settings, Sold, new_context
from leases.accept.parse import sshdconf
from leases.accept.parse.listen import Listener, Listening
from leases.core.acceptance import CheckResult, Level, Status
from leases.ssh.stream import CommandResult

MAIN_OK = "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM yes\n"


class FileRunner:
    """A node without sshd -T whose include script answers from `printed` (path -> the
    lines the script would print for it)."""

    def __init__(self, main: str, printed: dict[str, str], ss: str = "") -> None:
        self.main, self.printed, self.ss = main, printed, ss
        self.sent: list[str] = []

    async def run(self, cmd: str, timeout: float | None = None) -> CommandResult:
        self.sent.append(cmd)
        if cmd.endswith("sshd -T"):
            return CommandResult(1, "", "sshd: no hostkeys available -- exiting.\n")
        if cmd == "cat /etc/ssh/sshd_config":
            return CommandResult(0, self.main, "")
        m = re.match(r"for f in (.*?); do", cmd)
        if m:
            return CommandResult(
                0, "".join(self.printed.get(p, "") for p in m.group(1).split()), ""
            )
        return CommandResult(127, "", f"sh: 1: {cmd.split()[0]}: not found\n")


async def settings_of(runner: FileRunner) -> dict[str, CheckResult]:
    ctx = new_context(Sold("n"), runner, Level.QUICK)
    conf, keys, how = await sshd.read_settings(ctx.probe)
    assert conf is not None
    return {r.check: r for r in sshd.judge_settings(conf, keys, how)}


# -- 2: an Include file that exists but cannot be read -----------------------------------


async def test_unreadable_include_file_is_named_and_password_not_passed() -> None:
    glob = "/etc/ssh/sshd_config.d/*.conf"
    runner = FileRunner(
        f"Include {glob}\n{MAIN_OK}",
        {
            glob: "==> /etc/ssh/sshd_config.d/10-lab.conf <==\nX11Forwarding no\n\n"
            "==! /etc/ssh/sshd_config.d/50-cloud-init.conf <== unreadable\n"
        },
    )
    by = await settings_of(runner)
    assert by["sshd.password"].status is Status.WARNED
    assert "50-cloud-init.conf" in by["sshd.password"].words
    assert "could not be read" in by["sshd.password"].words
    assert by["sshd.kbdint"].status is Status.WARNED
    assert by["sshd.config-unread"].status is Status.WARNED


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory anyone may enter (pytest's tmp_path is root's alone)."""
    d = Path(tempfile.mkdtemp(prefix="zuka-include-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d)


def _as_user(script: str) -> str:
    """The script run by dash (the node's sh), as an unprivileged user where this runs as
    root (root reads a mode-000 file)."""
    shell = shutil.which("dash") or shutil.which("sh")
    assert shell is not None
    argv = [shell, "-c", script]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: cannot be refused a read")
        argv = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", *argv]
    return subprocess.run(argv, capture_output=True, text=True, check=False).stdout


def test_include_script_marks_unreadable_cut_and_skipped_files(open_dir: Path) -> None:
    """The script itself, as a user who cannot read a mode-000 file: the mark is printed
    for it (and for a cut, a symlinked file), the readable file's text comes through, an
    id_* key is never read."""
    d = open_dir / "x"
    d.mkdir()
    d.chmod(0o755)
    for name, text in (
        ("10-lab.conf", "X11Forwarding no\n"),
        ("50-cloud.conf", "PasswordAuthentication yes\n"),
        ("big.conf", "#" * 70_000 + "\n"),
        ("id_ed25519", "PRIVATE\n"),
    ):
        (d / name).write_text(text)
        (d / name).chmod(0o644)
    (d / "50-cloud.conf").chmod(0)
    (d / "link.conf").symlink_to(d / "10-lab.conf")
    script = sshd.include_script(["/etc/ssh/x/*.conf", "/etc/ssh/x/id_ed25519"])
    out = _as_user(script.replace("/etc/ssh/x/", f"{d}/"))
    files, marks = sshdconf.split_output(out.replace(f"{d}/", "/etc/ssh/x/"))
    assert files["/etc/ssh/x/10-lab.conf"] == "X11Forwarding no\n"
    assert marks == {
        "/etc/ssh/x/50-cloud.conf": "unreadable",
        "/etc/ssh/x/big.conf": "cut",
        "/etc/ssh/x/link.conf": "symlink",
    }
    assert len(files["/etc/ssh/x/big.conf"]) == 65_536  # what head -c let through
    assert "PRIVATE" not in out and "/etc/ssh/x/id_ed25519" not in files


# -- 3: nested too deep, asked for and never returned, cut ------------------------------


async def test_include_nested_deeper_than_the_rounds_is_a_problem() -> None:
    files = {
        "/etc/ssh/a.conf": "Include /etc/ssh/b.conf\n",
        "/etc/ssh/b.conf": "Include /etc/ssh/c.conf\n",
        "/etc/ssh/c.conf": "Include /etc/ssh/d.conf\n",
        "/etc/ssh/d.conf": "PasswordAuthentication yes\n",
    }
    runner = FileRunner(
        f"Include /etc/ssh/a.conf\n{MAIN_OK}",
        {p: f"==> {p} <==\n{t}\n" for p, t in files.items()},
    )
    by = await settings_of(runner)
    assert sshd.MAX_INCLUDE_ROUNDS == 3
    assert by["sshd.password"].status is Status.WARNED
    assert "/etc/ssh/d.conf" in by["sshd.config-unread"].words
    assert "nested" in by["sshd.config-unread"].words


async def test_literal_include_never_returned_is_a_problem() -> None:
    runner = FileRunner(f"Include /etc/ssh/lab.conf\n{MAIN_OK}", {})
    by = await settings_of(runner)
    assert by["sshd.password"].status is Status.WARNED
    assert "/etc/ssh/lab.conf" in by["sshd.config-unread"].words


async def test_literal_include_the_node_says_is_missing_passes() -> None:
    # sshd ignores an Include that matches no file; the script says so explicitly.
    runner = FileRunner(
        f"Include /etc/ssh/lab.conf\n{MAIN_OK}",
        {"/etc/ssh/lab.conf": "==! /etc/ssh/lab.conf <== missing\n"},
    )
    by = await settings_of(runner)
    assert by["sshd.password"].status is Status.PASSED
    assert "sshd.config-unread" not in by


async def test_cut_include_file_is_a_problem() -> None:
    runner = FileRunner(
        f"Include /etc/ssh/lab.conf\n{MAIN_OK}",
        {"/etc/ssh/lab.conf": "==> /etc/ssh/lab.conf <==\n#\n\n==! /etc/ssh/lab.conf <== cut\n"},
    )
    by = await settings_of(runner)
    assert by["sshd.password"].status is Status.WARNED
    assert "/etc/ssh/lab.conf" in by["sshd.password"].words


# -- 9: Include globs that climb out of /etc/ssh -----------------------------------------


@pytest.mark.parametrize(
    "pattern",
    [
        "/etc/ssh/.?/passwd",
        "/etc/ssh/.*/hostname",
        "/etc/ssh/?./x",
        "/etc/ssh/..?/x",
        "/etc/ssh/.?*/x",
        "/etc/ssh/.?/ssh/ssh_host_ed25519_key.pub",
        "/etc/ssh/a/..",
        "/etc/ssh/.*.conf",
    ],
)
def test_include_patterns_that_can_match_dot_dot_are_refused(pattern: str) -> None:
    assert not sshdconf.include_allowed(pattern)
    assert pattern not in sshd.include_script([pattern])


@pytest.mark.parametrize(
    "pattern",
    ["/etc/ssh/sshd_config.d/*.conf", "/etc/ssh/sshd_config.d/*", "/etc/ssh/lab.conf"],
)
def test_ordinary_include_patterns_stay_allowed(pattern: str) -> None:
    assert sshdconf.include_allowed(pattern)


def test_script_skips_dot_dot_paths_even_if_a_shell_expands_them(open_dir: Path) -> None:
    (open_dir / "ssh").mkdir()
    (open_dir / "ssh").chmod(0o755)
    (open_dir / "passwd").write_text("root:x:0:0\n")
    (open_dir / "passwd").chmod(0o644)
    # A word the allow-list would refuse, put in by hand: the script's own guard.
    script = sshd.include_script(["/etc/ssh/sshd_config.d/*.conf"]).replace(
        "/etc/ssh/sshd_config.d/*.conf", f"{open_dir}/ssh/.?/passwd"
    )
    out = _as_user(script)
    assert "root:x" not in out
    assert out == f"==! {open_dir}/ssh/../passwd <== skipped\n"


# -- 4: ss output zuka could not read ----------------------------------------------------


def test_ports_unread_and_nothing_read_is_not_checked() -> None:
    listening = Listening((), ("ss line 1: no address:port", "ss line 2 not read"))
    r = ports.judge_ports(listening, Settings(), ("listen",))
    assert r.status is Status.NOT_CHECKED
    assert "ss line 1" in r.words


def test_ports_partly_unread_warns() -> None:
    listening = Listening((Listener("0.0.0.0", 22, "sshd"),), ("ss line 2 not read",))
    r = ports.judge_ports(listening, Settings(), ("listen",))
    assert r.status is Status.WARNED
    assert "ss line 2 not read" in r.words


def test_no_sshd_listening_while_logged_in_over_ssh_warns() -> None:
    listening = Listening((Listener("0.0.0.0", 8080, "python3"),))
    r = ports.judge_ports(listening, Settings(), ("listen",), remote=True)
    assert r.status is Status.WARNED
    assert "sshd" in r.words
    local = ports.judge_ports(listening, Settings(), ("listen",), remote=False)
    assert local.status is Status.PASSED


async def test_ss_garbage_is_not_passed_end_to_end() -> None:
    runner_ss = _SsRunner("LISTEN  0  4096  *  :22  *:*\nLISTEN 0 128 ???\n")
    ctx = new_context(Sold("n"), runner_ss, Level.QUICK)
    by = {r.check: r.status for r in await ports.check_ports(ctx)}
    assert by["sshd.ports"] is Status.NOT_CHECKED
    assert by["sshd.services"] is Status.NOT_CHECKED


class _SsRunner:
    def __init__(self, ss: str, open_port: int = 0) -> None:
        self.ss, self.open_port = ss, open_port
        self.sent: list[str] = []

    async def run(self, cmd: str, timeout: float | None = None) -> CommandResult:
        self.sent.append(cmd)
        if cmd == "ss -ltnpH":
            return CommandResult(0, self.ss, "")
        if cmd.startswith("curl"):
            return CommandResult(0, "200" if f":{self.open_port}/" in cmd else "404", "")
        return CommandResult(127, "", "not found\n")


# -- 5: more open ports than zuka asks -------------------------------------------------


def _ss(port: int, proc: str) -> str:
    return f'LISTEN 0 128 0.0.0.0:{port} 0.0.0.0:* users:(("{proc}",pid=1,fd=3))\n'


async def test_likely_jupyter_ports_are_asked_first() -> None:
    ss = "".join(_ss(p, "redis") for p in range(7000, 7020)) + _ss(8888, "jupyter-lab")
    runner = _SsRunner(ss, open_port=8888)
    ctx = new_context(Sold("n"), runner, Level.QUICK)
    by = {r.check: r for r in await ports.check_ports(ctx)}
    assert by["sshd.services"].status is Status.FAILED
    assert "0.0.0.0:8888" in by["sshd.services"].words
    curls = [c for c in runner.sent if c.startswith("curl")]
    assert ":8888/" in curls[0]
    assert len(curls) == ports.MAX_PROBED_PORTS == 16


async def test_ports_not_asked_are_named_in_a_warning() -> None:
    ss = _ss(8888, "python3") + "".join(_ss(p, "redis") for p in range(7000, 7020))
    runner = _SsRunner(ss)
    ctx = new_context(Sold("n"), runner, Level.QUICK)
    by = {r.check: r for r in await ports.check_ports(ctx)}
    r = by["sshd.services"]
    assert r.status is Status.WARNED
    # 21 candidates, 16 asked (8888 first, then 7000..7014): 7015..7019 not asked.
    assert "not asked" in r.words
    for p in range(7015, 7020):
        assert str(p) in r.found
    assert "0.0.0.0:7014" not in r.found
