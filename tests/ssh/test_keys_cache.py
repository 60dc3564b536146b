"""Client keys are parsed once per process per file (a fleet on one key connects without
re-reading it per node), and read again as soon as the file changes or goes."""

from __future__ import annotations

import os
from pathlib import Path

import asyncssh
import pytest

from leases.ssh.keys import KeyFileRefused, load_client_key, load_keys


def write_key(path: Path, key: asyncssh.SSHKey) -> None:
    fresh = path.with_name(path.name + ".new")
    fresh.write_bytes(key.export_private_key())
    os.replace(fresh, path)  # a new file, as ssh-keygen -f over an old one is


def test_a_key_file_is_parsed_once_until_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "id_ed25519"
    first, second = (asyncssh.generate_private_key("ssh-ed25519") for _ in range(2))
    write_key(path, first)
    loaded = load_client_key(str(path))
    assert isinstance(loaded, asyncssh.SSHKey) and loaded.public_data == first.public_data
    assert load_client_key(str(path)) is loaded  # not parsed again
    assert load_keys(str(path), [])[0] is loaded
    write_key(path, second)  # rotated
    again = load_client_key(str(path))
    assert isinstance(again, asyncssh.SSHKey) and again.public_data == second.public_data


def test_a_key_file_that_went_is_refused_not_served_from_memory(tmp_path: Path) -> None:
    path = tmp_path / "id_ed25519"
    write_key(path, asyncssh.generate_private_key("ssh-ed25519"))
    load_client_key(str(path))
    path.unlink()
    with pytest.raises(KeyFileRefused):
        load_client_key(str(path))
    os.mkfifo(path)  # never read: it would block
    with pytest.raises(KeyFileRefused):
        load_client_key(str(path))


def test_a_certificate_added_beside_the_key_is_picked_up(tmp_path: Path) -> None:
    path = tmp_path / "id_ed25519"
    key = asyncssh.generate_private_key("ssh-ed25519")
    write_key(path, key)
    assert isinstance(load_client_key(str(path)), asyncssh.SSHKey)
    ca = asyncssh.generate_private_key("ssh-ed25519")
    cert = ca.generate_user_certificate(key, "root", principals=["root"])
    (tmp_path / "id_ed25519-cert.pub").write_bytes(cert.export_certificate())
    loaded = load_client_key(str(path))
    assert isinstance(loaded, tuple) and loaded[1].public_data == cert.public_data
