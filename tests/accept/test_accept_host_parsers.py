"""The host part's parsers on real-looking outputs: sshd -T, sshd_config with Include and
Match, ss -ltnpH, /proc/net/tcp{,6}, df -PT."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from leases.accept.parse.df import parse_df
from leases.accept.parse.listen import parse_proc_net_tcp, parse_ss
from leases.accept.parse.sshdconf import (
    expand,
    include_allowed,
    includes_of,
    parse_config,
    parse_sshd_t,
    split_files,
)

# `sshd -T` on Ubuntu 22.04 (OpenSSH 8.9p1), cut to the lines around ours.
SSHD_T = """\
port 22
addressfamily any
listenaddress [::]:22
listenaddress 0.0.0.0:22
usepam yes
logingracetime 120
permitrootlogin without-password
pubkeyauthentication yes
passwordauthentication no
kbdinteractiveauthentication no
authenticationmethods any
authorizedkeysfile .ssh/authorized_keys .ssh/authorized_keys2
"""


def test_sshd_t_values_and_source() -> None:
    conf = parse_sshd_t(SSHD_T)
    assert conf.source == "sshd -T"
    assert conf.value("passwordauthentication") == "no"
    assert conf.value("permitrootlogin") == "without-password"
    assert conf.value("usepam") == "yes"
    assert conf.values["kbdinteractiveauthentication"].source == "sshd -T"
    assert conf.problems == ()


def test_sshd_t_garbage_is_a_problem_not_a_crash() -> None:
    conf = parse_sshd_t("\x1b[31mhello\x00\n" * 3)
    assert conf.values == {}
    assert conf.problems == ("sshd -T printed none of the settings looked for",)


# Ubuntu cloud images: the main file says no, but sshd_config.d/50-cloud-init.conf (read
# first, because Include comes first) says yes, and the first value wins.
MAIN = """\
# This is the sshd server system-wide configuration file.
Include /etc/ssh/sshd_config.d/*.conf
KbdInteractiveAuthentication no
UsePAM yes
PasswordAuthentication no   # ignored: the include said it first
PermitRootLogin=yes
Match User deploy
    PasswordAuthentication yes
Match all
PubkeyAuthentication yes
Include ../../tmp/evil.conf
"""
FILES = {
    "/etc/ssh/sshd_config": MAIN,
    "/etc/ssh/sshd_config.d/50-cloud-init.conf": "PasswordAuthentication yes\n",
    "/etc/ssh/sshd_config.d/60-local.conf": 'ChallengeResponseAuthentication "yes"\n',
    "/etc/ssh/sshd_config.d/.hidden.conf": "PermitRootLogin no\n",
}


def test_config_first_value_wins_across_includes() -> None:
    conf = parse_config(FILES)
    assert conf.source == "sshd_config"
    pw = conf.values["passwordauthentication"]
    assert (pw.value, pw.source) == ("yes", "/etc/ssh/sshd_config.d/50-cloud-init.conf line 1")
    # The alias in 60-local.conf came before the main file's KbdInteractiveAuthentication.
    kbd = conf.values["kbdinteractiveauthentication"]
    assert (kbd.value, kbd.source) == ("yes", "/etc/ssh/sshd_config.d/60-local.conf line 1")
    # A name starting with a dot is not matched by *.conf (glob(3)).
    assert conf.value("permitrootlogin") == "yes"
    assert conf.values["permitrootlogin"].source == "/etc/ssh/sshd_config line 6"
    assert conf.files == (
        "/etc/ssh/sshd_config",
        "/etc/ssh/sshd_config.d/50-cloud-init.conf",
        "/etc/ssh/sshd_config.d/60-local.conf",
    )


def test_match_values_apply_only_to_what_they_match() -> None:
    conf = parse_config(FILES)
    [match] = conf.matched
    assert (match.key, match.value, match.condition) == (
        "passwordauthentication",
        "yes",
        "User deploy",
    )
    # After `Match all` values are global again.
    assert conf.values["pubkeyauthentication"].source == "/etc/ssh/sshd_config line 10"


def test_include_outside_etc_ssh_is_named_not_read() -> None:
    conf = parse_config(FILES)
    assert any("/etc/ssh/../../tmp/evil.conf" in p for p in conf.problems)


def test_defaults_where_no_file_sets_a_key() -> None:
    conf = parse_config({"/etc/ssh/sshd_config": "Port 22\n"})
    assert conf.value("passwordauthentication") == "yes"
    assert conf.values["passwordauthentication"].source == "OpenSSH's default"
    assert conf.value("permitrootlogin") == "prohibit-password"


def test_include_loop_stops() -> None:
    files = {"/etc/ssh/sshd_config": "Include /etc/ssh/sshd_config\n"}
    conf = parse_config(files)
    assert any("nested too deep" in p for p in conf.problems)


def test_include_helpers() -> None:
    assert includes_of("Include a.conf /etc/ssh/b/*.conf\n#Include x\n") == [
        "/etc/ssh/a.conf",
        "/etc/ssh/b/*.conf",
    ]
    assert include_allowed("/etc/ssh/sshd_config.d/*.conf")
    for bad in ("/etc/ssh/../shadow", "/etc/ssh/a b", "/etc/ssh/$(id)", "/etc/sshx", "/root/x"):
        assert not include_allowed(bad), bad
    assert expand(
        "/etc/ssh/d/*.conf",
        {"/etc/ssh/d/b.conf": "", "/etc/ssh/d/a.conf": "", "/etc/ssh/d/sub/c.conf": ""},
    ) == [
        "/etc/ssh/d/a.conf",
        "/etc/ssh/d/b.conf",
    ]


def test_split_files() -> None:
    out = "==> /etc/ssh/a.conf <==\nX yes\n\n==> /etc/ssh/b.conf <==\nY no\n\n"
    assert split_files(out) == {"/etc/ssh/a.conf": "X yes\n", "/etc/ssh/b.conf": "Y no\n\n"}


# ss -ltnpH from iproute2 5.10 (Debian 11) as root, and a line of an older ss without the
# state column.
SS = """\
LISTEN 0      128          0.0.0.0:22        0.0.0.0:*    users:(("sshd",pid=812,fd=3))
LISTEN 0      4096   127.0.0.53%lo:53        0.0.0.0:*    users:(("systemd-resolve",pid=633,fd=13))
LISTEN 0      128          0.0.0.0:8888      0.0.0.0:*    users:(("jupyter-lab",pid=4242,fd=6))
LISTEN 0      128             [::]:22           [::]:*    users:(("sshd",pid=812,fd=4))
LISTEN 0      511                *:6006            *:*
0      128      [::ffff:127.0.0.1]:631         [::]:*
garbage \x1b[2J
"""


def test_ss() -> None:
    got = parse_ss(SS)
    assert [(s.address, s.port, s.process) for s in got.sockets] == [
        ("0.0.0.0", 22, "sshd"),
        ("127.0.0.53", 53, "systemd-resolve"),
        ("0.0.0.0", 8888, "jupyter-lab"),
        ("::", 22, "sshd"),
        ("*", 6006, ""),
        ("::ffff:127.0.0.1", 631, ""),
    ]
    assert [s.all_interfaces for s in got.sockets] == [True, False, True, True, True, False]
    assert got.problems == ("ss line 7 not read",)


# /proc/net/tcp then tcp6 as `cat` prints them: 0.0.0.0:22 and 127.0.0.1:631 listening,
# one established connection; [::]:22 and [::1]:8888.
PROC = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 21000 1 0000000000000000 100 0 0 10 0
   1: 0100007F:0277 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 21001 1 0000000000000000 100 0 0 10 0
   2: 0100007F:0016 0100007F:D2F0 01 00000000:00000000 02:0009A2B2 00000000     0        0 21002 4 0000000000000000 20 4 30 10 -1
  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:0016 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 21003 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000001000000:22B8 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 21004 1 0000000000000000 100 0 0 10 0
   2: ZZZZ:0016 00000000:0000 0A
"""


def test_proc_net_tcp() -> None:
    got = parse_proc_net_tcp(PROC)
    assert [(s.address, s.port) for s in got.sockets] == [
        ("0.0.0.0", 22),
        ("127.0.0.1", 631),
        ("::", 22),
        ("::1", 8888),
    ]
    assert [s.all_interfaces for s in got.sockets] == [True, False, True, False]
    assert got.problems == ("/proc/net/tcp line 8 not read",)


DF_OUT = """\
Filesystem     Type    1024-blocks      Used Available Capacity Mounted on
overlay        overlay   102687672  55123456  42312345      57% /
/dev/nvme1n1   xfs      7500000000 100000000 7400000000       2% /root/autodl-tmp
"""
DF_ERR = "df: /data: No such file or directory\ndf: '/mnt': No such file or directory\n"


def test_df_matches_lines_to_the_paths_that_exist() -> None:
    paths = ("/", "/data", "/root/autodl-tmp", "/mnt")
    got = parse_df(DF_OUT, DF_ERR, paths)
    assert got.missing == ("/data", "/mnt")
    assert [(s.path, s.fstype, s.available_kib, s.mount) for s in got.spaces] == [
        ("/", "overlay", 42312345, "/"),
        ("/root/autodl-tmp", "xfs", 7400000000, "/root/autodl-tmp"),
    ]
    assert got.problems == ()


def test_df_count_mismatch_is_a_problem() -> None:
    got = parse_df(DF_OUT, "", ("/",))
    assert got.spaces == ()
    assert got.problems == ("df printed 2 file systems for 1 paths: which is which cannot be told",)


# -- hostile text: the parsers return what they could read, and never raise -----------

_TEXT = st.text(
    alphabet=st.sampled_from(
        list("abcdefghijklmnopqrstuvwxyz0123456789 \t\n:[]%*=#\"'/.-_\x1b\x00")
    ),
    max_size=400,
)


@given(_TEXT)
def test_sshd_parsers_never_raise(text: str) -> None:
    parse_sshd_t(text)
    conf = parse_config({"/etc/ssh/sshd_config": text, "/etc/ssh/a.conf": text})
    assert set(conf.values) >= {"passwordauthentication", "permitrootlogin"}
    split_files(text)


@given(_TEXT)
def test_listen_and_df_parsers_never_raise(text: str) -> None:
    for got in (parse_ss(text), parse_proc_net_tcp(text)):
        assert all(0 < s.port < 65536 for s in got.sockets)
    parse_df(text, text, ("/", "/data"))


def test_include_fan_out_is_bounded() -> None:
    # Each file includes itself twice: 2**16 reads unless the line bound stops it.
    text = "Include /etc/ssh/sshd_config /etc/ssh/sshd_config\nPermitRootLogin no\n"
    conf = parse_config({"/etc/ssh/sshd_config": text})
    assert conf.value("permitrootlogin") == "no"
    assert "more than 20000 lines: the rest not read" in conf.problems
    assert len(conf.problems) < 40


def test_problems_are_bounded() -> None:
    got = parse_ss("x\n" * 1000)
    assert len(got.problems) == 21 and got.problems[-1] == "and 980 more lines not read"
