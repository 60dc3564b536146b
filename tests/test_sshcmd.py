"""Reading the login commands rental platforms and clouds hand out."""

from __future__ import annotations

import pytest

from leases.errors import InputError
from leases.models import SshTarget
from leases.sshcmd import parse_ssh_command, ssh_config_aliases


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
        ("ssh -L 8888:localhost:8888 -p 1234 root@host", SshTarget("host", 1234, "root")),
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
