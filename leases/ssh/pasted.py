"""A console's paste around a login command: the password it may hold (a line after the
command, or said on its line), which zuka drops and never stores, and the words that say
so without repeating it (leases.ssh.login reads the command itself)."""

from __future__ import annotations

import re

from leases.ssh.speech import _

# A password line after the command, or a password said on the command's own line.
PASSWORD_LINE_RE = re.compile(
    r"^\s*(?:登录)?(?:密码|口令|password|passwd|pwd)\s*[:：=]", re.IGNORECASE
)
PASSWORD_INLINE_RE = re.compile(
    r"(?<![A-Za-z])(?:密码|口令|password|passwd|pass|pwd|pw)\s*[:：=]", re.IGNORECASE
)


def dropped_from(command: str) -> str | None:
    """What of a pasted login zuka drops, said without the dropped text (a password is
    never repeated), and why; None when nothing was. The dashboard's form says it by
    replacing the paste; the command line says it in these words."""
    lines = [line.strip() for line in command.splitlines() if line.strip()]
    kept = [line for line in lines if not PASSWORD_LINE_RE.match(line)]
    line = len(kept) != len(lines)
    inline = len(kept) == 1 and bool(PASSWORD_INLINE_RE.search(kept[0]))
    if line and inline:
        return _(
            "dropped the password line and the password after the command of the pasted login:"
            " zuka never stores a password; it logs in with a key (ssh -i KEY, or your ssh agent)"
        )
    if line:
        return _(
            "dropped the password line of the pasted login: zuka never stores a password; it"
            " logs in with a key (ssh -i KEY, or your ssh agent)"
        )
    if inline:
        return _(
            "dropped the password after the command of the pasted login: zuka never stores a"
            " password; it logs in with a key (ssh -i KEY, or your ssh agent)"
        )
    return None
