"""Which paths offboarding may shred on a node, and how they become words of a command.

Pure: a scratch path is shredded only when it is absolute, normalised, made of plain
characters (the ledger's own check for a scratch_path resource), equal to or below a
declared root, and not a system directory nor a place whose loss locks everyone out
(an `.ssh` directory: the keys go in their own step). Every path that passes is quoted
with shlex.quote and written after `--` in the commands that use it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence

from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.models import ResourceKind
from leases.core.textsafe import visible
from leases.ledger.records import resource_id

# Never shredded, nor anything below them: the system itself and kernel file systems.
SYSTEM_TREES = (
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/proc",
    "/run",
    "/sbin",
    "/snap",
    "/sys",
    "/usr",
)
# Never shredded as a whole (their subdirectories may be scratch: /root/autodl-tmp).
WHOLE_DIRS = frozenset({"/", "/home", "/root", "/var", "/opt", "/srv", "/tmp", "/mnt", "/media"})
# Parts of a path relative to the login user's home (histories and caches).
_PRIVATE_KEY_RE = re.compile(r"id_(rsa|dsa|ecdsa|ed25519)(_sk)?")
_HOME_PART_RE = re.compile(r"[A-Za-z0-9._@+=,:-]{1,255}")


def under(path: str, root: str) -> bool:
    """path is root or below it (both absolute and normalised)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def check_root(root: str, field: str = "scratch_roots") -> str:
    """A declared root: a clean absolute path that is not / nor a system directory."""
    try:
        resource_id(ResourceKind.SCRATCH_PATH, root)
    except InputError as exc:
        raise InputError(field, exc.value, exc.reason) from None
    if any(under(root, tree) for tree in SYSTEM_TREES) or root == "/":
        raise InputError(field, visible(root, 80), _("a system directory is never a scratch root"))
    return root


def check_scratch_path(path: str, roots: Sequence[str], field: str = "scratch_path") -> str:
    """path, when offboarding may shred it; else InputError naming field, value and why."""
    if not isinstance(path, str):
        raise InputError(field, repr(path), _("must be a string"))
    if path == "/":
        raise InputError(field, path, _("the whole file system is never shredded"))
    try:
        resource_id(ResourceKind.SCRATCH_PATH, path)
    except InputError as exc:
        raise InputError(field, exc.value, exc.reason) from None
    if path in WHOLE_DIRS or any(under(path, tree) for tree in SYSTEM_TREES):
        raise InputError(field, path, _("a system directory is never shredded"))
    if ".ssh" in path.split("/"):
        raise InputError(
            field, path, _("an .ssh directory is not scratch: the lab's key goes in its own step")
        )
    checked = [check_root(r) for r in roots]
    if not checked:
        raise InputError(
            field,
            path,
            _("no scratch roots are declared for this node: add one to [offboard] scratch_roots"),
        )
    if not any(under(path, root) for root in checked):
        raise InputError(
            field,
            path,
            _(
                "is outside the declared roots ({roots}): add its root to "
                "[offboard] scratch_roots, or fix the resource"
            ).format(roots=", ".join(checked)),
        )
    return path


def check_home_entry(rel: str, field: str = "home_path", *, keys: bool = False) -> str:
    """A path relative to the login user's home (a history file, a cache directory; with
    keys=True, the authorized_keys file, the one thing under .ssh offboarding edits)."""
    if not isinstance(rel, str):
        raise InputError(field, repr(rel), _("must be a string"))
    parts = rel.split("/")
    if (
        rel.startswith("/")
        or len(rel) > 1024
        or not all(_HOME_PART_RE.fullmatch(p) and p not in (".", "..") for p in parts)
    ):
        raise InputError(
            field,
            visible(rel, 80),
            _(
                "a path in the home directory is relative, normalised, of letters, digits and "
                ". _ @ + = , : - (no '..', spaces, globs or shell characters)"
            ),
        )
    own_key = len(parts) == 2 and _PRIVATE_KEY_RE.fullmatch(parts[1]) is not None
    if parts[0] == ".ssh" and not (
        (keys and len(parts) == 2 and parts[1].startswith("authorized")) or (not keys and own_key)
    ):
        raise InputError(
            field,
            rel,
            _(
                "an .ssh directory is not a cache: keys have their own step (only a private key"
                " file such as .ssh/id_ed25519 is cleared)"
            ),
        )
    return rel


def quoted(path: str) -> str:
    """One shell word for a checked path (for after `--`)."""
    return shlex.quote(path)


def home_word(rel: str, *, keys: bool = False) -> str:
    """One shell word for a path in the login user's home: "$HOME"/'rel'."""
    return '"$HOME"/' + shlex.quote(check_home_entry(rel, keys=keys))


def root_of(path: str, roots: Iterable[str]) -> str:
    """The innermost declared root that holds path ("" when none)."""
    holding = [r for r in roots if under(path, r)]
    return max(holding, key=len) if holding else ""
