"""`zuka collect`'s metrics options refused before the collector starts: exit 2, the
option named, no lock taken, nothing polled."""

from __future__ import annotations

from pathlib import Path

import pytest

from leases.telemetry.lock import PollerLock
from tests.support.cli import Cli


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--metrics-listen", "localhost:9400"], "not an IP address"),
        (["--metrics-listen", "127.0.0.1:0"], "1 to 65535"),
        (["--metrics-listen", "9400"], "no port"),
        (["--metrics-listen", "0.0.0.0:9400"], "needs --metrics-token-file"),
        (["--metrics-listen", "127.0.0.1:9400", "--metrics-money"], "money figures over TCP"),
        (["--metrics-money"], "--metrics-money needs --metrics-listen"),
        (["--metrics-token-file", "/nonexistent"], "--metrics-token-file needs --metrics-listen"),
    ],
)
def test_refused_before_it_starts(z: Cli, ledger_path: Path, args: list[str], said: str) -> None:
    r = z("collect", *args)
    assert r.code == 2 and said in r.err, r.err
    assert PollerLock(ledger_path).holder() is None


def test_a_token_file_others_can_read_is_refused(z: Cli, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("secret\n")
    token.chmod(0o644)
    r = z("collect", "--metrics-listen", "127.0.0.1:9400", "--metrics-token-file", str(token))
    assert r.code == 2 and "readable by others (mode 0644)" in r.err and "chmod 600" in r.err, r.err
    assert "secret" not in r.err + r.out
