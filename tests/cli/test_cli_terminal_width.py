"""How wide the command line's tables are fitted."""

from __future__ import annotations

import os


def test_a_terminal_of_no_size_is_taken_as_80_columns() -> None:
    """A pty `ssh -tt` opens from a script says 0x0: tables wrapped at 10 columns then."""
    import pty

    from tui.cli.output import terminal_columns

    leader, follower = pty.openpty()
    try:
        with os.fdopen(follower, "w", closefd=False) as out:
            assert os.get_terminal_size(follower).columns == 0
            assert terminal_columns(out, 80) == 80
    finally:
        os.close(leader)
        os.close(follower)
