"""`zuka doctor`'s look at SSH keys: the user's agent, the private keys in ~/.ssh and those
the ledger's nodes name (OpenSSH refuses a private key others can read: so does zuka's
login), each without reading a key's contents."""

from __future__ import annotations

import os
import shlex
import socket
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from leases.app.doctor import Finding, Level, Setting
from leases.core.i18n import _
from leases.core.textsafe import visible

AREA = "ssh keys"
# The private keys OpenSSH tries by default.
DEFAULT_KEYS = ("id_ed25519", "id_ecdsa", "id_rsa", "id_ed25519_sk", "id_ecdsa_sk")


def agent(setting: Setting) -> Iterator[Finding]:
    """The agent a person's zuka logs in with: set, and answering."""
    sock = setting.env.get("SSH_AUTH_SOCK", "")
    if not sock:
        yield Finding(
            AREA,
            Level.OK,
            _("no SSH agent (SSH_AUTH_SOCK unset): logins use key files only"),
        )
        return
    path = Path(sock)
    try:
        info = os.stat(path)
    except OSError:
        yield Finding(
            AREA,
            Level.WARN,
            _(
                "SSH_AUTH_SOCK names {path}, which does not exist (an agent of an ended login?)"
            ).format(path=visible(sock)),
            _("log in again with agent forwarding, or: eval $(ssh-agent) && ssh-add"),
        )
        return
    if not stat.S_ISSOCK(info.st_mode):
        said = _("SSH_AUTH_SOCK {path} is not a socket").format(path=visible(sock))
        yield Finding(AREA, Level.WARN, said)
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2)
    try:
        probe.connect(str(path))
    except OSError as exc:
        yield Finding(
            AREA,
            Level.WARN,
            _("the SSH agent at {path} does not answer ({problem})").format(
                path=visible(sock), problem=exc.strerror or exc
            ),
            "eval $(ssh-agent) && ssh-add",
        )
        return
    finally:
        probe.close()
    yield Finding(AREA, Level.OK, _("the SSH agent at {path} answers").format(path=visible(sock)))


def key_files(setting: Setting, named: Iterable[tuple[str, str]]) -> Iterator[Finding]:
    """The user's default private keys and every key a node names (node, path): each must
    exist, be a regular file and be the user's alone."""
    home = setting.home
    checked: set[Path] = set()
    found_any = False
    if home is not None:
        folder = home / ".ssh"
        info = _stat(folder)
        if info is not None and info.st_mode & 0o022:
            yield Finding(
                AREA,
                Level.FAIL,
                _("{path} may be written by others (mode {mode}): sshd and ssh distrust it").format(
                    path=visible(str(folder)), mode=f"{stat.S_IMODE(info.st_mode):04o}"
                ),
                f"chmod 700 {shlex.quote(str(folder))}",
            )
        for name in DEFAULT_KEYS:
            path = folder / name
            if path.exists():
                found_any = True
                checked.add(path)
                yield from _private(path, _("your key"))
    for node, raw in named:
        path = (
            Path(raw).expanduser()
            if home is None
            else Path(raw.replace("~", str(home), 1) if raw.startswith("~") else raw)
        )
        if path in checked:
            continue
        checked.add(path)
        if not path.exists():
            yield Finding(
                AREA,
                Level.FAIL,
                _("node {node} logs in with {path}, which does not exist here").format(
                    node=visible(node), path=visible(raw)
                ),
                _(
                    "copy the key there, or change the node: zuka node edit {node} --ssh '...'"
                ).format(node=shlex.quote(node)),
            )
            continue
        found_any = True
        yield from _private(path, _("node {node}'s key").format(node=visible(node)))
    if not found_any and not setting.env.get("SSH_AUTH_SOCK"):
        yield Finding(
            AREA,
            Level.WARN,
            _("no private key in ~/.ssh and no agent: zuka has nothing to log in with"),
            _("ssh-keygen -t ed25519, then give the .pub to each node"),
        )


def _private(path: Path, what: str) -> Iterator[Finding]:
    info = _stat(path)
    if info is None:
        return
    shown = visible(str(path))
    if not stat.S_ISREG(info.st_mode):
        said = _("{what} {path} is not a regular file").format(what=what, path=shown)
        yield Finding(AREA, Level.FAIL, said)
        return
    if info.st_mode & 0o077:
        yield Finding(
            AREA,
            Level.FAIL,
            _("{what} {path} is readable by others (mode {mode}): ssh refuses such a key").format(
                what=what, path=shown, mode=f"{stat.S_IMODE(info.st_mode):04o}"
            ),
            f"chmod 600 {shlex.quote(str(path))}",
        )
        return
    if not os.access(path, os.R_OK):
        said = _("{what} {path} cannot be read by this user").format(what=what, path=shown)
        yield Finding(AREA, Level.FAIL, said)
        return
    yield Finding(AREA, Level.OK, _("{what} {path} is private").format(what=what, path=shown))


def _stat(path: Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None
