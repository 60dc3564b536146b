"""The words of SSH faults: what failed, never a Python type name."""

from __future__ import annotations

from pathlib import Path

from leases.ssh.session import NodeSession
from tests.support.sshfixtures import FakeNode, TestKeys, node_options


async def test_a_channel_that_failed_without_an_exception_says_so(
    keys: TestKeys, node: FakeNode, tmp_path: Path
) -> None:
    session = NodeSession(node.as_node("gpu1"), node_options(keys, tmp_path, [node]))
    try:
        await session.run("true")
        link = session._link
        assert link is not None
        # The connection is up; only a channel ended with no error to show.
        err = session._dropped(link, None)
        assert err.message == "channel failed: it closed without an exit status"
        assert "str" not in err.message.split()
    finally:
        await session.close()
