"""Where an audit entry's user came from (leases.core.origin): utmp records crafted byte by
byte, the environment as sshd sets it (and as a user can set it), services, terminals."""

from __future__ import annotations

import ipaddress
import os
import struct
from pathlib import Path

import pytest

from leases.core import origin
from leases.core.origin import RECORD, USER_PROCESS, UtmpRecord

DEAD_PROCESS = 8
LOGIN_PROCESS = 6


def utmp(
    line: str = "pts/3",
    host: bytes | str = b"",
    addr: str | bytes | None = None,
    kind: int = USER_PROCESS,
    user: str = "alice",
) -> bytes:
    """One struct utmp as glibc writes it (384 bytes)."""
    raw_addr = b"\0" * 16
    if isinstance(addr, bytes):
        raw_addr = addr
    elif addr is not None:
        packed = ipaddress.ip_address(addr).packed
        raw_addr = packed + b"\0" * (16 - len(packed))
    host_bytes = host.encode() if isinstance(host, str) else host
    return RECORD.pack(
        kind, 4242, line.encode(), line[-4:].encode(), user.encode(), host_bytes,
        0, 0, 0, 1796283012, 0, raw_addr, b"\0" * 20,
    )  # fmt: skip


def test_the_record_is_linux_struct_utmp() -> None:
    assert RECORD.size == 384


def test_an_ipv4_login_from_its_binary_address() -> None:
    records = origin.parse_utmp(utmp(host="203.0.113.7", addr="203.0.113.7"))
    assert records == [
        UtmpRecord(USER_PROCESS, 4242, "pts/3", "alice", "203.0.113.7",
                   bytes([203, 0, 113, 7]) + b"\0" * 12)
    ]  # fmt: skip
    assert origin.remote_of(records, "pts/3") == "203.0.113.7"


def test_an_ipv6_login() -> None:
    records = origin.parse_utmp(utmp(host="2001:db8::7", addr="2001:db8::7"))
    assert origin.remote_of(records, "pts/3") == "2001:db8::7"
    # Written by sshd for an IPv4 client on a dual-stack socket: shown as IPv4.
    mapped = origin.parse_utmp(utmp(host="::ffff:198.51.100.9", addr="::ffff:198.51.100.9"))
    assert origin.remote_of(mapped, "pts/3") == "198.51.100.9"


def test_a_host_name_with_its_address_takes_the_address() -> None:
    # sshd with UseDNS yes writes the name in ut_host, the address in ut_addr_v6.
    records = origin.parse_utmp(utmp(host="laptop.lab.example", addr="192.0.2.5"))
    assert origin.remote_of(records, "pts/3") == "192.0.2.5"


def test_a_host_name_alone_is_kept_when_it_is_one() -> None:
    records = origin.parse_utmp(utmp(host="Laptop.Lab.example"))
    assert origin.remote_of(records, "pts/3") == "laptop.lab.example"


@pytest.mark.parametrize(
    "host",
    [
        b"\x1b[31mevil\x1b[0m",  # a terminal escape
        b"[red]markup[/red]",  # Textual markup
        b"203.0.113.7; rm -rf /",  # a shell word
        b"\xff\xfe\xfd",  # not UTF-8
        b"-oProxyCommand=sh",  # an ssh option
        "２０３.0.113.7".encode(),  # full-width digits
        b"a" * 255,  # too long for a host name
        b":0",  # an X display: a local login
        b"",
    ],
)
def test_junk_in_the_host_field_is_never_an_origin(host: bytes) -> None:
    records = origin.parse_utmp(utmp(host=host))
    assert origin.remote_of(records, "pts/3") is None
    # The record itself reads, its text made visible.
    assert all(c.isprintable() for c in records[0].host)
    # With no remote end, the terminal is where the user is.
    assert origin.decide(line="pts/3", records=records, env={}, ppid=99) == "tty pts/3"


def test_a_truncated_record_is_dropped_and_the_count_bounded() -> None:
    whole = utmp(line="pts/1", addr="192.0.2.1")
    assert origin.parse_utmp(whole + utmp(line="pts/2")[:200]) == origin.parse_utmp(whole)
    assert origin.parse_utmp(whole[:383]) == []
    assert origin.parse_utmp(b"") == []
    assert len(origin.parse_utmp(whole * 10, max_records=3)) == 3


def test_a_record_of_another_terminal_says_nothing_of_this_one() -> None:
    records = origin.parse_utmp(utmp(line="pts/4", addr="203.0.113.7"))
    assert origin.remote_of(records, "pts/3") is None
    assert origin.remote_of(records, "pts/4") == "203.0.113.7"
    # Nor a closed login on this terminal, nor a getty's.
    closed = utmp(line="pts/3", addr="203.0.113.7", kind=DEAD_PROCESS)
    getty = utmp(line="pts/3", addr="203.0.113.7", kind=LOGIN_PROCESS)
    assert origin.remote_of(origin.parse_utmp(closed + getty), "pts/3") is None


def test_the_latest_login_on_a_terminal_wins() -> None:
    data = (
        utmp(addr="192.0.2.1") + utmp(addr="192.0.2.2", kind=DEAD_PROCESS) + utmp(addr="192.0.2.3")
    )
    assert origin.remote_of(origin.parse_utmp(data), "pts/3") == "192.0.2.3"


def test_the_controlling_terminal_from_proc_stat() -> None:
    def stat(tty_nr: int, comm: str = "python3") -> str:
        return f"1234 ({comm}) S 1000 1234 1234 {tty_nr} 1234 4194560 0 0 0 0"

    assert origin.tty_of_stat(stat(136 << 8 | 3)) == "pts/3"
    # pts 300: major 137, minor 44.
    assert origin.tty_of_stat(stat(137 << 8 | 44)) == "pts/300"
    # A minor above 255 is split around the major.
    assert origin.tty_of_stat(stat((136 << 8) | (1 << 20) | 4)) == "pts/260"
    assert origin.tty_of_stat(stat(4 << 8 | 1)) == "tty1"
    assert origin.tty_of_stat(stat(4 << 8 | 65)) == "ttyS1"
    assert origin.tty_of_stat(stat(0)) is None
    # A command name with spaces and parentheses does not move the fields.
    assert origin.tty_of_stat(stat(136 << 8 | 7, comm="a) 1 2 3 (b")) == "pts/7"
    assert origin.tty_of_stat(stat(5 << 8 | 1)) is None  # /dev/tty, console: not a login
    assert origin.tty_of_stat("garbage") is None
    assert origin.tty_of_stat("1 (x) S 1 1 1 ３") is None  # ASCII digits only


def test_a_terminal_device_path_as_utmp_names_it() -> None:
    assert origin.line_of_ttyname("/dev/pts/3") == "pts/3"
    assert origin.line_of_ttyname("/dev/tty1") == "tty1"
    assert origin.line_of_ttyname("pts/3") is None
    assert origin.line_of_ttyname("/dev/pts/\x1b[2J") is None


def test_the_environment_is_marked_as_the_environment() -> None:
    env = {"SSH_CONNECTION": "203.0.113.7 51234 10.0.0.2 22"}
    assert origin.decide(line=None, records=(), env=env, ppid=4000) == "ssh 203.0.113.7 (env)"
    client = {"SSH_CLIENT": "2001:db8::7 51234 22"}
    assert origin.decide(line=None, records=(), env=client, ppid=4000) == "ssh 2001:db8::7 (env)"
    # A terminal whose utmp says nothing: the environment still comes before it.
    assert origin.decide(line="pts/3", records=(), env=env, ppid=4000) == "ssh 203.0.113.7 (env)"


def test_utmp_wins_over_what_the_environment_says() -> None:
    records = origin.parse_utmp(utmp(addr="192.0.2.1"))
    env = {"SSH_CONNECTION": "203.0.113.66 51234 10.0.0.2 22"}
    assert origin.decide(line="pts/3", records=records, env=env, ppid=4000) == "ssh 192.0.2.1"


@pytest.mark.parametrize(
    "value",
    [
        "\x1b]0;owned\x07 1 2 3",
        "[b]x[/b] 1 2 3",
        "evil.example 1 2 3",  # not an address: sshd always writes one
        "203.0.113.7\n 1 2 3",
        "१२३.0.0.1 1 2 3",  # Devanagari digits
        "9" * 300,
        "",
        "   ",
    ],
)
def test_junk_in_the_environment_is_never_an_origin(value: str) -> None:
    env = {"SSH_CONNECTION": value, "SSH_CLIENT": value}
    assert origin.decide(line=None, records=(), env=env, ppid=4000) == ""


def test_a_scope_id_is_dropped() -> None:
    env = {"SSH_CONNECTION": "fe80::1%eth0 51234 fe80::2%eth0 22"}
    assert origin.decide(line=None, records=(), env=env, ppid=4000) == "ssh fe80::1 (env)"


def test_a_service() -> None:
    zuka_unit = {"ZUKA_SERVICE": "zuka-collect", "INVOCATION_ID": "0" * 32}
    assert origin.decide(line=None, records=(), env=zuka_unit, ppid=1) == "service zuka-collect"
    any_unit = {"INVOCATION_ID": "0" * 32}
    assert origin.decide(line=None, records=(), env=any_unit, ppid=1) == "service systemd"
    # INVOCATION_ID alone from a shell a unit started: not a service of its own.
    assert origin.decide(line=None, records=(), env=any_unit, ppid=4000) == ""
    # A name that is no unit's is not kept.
    bad = {"ZUKA_SERVICE": "x\x1b[2J", "INVOCATION_ID": "0" * 32}
    assert origin.decide(line=None, records=(), env=bad, ppid=1) == "service systemd"
    # On a terminal it is a person, whatever the environment claims.
    assert origin.decide(line="pts/3", records=(), env=zuka_unit, ppid=1) == "tty pts/3"


def test_nothing_known_is_empty() -> None:
    assert origin.decide(line=None, records=(), env={}, ppid=4000) == ""


def _stat_file(tmp_path: Path, tty_nr: int) -> Path:
    path = tmp_path / "stat"
    path.write_text(f"1 (zuka) S 1 1 1 {tty_nr} 1 0\n")
    return path


def _no_tty(fd: int) -> str:
    raise OSError(25, "Inappropriate ioctl for device")


def test_detect_reads_utmp_of_the_terminal(tmp_path: Path) -> None:
    data = utmp(line="pts/2", addr="192.0.2.2") + utmp(line="pts/3", addr="192.0.2.3")
    (tmp_path / "utmp").write_bytes(data)
    found = origin.detect(
        env={"SSH_CONNECTION": "203.0.113.66 1 2 3"},
        utmp_paths=[tmp_path / "missing", tmp_path / "utmp"],
        stat_path=_stat_file(tmp_path, 136 << 8 | 3),
        ttyname=_no_tty,
        ppid=4000,
    )
    assert found == "ssh 192.0.2.3"


def test_detect_falls_back_to_the_terminal_on_stdin(tmp_path: Path) -> None:
    (tmp_path / "utmp").write_bytes(utmp(line="pts/9", addr="192.0.2.9"))
    found = origin.detect(
        env={},
        utmp_paths=[tmp_path / "utmp"],
        stat_path=tmp_path / "no-proc",
        ttyname=lambda fd: "/dev/pts/9" if fd == 0 else _no_tty(fd),
        ppid=4000,
    )
    assert found == "ssh 192.0.2.9"


@pytest.mark.skipif(os.geteuid() != 0, reason="a utmp not root's needs another owner: root")
def test_a_utmp_that_anyone_may_write_or_not_roots_is_not_believed(tmp_path: Path) -> None:
    path = tmp_path / "utmp"
    path.write_bytes(utmp(line="pts/3", addr="192.0.2.3"))
    args = {
        "env": {},
        "utmp_paths": [path],
        "stat_path": _stat_file(tmp_path, 136 << 8 | 3),
        "ttyname": _no_tty,
        "ppid": 4000,
    }
    path.chmod(0o664)
    assert origin.detect(**args) == "ssh 192.0.2.3"
    path.chmod(0o666)
    assert origin.detect(**args) == "tty pts/3"
    path.chmod(0o644)
    os.chown(path, 65534, 0)
    assert origin.detect(**args) == "tty pts/3"
    # A link is not followed.
    os.chown(path, 0, 0)
    (tmp_path / "link").symlink_to(path)
    args["utmp_paths"] = [tmp_path / "link"]
    assert origin.detect(**args) == "tty pts/3"


def test_detect_without_a_terminal_reads_no_utmp(tmp_path: Path) -> None:
    (tmp_path / "utmp").write_bytes(utmp(line="pts/0", addr="192.0.2.1"))
    found = origin.detect(
        env={"SSH_CLIENT": "198.51.100.4 5 22"},
        utmp_paths=[tmp_path / "utmp"],
        stat_path=_stat_file(tmp_path, 0),
        ttyname=_no_tty,
        ppid=4000,
    )
    assert found == "ssh 198.51.100.4 (env)"


def test_who_says_it_in_words() -> None:
    assert origin.who("alice", "ssh 203.0.113.7") == "alice from 203.0.113.7"
    assert origin.who("alice", "ssh 203.0.113.7 (env)") == "alice from 203.0.113.7 (env)"
    assert origin.who("zuka", "service zuka-collect") == "zuka from service zuka-collect"
    assert origin.who("bob", "tty pts/3") == "bob from tty pts/3"
    assert origin.who("bob", "") == "bob"
    # Read back from a ledger someone wrote by hand: made visible.
    assert "\x1b" not in origin.who("bob\x1b[2J", "ssh \x1b]0;x\x07")


def test_the_record_layout_matches_what_sshd_wrote() -> None:
    # The first record of a real /run/utmp sshd wrote in this project's CI container
    # (a login of zukatest on pts/0 from 127.0.0.1), its fields at glibc's offsets.
    raw = bytearray(384)
    struct.pack_into("<hi", raw, 0, USER_PROCESS, 1978)
    raw[8:13] = b"pts/0"
    raw[40:44] = b"ts/0"
    raw[44:52] = b"zukatest"
    raw[76:85] = b"127.0.0.1"
    struct.pack_into("<ii", raw, 340, 1796283012, 0)
    raw[348:352] = bytes([127, 0, 0, 1])
    (rec,) = origin.parse_utmp(bytes(raw))
    assert (rec.line, rec.user, rec.host) == ("pts/0", "zukatest", "127.0.0.1")
    assert origin.record_remote(rec) == "127.0.0.1"
