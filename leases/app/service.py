"""`zuka service install | status | uninstall`: the collector (and `zuka web`) as systemd
services, once for every front end.

A plan is made first and shown whole (the files and the systemctl commands); nothing is
written until the front end has the user's yes. `--system` is a lab's install: it needs
root and a lab folder (`zuka lab init`), and runs as the lab's service user with the
collector's own key. `--user` runs in the user's own service manager on their own ledger.
Where systemd is not running, the files are written and the commands are said, not run.
"""

from __future__ import annotations

import os
import pwd
import stat
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from leases.app import serviceruntime
from leases.core.clock import Clock
from leases.core.errors import InputError
from leases.core.i18n import _
from leases.lab.layout import DEFAULT_FOLDER, LEDGER, Lab, find_lab
from leases.service import files
from leases.service.units import COLLECT, WEB, Mode, Runtime, UnitSpec, collect_args, render
from leases.service.units import web_args as make_web_args
from leases.ssh.keys import KeyFileRefused, load_own_key

# (exit status, what it printed) of one command.
Runner = Callable[[Sequence[str]], tuple[int, str]]
SYSTEM_LEDGER = DEFAULT_FOLDER / LEDGER
DEFAULT_WEB_HOST = "127.0.0.1"
DEFAULT_WEB_PORT = 8000


def run_command(argv: Sequence[str]) -> tuple[int, str]:
    """A command to its end (bounded), its status and its output together."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, str(exc)
    return done.returncode, (done.stdout + done.stderr).strip()


def systemd_running(root: Path | None) -> bool:
    """Whether systemd is this machine's init (sd_booted: /run/systemd/system is there);
    never with --root, where the files are for another system."""
    return root is None and Path("/run/systemd/system").is_dir()


def this_runtime() -> Runtime:
    """This zuka's interpreter, and the folder holding its packages (leases and tui lie
    side by side) when the interpreter's own site-packages do not (a checkout run with
    PYTHONPATH)."""
    import leases

    package_root = Path(leases.__file__).resolve().parents[1]
    installed = {Path(sysconfig.get_path(k)).resolve() for k in ("purelib", "platlib")}
    python = Path(sys.executable)
    if not python.is_absolute():
        python = python.absolute()
    needs = (python.resolve(), Path(sys.base_prefix).resolve(), package_root)
    return Runtime(python, None if package_root in installed else package_root, needs)


@dataclass(frozen=True)
class UnitFile:
    name: str  # zuka-collect.service
    path: Path
    text: str


@dataclass(frozen=True)
class ServicePlan:
    """What an install or uninstall will do: the files and the systemctl commands."""

    mode: Mode
    units: tuple[UnitFile, ...]
    commands: tuple[tuple[str, ...], ...]
    run_commands: bool  # False where systemd is not running (or --root)
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Request:
    """What `zuka service install` was asked."""

    mode: Mode
    ledger: Path | None  # --ledger (a system install: the lab's ledger; default /var/lib/zuka)
    web: bool = False
    identity: Path | None = None
    web_host: str = DEFAULT_WEB_HOST
    web_port: int = DEFAULT_WEB_PORT
    root: Path | None = None
    home: Path = Path("/")
    env: Mapping[str, str] | None = None


def _systemctl(mode: Mode, *words: str) -> tuple[str, ...]:
    return ("systemctl", *(["--user"] if mode is Mode.USER else []), *words)


def lab_for(ledger: Path | None) -> Lab:
    """The lab whose ledger this is (default /var/lib/zuka/ledger.db), else InputError
    saying to make it first."""
    path = ledger or SYSTEM_LEDGER
    lab = find_lab(path)
    if lab is None:
        raise InputError(
            "ledger",
            str(path),
            _(
                "is not in a lab folder (no root-owned zuka-lab.toml in {parent}): a "
                "system service runs on a lab's ledger; run `sudo zuka lab init` first"
            ).format(parent=path.parent),
        )
    return lab


def _specs(req: Request, runtime: Runtime, euid: int) -> tuple[list[UnitSpec], list[str]]:
    notes: list[str] = []
    identity: Path | None
    if req.mode is Mode.SYSTEM:
        if euid != 0:
            raise InputError(
                "--system", None, _("installs into /etc/systemd/system: run it as root (sudo)")
            )
        lab = lab_for(req.ledger)
        loose = serviceruntime.problems(runtime, lab.service_user)
        if loose:
            raise InputError(
                "--system",
                None,
                _(
                    "the unit would run code that someone but root may change, or that the"
                    " service user {user} cannot reach (it owns the lab's ledger and reads the"
                    " collector's key): {problems}. Install zuka where only root writes"
                    " (python3 -m venv /opt/zuka, as root)"
                ).format(
                    user=lab.service_user,
                    problems="; ".join(loose[:8]) + ("; ..." if len(loose) > 8 else ""),
                ),
            )
        identity = req.identity or lab.collector_key
        notes += service_key_problems(identity, lab.service_user)
        ledger, home, writable = lab.ledger, lab.collector_key_dir, (lab.folder,)
        user: str | None = lab.service_user
        group: str | None = lab.viewers
    else:
        if req.ledger is None:
            raise InputError("ledger", None, _("a user service needs the ledger's path"))
        ledger = req.ledger.absolute()
        if not ledger.exists():
            raise InputError("ledger", str(ledger), _("no ledger there yet: add nodes first"))
        identity = req.identity.absolute() if req.identity else None
        if identity is not None:
            _check_own_key(identity)
        home, writable, user, group = req.home, (ledger.parent,), None, None
        notes.append(
            _(
                "a user's services stop when they log out, unless `loginctl "
                "enable-linger {user_name}` was run (as root, once)"
            ).format(user_name=_user_name(euid))
        )

    def spec(name: str, what: str, args: tuple[str, ...]) -> UnitSpec:
        return UnitSpec(req.mode, name, what, args, runtime, home, writable, user, group)

    specs = [spec(COLLECT, "zuka collector: polls the fleet into the ledger",
                  collect_args(ledger, identity))]  # fmt: skip
    if req.web:
        args = make_web_args(ledger, req.web_host, req.web_port)
        specs.append(spec(WEB, "zuka web: the dashboard in a browser tab", args))
        if req.mode is Mode.SYSTEM:
            notes.append(
                _(
                    "zuka web's dashboards only read the lab's ledger (whoever holds the "
                    "token is not known by name): they show the fleet to anyone who may read "
                    "the journal, where the token is printed; keep it on 127.0.0.1 and reach "
                    "it with ssh -L"
                )
            )
        notes.append(
            _(
                "zuka web prints each run's address with its secret token to the "
                "journal: journalctl {user_flag}-u {web}.service"
            ).format(user_flag="--user " if req.mode is Mode.USER else "", web=WEB)
        )
    return specs, notes


def _check_own_key(path: Path) -> None:
    """A user service's key: this user's own, closed to others, a key (as `zuka collect
    --identity` will check it at every start: refused now rather than in a restart loop)."""
    import asyncssh

    try:
        load_own_key(path)
    except KeyFileRefused as exc:
        raise InputError(
            "identity", str(path), _("refused: {problem}").format(problem=exc)
        ) from None
    except (asyncssh.KeyImportError, ValueError) as exc:
        raise InputError(
            "identity",
            str(path),
            _("is not a private key usable without a passphrase ({problem})").format(problem=exc),
        ) from None


def service_key_problems(path: Path, service_user: str) -> list[str]:
    """What would keep the service from using its key, said before the unit is written
    (root cannot load it as the service user: its owner and mode are looked at)."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return [
            _(
                "the collector's key {path} does not exist yet: `sudo zuka lab init` makes it"
            ).format(path=path)
        ]
    try:
        uid = pwd.getpwnam(service_user).pw_uid
    except KeyError:
        return [
            _(
                "the service user {service_user} does not exist: `sudo zuka lab init` makes it"
            ).format(service_user=service_user)
        ]
    problems = []
    if not stat.S_ISREG(info.st_mode):
        problems.append(_("the collector's key {path} is not a regular file").format(path=path))
    if info.st_uid != uid:
        problems.append(
            _(
                "the collector's key {path} is not {service_user}'s: chown {service_user} {path}"
            ).format(path=path, service_user=service_user)
        )
    if info.st_mode & 0o077:
        problems.append(
            _("the collector's key {path} is open to others: chmod 600 {path}").format(path=path)
        )
    return problems


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def plan_install(
    req: Request, runtime: Runtime | None = None, euid: int | None = None
) -> ServicePlan:
    """The units and commands of an install (nothing written). Raises InputError."""
    specs, notes = _specs(req, runtime or this_runtime(), os.geteuid() if euid is None else euid)
    folder = files.units_dir(req.mode, req.root, req.home, dict(req.env or os.environ))
    units = tuple(UnitFile(s.file_name, folder / s.file_name, render(s)) for s in specs)
    names = [u.name for u in units]
    commands = (
        _systemctl(req.mode, "daemon-reload"),
        _systemctl(req.mode, "enable", "--now", *names),
    )
    return ServicePlan(req.mode, units, commands, systemd_running(req.root), tuple(notes))


@dataclass(frozen=True)
class Outcome:
    """What was done: the files written or removed, each command's status and words."""

    files: tuple[Path, ...]
    ran: tuple[tuple[tuple[str, ...], int, str], ...]
    not_run: tuple[tuple[str, ...], ...]


def _run_all(
    plan: ServicePlan, commands: Sequence[tuple[str, ...]], runner: Runner
) -> tuple[list[tuple[tuple[str, ...], int, str]], list[tuple[str, ...]]]:
    if not plan.run_commands:
        return [], list(commands)
    ran = []
    for argv in commands:
        code, said = runner(argv)
        ran.append((argv, code, said))
        if code != 0:
            break
    return ran, []


def install(plan: ServicePlan, *, force: bool = False, runner: Runner = run_command) -> Outcome:
    """Write the plan's units (every one checked before any is written), then run its
    commands where systemd runs."""
    for unit in plan.units:
        files.refuse_foreign(unit.path, force)
    for unit in plan.units:
        files.write_atomic(unit.path, unit.text)
    ran, not_run = _run_all(plan, plan.commands, runner)
    return Outcome(tuple(u.path for u in plan.units), tuple(ran), tuple(not_run))


def plan_uninstall(
    mode: Mode, root: Path | None, home: Path, env: Mapping[str, str] | None = None
) -> ServicePlan:
    """The units zuka installed in this mode (those there), and the commands that stop them."""
    folder = files.units_dir(mode, root, home, dict(env or os.environ))
    units = []
    for name in (COLLECT, WEB):
        path = folder / f"{name}.service"
        text = files.read_unit(path)
        if text is not None:
            units.append(UnitFile(f"{name}.service", path, text))
    names = [u.name for u in units]
    commands = [_systemctl(mode, "disable", "--now", *names)] if names else []
    commands.append(_systemctl(mode, "daemon-reload"))
    return ServicePlan(mode, tuple(units), tuple(commands), systemd_running(root))


def uninstall(plan: ServicePlan, *, force: bool = False, runner: Runner = run_command) -> Outcome:
    """Stop and disable the units, remove their files (zuka's only, unless force)."""
    for unit in plan.units:
        files.refuse_foreign(unit.path, force)
    stop, reload = plan.commands[:-1], plan.commands[-1:]
    ran, not_run = _run_all(plan, stop, runner)
    if any(code != 0 for _, code, _ in ran):  # still running: its files are kept
        return Outcome((), tuple(ran), ())
    removed = []
    for unit in plan.units:
        unit.path.unlink(missing_ok=True)
        removed.append(unit.path)
    more, later = _run_all(plan, reload, runner)
    return Outcome(tuple(removed), tuple(ran + more), tuple(not_run + later))


@dataclass(frozen=True)
class UnitState:
    name: str
    path: Path
    present: bool
    ours: bool
    active: str | None  # systemctl is-active's word; None where systemd is not running


@dataclass(frozen=True)
class ServiceStatus:
    mode: Mode
    ledger: Path
    units: tuple[UnitState, ...]
    systemd: bool
    poller_pid: int | None  # who holds the poller lock (-1: held, pid unreadable)
    poller_user: str | None
    last_reading: datetime | None
    age: timedelta | None


def holder_user(pid: int | None) -> str | None:
    if pid is None or pid <= 0:
        return None
    try:
        uid = os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None
    return _user_name(uid)


def status(
    mode: Mode,
    ledger: Path,
    root: Path | None,
    home: Path,
    clock: Clock,
    runner: Runner = run_command,
    env: Mapping[str, str] | None = None,
) -> ServiceStatus:
    """The units (present, zuka's, active), who polls the ledger and how old its last
    reading is."""
    from leases.ledger.store import Ledger
    from leases.telemetry.lock import PollerLock
    from leases.telemetry.rollups import HistoryStore

    folder = files.units_dir(mode, root, home, dict(env or os.environ))
    running = systemd_running(root)
    units = []
    for name in (COLLECT, WEB):
        path = folder / f"{name}.service"
        ours = files.is_ours(path)
        active = None
        if running and ours is not None:
            code, said = runner(_systemctl(mode, "is-active", f"{name}.service"))
            active = said.splitlines()[0] if said else ("active" if code == 0 else "inactive")
        units.append(UnitState(f"{name}.service", path, ours is not None, bool(ours), active))
    pid = PollerLock(ledger).holder() if ledger.exists() else None
    last = None
    if ledger.exists():
        with Ledger.open(ledger, readonly=True) as led:
            statuses = HistoryStore(led).latest_by_id().values()
            checked = [st.checked for st in statuses if st.checked is not None]
        last = max(checked) if checked else None
    now = clock()
    return ServiceStatus(
        mode,
        ledger,
        tuple(units),
        running,
        pid,
        holder_user(pid),
        last,
        None if last is None else now - last,
    )
