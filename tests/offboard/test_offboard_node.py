"""The SSH driver against a node that races it, mounts things inside declared paths,
keeps keys in authorized_keys2, has its home on network storage, or loses its client
mid-shred (issue 16's node-side findings).

The node is tests/support/shellnode.py's ShellNode: each command runs in a real sh on this
machine, on real files, as root (the login user of most rental platforms). Racing
processes are real processes running as `nobody`, the other user who owns a directory
under the declared path. Overwriting itself is not observable (see test_offboard_remote):
the tests check what was and was not touched, and what the step said.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncssh
import pytest

from leases.core import secrets
from leases.core.models import Resource, ResourceKind
from leases.offboard import nodescripts, presets
from leases.offboard.remote import RemoteDriver, fresh_login
from leases.offboard.remoteplan import plan_remote
from leases.offboard.report import markdown
from leases.offboard.steps import Phase, Step
from leases.ssh.session import NodeSession
from tests.offboard.test_offboard_e2e import node_jobs
from tests.support.shellnode import ShellNode, shell_handler
from tests.support.sshfixtures import TestKeys, node_options

_NOBODY = 65534
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (chown, mount)")


class Node:
    def __init__(self, node: ShellNode, driver: RemoteDriver, base: Path, home: Path) -> None:
        self.node, self.driver, self.base, self.home = node, driver, base, home
        self.root = base / "scratch"
        self.outside = base / "outside"


@pytest.fixture
def base() -> Iterator[Path]:
    """A folder `nobody` may search (pytest's tmp_path sits in root's 0700 folder)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp).chmod(0o755)
        yield Path(tmp)


@pytest.fixture
async def node(keys: TestKeys, base: Path) -> AsyncIterator[Node]:
    home = base / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "authorized_keys").write_text(keys.client_key.export_public_key().decode())
    key_path = base / "lab_key"
    keys.client_key.write_private_key(key_path)
    key_path.chmod(0o600)
    keys.client_key.write_public_key(base / "lab_key.pub")
    (base / "scratch").mkdir()
    (base / "outside").mkdir()
    (base / "bin").mkdir()
    async with ShellNode(keys, handler=shell_handler, home=home, bin=base / "bin") as shell:
        options = node_options(keys, base, [shell], client_keys=[])
        target = shell.as_node("gpu1", key_path=str(key_path))
        session = NodeSession(target, options)
        driver = RemoteDriver(
            session,
            roots=(str(base / "scratch"),),
            login=fresh_login(target, options),
            shred_timeout_s=120,
        )
        try:
            yield Node(shell, driver, base, home)
        finally:
            await session.close()


def shred_step(path: Path, inside: tuple[Path, ...] = ()) -> Step:
    words = (("inside", "\n".join(map(str, inside))), ("path", str(path)))
    return Step(f"shred:{path}", Phase.SHRED, "ssh", "shred", str(path), True, "", words)


def clear_step(rel: str) -> Step:
    return Step(
        f"clear:~/{rel}", Phase.CLEAR, "ssh", "clear", f"~/{rel}", True, "", (("home", rel),)
    )


def revoke_step(key_path: Path) -> Step:
    words = (("fingerprint", ""), ("key_path", str(key_path)), ("keys_file", presets.KEYS_FILE))
    return Step("revoke-key:k", Phase.REVOKE, "ssh", "revoke-key", "k", True, "", words)


# -- a racing process ---------------------------------------------------------------

_RACER = """
import os, sys, time
mode, where, outside, flag = sys.argv[1:5]
swaps = 0
print("racing", flush=True)
while os.path.exists(flag):
    if mode == "files":  # each name: a link to outside, then a regular file again
        for name in sorted(os.listdir(where)):
            if name.startswith("."):
                continue
            try:
                os.symlink(outside, os.path.join(where, ".link"))
                os.rename(os.path.join(where, ".link"), os.path.join(where, name))
                with open(os.path.join(where, ".file"), "w") as f:
                    f.write("theirs")
                os.rename(os.path.join(where, ".file"), os.path.join(where, name))
                swaps += 1
            except OSError:
                pass
    else:  # the directory `where`: a link to `outside`, then itself again
        try:
            os.rename(where, where + ".real")
            os.symlink(outside, where)
            os.rename(where + ".real", where + ".back")
            os.unlink(where)
            os.rename(where + ".back", where)
            swaps += 1
        except OSError:
            pass
print(swaps)
"""


@contextlib.contextmanager
def racing(mode: str, where: Path, outside: Path) -> Iterator[list[int]]:
    """A process running as nobody that keeps swapping a link over every file in where
    (mode "files") or where itself for a link to outside (mode "dir"), until the block
    ends; yields a list that then holds how many swaps it made."""
    flag = outside.parent / f"racing-{mode}"  # outside every declared path
    flag.touch()
    drop = ["setpriv", f"--reuid={_NOBODY}", f"--regid={_NOBODY}", "--clear-groups"]
    proc = subprocess.Popen(
        [*drop, sys.executable, "-c", _RACER, mode, str(where), str(outside), str(flag)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "racing\n"
    swaps: list[int] = []
    try:
        yield swaps
    finally:
        flag.unlink()
        out, _ = proc.communicate(timeout=30)
        swaps.append(int(out.strip() or 0))


def _nobody_owns(*paths: Path) -> None:
    for p in paths:
        os.chown(p, _NOBODY, _NOBODY)


@needs_root
async def test_a_link_renamed_over_listed_files_by_a_racing_user_is_never_followed(
    node: Node,
) -> None:
    """Another user owns a directory under the declared path and keeps renaming a link to
    a file outside every root over each file there while the shred runs: the file outside
    is never written, and a step that skipped anything does not say done."""
    lab = node.root / "lab"
    (lab / "run").mkdir(parents=True)
    for i in range(300):
        (lab / "run" / f"f{i:03}.bin").write_bytes(b"ours" * 256)
    _nobody_owns(lab, lab / "run", *(lab / "run").iterdir())
    secret = node.outside / "secret"
    secret.write_text("not ours, not theirs")
    for _ in range(3):
        with racing("files", lab / "run", secret) as swaps:
            outcome = await node.driver.run(shred_step(lab))
        assert swaps[0] > 0
        assert secret.read_text() == "not ours, not theirs"
        if "changed since listed" in outcome.output:
            assert not outcome.done and "changed while it was shredded" in outcome.detail
        if not outcome.done:
            break


@needs_root
async def test_a_parent_directory_swapped_for_a_link_does_not_redirect_the_shred(
    node: Node,
) -> None:
    """A directory above the declared path belongs to another user, who keeps swapping the
    directory in it for a link to a directory outside (holding a `run` of its own):
    nothing outside is touched."""
    lab = node.root / "lab"
    run = lab / "sub" / "run"
    run.mkdir(parents=True)
    (run / "a.bin").write_bytes(b"ours")
    _nobody_owns(lab, lab / "sub")
    theirs = node.outside / "theirs"
    (theirs / "run").mkdir(parents=True)
    keep = [theirs / "run" / f"keep{i}.bin" for i in range(50)]
    for k in keep:
        k.write_text("not ours")
    for _ in range(20):
        with racing("dir", lab / "sub", theirs):
            for _ in range(5):
                await node.driver.run(shred_step(run))
        assert all(k.exists() and k.read_text() == "not ours" for k in keep)


@needs_root
def test_without_python3_the_shred_refuses_what_another_user_may_rename(base: Path) -> None:
    """A node without python3 cannot shred without following: the fallback refuses a path
    where another user owns or may write a directory, naming it, and touches nothing."""
    root = base / "scratch"
    (root / "lab" / "run").mkdir(parents=True)
    (root / "lab" / "run" / "a.bin").write_text("ours")
    _nobody_owns(root / "lab" / "run")
    script = nodescripts.fallback(nodescripts.shred_script(str(root / "lab"), (str(root),)))
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 11 and "writable by others: ./run" in done.stdout, done.stdout
    assert (root / "lab" / "run" / "a.bin").read_text() == "ours"
    os.chown(root / "lab" / "run", 0, 0)
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (root / "lab" / "run" / "a.bin").exists()


# -- mounts inside a declared path --------------------------------------------------------


@contextlib.contextmanager
def tmpfs(at: Path) -> Iterator[None]:
    at.mkdir(parents=True, exist_ok=True)
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "zukatest", str(at)])
    if made.returncode != 0:
        pytest.skip("mounting a tmpfs is not permitted here")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(at)], check=True)


@needs_root
async def test_a_mount_inside_a_declared_path_is_named_and_never_called_done(node: Node) -> None:
    ckpt = node.root / "lab"
    (ckpt / "a.bin").parent.mkdir(parents=True)
    (ckpt / "a.bin").write_bytes(b"ours")
    nvme = ckpt / "local_nvme"
    with tmpfs(nvme):
        (nvme / "w.pt").write_bytes(b"weights")
        step = shred_step(ckpt)
        ran = await node.driver.run(step)
        assert not ran.done and f"mounted inside: {nvme}" in ran.output, ran
        assert "declare each mount as a scratch_path of its own" in ran.detail
        assert ran.facts["fstype"]  # the file system is read again on every shred run
        assert (nvme / "w.pt").exists()
        checked = await node.driver.verify(step)
        assert not checked.done and str(nvme) in checked.output
        # Declared as a path of its own: the outer step leaves it to that step.
        outer, inner = shred_step(ckpt, inside=(nvme,)), shred_step(nvme)
        for s in (outer, inner):
            assert (await node.driver.run(s)).done, s.key
            assert (await node.driver.verify(s)).done, s.key
        assert not (nvme / "w.pt").exists() and not (ckpt / "a.bin").exists()
        inner_facts = (await node.driver.run(inner)).facts
        assert inner_facts["fstype"] == "tmpfs" and "memory" in inner_facts["caveats"]


# -- a killed or cancelled run -------------------------------------------------------------

_HANGING_SHRED = '#!/bin/sh\n: > "{flag}"\nexec sleep 600\n'


async def test_a_cancelled_shred_stops_on_the_node_and_the_resume_keeps_its_output(
    node: Node,
) -> None:
    """The client goes mid-shred (an asyncio cancel closes the channel, as Ctrl-C or a
    dropped connection does): the node's job is killed, nothing of it stays at work, and
    the next run says what the cut-off run printed before it acts."""
    ckpt = node.root / "ckpt"
    ckpt.mkdir()
    (ckpt / "a.bin").write_bytes(b"ours")
    flag = node.base / "shred-started"
    (node.base / "bin" / "shred").write_text(_HANGING_SHRED.format(flag=flag))
    (node.base / "bin" / "shred").chmod(0o755)
    step = shred_step(ckpt)
    task = asyncio.ensure_future(node.driver.run(step))
    deadline = time.monotonic() + 30
    while not flag.exists():
        assert time.monotonic() < deadline and not task.done(), task
        await asyncio.sleep(0.02)
    assert node_jobs(node.base)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    deadline = time.monotonic() + 15
    while node_jobs(node.base):
        assert time.monotonic() < deadline, node_jobs(node.base)
        await asyncio.sleep(0.05)
    (node.base / "bin" / "shred").unlink()  # the node's real shred from here on
    again = await node.driver.run(step)
    assert again.done, again
    assert "an earlier run of this step was cut off" in again.output
    assert not (ckpt / "a.bin").exists()
    # The resumed run's own job is done; its last processes may still be exiting.
    deadline = time.monotonic() + 15
    while node_jobs(node.base):
        assert time.monotonic() < deadline, node_jobs(node.base)
        await asyncio.sleep(0.05)


# -- keys in every file sshd reads ----------------------------------------------------------


async def test_the_key_is_revoked_from_authorized_keys2_too(node: Node, keys: TestKeys) -> None:
    ours = keys.client_key.export_public_key().decode()
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode()
    (node.home / ".ssh" / "authorized_keys2").write_text(other + ours)
    step = revoke_step(node.base / "lab_key")
    seen = await node.driver.inspect(step)
    assert seen.exists and "authorized_keys2" in seen.detail, seen
    assert (await node.driver.run(step)).done
    assert (await node.driver.verify(step)).done
    blob = ours.split()[1]
    for name in ("authorized_keys", "authorized_keys2"):
        assert blob not in (node.home / ".ssh" / name).read_text()
    assert (node.home / ".ssh" / "authorized_keys2").read_text() == other
    prove = Step("prove:k", Phase.PROVE, "ssh", "prove-refused", "k", False, "", step.params)
    assert (await node.driver.run(prove)).done  # the node refuses the key in both files


def test_a_verified_revoke_of_an_ssh_key_resource_leaves_no_secret_in_its_note() -> None:
    """evidence marks the resource verified with a note naming the step's key; the ledger
    refuses a random-looking word there (the full fingerprint): every rerun exited 2."""
    from tests.offboard.test_offboard_remote import facts

    fp = asyncssh.generate_private_key("ssh-ed25519").get_fingerprint("sha256")
    key = Resource(lease_id=1, kind=ResourceKind.SSH_KEY, native_id=fp, id=9)
    revoke = next(s for s in plan_remote(facts(key)) if s.action == "revoke-key")
    secrets.refuse_secret("notes", f"offboarding plan 1, step {revoke.key}: verified gone")
    assert revoke.target == fp and revoke.param("fingerprint") == fp


# -- a home on shared storage ---------------------------------------------------------------


async def test_a_home_on_network_storage_is_not_cleared_and_asks_first(node: Node) -> None:
    """No NFS server here: a stand-in findmnt (first on the node's PATH) says what a node
    with an NFS home says; everything else is the node's own."""
    (node.base / "bin" / "findmnt").write_text("#!/bin/sh\necho 'nfs4 filer:/export/home /home'\n")
    (node.base / "bin" / "findmnt").chmod(0o755)
    creds = node.home / ".aws" / "credentials"
    creds.parent.mkdir()
    creds.write_text("[default]\n")
    out = await node.driver.run(clear_step(".aws/credentials"))
    assert not out.done and out.needs_consent, out
    assert "nfs4" in out.detail and "not cleared" in out.detail
    assert creds.read_text() == "[default]\n"
    (node.base / "bin" / "findmnt").unlink()
    assert (await node.driver.run(clear_step(".aws/credentials"))).done
    assert not creds.exists()


# -- inspect -----------------------------------------------------------------------------


async def test_inspect_says_what_is_there_and_a_mistyped_path_is_not_found(node: Node) -> None:
    ckpt = node.root / "ckpt"
    (ckpt / "d").mkdir(parents=True)
    (ckpt / "a.bin").write_bytes(b"x" * 100)
    (ckpt / "d" / "b.bin").write_bytes(b"y" * 23)
    os.utime(ckpt / "a.bin", (1796174114, 1796174114))
    os.utime(ckpt / "d" / "b.bin", (1700000000, 1700000000))
    seen = await node.driver.inspect(shred_step(ckpt))
    assert seen.exists is True, seen
    assert seen.facts["files"] == "2" and seen.facts["bytes"] == "123"
    assert seen.facts["fstype"] and seen.facts["path"] == str(ckpt)
    assert seen.facts["newest"] == "2026-12-02T01:15:14Z"  # ISO 8601 UTC, as buckets say
    typo = await node.driver.inspect(shred_step(node.root / "ckpy"))
    assert typo.exists is False and "not found" in typo.detail
    (node.home / ".bash_history").write_text("ls\n")
    assert (await node.driver.inspect(clear_step(".bash_history"))).exists is True
    assert (await node.driver.inspect(clear_step(".zsh_history"))).exists is False
    assert list(ckpt.rglob("*.bin"))  # inspect changed nothing


# -- the report shows node text inert ---------------------------------------------------------


def test_node_text_in_the_markdown_report_is_inert() -> None:
    hostile = "/mnt/x|<img src=x onerror=alert(1)> [click](http://e) `x` *b*\nline"
    report = {
        "node": "n1",
        "plan": 1,
        "hash": "h",
        "created_at": "2026-01-01",
        "finished_at": None,
        "finished": False,
        "outcome": "o",
        "not_deleted": [],
        "skipped": [],
        "audit_chain": {"ok": True, "entries": 1, "head_id": 1, "head_hash": "x"},
        "steps": [
            {
                "key": "facts:/mnt/x",
                "phase": "facts",
                "command": "findmnt",
                "destructive": False,
                "state": "verified",
                "at": None,
                "detail": hostile,
            }
        ],
        "evidence": [
            {
                "entry": 2,
                "event": "run",
                "step": "facts:/mnt/x",
                "at": "t",
                "actor": "root",
                "command": None,
                "state": "verified",
                "detail": hostile,
                "facts": {"mounts_inside": hostile},
                "problem": None,
                "output": None,
                "done": True,
                "plan": None,
                "hash": None,
            }
        ],
        "caveat": "c",
    }
    md = markdown(report)
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark").enable("table").render(md)
    assert "<img" not in html and "<a " not in html and "<code>x" not in html
    assert "<em>" not in html and "http://e" not in md
    row = next(line for line in md.splitlines() if line.startswith("| 1 |"))
    assert row.count("|") - row.count("\\|") == 9  # still exactly eight cells
    assert "onerror" in html  # shown as text, not dropped


def _nest(top: Path, depth: int) -> None:
    """top/d/d/.../d/secret, depth directories deep (made relative to an open directory:
    the whole path is longer than PATH_MAX)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            sub = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = sub
        made = os.open("secret", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd)
        os.write(made, b"ours")
        os.close(made)
    finally:
        os.close(fd)


async def test_a_directory_nested_deeper_than_the_walker_recurses_is_said_in_words(
    node: Node,
) -> None:
    """A tree 600 directories deep: the walker on the node ran out of Python's recursion
    and ended on a RecursionError traceback (exit 1) in every mode. It is now an
    unreadable part, said in words: the shred not done, not verified, inspect partial."""
    deep = node.root / "deep"
    deep.mkdir()
    _nest(deep, 600)
    step = shred_step(deep)
    looked = await node.driver.inspect(step)
    assert looked.exists is True and looked.facts.get("partial") == "yes", looked
    assert "Traceback" not in looked.output
    ran = await node.driver.run(step)
    assert not ran.done and "Traceback" not in ran.output, ran
    assert "nested too deep" in ran.output
    checked = await node.driver.verify(step)
    assert not checked.done and "Traceback" not in checked.output, checked


@needs_root
async def test_a_name_on_the_node_cannot_change_what_the_shred_says(node: Node) -> None:
    """Found by the attacker review: a FIFO named 'x<CR>absent' in a declared path made the
    shred that ran say "already gone" (the node's output was split on every line break
    Python knows, \\r included, and one line read 'absent'). Only '\\n' ends a line."""
    ckpt = node.root / "ckpt"
    ckpt.mkdir()
    (ckpt / "a.bin").write_bytes(b"ours")
    os.mkfifo(ckpt / "x\rabsent")
    ran = await node.driver.run(shred_step(ckpt))
    assert ran.done, ran
    assert ran.detail.startswith("shredded file by file"), ran.detail
    assert "1 symbolic link(s) or special file(s) left" in ran.detail
    assert not (ckpt / "a.bin").exists()


@needs_root
async def test_a_private_key_left_below_a_scratch_path_is_not_verified_gone(node: Node) -> None:
    """Found by the attacker review: /scratch/ckpt/sub/.ssh/id_ed25519 (a .ssh directory
    that is no login's: no step handles it) was kept by the shred, and the read-back said
    'no regular file left': the step was verified while a private key stayed on the node.
    Only the login's own ~/.ssh is spared now: any other .ssh is the lease's data."""
    ckpt = node.root / "ckpt"
    key = ckpt / "sub" / ".ssh" / "id_ed25519"
    key.parent.mkdir(parents=True)
    key.write_bytes(b"PRIVATE KEY")
    (ckpt / "a.bin").write_bytes(b"ours")
    ran = await node.driver.run(shred_step(ckpt))
    assert ran.done, ran
    assert not key.exists() and "kept" not in ran.detail, ran.detail
    assert (await node.driver.verify(shred_step(ckpt))).done
    # One put back after the shred is left, never verified gone.
    key.parent.mkdir(parents=True, exist_ok=True)
    key.write_bytes(b"PRIVATE KEY")
    checked = await node.driver.verify(shred_step(ckpt))
    assert not checked.done, checked
    assert f"left: {key}" in checked.output


# -- zuka's own run directory on the node --------------------------------------------------


async def test_the_revoke_step_removes_zukas_run_directory_and_a_rerun_makes_it_again(
    node: Node,
) -> None:
    """~/.zuka-offboard (each job's pid, output and script) was left on the node: the
    revoke step, the last that can still log in, removes it before the key goes."""
    ckpt = node.root / "ckpt"
    ckpt.mkdir()
    (ckpt / "a.bin").write_bytes(b"ours")
    assert (await node.driver.run(shred_step(ckpt))).done
    run_dir = node.home / ".zuka-offboard"
    assert run_dir.is_dir()
    revoke = revoke_step(node.base / "lab_key")
    revoked = await node.driver.run(revoke)
    assert revoked.done, revoked
    assert not run_dir.exists(), list(run_dir.iterdir())
    assert "removed zuka's run directory" in revoked.output
    # A rerun (the session is still open) makes it again, and a revoke with the key
    # already gone still removes it.
    (ckpt / "b.bin").write_bytes(b"ours")
    assert (await node.driver.run(shred_step(ckpt))).done
    assert run_dir.is_dir() and not (ckpt / "b.bin").exists()
    again = await node.driver.run(revoke)
    assert again.done and "in none of" in again.detail, again
    assert not run_dir.exists()


async def test_a_run_directory_that_is_a_link_is_not_followed_by_the_revoke(node: Node) -> None:
    elsewhere = node.outside / "kept"
    elsewhere.mkdir()
    (elsewhere / "x").write_text("not zuka's")
    (node.home / ".zuka-offboard").symlink_to(elsewhere)
    assert (await node.driver.run(revoke_step(node.base / "lab_key"))).done
    assert (elsewhere / "x").read_text() == "not zuka's"
