"""leases.offboard.remoteplan's plan_remote from ledger facts, and leases.offboard.remote's
RemoteDriver against in-process asyncssh nodes.

The "shell" node (tests/support/shellnode.py) answers each command by running it in a real `sh`
on this machine with HOME set to a folder of the test's own, and accepts exactly the
client keys listed in a real authorized_keys file there: the driver's steps act on real files under
tmp_path (the test says which must go and which must stay), and revoking the key really
stops the next login. Shred's overwrite itself is not observable here (the file is gone
or not); see the GNU shred manual for what it can promise.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import asyncssh
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leases.config.sections import Config, OffboardConfig
from leases.core.errors import InputError
from leases.core.models import (
    Node,
    NodeHealth,
    Provider,
    ProviderKind,
    Resource,
    ResourceKind,
    SshTarget,
)
from leases.core.textsafe import is_clean
from leases.offboard import presets
from leases.offboard.nodescripts import fallback, gone_script, shred_script
from leases.offboard.plan import Plan
from leases.offboard.remote import LoginAttempt, RemoteDriver, fresh_login, login_refused
from leases.offboard.remoteplan import plan_remote, scratch_roots
from leases.offboard.steps import Phase, PlanInput, Step
from leases.sim import Scenario, SimNode
from leases.ssh.errors import SshError
from leases.ssh.faults import HopFailed
from leases.ssh.session import NodeSession
from tests.support.shellnode import ShellNode, shell_handler
from tests.support.sshfixtures import FakeNode, TestKeys, node_options

AUTODL = Provider(kind=ProviderKind.PLATFORM, name="AutoDL", id=1)


def facts(
    *resources: Resource,
    provider: Provider | None = AUTODL,
    roots: tuple[str, ...] = (),
    key_path: str | None = "/keys/lab",
    local: bool = False,
) -> PlanInput:
    node = Node(
        name="gpu1",
        ssh=SshTarget(host="connect.example.com", port=30022, user="root", key_path=key_path),
        provider=provider.name if provider else None,
        local=local,
    )
    config = Config(offboard=OffboardConfig(scratch_roots=roots))
    return PlanInput(node, provider, None, resources, config)


def scratch(path: str, rid: int = 7) -> Resource:
    return Resource(lease_id=1, kind=ResourceKind.SCRATCH_PATH, native_id=path, id=rid)


# -- the plan ---------------------------------------------------------------------


def test_plan_orders_the_ssh_steps_and_uses_the_platform_preset() -> None:
    steps = plan_remote(facts(scratch("/root/autodl-tmp/ckpt")))
    assert [s.phase for s in steps] == sorted(s.phase for s in steps)
    assert {s.driver for s in steps} == {"ssh"}
    assert len({s.key for s in steps}) == len(steps)
    by_key = {s.key: s for s in steps}
    assert by_key["gpu-processes"].phase is Phase.PROCESSES
    shreds = [s for s in steps if s.action == "shred"]
    assert [s.target for s in shreds] == ["/root/autodl-tmp", "/root/autodl-tmp/ckpt"]
    assert shreds[1].resource_id == 7 and shreds[0].resource_id is None
    assert all(s.destructive for s in shreds)
    # The shared file storage is looked at, with a warning, but never shredded by default.
    shared = by_key["facts:/root/autodl-fs"]
    assert shared.param("shared") == "yes" and "outlives" in shared.describe
    assert "shred:/root/autodl-fs" not in by_key
    clears = [s for s in steps if s.action == "clear"]
    assert {s.param("home") for s in clears} == set(presets.HOME_ENTRIES)
    revoke, prove = steps[-2:]
    assert (revoke.action, prove.action) == ("revoke-key", "prove-refused")
    assert revoke.param("key_path") == "/keys/lab" and revoke.phase < prove.phase
    assert plan_remote(facts(scratch("/root/autodl-tmp/ckpt"))) == steps  # stable


def test_plan_refuses_a_declared_path_outside_the_roots_and_names_it() -> None:
    with pytest.raises(InputError) as caught:
        plan_remote(facts(scratch("/srv/data/ckpt")))
    assert "/srv/data/ckpt" in caught.value.field and "outside the declared roots" in str(
        caught.value
    )
    steps = plan_remote(facts(scratch("/srv/data/ckpt"), roots=("/srv/data",)))
    assert "shred:/srv/data/ckpt" in {s.key for s in steps}


def test_plan_for_ssh_key_resources_and_for_a_node_without_a_key() -> None:
    fp = asyncssh.generate_private_key("ssh-ed25519").get_fingerprint("sha256")
    key = Resource(lease_id=1, kind=ResourceKind.SSH_KEY, native_id=fp, id=9)
    steps = plan_remote(facts(key))
    revoke = next(s for s in steps if s.action == "revoke-key")
    assert revoke.target == fp and revoke.resource_id == 9
    bare = plan_remote(facts(key_path=None, provider=None))
    assert [s.target for s in bare if s.action == "revoke-key"] == ["unknown"]
    assert not [s for s in bare if s.action == "shred"]  # no provider, no roots: nothing
    assert plan_remote(facts(local=True)) == []
    bad = Resource(lease_id=1, kind=ResourceKind.SSH_KEY, native_id="SHA256:nope", id=3)
    with pytest.raises(InputError):
        plan_remote(facts(bad))


# -- a node that runs commands in a real sh ------------------------------------------


@dataclasses.dataclass
class Lab:
    node: ShellNode
    session: NodeSession
    driver: RemoteDriver
    root: Path
    outside: Path
    home: Path
    key_path: Path


@pytest.fixture
async def lab(keys: TestKeys, tmp_path: Path) -> AsyncIterator[Lab]:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    other = asyncssh.generate_private_key("ssh-ed25519")
    (home / ".ssh" / "authorized_keys").write_text(
        keys.client_key.export_public_key().decode()
        + 'no-pty,command="true" '
        + other.export_public_key().decode()
    )
    key_path = tmp_path / "lab_key"
    keys.client_key.write_private_key(key_path)
    keys.client_key.write_public_key(tmp_path / "lab_key.pub")
    root = tmp_path / "scratch"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    async with ShellNode(keys, handler=shell_handler, home=home) as node:
        options = node_options(keys, tmp_path, [node], client_keys=[])
        target = node.as_node("gpu1", key_path=str(key_path))
        session = NodeSession(target, options)
        driver = RemoteDriver(
            session, roots=(str(root),), login=fresh_login(target, options), shred_timeout_s=60
        )
        try:
            yield Lab(node, session, driver, root, outside, home, key_path)
        finally:
            await session.close()


def shred_step(path: Path | str, action: str = "shred") -> Step:
    if action == "clear":
        return Step(
            f"clear:~/{path}",
            Phase.CLEAR,
            "ssh",
            "clear",
            f"~/{path}",
            True,
            "",
            (("home", str(path)),),
        )
    return Step(
        f"shred:{path}", Phase.SHRED, "ssh", "shred", str(path), True, "", (("path", str(path)),)
    )


async def test_shred_removes_files_under_the_root_and_nothing_outside(lab: Lab) -> None:
    (lab.root / "ckpt" / "deep").mkdir(parents=True)
    (lab.root / "ckpt" / "epoch_1.pt").write_bytes(b"weights" * 1000)
    (lab.root / "ckpt" / "deep" / "data.bin").write_bytes(b"secret")
    (lab.root / "ckpt" / "name with\nnewline; rm -rf $(x)").write_text("hostile name")
    target = lab.outside / "keep.txt"
    target.write_text("not ours")
    (lab.root / "ckpt" / "link").symlink_to(target)
    (lab.root / "ckpt" / "linkdir").symlink_to(lab.outside, target_is_directory=True)
    os.link(target, lab.root / "ckpt" / "hard")
    step = shred_step(lab.root / "ckpt")

    before = await lab.driver.verify(step)
    assert not before.done and "epoch_1.pt" in before.output
    outcome = await lab.driver.run(step)
    assert outcome.done, outcome
    assert "hard links unlinked" in outcome.detail and "never followed" in outcome.detail
    left = sorted(p.name for p in (lab.root / "ckpt").rglob("*"))
    assert left == ["link", "linkdir"]  # the symbolic links stay, untouched
    assert target.read_text() == "not ours"  # neither followed nor overwritten via a link
    assert (await lab.driver.verify(step)).done
    again = await lab.driver.run(step)  # a rerun of a finished step does no harm
    assert again.done and target.read_text() == "not ours"


async def test_shred_of_a_single_file_and_of_what_is_already_gone(lab: Lab) -> None:
    (lab.root / "one.bin").write_bytes(b"x" * 4096)
    assert (await lab.driver.run(shred_step(lab.root / "one.bin"))).done
    assert not (lab.root / "one.bin").exists()
    checked = await lab.driver.verify(shred_step(lab.root / "one.bin"))
    assert checked.done and checked.detail == "not there: nothing left"
    gone = await lab.driver.run(shred_step(lab.root / "never-there"))
    assert gone.done and gone.detail == "already gone"


async def test_symlinked_paths_are_refused_and_nothing_is_touched(lab: Lab) -> None:
    (lab.outside / "data").mkdir()
    (lab.outside / "data" / "f").write_text("not ours")
    (lab.root / "alias").symlink_to(lab.outside / "data", target_is_directory=True)
    outcome = await lab.driver.run(shred_step(lab.root / "alias"))
    assert not outcome.done and "symbolic link" in outcome.detail
    # A symbolic link on the way (a parent) is refused too.
    outcome = await lab.driver.run(shred_step(lab.root / "alias" / "f"))
    assert not outcome.done and "resolves elsewhere" in outcome.detail
    assert (lab.outside / "data" / "f").read_text() == "not ours"


async def test_paths_outside_the_roots_never_reach_the_node(lab: Lab) -> None:
    (lab.outside / "f").write_text("not ours")
    for path in [lab.outside / "f", f"{lab.root}/../outside/f", f"{lab.root}/x; rm -rf /"]:
        outcome = await lab.driver.run(shred_step(path))
        assert not outcome.done and outcome.detail.startswith("refused")
    assert lab.node.channels.total == 0
    assert (lab.outside / "f").read_text() == "not ours"


async def test_clear_histories_and_caches_in_the_home(lab: Lab) -> None:
    (lab.home / ".bash_history").write_text("export HF_TOKEN=hf_secret\n")
    (lab.home / ".cache" / "huggingface" / "hub").mkdir(parents=True)
    (lab.home / ".cache" / "huggingface" / "token").write_text("hf_secret")
    (lab.home / ".cache" / "huggingface" / "hub" / "model.bin").write_bytes(b"m" * 10)
    for rel in (".bash_history", ".cache/huggingface", ".zsh_history"):
        step = shred_step(rel, "clear")
        assert (await lab.driver.run(step)).done
        assert (await lab.driver.verify(step)).done
    assert not (lab.home / ".bash_history").exists()
    assert not list((lab.home / ".cache" / "huggingface").rglob("*.bin"))
    assert (lab.home / ".ssh" / "authorized_keys").exists()


async def test_file_system_facts_of_a_path(lab: Lab) -> None:
    step = Step(
        "facts:x",
        Phase.FACTS,
        "ssh",
        "fs-facts",
        str(lab.root),
        False,
        "",
        (("path", str(lab.root / "not-yet")),),
    )
    outcome = await lab.driver.run(step)
    assert outcome.done
    assert outcome.facts["path"] == str(lab.root)  # the nearest existing parent
    assert outcome.facts["fstype"] and outcome.facts["mount"]
    assert outcome.detail.startswith(outcome.facts["fstype"])


async def test_revoke_the_key_then_prove_a_fresh_login_fails(lab: Lab) -> None:
    revoke = Step(
        "revoke-key:k",
        Phase.REVOKE,
        "ssh",
        "revoke-key",
        "k",
        True,
        "",
        (("fingerprint", ""), ("key_path", str(lab.key_path)), ("keys_file", presets.KEYS_FILE)),
    )
    prove = Step(
        "prove-refused:k", Phase.PROVE, "ssh", "prove-refused", "k", False, "", revoke.params
    )
    keys_file = lab.home / ".ssh" / "authorized_keys"
    os.chmod(keys_file, 0o600)

    early = await lab.driver.run(prove)
    assert not early.done and "still works" in early.output
    assert "authorised elsewhere" in early.detail
    assert not (await lab.driver.verify(revoke)).done
    outcome = await lab.driver.run(revoke)
    assert outcome.done, outcome
    assert outcome.facts["fingerprint"] == lab.node.keys.client_key.get_fingerprint("sha256")
    # The platform's own key stays, options and all; the file keeps its mode.
    assert keys_file.read_text().startswith('no-pty,command="true" ssh-ed25519 ')
    assert keys_file.stat().st_mode & 0o777 == 0o600
    assert not list(keys_file.parent.glob("*.zuka.*"))
    # The open session still works (it authenticated before); a fresh login does not.
    assert (await lab.driver.verify(revoke)).done
    proof = await lab.driver.run(prove)
    assert proof.done, proof
    assert (await lab.driver.verify(prove)).done
    assert (await lab.driver.run(revoke)).done  # nothing left to remove: still done

    # A rerun in a new process cannot log in to read the file any more: the node refusing
    # the key proves the step; a shred step can only say why it cannot check.
    await lab.session.close()
    fresh = NodeSession(lab.session.node, lab.session.options)
    again = RemoteDriver(fresh, roots=lab.driver.roots, login=lab.driver.login)
    try:
        rerun = await again.verify(revoke)
        assert rerun.done and rerun.detail == "the node refuses a login with the key"
        shred = await again.verify(shred_step(lab.root / "x"))
        assert not shred.done and "nothing on the node can be checked" in shred.detail
    finally:
        await fresh.close()


async def test_only_the_node_refusing_the_key_is_proof(
    lab: Lab, keys: TestKeys, tmp_path: Path
) -> None:
    prove = Step(
        "prove-refused:k",
        Phase.PROVE,
        "ssh",
        "prove-refused",
        "k",
        False,
        "",
        (("key_path", str(lab.key_path)),),
    )
    await lab.node.stop()  # unreachable is not refused
    outcome = await lab.driver.run(prove)
    assert not outcome.done and "not proven" in outcome.detail
    unreadable = dataclasses.replace(prove, params=(("key_path", str(tmp_path / "missing")),))
    outcome = await lab.driver.run(unreadable)  # a key we cannot read proves nothing
    assert not outcome.done
    no_key = dataclasses.replace(prove, params=())
    assert not (await lab.driver.run(no_key)).done


async def test_a_key_file_that_is_not_the_recorded_key_proves_nothing(
    lab: Lab, tmp_path: Path
) -> None:
    stranger = asyncssh.generate_private_key("ssh-ed25519")
    stranger_path = tmp_path / "stranger"
    stranger.write_private_key(stranger_path)
    fp = lab.node.keys.client_key.get_fingerprint("sha256")
    prove = Step(
        "prove-refused:k",
        Phase.PROVE,
        "ssh",
        "prove-refused",
        fp,
        False,
        "",
        (("fingerprint", fp), ("key_path", str(stranger_path))),
    )
    # The node refuses the stranger's key, but that says nothing about the lab's.
    outcome = await lab.driver.run(prove)
    assert not outcome.done and f"not {fp}" in outcome.detail
    assert lab.node.connects.total == 0


def test_login_refused_reads_only_a_node_permission_denied() -> None:
    def chain(words: str, cause: BaseException, *, at_node: bool) -> SshError:
        # As leases.ssh.connect raises them: the node's own failure marked, a jump host's not.
        hop = HopFailed(NodeHealth.AUTH_FAILED, words, at_node=at_node)
        hop.__cause__ = cause
        err = SshError("n", NodeHealth.AUTH_FAILED, words)
        err.__cause__ = hop
        return err

    denied = asyncssh.PermissionDenied("no")
    assert login_refused(chain("node root@h:22: authentication failed", denied, at_node=True))
    # The words are in the language in use: a node's refusal in Chinese counts the same.
    assert login_refused(chain("节点 root@h:22：认证失败", denied, at_node=True))
    assert not login_refused(chain("jump host j:22: authentication failed", denied, at_node=False))
    assert not login_refused(chain("node h: x", OSError("refused"), at_node=True))
    plain = SshError("n", NodeHealth.AUTH_FAILED, "node h: x")
    plain.__cause__ = Exception("node h: x")
    plain.__cause__.__cause__ = denied
    assert not login_refused(plain)  # not a hop zuka's connect raised
    assert not login_refused(SshError("n", NodeHealth.TIMEOUT, "t"))


async def test_revoke_without_a_recorded_key_says_what_to_record(lab: Lab) -> None:
    step = Step("revoke-key:unknown", Phase.REVOKE, "ssh", "revoke-key", "unknown", True, "", ())
    outcome = await lab.driver.run(step)
    assert not outcome.done and "ssh_key resource" in outcome.detail
    assert (lab.home / ".ssh" / "authorized_keys").read_text().count("ssh-ed25519") == 2


# -- GPU processes (a simulated GPU node) ------------------------------------------------


def processes_step() -> Step:
    return Step("gpu-processes", Phase.PROCESSES, "ssh", "gpu-processes", "gpu1", False, "")


async def _driver_for(
    node: FakeNode, keys: TestKeys, tmp_path: Path
) -> tuple[RemoteDriver, NodeSession]:
    session = NodeSession(node.as_node("gpu1"), node_options(keys, tmp_path, [node]))

    async def never(step: Step) -> LoginAttempt:
        raise AssertionError("no login here")

    return RemoteDriver(session, roots=(), login=never), session


@pytest.mark.parametrize("scenario", [Scenario.BUSY, Scenario.IDLE_MONTHLY])
async def test_running_gpu_processes_need_consent(
    keys: TestKeys, tmp_path: Path, scenario: Scenario
) -> None:
    sim = SimNode("gpu1", "A100", 2, scenario, seed=3)
    # At 04:00 in Shanghai: idle_monthly's busy days are busy from 09:00 to 23:00 only, so
    # the real clock would make it busy or idle by the hour the test runs at.
    at = datetime(2026, 12, 2, 20, 0, tzinfo=UTC)
    async with FakeNode(keys, sim=sim, sim_clock=lambda: at) as node:
        driver, session = await _driver_for(node, keys, tmp_path)
        try:
            outcome = await driver.run(processes_step())
            checked = await driver.verify(processes_step())
        finally:
            await session.close()
    if scenario is Scenario.BUSY:  # a training job on both GPUs
        assert outcome.done and outcome.needs_consent
        assert "2 GPU process(es) still running: " in outcome.detail
        assert outcome.facts == {"gpu_processes": "2"}
        assert not checked.done and not checked.needs_consent
    else:
        assert outcome.done and not outcome.needs_consent and checked.done
        assert outcome.detail == "no GPU process running"


async def test_unknown_gpu_processes_are_not_none(
    keys: TestKeys, node: FakeNode, tmp_path: Path
) -> None:
    driver, session = await _driver_for(node, keys, tmp_path)  # no sim: nvidia-smi not found
    try:
        outcome = await driver.run(processes_step())
        assert not outcome.done and outcome.needs_consent and "unknown" in outcome.detail
    finally:
        await session.close()


async def test_an_unreachable_node_is_an_outcome_not_a_raise(
    keys: TestKeys, node: FakeNode, tmp_path: Path
) -> None:
    driver, session = await _driver_for(node, keys, tmp_path)
    await node.stop()
    try:
        outcome = await driver.run(processes_step())
        assert not outcome.done and outcome.detail.startswith("SSH failed: ")
    finally:
        await session.close()


def test_scratch_roots_join_the_preset_and_the_config() -> None:
    assert scratch_roots(facts(roots=("/data/x", "/root/autodl-tmp"))) == (
        "/root/autodl-tmp",
        "/root/autodl-fs",
        "/data/x",
    )


# -- a hostile node -------------------------------------------------------------------

HOSTILE = (
    "\x1b]0;owned\x07\x1b[2J[bold red]markup[/] \u202egnp.exe\n"
    "GPU-1, 1, \x1b[31mevil\x1b[0m, 10\n"
    "mount / /dev/sda1 ext4\x1b[8m rw\x00\n"
    "disk disk 0 \x9b31m\n" + "x" * 50_000 + "\n"
)


async def hostile_handler(process: asyncssh.SSHServerProcess[str], node: FakeNode) -> None:
    process.stdout.write(HOSTILE)
    process.stderr.write("\x1b[?1049h" + "\n" * 10)
    process.exit(0)


async def test_what_a_hostile_node_prints_reaches_a_person_only_made_visible(
    keys: TestKeys, tmp_path: Path
) -> None:
    async with FakeNode(keys, handler=hostile_handler) as node:
        session = NodeSession(node.as_node("gpu1"), node_options(keys, tmp_path, [node]))

        async def refused(step: Step) -> LoginAttempt:
            return LoginAttempt(False, "\x1b[2Jstill in")

        driver = RemoteDriver(session, roots=("/data",), login=refused)
        fp = keys.client_key.get_fingerprint("sha256")
        steps = [
            processes_step(),
            Step("f", Phase.FACTS, "ssh", "fs-facts", "/data/x", False, "", (("path", "/data/x"),)),
            shred_step("/data/x"),
            shred_step(".bash_history", "clear"),
            Step("r", Phase.REVOKE, "ssh", "revoke-key", fp, True, "", (("fingerprint", fp),)),
            Step("p", Phase.PROVE, "ssh", "prove-refused", fp, False, ""),
        ]
        try:
            outcomes = [await driver.run(s) for s in steps]
        finally:
            await session.close()
    for step, outcome in zip(steps, outcomes, strict=True):
        assert is_clean(outcome.detail), (step.key, outcome.detail)
        assert len(outcome.detail) < 2000
        assert all(is_clean(v) and len(v) < 20_000 for v in outcome.facts.values())
        assert len(outcome.output) <= 64 * 1024  # evidence kept as it came, bounded
    assert outcomes[1].facts["fstype"] == "ext4␛[8m"
    assert not outcomes[-1].done  # a login that was not refused proves nothing


# -- the shred script on real trees (hypothesis) ------------------------------------------

_NAME = st.text(
    alphabet=st.sampled_from([*"ab-_. ;$()`'\"\\\n*?[]~!#|&<>", "\u202e", "é", "卡"]),
    min_size=1,
    max_size=12,
).filter(lambda n: n not in (".", ".."))
_KIND = st.sampled_from(["file", "dir", "link-file", "link-dir", "hard", "fifo"])


@settings(max_examples=25)
@given(tree=st.lists(st.tuples(st.lists(_NAME, min_size=1, max_size=3), _KIND), max_size=12))
def test_shred_never_reaches_outside_the_declared_path(
    tree: list[tuple[list[str], str]],
) -> None:
    """Whatever the names and links under a declared path, the shred script (run in a
    real sh on real files) leaves no regular file there and changes nothing outside."""
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        root, outside = base / "scratch", base / "outside"
        (outside / "dir").mkdir(parents=True)
        (outside / "dir" / "f").write_text("outside dir file")
        (outside / "f").write_text("outside file")
        ckpt = root / "ckpt"
        ckpt.mkdir(parents=True)
        for parts, kind in tree:
            path = ckpt.joinpath(*parts)
            if os.path.lexists(path) or not path.parent.is_dir() or path.parent.is_symlink():
                continue
            if kind == "file":
                path.write_bytes(os.urandom(64))
            elif kind == "dir":
                path.mkdir()
            elif kind == "link-file":
                path.symlink_to(outside / "f")
            elif kind == "link-dir":
                path.symlink_to(outside / "dir", target_is_directory=True)
            elif kind == "hard":
                os.link(outside / "f", path)
            else:
                os.mkfifo(path)
        links = sorted(p for p in ckpt.rglob("*") if p.is_symlink())
        script = shred_script(str(ckpt), (str(root),))
        done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        left = [p for p in ckpt.rglob("*") if p.is_file() and not p.is_symlink()]
        assert left == []
        assert (outside / "f").read_text() == "outside file"
        assert (outside / "dir" / "f").read_text() == "outside dir file"
        assert sorted(p for p in ckpt.rglob("*") if p.is_symlink()) == links
        gone = subprocess.run(
            ["sh", "-c", gone_script(str(ckpt), (str(root),))], capture_output=True, text=True
        )
        assert gone.returncode == 0, gone.stdout


# -- what the login user cannot see is not gone ---------------------------------------------

_NOBODY = 65534
needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or not Path("/usr/bin/setpriv").exists(),
    reason="runs the scripts as an unprivileged user: needs root and setpriv",
)


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A folder every user may search (pytest's tmp_path sits in root's 0700 folder)."""
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp).chmod(0o755)
        yield Path(tmp)


def _as_nobody(script: str) -> subprocess.CompletedProcess[str]:
    drop = ["setpriv", f"--reuid={_NOBODY}", f"--regid={_NOBODY}", "--clear-groups"]
    return subprocess.run(
        [*drop, "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": os.environ["PATH"], "LC_ALL": "C"},
    )


@needs_root
def test_a_directory_the_login_user_cannot_read_is_not_verified_gone(open_tmp: Path) -> None:
    """A non-root login that cannot read a directory under the path: find fails there, and
    its silence is not 'no regular file left' (a rerun would take it for done)."""
    root = open_tmp / "scratch"
    ckpt = root / "ckpt"
    (ckpt / "locked").mkdir(parents=True)
    (ckpt / "locked" / "weights.pt").write_bytes(b"secret")
    for p in (root, ckpt, ckpt / "locked"):
        os.chown(p, _NOBODY, _NOBODY)
    (ckpt / "locked").chmod(0)
    gone = _as_nobody(gone_script(str(ckpt), (str(root),)))
    assert gone.returncode != 0, gone.stdout
    assert (ckpt / "locked" / "weights.pt").exists()


@needs_root
def test_a_path_behind_a_directory_the_login_user_cannot_search_is_not_absent(
    open_tmp: Path,
) -> None:
    """`[ -e ]` is false for a path the login user may not look at: that is not 'absent'."""
    root = open_tmp / "scratch"
    (root / "private").mkdir(parents=True)
    (root / "private" / "data.bin").write_bytes(b"secret")
    (root / "private").chmod(0o700)  # root's, not nobody's
    path = str(root / "private" / "data.bin")
    for script in (gone_script(path, (str(root),)), shred_script(path, (str(root),))):
        done = _as_nobody(script)
        assert done.returncode != 0 and "absent" not in done.stdout, done.stdout
    # A path that really is not there (its parent searchable) is still absent.
    done = _as_nobody(gone_script(str(root / "never-there"), (str(root),)))
    assert done.returncode == 0 and done.stdout.startswith("absent"), done.stdout
    assert (root / "private" / "data.bin").exists()


@pytest.mark.skipif(
    os.geteuid() != 0 or subprocess.run(["unshare", "-m", "true"]).returncode != 0,
    reason="bind-mounts in a private mount namespace: needs root and unshare",
)
def test_a_bind_mount_inside_the_path_is_refused_not_shredded_through(open_tmp: Path) -> None:
    """A bind mount of the same file system under the declared path: find -xdev cannot
    tell it from a plain directory, so the shred would overwrite what lies outside."""
    root, outside = open_tmp / "scratch", open_tmp / "outside"
    (root / "ckpt" / "data").mkdir(parents=True)
    (root / "ckpt" / "mine.bin").write_bytes(b"ours")
    outside.mkdir()
    (outside / "theirs.txt").write_text("not ours")
    script = shred_script(str(root / "ckpt"), (str(root),))
    bind_then_run = 'mount --bind "$1" "$2" && sh -c "$3"'
    argv = [bind_then_run, "sh", str(outside), str(root / "ckpt" / "data"), script]
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", *argv],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (outside / "theirs.txt").read_text() == "not ours"
    assert done.returncode != 0 and "mounted inside" in done.stdout, done.stdout


def test_a_directory_swapped_for_a_link_mid_shred_is_not_followed(tmp_path: Path) -> None:
    """Between find listing a file and shred opening it, something on the node turns a
    directory on the way into a symbolic link to elsewhere (a stand-in shred does it on its
    first call, then runs the real one). Full paths handed to shred would follow it; shred
    run in each directory find entered itself (-execdir) does not."""
    root, outside = tmp_path / "scratch", tmp_path / "outside"
    ckpt = root / "ckpt"
    for d in ("a", "b"):
        (ckpt / d).mkdir(parents=True)
        (ckpt / d / f"{d}.bin").write_bytes(b"ours")
    outside.mkdir()
    for name in ("a.bin", "b.bin"):
        (outside / name).write_text("not ours")
    real = subprocess.run(["sh", "-c", "command -v shred"], capture_output=True, text=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    swap = (
        f"#!/bin/sh\nif [ ! -e {tmp_path}/swapped ]; then : > {tmp_path}/swapped\n"
        f'  for d in a b; do if [ "$(pwd -P)" != {ckpt}/$d ]; then\n'
        f"    mv {ckpt}/$d {tmp_path}/moved-$d && ln -s {outside} {ckpt}/$d; break; fi; done\n"
        f'fi\nexec {real.stdout.strip()} "$@"\n'
    )
    (bin_dir / "shred").write_text(swap)
    (bin_dir / "shred").chmod(0o755)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "LC_ALL": "C"}
    subprocess.run(
        ["sh", "-c", shred_script(str(ckpt), (str(root),))],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert (tmp_path / "swapped").exists()  # the stand-in did swap
    assert sorted(p.read_text() for p in outside.iterdir()) == ["not ours", "not ours"]


async def test_a_keys_file_longer_than_zuka_reads_is_not_called_clean(lab: Lab) -> None:
    """Ten thousand lines of padding before the lab's key: what zuka did not read is not
    'the key is not in the file'."""
    keys_file = lab.home / ".ssh" / "authorized_keys"
    ours = keys_file.read_text()
    keys_file.write_text("# padding\n" * 10_000 + ours)
    revoke = Step(
        "revoke-key:k",
        Phase.REVOKE,
        "ssh",
        "revoke-key",
        "k",
        True,
        "",
        (("fingerprint", ""), ("key_path", str(lab.key_path)), ("keys_file", presets.KEYS_FILE)),
    )
    for outcome in (await lab.driver.verify(revoke), await lab.driver.run(revoke)):
        assert not outcome.done and "not read" in outcome.detail, outcome


@pytest.mark.parametrize("python3", [True, False], ids=["walker", "no-python3"])
def test_only_the_logins_own_ssh_directory_under_a_declared_path_is_kept(
    tmp_path: Path, python3: bool
) -> None:
    """A declared path that holds the login's home: its ~/.ssh (authorized_keys is how zuka
    logs in until the revoke step, the last) is kept, and said. Any other .ssh in it (a
    copied home, a private key in a checkpoint folder) is the lease's data: shredded."""
    root = tmp_path / "scratch"
    home = root / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "authorized_keys").write_text("ssh-ed25519 AAAA platform\n")
    other = home / "proj" / ".ssh" / "id_ed25519"
    other.parent.mkdir(parents=True)
    other.write_text("PRIVATE KEY")
    (home / "run.log").write_text("ours")
    env = {**os.environ, "HOME": str(home)}

    def run(script: str) -> subprocess.CompletedProcess[str]:
        script = script if python3 else fallback(script)
        return subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=env)

    done = run(shred_script(str(home), (str(root),)))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"kept (the login's own ~/.ssh): {home}/.ssh" in done.stdout
    assert not (home / "run.log").exists() and not other.exists()
    assert not other.parent.exists()
    assert (home / ".ssh" / "authorized_keys").read_text() == "ssh-ed25519 AAAA platform\n"
    gone = run(gone_script(str(home), (str(root),)))
    assert gone.returncode == 0, gone.stdout + gone.stderr
    other.parent.mkdir(parents=True)
    other.write_text("PRIVATE KEY")
    left = run(gone_script(str(home), (str(root),)))
    assert left.returncode == 1 and "id_ed25519" in left.stdout, left.stdout + left.stderr


def test_a_node_path_with_an_empty_entry_still_shreds(tmp_path: Path) -> None:
    """find refuses -execdir when PATH holds the current directory (an empty entry, a
    trailing colon): common in hand-made shell profiles; the script drops those entries."""
    root = tmp_path / "scratch"
    (root / "ckpt").mkdir(parents=True)
    (root / "ckpt" / "a.pt").write_bytes(b"ours")
    done = subprocess.run(
        ["sh", "-c", shred_script(str(root / "ckpt"), (str(root),))],
        capture_output=True,
        text=True,
        env={"PATH": f":{os.environ['PATH']}:.:", "LC_ALL": "C"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (root / "ckpt" / "a.pt").exists()


def test_a_path_inside_another_says_so_and_the_plan_names_what_it_will_not_delete() -> None:
    steps = plan_remote(facts(scratch("/root/autodl-tmp/ckpt")))
    inner = next(s for s in steps if s.key == "shred:/root/autodl-tmp/ckpt")
    assert "inside /root/autodl-tmp, shredded by that step first" in inner.describe
    outer = next(s for s in steps if s.key == "shred:/root/autodl-tmp")
    assert "(inside " not in outer.describe
    plan = Plan(node_id=1, node="gpu1", lease_id=1, steps=tuple(steps))
    (kept,) = plan.not_deleted()
    assert kept.startswith("/root/autodl-fs: shared storage that outlives the instance")
    assert "zuka resource add gpu1 --kind scratch_path --id PATH" in kept


def test_the_revoke_step_says_which_key_in_words() -> None:
    revoke = next(s for s in plan_remote(facts()) if s.action == "revoke-key")
    assert "holding the public key of /keys/lab" in revoke.describe
    fp = "SHA256:" + "A" * 43
    key = Resource(lease_id=1, kind=ResourceKind.SSH_KEY, native_id=fp, id=9)
    revoke = next(s for s in plan_remote(facts(key)) if s.action == "revoke-key")
    assert f"holding the public key {fp}" in revoke.describe


def test_each_ssh_step_says_what_really_runs_on_the_node() -> None:
    """A person confirms what the plan says: the shred step said `find ... -execdir shred`
    while the walker (nodewalk.py) ran, and the revoke step named authorized_keys only
    while every keys file sshd reads was rewritten. The evidence repeats these words."""
    steps = plan_remote(facts(scratch("/root/autodl-tmp/ckpt")))
    shred = next(s for s in steps if s.key == "shred:/root/autodl-tmp")
    clear = next(s for s in steps if s.key == "clear:~/.bash_history")
    for step in (shred, clear):
        for rule in (
            "python3",
            "no link followed",
            "a file written only if it is the file listed",
            "hard-linked files only unlinked",
            "mounts inside refused",
            "the login's own ~/.ssh kept",
            "without python3",
        ):
            assert rule in step.describe, (step.key, rule, step.describe)
        assert "\n" not in step.describe
    assert shred.describe.startswith("shred -n 1 -z and unlink each regular file in /root/")
    assert "'~'/.bash_history" in clear.describe or "~/.bash_history" in clear.describe
    revoke = next(s for s in steps if s.action == "revoke-key")
    for words in ("authorized_keys2", "AuthorizedKeysFile", "every keys file sshd reads"):
        assert words in revoke.describe, (words, revoke.describe)
    assert "removes ~/.zuka-offboard" in revoke.describe


def test_the_usual_shell_histories_are_cleared() -> None:
    """ash, ksh and busybox shells write ~/.sh_history or ~/.ash_history; fish, node,
    redis-cli their own. Only well-known names: each is one more step in every plan."""
    for rel in (
        ".sh_history",
        ".ash_history",
        ".local/share/fish/fish_history",
        ".node_repl_history",
        ".rediscli_history",
    ):
        assert rel in presets.HISTORIES
    keys = {s.key for s in plan_remote(facts())}
    assert {"clear:~/.sh_history", "clear:~/.ash_history"} <= keys


async def test_an_ash_and_a_fish_history_are_shredded(lab: Lab) -> None:
    (lab.home / ".ash_history").write_text("export HF_TOKEN=hf_secret\n")
    fish = lab.home / ".local" / "share" / "fish" / "fish_history"
    fish.parent.mkdir(parents=True)
    fish.write_text("- cmd: export HF_TOKEN=hf_secret\n")
    for rel in (".ash_history", ".local/share/fish/fish_history"):
        step = shred_step(rel, "clear")
        assert (await lab.driver.run(step)).done
        assert (await lab.driver.verify(step)).done
    assert not (lab.home / ".ash_history").exists() and not fish.exists()


async def inspect_handler(process: asyncssh.SSHServerProcess[str], node: FakeNode) -> None:
    newest = "99999999999999999999" if "hostile" in str(process.command) else "1796174114"
    process.stdout.write(f"exists yes\nfiles 1\nbytes 5\nnewest {newest}\n")
    process.exit(0)


async def test_inspect_gives_the_newest_file_as_iso_utc(keys: TestKeys, tmp_path: Path) -> None:
    """--inspect printed `newest 1796174114` for node files (epoch seconds) while buckets
    said an ISO date; a number no date can hold is shown as it came, made visible."""
    async with FakeNode(keys, handler=inspect_handler) as node:
        session = NodeSession(node.as_node("gpu1"), node_options(keys, tmp_path, [node]))

        async def refused(step: Step) -> LoginAttempt:
            return LoginAttempt(False, "")

        driver = RemoteDriver(session, roots=("/data",), login=refused)
        try:
            seen = await driver.inspect(shred_step("/data/x"))
            odd = await driver.inspect(shred_step("/data/hostile"))
        finally:
            await session.close()
    assert seen.exists and seen.facts["newest"] == "2026-12-02T01:15:14Z", seen
    assert odd.exists and odd.facts["newest"] == "99999999999999999999", odd


def test_the_simulated_node_answers_the_run_directory_removal() -> None:
    """zuka demo's nodes: the revoke step's first script gets a plain answer."""
    from leases.offboard.nodescripts import RUN_DIR_GONE
    from leases.sim.offboard import answer_script

    said = answer_script(SimNode("gpu1", "A100"), RUN_DIR_GONE)
    assert said is not None and said.stdout == "no run directory of zuka's left\n"


async def test_private_keys_in_the_logins_own_ssh_are_shredded_and_its_login_kept(lab: Lab) -> None:
    """The login's own ~/.ssh is spared as a directory (zuka logs in through its
    authorized_keys until the revoke, the last SSH step), but the private keys the lab put
    there are cleared one by one."""
    ssh = lab.home / ".ssh"
    ssh.mkdir(exist_ok=True)
    (ssh / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nlab\n")
    keys_before = (
        (ssh / "authorized_keys").read_text() if (ssh / "authorized_keys").exists() else None
    )
    assert "clear:~/.ssh/id_ed25519" in {s.key for s in plan_remote(facts())}
    step = shred_step(".ssh/id_ed25519", "clear")
    assert (await lab.driver.inspect(step)).exists is True
    assert (await lab.driver.run(step)).done
    assert (await lab.driver.verify(step)).done
    assert not (ssh / "id_ed25519").exists() and ssh.is_dir()
    after = (ssh / "authorized_keys").read_text() if (ssh / "authorized_keys").exists() else None
    assert after == keys_before
