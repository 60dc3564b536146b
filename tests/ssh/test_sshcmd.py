"""Reading the login commands rental platforms and clouds hand out."""

from __future__ import annotations

import pytest

from leases.core.errors import InputError
from leases.core.models import SshTarget
from leases.core.secrets import HIDDEN
from leases.ssh.login import JumpHop, parse_jump_hops, parse_ssh_command, ssh_config_aliases


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (
            "ssh -p 30022 root@connect.westb.seetacloud.com",
            SshTarget("connect.westb.seetacloud.com", 30022, "root"),
        ),
        ("ssh root@region-9.autodl.pro -p 41234", SshTarget("region-9.autodl.pro", 41234, "root")),
        (
            "ssh -i ~/.ssh/lab -J bastion@jump.lab.cn user@10.0.0.7",
            SshTarget("10.0.0.7", None, "user", "~/.ssh/lab", "bastion@jump.lab.cn"),
        ),
        ("ssh -o Port=2222 -l ubuntu gpu.example.cn", SshTarget("gpu.example.cn", 2222, "ubuntu")),
        ("ssh -o 'Port 2200' -oUser=lab h1", SshTarget("h1", 2200, "lab")),
        ("ssh -p2201 -CT -v root@1.2.3.4", SshTarget("1.2.3.4", 2201, "root")),
        ("ssh://root@h.example.com:2200", SshTarget("h.example.com", 2200, "root")),
        ("ssh -p 22 root@[2001:db8::1]", SshTarget("2001:db8::1", 22, "root")),
        ("ssh -CNgT -v -p 1234 root@host", SshTarget("host", 1234, "root")),
        ("ssh -o ServerAliveInterval=30 -o LogLevel=ERROR h", SshTarget("h")),
        ("ssh -vp2202 root@h", SshTarget("h", 2202, "root")),
        ("ssh -J none -J other root@h", SshTarget("h", None, "root")),
        ("ssh -o ProxyJump=none root@h", SshTarget("h", None, "root")),
        (
            "ssh -J 'a@j1:2200,ssh://[2001:db8::2]:22' h",
            SshTarget("h", jump="a@j1:2200,[2001:db8::2]:22"),
        ),
        ("ssh -- root@h", SshTarget("h", None, "root")),
        # Console pastes: a label before `ssh`, a password line after it.
        ("登录指令：ssh -p 6666 root@gw.example.cn", SshTarget("gw.example.cn", 6666, "root")),
        ("SSH: ssh -p 6666 root@gw", SshTarget("gw", 6666, "root")),
        ("Login command: ssh root@gw -p 7", SshTarget("gw", 7, "root")),
        ("ssh -p 6666 root@gw\n密码：Xk9#pq", SshTarget("gw", 6666, "root")),
        ("登录指令：ssh -p 1 root@gw\r\n\r\nPassword: hunter2\n", SshTarget("gw", 1, "root")),
        ("ssh -p 1 root@gw 密码：Xk9pq", SshTarget("gw", 1, "root")),
        ("plain-host", SshTarget("plain-host")),
        # OpenSSH takes the first value of a repeated setting (checked with `ssh -G`).
        ("ssh -p 22 -p 23 root@x", SshTarget("x", 22, "root")),
        ("ssh -o Port=24 -p 23 root@x", SshTarget("x", 24, "root")),
    ],
)
def test_parses_platform_commands(command: str, expected: SshTarget) -> None:
    assert parse_ssh_command(command) == expected


def test_alias_is_recognised_from_ssh_config() -> None:
    aliases = ssh_config_aliases("Host gpu-a gpu-b\n  HostName 10.0.0.1\nHost *.lab\n  User x\n")
    assert aliases == frozenset({"gpu-a", "gpu-b"})
    assert parse_ssh_command("gpu-a", aliases) == SshTarget("gpu-a", alias=True)
    assert parse_ssh_command("ssh gpu-b", aliases).alias is True


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("", "is empty"),
        ("ssh", "has no host"),
        ("ssh -p", "option -p needs a value"),
        ("ssh -p 0 root@h", "port must be"),
        ("ssh -p abc root@h", "port must be"),
        ("ssh -Z root@h", "unknown ssh option"),
        ("ssh root@h nvidia-smi", "remote command"),
        ("ssh 'root@h", "cannot be split"),
        ("scp root@h:/x .", "must start with 'ssh'"),
        ("ssh root@bad_host!", "not a valid host"),
        ("ssh 'ro ot'@host", "not a valid user"),
    ],
)
def test_refuses_what_is_not_a_login(command: str, reason: str) -> None:
    with pytest.raises(InputError) as err:
        parse_ssh_command(command)
    assert err.value.field == "ssh"
    assert reason in str(err.value)


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        # Port forwards are kept (test_sshcmd_tunnels.py), but only well-formed ones.
        ("ssh -L /tmp/sock:h:1 root@host", "socket path"),
        ("ssh -CNgL 0:127.0.0.1:6006 root@host", "port must be"),
        ("ssh -F /tmp/x root@host", "does not honour the ssh option -F"),
        ("ssh -W h:22 root@host", "does not honour the ssh option -W"),
        ("ssh -o ProxyCommand='sh -c id' h", "does not honour the ssh option ProxyCommand"),
        ("ssh -oProxyCommand=nc h", "does not honour the ssh option ProxyCommand"),
        ("ssh -o HostName=evil h", "does not honour the ssh option HostName"),
        ("ssh -o LocalCommand=id h", "does not honour the ssh option LocalCommand"),
        ("ssh -o PermitLocalCommand=yes h", "does not honour the ssh option PermitLocalCommand"),
        ("ssh -o StrictHostKeyChecking=maybe h", "always checks host keys"),
        ("ssh -o ServerAliveInterval='30 x' h", "does not honour"),
        ("ssh -G h", "is not a login"),
        ("ssh -o 'Pro%xy=1' h", "not an ssh option name"),
        ("ssh root@-oProxyCommand=x", "not a valid host"),
        ("ssh -- -oProxyCommand=x", "not a valid host"),
        ("ssh -l -oProxy root@h", "not a valid user"),
        ("ssh 'h;id'", "not a valid host"),
        ("ssh 'h%h'", "not a valid host"),
        ("ssh '[fe80::1%eth0]'", "not a valid IPv6"),
        ("ssh h:22", "host:port is not an ssh destination"),
        ("ssh -J '-oProxyCommand=x' h", "not a valid host"),
        ("ssh -J 'a b' h", "not a valid host"),
        ("ssh -i '-oProxyCommand=x' h", "must not start with '-'"),
        ("ssh -i 'a\x1b[2Jb' h", "control"),
        ("ssh x.invalid", "never resolve"),
        ("ssh root@h\nrm -rf /", "more than one line"),
        ("ssh -p 1 " + "a" * 5000, "longer than"),
    ],
)
def test_refuses_options_and_values_zuka_does_not_honour(command: str, reason: str) -> None:
    with pytest.raises(InputError) as err:
        parse_ssh_command(command)
    assert reason in str(err.value)


@pytest.mark.parametrize(
    "command",
    [
        "ssh -J admin:S3cretPw@jump.lab h",
        "ssh://root:S3cretPw@h:22",
        "ssh root:S3cretPw@h",
        "sshpass -p S3cretPw ssh root@h",
        "ssh -p 1 root@h\npassword: S3cretPw\nextra line",
        "ssh -i '-----BEGIN OPENSSH PRIVATE KEY-----S3cretPw' h",
        "密码：S3cretPw",
    ],
)
def test_passwords_are_refused_and_never_repeated(command: str) -> None:
    with pytest.raises(InputError) as err:
        parse_ssh_command(command)
    assert err.value.value == HIDDEN
    assert "S3cretPw" not in str(err.value)


def test_jump_hops_are_parsed_for_the_connection() -> None:
    assert parse_jump_hops("u@a:2200,[2001:db8::1],b") == [
        JumpHop("a", 2200, "u"),
        JumpHop("2001:db8::1"),
        JumpHop("b"),
    ]
    assert parse_jump_hops("none") == []
    with pytest.raises(InputError, match="more than 8 hops"):
        parse_jump_hops(",".join(["h"] * 9))
    with pytest.raises(InputError, match="port must be"):
        parse_jump_hops("h:0")


# OpenSSH's getopt: flags without a value combine; the last letter of a group may take its
# value attached or as the next word; an unknown or refused letter is named wherever it sits.
@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("ssh -vp 2222 root@h", SshTarget("h", 2222, "root")),
        ("ssh -vvp2222 root@h", SshTarget("h", 2222, "root")),
        ("ssh -4p 22 root@h", SshTarget("h", 22, "root")),
        ("ssh -4Cp22 -vl lab h", SshTarget("h", 22, "lab")),
        ("ssh -4i ~/.ssh/k root@h", SshTarget("h", None, "root", "~/.ssh/k")),
        ("ssh -qJ ops@j root@h", SshTarget("h", None, "root", jump="ops@j")),
        ("ssh -vo Port=2200 h", SshTarget("h", 2200)),
    ],
)
def test_combined_flags_parse_like_openssh(command: str, expected: SshTarget) -> None:
    assert parse_ssh_command(command) == expected


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        # -i takes "p" as its value: the key path is then the host and root@h a command.
        ("ssh -ip /k root@h", "remote command"),
        ("ssh -vZp 22 root@h", "unknown ssh option -Z"),
        ("ssh -vG root@h", "-G (printing the config)"),
        ("ssh -vS /tmp/ctl root@h", "-S (a control socket)"),
        ("ssh -vp", "option -p needs a value"),
    ],
)
def test_combined_flags_refuse_by_name(command: str, reason: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_ssh_command(command)
    assert reason in caught.value.reason
