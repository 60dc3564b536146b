"""The login commands platforms hand out with port forwards (-L, -R, -D) and with a comment
after them: the forwards kept as the node's tunnels, each checked; the comment dropped."""

from __future__ import annotations

import pytest

from leases.core.errors import InputError
from leases.core.models import SshTarget
from leases.ssh.login import (
    MAX_TUNNELS,
    check_target,
    check_tunnel,
    check_tunnels,
    parse_ssh_command,
    without_comment,
)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        # InternStudio's console, without the -o StrictHostKeyChecking=no it adds (below).
        (
            "ssh -p 41234 root@ssh.intern-ai.org.cn -CNg -L 7860:127.0.0.1:7860",
            SshTarget("ssh.intern-ai.org.cn", 41234, "root", tunnels=("-L 7860:127.0.0.1:7860",)),
        ),
        # Vast.ai's "Direct ssh connect" with its Jupyter forward.
        (
            "ssh -p 12345 root@ssh5.vast.ai -L 8080:localhost:8080",
            SshTarget("ssh5.vast.ai", 12345, "root", tunnels=("-L 8080:localhost:8080",)),
        ),
        # Attached value, bind address, IPv6 in brackets, -R, -D with and without a bind.
        (
            "ssh -L6006:127.0.0.1:6006 -L 127.0.0.1:8888:localhost:8888 h",
            SshTarget("h", tunnels=("-L 6006:127.0.0.1:6006", "-L 127.0.0.1:8888:localhost:8888")),
        ),
        (
            "ssh -L [::1]:80:[2001:db8::1]:8080 -R 9000:localhost:22 -D 1080 -D '*:1081' h",
            SshTarget(
                "h",
                tunnels=(
                    "-L [::1]:80:[2001:db8::1]:8080",
                    "-R 9000:localhost:22",
                    "-D 1080",
                    "-D *:1081",
                ),
            ),
        ),
        # Leading zeros read as OpenSSH reads them; the same forward twice is kept once.
        ("ssh -L 080:h:0022 -L 80:h:22 h", SshTarget("h", tunnels=("-L 80:h:22",))),
        # Featurize's line with its comment; a comment after an alias; `#` inside a word.
        (
            "ssh -p 20022 featurize@workspace.featurize.cn  # 密码见控制台",
            SshTarget("workspace.featurize.cn", 20022, "featurize"),
        ),
        ("ssh -p 1 root@h #see: ssh -p 2 evil@x", SshTarget("h", 1, "root")),
        ("登录指令：ssh -p 6 root@gw # 复制", SshTarget("gw", 6, "root")),
        ("ssh -p 6 root@gw\n密码：Xk9 # 复制", SshTarget("gw", 6, "root")),
    ],
)
def test_forwards_are_kept_and_comments_dropped(command: str, expected: SshTarget) -> None:
    assert parse_ssh_command(command) == expected


def test_internstudios_line_is_accepted_as_pasted_and_its_trust_options_never_honoured() -> None:
    """The console's `-o StrictHostKeyChecking=no` (and a known_hosts of /dev/null) would
    weaken OpenSSH's host-key checks; zuka drops them and checks every key anyway."""
    line = (
        "ssh -p 41234 root@ssh.intern-ai.org.cn -CNg -L 7860:127.0.0.1:7860 "
        "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
    )
    target = parse_ssh_command(line)
    assert target == SshTarget(
        "ssh.intern-ai.org.cn", 41234, "root", tunnels=("-L 7860:127.0.0.1:7860",)
    )
    assert "StrictHostKeyChecking" not in target.command(tunnels=True)


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("ssh -L 1:h:2 -o UserKnownHostsFile=/tmp/k h", "does not honour"),
        ("ssh -L 1:h:2 -o StrictHostKeyChecking='no x' h", "does not honour"),
        ("ssh -L 8080 h", "-L takes [bind_address:]port:host:hostport"),
        ("ssh -L 1:h h", "-L takes [bind_address:]port:host:hostport"),
        ("ssh -L 1:2:h:3:4 h", "-L takes"),
        ("ssh -R 8080 h", "-R takes"),  # OpenSSH's dynamic -R: not kept
        ("ssh -D 1:2:3 h", "-D takes [bind_address:]port"),
        ("ssh -L 70000:h:1 h", "port must be"),
        ("ssh -L 1:h:0 h", "port must be"),
        ("ssh -L /run/x.sock:/run/y.sock h", "socket path"),
        ("ssh -L 1/h/2 h", "socket path"),
        ("ssh -L '1:h;id:2' h", "not a valid host"),
        ("ssh -L 1:-oProxyCommand=x:2 h", "not a valid host"),
        ("ssh -L '1:h x:2' h", "a tunnel is -L or -R"),
        ("ssh -L [::1:80:h:1 h", "cannot be read as a port forward"),
        ("ssh -L 1:[fe80::1%eth0]:2 h", "not a valid IPv6"),
        ("ssh -L", "option -L needs a value"),
        ("ssh -o LocalForward='1 h:2' h", "give the forward as -L"),
        ("ssh -o DynamicForward=1080 h", "give the forward as -D"),
        # A quoted `#` is no comment: the word stays, and is a remote command.
        ("ssh h '# x'", "remote command"),
        ("# ssh root@h", "must start with 'ssh'"),
    ],
)
def test_bad_forwards_are_refused(command: str, reason: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_ssh_command(command)
    assert caught.value.field == "ssh"
    assert reason in str(caught.value)


def test_too_many_forwards_are_refused() -> None:
    many = " ".join(f"-L {p}:localhost:{p}" for p in range(1, MAX_TUNNELS + 2))
    with pytest.raises(InputError, match=f"at most {MAX_TUNNELS} tunnels"):
        parse_ssh_command(f"ssh {many} h")
    assert len(parse_ssh_command(f"ssh {many.rsplit(' -L', 1)[0]} h").tunnels) == MAX_TUNNELS


def test_the_command_leaves_tunnels_out_unless_asked() -> None:
    t = parse_ssh_command("ssh -p 41234 root@ssh.intern-ai.org.cn -CNg -L 7860:127.0.0.1:7860")
    assert t.command() == "ssh -p 41234 root@ssh.intern-ai.org.cn"
    with_tunnels = t.command(tunnels=True)
    assert with_tunnels == "ssh -p 41234 -L 7860:127.0.0.1:7860 root@ssh.intern-ai.org.cn"
    # What the node form shows reads back to the same target.
    assert parse_ssh_command(with_tunnels) == t


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, ()),
        ("", ()),
        (["-L 1:h:2"], ("-L 1:h:2",)),
        (("-L 1:h:2", "-D 3"), ("-L 1:h:2", "-D 3")),
        ("-L 1:h:2,-D 3", ("-L 1:h:2", "-D 3")),  # a CSV cell
        ("-L 1:h:2\n-D 3\n", ("-L 1:h:2", "-D 3")),
        ("  -L  1:h:2 ", ("-L 1:h:2",)),
    ],
)
def test_stored_tunnels_are_read_through_the_one_check(
    value: object, expected: tuple[str, ...]
) -> None:
    assert check_tunnels(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        "L 1:h:2",
        "-X 1:h:2",
        "-L",
        "-L 1:h:2 extra",
        "-L 1:h\x1b[2J:2",
        "-L " + "1" * 400,
        7,
        {"-L": "1:h:2"},
    ],
)
def test_stored_tunnels_that_are_not_forwards_are_refused(value: object) -> None:
    with pytest.raises(InputError) as caught:
        check_tunnels(value if not isinstance(value, str) else [value])
    assert caught.value.field == "ssh_tunnels"


def test_check_target_checks_tunnels_too() -> None:
    assert check_target(SshTarget("h", tunnels=("-D  1080",))).tunnels == ("-D 1080",)
    with pytest.raises(InputError, match="socket path"):
        check_target(SshTarget("h", tunnels=("-L /x:h:1",)))
    assert check_tunnel("-R *:8080:localhost:80") == "-R *:8080:localhost:80"


@pytest.mark.parametrize(
    ("line", "kept"),
    [
        ("ssh h # c", "ssh h"),
        ("ssh h #c", "ssh h"),
        ("ssh h#c", "ssh h#c"),  # not a word start: the shell keeps it
        ("ssh 'h # c'", "ssh 'h # c'"),
        ('ssh "h \\" # c"', 'ssh "h \\" # c"'),
        ("ssh h \\# c", "ssh h \\# c"),
        ("# all", ""),
    ],
)
def test_without_comment_reads_like_a_shell(line: str, kept: str) -> None:
    assert without_comment(line) == kept
