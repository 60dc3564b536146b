"""The lab install's use cases: `zuka lab init` (groups, the service user, the folder, its
marker, the ledger, the collector's key, every path's permissions), `repair`, `check`,
`add-user`, `remove-user`, `pubkey`. Each change is a list of steps said before any is
taken (the front end asks, or shows them for --dry-run), each step's words what it runs;
what changes the lab is audited in its ledger. Root only, but `check` and `pubkey`.
"""

from __future__ import annotations

import contextlib
import functools
import grp
import json
import os
import pwd
import sqlite3
import stat
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from leases.core.errors import ConfigError, InputError
from leases.core.i18n import EN, _, speaking
from leases.lab import acl, perms, rootpath, sysconfig
from leases.lab.layout import Lab, LabError, check_name, find_lab
from leases.lab.roles import Role, group_of
from leases.ledger.files import SCHEMA_VERSION
from leases.ledger.store import Ledger

# Runs one command's words (groupadd, useradd, gpasswd), raising on failure.
Runner = Callable[[Sequence[str]], None]
NOLOGIN = "/usr/sbin/nologin"
# A role's groups: offboarding implies editing, editing implies viewing.
_IMPLIED = {
    Role.VIEW: (Role.VIEW,),
    Role.EDIT: (Role.VIEW, Role.EDIT),
    Role.OFFBOARD: (Role.VIEW, Role.EDIT, Role.OFFBOARD),
}


def run_command(argv: Sequence[str]) -> None:
    """The system's runner: the command's own words on failure."""
    done = subprocess.run(list(argv), capture_output=True, text=True, check=False, timeout=60)
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip()[-300:]
        raise LabError(
            _("{command} failed (exit {code}): {said}").format(
                command=" ".join(argv), code=done.returncode, said=said
            )
        )


@dataclass(frozen=True)
class Step:
    """One thing a lab change does: its words (the command it amounts to, in English: the
    audit log keeps them), the act, and the words shown to a person (the language in use;
    "" when they are the command itself)."""

    words: str
    act: Callable[[], object]
    said: str = ""

    @property
    def shown(self) -> str:
        return self.said or self.words


@dataclass
class Plan:
    lab: Lab
    steps: list[Step] = field(default_factory=list)
    audit_action: str = "lab.init"
    audit_after: dict[str, object] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # said after the steps, changing nothing

    def add(self, words: str, act: Callable[[], object], said: str = "") -> None:
        self.steps.append(Step(words, act, said))


def refuse_unless_root(what: str) -> None:
    if os.geteuid() != 0:
        raise LabError(
            _("{what} changes the machine's users and files: run it as root (sudo {what})").format(
                what=what
            )
        )


def lab_from(
    folder: Path,
    *,
    viewers: str | None = None,
    editors: str | None = None,
    offboard: str | None = None,
    service_user: str | None = None,
) -> Lab:
    """The lab of a folder: its marker's names where it has one (a name given that differs
    is refused: the marker is changed by hand, on purpose), else those given or the
    defaults. Names checked."""
    given = {"viewers": viewers, "editors": editors, "offboard": offboard}
    given["service_user"] = service_user
    for key, value in given.items():
        if value is not None:
            check_name(f"--{key.replace('_', '-')}", value)
    found = find_lab(folder / "ledger.db")
    if found is not None:
        for key, value in given.items():
            if value is not None and value != getattr(found, key):
                raise LabError(
                    _(
                        "{marker} names {key} {have!r}, not {given!r}: a lab's groups are changed"
                        " by editing its marker as root, not by init"
                    ).format(marker=found.marker, key=key, have=getattr(found, key), given=value)
                )
        return found
    return Lab(folder=folder, **{k: v for k, v in given.items() if v is not None})


def _group_exists(name: str) -> bool:
    try:
        grp.getgrnam(name)
    except KeyError:
        return False
    return True


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def plan_init(lab: Lab, run: Runner = run_command, env: Mapping[str, str] = os.environ) -> Plan:
    """What `zuka lab init` would do to make this lab whole: nothing when it is."""
    _refuse_a_members_folder(lab)
    plan = Plan(lab)
    plan.audit_after = {
        "folder": str(lab.folder),
        "viewers": lab.viewers,
        "editors": lab.editors,
        "offboard": lab.offboard,
        "service_user": lab.service_user,
    }
    for group in dict.fromkeys((lab.viewers, lab.editors, lab.offboard)):
        if not _group_exists(group):
            argv = ["groupadd", "--system", group]
            plan.add(" ".join(argv), functools.partial(run, argv))
    if not _user_exists(lab.service_user):
        argv = ["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent"]
        argv += ["--shell", NOLOGIN, "--gid", lab.viewers, lab.service_user]
        plan.add(" ".join(argv), functools.partial(run, argv))
    if not lab.folder.is_dir():
        plan.add(
            f"mkdir -m 0750 {lab.folder} (root:{lab.viewers})",
            lambda: lab.folder.mkdir(mode=0o700, parents=True),
        )
    if not lab.ledger.exists():
        plan.add(
            f"create the ledger {lab.ledger} (migrated)",
            lambda: _create_ledger(lab),
            _("create the ledger {path} (migrated)").format(path=lab.ledger),
        )
    else:
        plan.add(
            f"open the ledger {lab.ledger} (migrated if need be)",
            lambda: _create_ledger(lab),
            _("open the ledger {path} (migrated if need be)").format(path=lab.ledger),
        )
    if not lab.marker.exists():
        plan.add(
            f"write the marker {lab.marker} (root:root 0644)",
            lambda: _write_marker(lab),
            _("write the marker {path} (root:root 0644)").format(path=lab.marker),
        )
    if not lab.collector_key.exists():
        plan.add(
            f"make the collector's SSH key {lab.collector_key} (ssh-ed25519, 0600,"
            f" {lab.service_user}'s alone)",
            lambda: _make_key(lab),
            _("make the collector's SSH key {path} (ssh-ed25519, 0600, {user}'s alone)").format(
                path=lab.collector_key, user=lab.service_user
            ),
        )
    if _pub_differs(lab):
        plan.add(
            f"copy its public key to {lab.folder / perms.COLLECTOR_PUB} (0644: any member"
            " may print it)",
            lambda: _copy_pub(lab),
            _("copy its public key to {path} (0644: any member may print it)").format(
                path=lab.folder / perms.COLLECTOR_PUB
            ),
        )
    only_open = len(plan.steps) == 1 and plan.steps[0].words.startswith("open the ledger")
    if only_open and _ledger_current(lab):
        plan.steps.clear()
    _plan_perms(plan, always=bool(plan.steps))
    _plan_system_config(plan, env)
    return plan


def _refuse_a_members_folder(lab: Lab) -> None:
    """A lab's folder, and every folder above it, is root's alone: one a member owns or may
    write could be renamed away or hold a ledger (and audit entries) the member made, which
    init would then adopt as the lab's."""
    where = lab.folder if lab.folder.exists() else lab.folder.parent
    why = rootpath.changeable_by_others(where)
    if why is not None:
        raise LabError(
            _(
                "{folder}: a lab's folder, and every folder above it, must be root's and"
                " writable by no one else: {why}. Choose a folder only root writes (the"
                " default /var/lib/zuka)"
            ).format(folder=lab.folder, why=why)
        )
    try:
        info = lab.ledger.lstat()
    except FileNotFoundError:
        return
    allowed = {0}
    with contextlib.suppress(KeyError):
        allowed.add(pwd.getpwnam(lab.service_user).pw_uid)
    if info.st_uid not in allowed:
        raise LabError(
            _(
                "{ledger}: belongs to uid {uid}, not root or the service user: a lab's ledger"
                " is made by `zuka lab init`, never adopted from a member"
            ).format(ledger=lab.ledger, uid=info.st_uid)
        )


def _plan_system_config(plan: Plan, env: Mapping[str, str]) -> None:
    """Every member's zuka opens the lab's ledger by default through the system config's
    `[lab] ledger`: written when there is no system config; an admin's own file is never
    edited, only told what it lacks."""
    path = sysconfig.system_config_path(env)
    ledger = plan.lab.ledger
    if path is None:
        plan.notes.append(
            _(
                "the system config is turned off ({env}): members give --ledger {ledger} or"
                " ZUKA_LEDGER"
            ).format(env=sysconfig.SYSTEM_CONFIG_ENV, ledger=ledger)
        )
        return
    if not path.exists():
        plan.add(
            f'write {path} (root:root 0644): [lab] ledger = "{ledger}", so that every'
            " member's zuka opens the lab's ledger",
            functools.partial(_write_system_config, path, ledger),
            _(
                'write {path} (root:root 0644): `[lab] ledger = "{ledger}"`, so that every'
                " member's zuka opens the lab's ledger"
            ).format(path=path, ledger=ledger),
        )
        return
    try:
        named = sysconfig.lab_ledger(env)
    except ConfigError as exc:
        plan.notes.append(
            _("{path} cannot be read as zuka's system config: {problem}").format(
                path=path, problem=exc
            )
        )
        return
    if named is None or named[0] != ledger:
        plan.notes.append(
            _(
                "{path} is there and does not name this lab's ledger: add `[lab]` with"
                ' `ledger = "{ledger}"` to it, so that every member\'s zuka opens it'
            ).format(path=path, ledger=ledger)
        )


def _write_system_config(path: Path, ledger: Path) -> None:
    path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    text = (
        "# zuka's system config: every user's zuka reads it first (their own file wins).\n"
        "# Written by `zuka lab init`; root's, mode 0644: no secret here (see secrets.toml).\n"
        "[lab]\n"
        f"ledger = {json.dumps(str(ledger))}\n"
    )
    _write_new(path, text.encode(), 0o644, 0, 0)


def _plan_perms(plan: Plan, *, always: bool = False) -> None:
    lab = plan.lab
    if _user_exists(lab.service_user) and all(
        _group_exists(g) for g in (lab.viewers, lab.editors, lab.offboard)
    ):
        with speaking(EN):  # the audit log's words stay English
            words = [f.line() for f in perms.check(lab)]
        said = [f.line() for f in perms.check(lab)]
    else:
        words = ["every path, once the users and groups exist"]
        said = [_("every path, once the users and groups exist")]
    if words:
        text = "set owners, modes and ACLs:\n     " + "\n     ".join(words)
        shown = _("set owners, modes and ACLs:") + "\n     " + "\n     ".join(said)
        plan.add(text, lambda: perms.apply(lab), shown)
    elif always:
        # The steps before may remake files (root's open of the ledger lets SQLite remove
        # its -wal and -shm): every path is looked at again after them.
        plan.add(
            "check every path's owner, mode and ACL again",
            lambda: perms.apply(lab),
            _("check every path's owner, mode and ACL again"),
        )


def plan_repair(lab: Lab) -> Plan:
    """What `zuka lab repair` would set (perms only; a missing ledger or key is init's)."""
    plan = Plan(lab, audit_action="lab.repair")
    _plan_perms(plan)
    plan.audit_after = {"fixed": [s.words for s in plan.steps]}
    return plan


def _ledger_current(lab: Lab) -> bool:
    """Whether the ledger is at this zuka's schema, asked read-only: root's writable
    open would let SQLite remove and make again the -wal and -shm at its close."""
    uri = f"file:{quote(str(lab.ledger))}?mode=ro"
    conn = sqlite3.connect(uri, uri=True)
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.Error:
        return False
    finally:
        conn.close()
    return bool(version == SCHEMA_VERSION)


def _create_ledger(lab: Lab) -> None:
    with Ledger.open(lab.ledger, create=True, lab_init=True):
        pass


def _write_marker(lab: Lab) -> None:
    _write_new(lab.marker, lab.marker_text().encode(), 0o644, 0, 0)


def _write_new(path: Path, data: bytes, mode: int, uid: int, gid: int) -> None:
    """A new file (never through a link, never over one), owned and moded before a byte,
    without the ACL a file made in the lab's folder starts with (its default ACL)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.fchown(fd, uid, gid)
        acl.write(fd, acl.from_mode(mode))
        os.write(fd, data)
    finally:
        os.close(fd)


def _make_key(lab: Lab) -> None:
    import asyncssh

    ids = perms.Ids.system()
    for want in perms.wants(lab, ids):
        if want.path == lab.collector_key_dir:
            perms.apply_one(want, ids)
    entry = pwd.getpwnam(lab.service_user)
    key = asyncssh.generate_private_key("ssh-ed25519", comment=f"zuka-collect@{lab.folder}")
    _write_new(lab.collector_key, key.export_private_key(), 0o600, entry.pw_uid, entry.pw_gid)
    pub = lab.collector_key.with_name(lab.collector_key.name + ".pub")
    if pub.exists():
        pub.unlink()
    _write_new(pub, key.export_public_key(), 0o644, entry.pw_uid, entry.pw_gid)


def _public_key(lab: Lab) -> bytes | None:
    """The collector's public key as the service user's folder holds it, read as
    untrusted (that user may have put anything there: a link to /etc/shadow is not
    followed, and only one ssh-ed25519 public key, written again by asyncssh, is
    copied); None when there is none such."""
    import asyncssh

    pub = lab.collector_key.with_name(lab.collector_key.name + ".pub")
    try:
        fd = os.open(pub, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        raw = os.read(fd, 4097)
    finally:
        os.close(fd)
    if len(raw) > 4096:
        return None
    try:
        key = asyncssh.import_public_key(raw)
    except (asyncssh.KeyImportError, ValueError, UnicodeDecodeError):
        return None
    if key.get_algorithm() != "ssh-ed25519":
        return None
    return bytes(key.export_public_key())


def _pub_differs(lab: Lab) -> bool:
    shared = lab.folder / perms.COLLECTOR_PUB
    try:
        have = shared.read_bytes()[:4096]
    except OSError:
        return True
    mine = _public_key(lab)
    return mine is None or have != mine


def _copy_pub(lab: Lab) -> None:
    data = _public_key(lab)
    if data is None:
        raise LabError(
            _("{path}.pub: missing: sudo zuka lab init makes the key").format(
                path=lab.collector_key
            )
        )
    shared = lab.folder / perms.COLLECTOR_PUB
    if shared.exists() or shared.is_symlink():
        shared.unlink()
    _write_new(shared, data, 0o644, 0, 0)


def carry_out(plan: Plan, actor: str | None = None) -> list[str]:
    """Take the plan's steps in order, then audit them in the lab's ledger (one entry);
    the words of the steps taken."""
    done: list[str] = []
    for step in plan.steps:
        step.act()
        done.append(step.words)
    if done and plan.lab.ledger.exists():
        after = {**plan.audit_after, "steps": done}
        with (
            Ledger.open(plan.lab.ledger, create=False, actor=actor) as ledger,
            ledger.transaction() as conn,
        ):
            ledger.audit(conn, plan.audit_action, "lab", None, None, None, after)
    return done


# -- members --------------------------------------------------------------------------


def _members(group: str) -> set[str]:
    entry = grp.getgrnam(group)
    primary = {p.pw_name for p in pwd.getpwall() if p.pw_gid == entry.gr_gid}
    return set(entry.gr_mem) | primary


def _role(word: str) -> Role:
    try:
        return Role(word)
    except ValueError:
        raise InputError("--role", word, _("is not view, edit or offboard")) from None


def _person(name: str) -> str:
    check_name("user", name)
    if not _user_exists(name):
        raise InputError("user", name, _("is no user of this machine (add it with adduser first)"))
    return name


def plan_add_user(lab: Lab, name: str, role: str, run: Runner = run_command) -> Plan:
    """`zuka lab add-user`: the user into its role's groups and the ones it implies."""
    user, wanted = _person(name), _role(role)
    plan = Plan(lab, audit_action="lab.add-user")
    groups = [group_of(lab, r) for r in _IMPLIED[wanted]]
    for group in groups:
        if user not in _members(group):
            argv = ["gpasswd", "-a", user, group]
            plan.add(" ".join(argv), functools.partial(run, argv))
    plan.audit_after = {"user": user, "role": wanted.value, "groups": groups}
    return plan


def plan_remove_user(
    lab: Lab, name: str, role: str | None = None, run: Runner = run_command
) -> Plan:
    """`zuka lab remove-user`: out of a role (and those that imply it), or of the lab."""
    user = _person(name)
    taken = Role.VIEW if role is None else _role(role)
    gone = [r for r in Role if taken in _IMPLIED[r]]
    plan = Plan(lab, audit_action="lab.remove-user")
    groups = [group_of(lab, r) for r in gone]
    primary = grp.getgrgid(pwd.getpwnam(user).pw_gid).gr_name
    for group in groups:
        if group == primary:
            raise LabError(
                _(
                    "{group} is {user}'s primary group, which gpasswd cannot take away: give"
                    " {user} another one first (sudo usermod -g GROUP {user})"
                ).format(group=group, user=user)
            )
        if user in _members(group):
            argv = ["gpasswd", "-d", user, group]
            plan.add(" ".join(argv), functools.partial(run, argv))
    plan.audit_after = {"user": user, "role": taken.value, "groups": groups}
    return plan


def public_key_text(lab: Lab) -> str:
    """The collector's public key as any member may read it (collector.pub)."""
    shared = lab.folder / perms.COLLECTOR_PUB
    try:
        raw = shared.read_bytes()[:4096]
    except FileNotFoundError:
        raise LabError(
            _("{path}: missing: the lab's admin runs `sudo zuka lab init`").format(path=shared)
        ) from None
    text = raw.decode("ascii", "replace").strip()
    if not text.startswith("ssh-ed25519 ") or any(c < " " for c in text):
        raise LabError(
            _("{path}: is not one ssh-ed25519 public key: sudo zuka lab repair").format(path=shared)
        )
    return text
