"""The one token-file check (leases.core.tokenfile): only a private regular file of the
user's, read without following a link or blocking on a FIFO, holding one token."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from leases.core.errors import InputError
from leases.core.tokenfile import MAX_TOKEN_BYTES, read_token
from tests.support.tokens import token_file


def _refused(path: Path | str) -> str:
    with pytest.raises(InputError) as caught:
        read_token(path, "prom_token_file", "the Prometheus queries")
    assert caught.value.field == "prom_token_file"
    return caught.value.reason


def test_a_private_file_holding_one_token(tmp_path: Path) -> None:
    assert read_token(token_file(tmp_path, " s3cret-Token_1\n"), "f", "x") == b"s3cret-Token_1"
    assert read_token(token_file(tmp_path, "ro\n", 0o400, "ro"), "f", "x") == b"ro"


def test_home_is_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    token_file(tmp_path, "tok\n")
    assert read_token("~/prom.token", "f", "x") == b"tok"


def test_a_file_others_may_read_is_refused(tmp_path: Path) -> None:
    # ~/.git-credentials as git writes it (0644) is not sent as a bearer token.
    creds = token_file(tmp_path, "https://alice:ghp_x@github.com\n", 0o644, ".git-credentials")
    said = _refused(creds)
    assert "open to its group and others (mode 0644)" in said and "chmod 600" in said
    assert "ghp_x" not in said


def test_a_fifo_never_blocks(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)  # nobody writes: a blocking open would never return
    assert "not a regular file" in _refused(fifo)


def test_a_device_a_directory_and_a_link_are_refused(tmp_path: Path) -> None:
    assert "not a regular file" in _refused("/dev/null")
    assert "not a regular file" in _refused(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(token_file(tmp_path, "tok\n"))
    assert "symbolic link" in _refused(link)
    assert "cannot be read" in _refused(tmp_path / "missing")


def test_a_file_of_proc_is_refused_before_it_is_read() -> None:
    # Regular, the user's own, 0600 and size 0: /proc/self/mem fails its read (EIO),
    # /proc/self/personality would read as the "token" 00000000.
    assert "is empty" in _refused("/proc/self/mem")
    assert "is empty" in _refused("/proc/self/personality")


def test_another_users_file_is_refused(tmp_path: Path) -> None:
    path = token_file(tmp_path, "tok\n")
    os.chown(path, 65534, 65534)  # nobody's (the tests run as root)
    assert "owned by uid 65534" in _refused(path)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (" \n", "is empty"),
        ("two words\n", "one token on one line"),
        ("a\nb\n", "one token on one line"),
        ("x" * (MAX_TOKEN_BYTES + 1), f"longer than {MAX_TOKEN_BYTES} bytes"),
    ],
)
def test_what_is_not_one_token_is_refused(tmp_path: Path, text: str, said: str) -> None:
    assert said in _refused(token_file(tmp_path, text))


@pytest.mark.parametrize(
    ("mode", "who"),
    [(0o640, "its group (mode 0640)"), (0o604, "others (mode 0604)"),
     (0o660, "its group (mode 0660)"), (0o606, "others (mode 0606)")],
)  # fmt: skip
def test_the_refusal_names_who_else_may_open_it(tmp_path: Path, mode: int, who: str) -> None:
    assert f"is open to {who}" in _refused(token_file(tmp_path, "tok\n", mode))
