"""`zuka ssh NODE [--tmux [SESSION]] [-t] [-- COMMAND...]`: an interactive session on a node through
the route, jump hosts, identity and pinned host keys polling uses (leases.app.shell)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TextIO

from leases.app.shell import ShellEnd, open_session
from leases.core.errors import no_ledger
from leases.core.i18n import _
from leases.core.textsafe import visible
from leases.ledger.paths import ledger_choice
from leases.ledger.store import Ledger
from leases.ssh.interactive import remote_command, tmux_name
from leases.ssh.interactive_tty import TtyTerminal


def ssh(args: argparse.Namespace, out: TextIO) -> int:
    # A bad tmux name, or tmux and a command together, refused before anything is read.
    tmux = None if args.tmux is None else tmux_name(args.tmux)
    words = list(args.remote) or None  # argparse has taken out the -- (every one: 3.11)
    remote_command(tmux, words)
    path, why = ledger_choice(args.ledger)
    if not path.exists():
        raise no_ledger(path, why)
    # Read only: a lab's viewer may log in to a node with their own key.
    with Ledger.open(path, create=False, readonly=True) as ledger:
        node = ledger.node(args.node)
    # Like ssh: a command gets no PTY (bytes streamed, no raw mode) unless -t asks for one.
    terminal = TtyTerminal(pty=words is None or bool(args.tty))
    end: ShellEnd = asyncio.run(open_session(path, node, terminal, tmux=tmux, command=words))
    if not end.opened or end.status != 0:
        print(visible(_("zuka: {problem}").format(problem=end.said)), file=sys.stderr)
    return end.exit_code
