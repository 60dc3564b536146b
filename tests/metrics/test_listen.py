"""--metrics-listen addresses, the token file and who may scrape what (leases.metrics.listen)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from leases.core.errors import InputError
from leases.metrics.exporter import settings
from leases.metrics.listen import Listen, access, parse_listen, read_token


@pytest.mark.parametrize(
    ("text", "host", "port"),
    [("127.0.0.1:9400", "127.0.0.1", 9400), ("[::1]:1", "::1", 1),
     ("0.0.0.0:65535", "0.0.0.0", 65535), ("10.1.2.3:9100", "10.1.2.3", 9100)],
)  # fmt: skip
def test_tcp_addresses(text: str, host: str, port: int) -> None:
    got = parse_listen(text)
    assert (got.host, got.port, got.unix) == (host, port, False)


def test_unix_address_and_loopback() -> None:
    assert parse_listen("unix:/run/zuka/m.sock") == Listen(path=Path("/run/zuka/m.sock"))
    assert parse_listen("127.0.0.1:9").loopback and parse_listen("[::1]:9").loopback
    assert not parse_listen("0.0.0.0:9").loopback and not parse_listen("10.0.0.1:9").loopback


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("", "give 127.0.0.1:PORT"),
        ("9400", "no port"),
        (":9400", "no port"),
        ("127.0.0.1", "no port"),
        ("127.0.0.1:0", "1 to 65535"),
        ("127.0.0.1:65536", "1 to 65535"),
        ("127.0.0.1:-1", "1 to 65535"),
        ("127.0.0.1:９４００", "1 to 65535"),  # fullwidth digits are not ASCII digits
        ("127.0.0.1:94 00", "1 to 65535"),
        ("localhost:9400", "not an IP address"),
        ("::1:9400", "in brackets"),
        ("[::1]9400", "needs its port"),
        ("[::ffff:127.0.0.1]:9400", "IPv4 address itself"),
        ("unix:", "needs a path"),
        ("unix:/" + "a" * 200, "at most 107 bytes"),
        ("127.0.0.1:94\x1b[2J", "give 127.0.0.1:PORT"),
    ],
)
def test_bad_addresses_are_refused_by_name(text: str, said: str) -> None:
    with pytest.raises(InputError) as err:
        parse_listen(text)
    assert err.value.field == "--metrics-listen"
    assert said in str(err.value), str(err.value)


def _token(tmp_path: Path, text: str, mode: int) -> Path:
    path = tmp_path / "token"
    path.write_text(text)
    path.chmod(mode)
    return path


def test_token_file_is_the_owners_only(tmp_path: Path) -> None:
    path = _token(tmp_path, "  s3cret-Token_1\n", 0o600)
    assert read_token(path) == b"s3cret-Token_1"
    for mode in (0o644, 0o640, 0o604, 0o660):
        path.chmod(mode)
        with pytest.raises(InputError) as err:
            read_token(path)
        assert f"mode {mode:04o}" in err.value.reason and "chmod 600" in err.value.reason
    path.chmod(0o400)
    assert read_token(path) == b"s3cret-Token_1"


def test_bad_token_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot be read"):
        read_token(tmp_path / "missing")
    with pytest.raises(InputError, match="is empty"):
        read_token(_token(tmp_path, " \n", 0o600))
    with pytest.raises(InputError, match="cannot carry"):
        read_token(_token(tmp_path, "two words", 0o600))
    with pytest.raises(InputError, match="longer than"):
        read_token(_token(tmp_path, "x" * 5000, 0o600))
    with pytest.raises(InputError, match="not a regular file"):
        read_token(tmp_path)
    real = _token(tmp_path, "tok", 0o600)
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(InputError, match="cannot be read"):  # O_NOFOLLOW: a link is not taken
        read_token(link)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(InputError, match="not a regular file"):  # never blocks on a FIFO
        read_token(fifo)


def test_who_needs_a_token(tmp_path: Path) -> None:
    token = _token(tmp_path, "tok", 0o600)
    loop, anywhere, sock = (parse_listen(a) for a in ("127.0.0.1:9", "0.0.0.0:9", "unix:/tmp/s"))
    assert access(loop, None, money=False) is None  # loopback, no money: token optional
    assert access(loop, token, money=False) == b"tok"
    assert access(loop, token, money=True) == b"tok"
    with pytest.raises(InputError, match="money figures over TCP need --metrics-token-file"):
        access(loop, None, money=True)
    with pytest.raises(InputError, match="needs --metrics-token-file"):
        access(anywhere, None, money=False)
    assert access(anywhere, token, money=True) == b"tok"
    assert access(sock, None, money=True) is None  # the socket's mode guards it
    with pytest.raises(InputError, match="takes no token"):
        access(sock, token, money=False)


def test_options_that_need_an_address() -> None:
    assert settings(None, None, False) is None
    with pytest.raises(InputError, match="--metrics-money: needs --metrics-listen"):
        settings(None, None, True)
    with pytest.raises(InputError, match="--metrics-token-file: needs --metrics-listen"):
        settings(None, "/tmp/t", False)
