"""known_hosts writes: one function, and nothing it writes reads back as more than one entry."""

from __future__ import annotations

from pathlib import Path

import asyncssh
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leases.ssh import hostkeys
from leases.ssh.hostkeys import UnsafeKnownHostsEntry

KEY = asyncssh.generate_private_key("ssh-ed25519")
OTHER = asyncssh.generate_private_key("ssh-ed25519")


def entries(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


@pytest.mark.parametrize(
    "host",
    [
        "gpu1\n[127.0.0.1]:2222",  # a second line: a key for another node
        "gpu1 ssh-ed25519 AAAA",
        "gpu1,victim.example.com",
        "*",
        "gpu?",
        "!gpu",
        "|1|c2FsdA==|aGFzaA==",
        "@cert-authority",
        "#gpu",
        "gpu\x1b[2J",
        "gpu\r",
        "",
        "[gpu]:22",
    ],
)
def test_a_host_that_would_not_read_back_as_one_entry_is_refused(host: str, tmp_path: Path) -> None:
    path = tmp_path / "known_hosts"
    with pytest.raises(UnsafeKnownHostsEntry):
        hostkeys.trust(host, 2222, KEY, path)
    assert not path.exists()


def test_a_newline_cannot_plant_a_key_for_another_node(tmp_path: Path) -> None:
    path = tmp_path / "known_hosts"
    with pytest.raises(UnsafeKnownHostsEntry):
        hostkeys.trust("gpu1\n[127.0.0.1]:2222", None, OTHER, path)
    assert hostkeys.classify("127.0.0.1", 2222, OTHER, [path]) is hostkeys.HostKeyStatus.UNKNOWN


@settings(max_examples=300, deadline=None)
@given(host=st.text(max_size=40), port=st.one_of(st.none(), st.integers(-5, 70000)))
def test_every_trust_adds_at_most_one_well_formed_entry_for_that_host_only(
    host: str, port: int | None, tmp_path_factory: pytest.TempPathFactory
) -> None:
    path = tmp_path_factory.mktemp("kh") / "known_hosts"
    try:
        hostkeys.trust(host, port, KEY, path)
    except UnsafeKnownHostsEntry:
        assert not path.exists()
        return
    lines = entries(path)
    assert len(lines) == 1
    parsed = asyncssh.import_known_hosts(path.read_text())
    pattern = hostkeys.host_pattern(host, port)
    assert [k.public_data for k in parsed.match(pattern, "", None)[0]] == [KEY.public_data]
    # And it vouches for nothing else.
    for other in ["victim", "127.0.0.1", "[127.0.0.1]:2222", "x" + host]:
        if other != pattern:
            assert parsed.match(other, "", None)[0] == []


def test_the_written_line_is_what_known_hosts_line_returns(tmp_path: Path) -> None:
    path = tmp_path / "known_hosts"
    assert hostkeys.trust("gpu.example.com", 2222, KEY, path)
    assert path.read_text() == hostkeys.known_hosts_line("gpu.example.com", 2222, KEY)
    assert path.stat().st_mode & 0o777 == 0o600
