"""The sshd and host checks through a runner whose answers the test chooses: which
commands they send, and what they make of good, bad, missing and hostile answers."""

from __future__ import annotations

import asyncssh
import pytest

from leases.accept.checks import host, keys, ports, sshd
from leases.accept.engine import LoginOffer, Settings, Sold, new_context
from leases.core.acceptance import CheckResult, Level, Status
from leases.core.models import NodeHealth
from leases.ssh.errors import SshError
from leases.ssh.stream import CommandResult

KEY_A = asyncssh.generate_private_key("ssh-ed25519", comment="lab@zuka")
KEY_B = asyncssh.generate_private_key("ssh-ed25519", comment="ops@provider\x1b[2J")
FP_A = KEY_A.get_fingerprint("sha256")
FP_B = KEY_B.get_fingerprint("sha256")


NO_KEYS2 = CommandResult(1, "", "cat: /root/.ssh/authorized_keys2: No such file or directory\n")


def _pub(key: asyncssh.SSHKey) -> str:
    return key.export_public_key().decode()


class Runner:
    """Answers by command; anything else exits 127 like a missing tool."""

    def __init__(self, answers: dict[str, CommandResult]) -> None:
        self.answers = answers
        self.sent: list[str] = []

    async def run(self, cmd: str, timeout: float | None = None) -> CommandResult:
        self.sent.append(cmd)
        for prefix, result in self.answers.items():
            if cmd == prefix or (prefix.endswith("*") and cmd.startswith(prefix[:-1])):
                return result
        return CommandResult(127, "", f"sh: 1: {cmd.split()[0]}: not found\n")


def ok(out: str, err: str = "") -> CommandResult:
    return CommandResult(0, out, err)


GOOD_T = (
    "usepam yes\npermitrootlogin prohibit-password\npubkeyauthentication yes\n"
    "passwordauthentication no\nkbdinteractiveauthentication no\nauthenticationmethods any\n"
)
SS_GOOD = (
    'LISTEN 0 128 0.0.0.0:22 0.0.0.0:* users:(("sshd",pid=1,fd=3))\n'
    "LISTEN 0 128 127.0.0.1:8888 0.0.0.0:*\n"
)


def good_node() -> dict[str, CommandResult]:
    return {
        "sshd -T": CommandResult(1, "", "sshd: no hostkeys available -- exiting.\n"),
        "/usr/sbin/sshd -T": ok(GOOD_T),
        "cat ~/.ssh/authorized_keys": ok(_pub(KEY_A)),
        "cat ~/.ssh/authorized_keys2": NO_KEYS2,
        "ss -ltnpH": ok(SS_GOOD),
    }


def refused() -> LoginOffer:
    return LoginOffer(True, ("publickey",), "Permission denied")


async def run_sshd(
    answers: dict[str, CommandResult],
    offer: LoginOffer | None = None,
    settings: Settings | None = None,
) -> tuple[dict[str, Status], list[CheckResult], Runner]:
    runner = Runner(answers)

    async def proof() -> LoginOffer:
        return offer or refused()

    ctx = new_context(
        Sold("n1", expected_keys=(FP_A,)), runner, Level.QUICK, settings, password_proof=proof
    )
    results = await sshd.run(ctx)
    return {r.check: r.status for r in results}, results, runner


async def test_good_node_passes_each_and_says_the_source() -> None:
    statuses, results, runner = await run_sshd(good_node())
    assert statuses == {
        "sshd.password": Status.PASSED,
        "sshd.kbdint": Status.PASSED,
        "sshd.rootlogin": Status.PASSED,
        "sshd.proof": Status.PASSED,
        "sshd.keys": Status.PASSED,
        "sshd.keysources": Status.PASSED,
        "sshd.ports": Status.PASSED,
        "sshd.services": Status.PASSED,
    }
    assert "read with `/usr/sbin/sshd -T`" in results[0].words
    # Nothing listens on all interfaces but the expected port 22: no curl was sent.
    assert not any(c.startswith("curl") for c in runner.sent)


async def test_bad_config_files_fail_each_with_sources() -> None:
    answers = {
        "cat /etc/ssh/sshd_config": ok(
            "Include /etc/ssh/sshd_config.d/*.conf\nUsePAM yes\nPermitRootLogin yes\n"
            "KbdInteractiveAuthentication yes\nInclude /root/evil\n"
        ),
        "for f in /etc/ssh/sshd_config.d/*.conf; do*": ok(
            "==> /etc/ssh/sshd_config.d/50-cloud-init.conf <==\nPasswordAuthentication yes\n\n"
        ),
        "cat ~/.ssh/authorized_keys": ok(_pub(KEY_A) + "\n" + _pub(KEY_B)),
        "cat ~/.ssh/authorized_keys2": NO_KEYS2,
        "ss -ltnpH": ok(
            SS_GOOD + "LISTEN 0 128 0.0.0.0:6379 0.0.0.0:*\nLISTEN 0 128 0.0.0.0:8888 0.0.0.0:*\n"
        ),
        "curl -s -m 3 -o /dev/null -w '%{http_code}' http://127.0.0.1:6379/api/kernels": CommandResult(
            52, "000", ""
        ),
        "curl -s -m 3 -o /dev/null -w '%{http_code}' http://127.0.0.1:8888/api/kernels": ok("200"),
    }
    offer = LoginOffer(True, ("publickey", "password"), "Permission denied")
    statuses, results, runner = await run_sshd(answers, offer)
    assert statuses == {
        "sshd.password": Status.FAILED,
        "sshd.kbdint": Status.FAILED,
        "sshd.rootlogin": Status.FAILED,
        "sshd.config-unread": Status.WARNED,
        "sshd.proof": Status.FAILED,
        "sshd.keys": Status.FAILED,
        "sshd.keysources": Status.PASSED,
        "sshd.ports": Status.WARNED,
        "sshd.services": Status.FAILED,
    }
    by = {r.check: r for r in results}
    assert "50-cloud-init.conf line 1" in by["sshd.password"].words
    assert "read from /etc/ssh/sshd_config and 1 Include file(s)" in by["sshd.password"].words
    assert "`sshd -T`: sshd: not found" in by["sshd.password"].words
    assert "the node asked for a password" in by["sshd.proof"].words
    # The stranger's key: its fingerprint and its comment, escape made visible.
    assert FP_B in by["sshd.keys"].words and FP_A not in by["sshd.keys"].words
    assert "\x1b" not in by["sshd.keys"].words and "ops@provider" in by["sshd.keys"].words
    assert "0.0.0.0:6379" in by["sshd.ports"].words and "8888" not in by["sshd.ports"].words
    assert "0.0.0.0:8888" in by["sshd.services"].words
    # The include script: the allow-listed glob as a word, the outside path never sent.
    [script] = [c for c in runner.sent if c.startswith("for f in")]
    assert "/root/evil" not in " ".join(runner.sent)
    assert "*_key|*/moduli) continue" in script


async def test_match_block_warns() -> None:
    answers = good_node() | {
        "/usr/sbin/sshd -T": CommandResult(255, "", "Permission denied\n"),
        "cat /etc/ssh/sshd_config": ok(
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            "Match Address 10.0.0.0/8\n  PasswordAuthentication yes\n"
        ),
    }
    statuses, results, _ = await run_sshd(answers)
    assert statuses["sshd.password"] is Status.PASSED
    assert statuses["sshd.match"] is Status.WARNED
    [match] = [r for r in results if r.check == "sshd.match"]
    assert "applies only to Match Address 10.0.0.0/8" in match.words


async def test_authentication_methods_publickey_first_makes_password_moot() -> None:
    answers = good_node() | {
        "/usr/sbin/sshd -T": ok(
            GOOD_T.replace("passwordauthentication no", "passwordauthentication yes").replace(
                "authenticationmethods any", "authenticationmethods publickey,password"
            )
        ),
    }
    statuses, _, _ = await run_sshd(answers)
    assert statuses["sshd.password"] is Status.PASSED


@pytest.mark.parametrize(
    ("offer", "status", "words"),
    [
        (
            LoginOffer(True, ("publickey", "keyboard-interactive"), "denied"),
            Status.FAILED,
            "keyboard-interactive answer",
        ),
        (LoginOffer(False, ("none",), "let in"), Status.FAILED, "no key and no password"),
        (
            LoginOffer(False, (), "jump host j: connection refused"),
            Status.NOT_CHECKED,
            "jump host j: connection refused",
        ),
        (LoginOffer(True, ("publickey",), "denied"), Status.PASSED, "methods offered: publickey"),
    ],
)
def test_judge_proof(offer: LoginOffer, status: Status, words: str) -> None:
    got = sshd.judge_proof(offer)
    assert got.status is status and words in got.words


def test_judge_proof_local_node_is_skipped() -> None:
    assert sshd.judge_proof(None).status is Status.SKIPPED


async def test_unreadable_settings_are_not_checked_never_passed() -> None:
    answers = {
        "/usr/sbin/sshd -T": CommandResult(1, "", "no hostkeys\n"),
        "cat /etc/ssh/sshd_config": CommandResult(
            1, "", "cat: /etc/ssh/sshd_config: Permission denied\n"
        ),
    }
    statuses, results, _ = await run_sshd(answers)
    assert statuses["sshd.settings"] is Status.NOT_CHECKED
    assert "Permission denied" in results[0].words
    # No ss: /proc/net/tcp is read instead.
    assert statuses["sshd.ports"] is Status.NOT_CHECKED


async def test_ports_from_proc_when_ss_is_missing() -> None:
    answers = good_node()
    del answers["ss -ltnpH"]
    answers["cat /proc/net/tcp /proc/net/tcp6"] = ok(
        "  sl  local_address rem_address   st\n"
        "   0: 00000000:1F90 00000000:0000 0A 00000000:00000000\n"  # 0.0.0.0:8080
        "   1: 00000000:18EB 00000000:0000 0A 00000000:00000000\n"  # 0.0.0.0:6379
    )
    statuses, _results, runner = await run_sshd(answers)
    assert statuses["sshd.ports"] is Status.WARNED
    # Both ports were asked for (curl missing: said after the first, and no more asked).
    assert statuses["sshd.services"] is Status.SKIPPED
    assert sum(c.startswith("curl") for c in runner.sent) == 1


async def test_unexpected_keys_without_expectations_are_skipped() -> None:
    ev_ctx = new_context(
        Sold("n1"), Runner({"cat ~/.ssh/authorized_keys": ok(_pub(KEY_B))}), Level.QUICK
    )
    ev = await ev_ctx.probe.run("authorized-keys", "cat ~/.ssh/authorized_keys")
    assert keys.judge_keys(ev, ()).status is Status.SKIPPED
    assert keys.judge_keys(ev, (FP_A,)).status is Status.FAILED
    assert keys.judge_keys(ev, (FP_B,)).status is Status.PASSED


async def test_an_unexpected_key_forced_to_a_command_warns_an_open_one_fails() -> None:
    """A platform's agent key (command="...", no shell of its own) is worth asking the
    provider about; a key that opens a shell is a way in nobody in the lab controls."""
    forced = 'no-pty,command="true" ' + _pub(KEY_B)
    for text, status in (
        (forced, Status.WARNED),
        ('from="10.0.0.1",command="/usr/bin/agent --x" ' + _pub(KEY_B), Status.WARNED),
        ('from="10.0.0.1" ' + _pub(KEY_B), Status.FAILED),
        (forced + _pub(KEY_B), Status.FAILED),  # the same key again, unrestricted
        # A forced command that is a shell, or runs what the client asks, forces nothing.
        ('command="/bin/bash -l" ' + _pub(KEY_B), Status.FAILED),
        ('command="/usr/bin/agent $SSH_ORIGINAL_COMMAND" ' + _pub(KEY_B), Status.FAILED),
        # "command=" inside another option's quoted value is no command option (sshd).
        ('from="*,command=" ' + _pub(KEY_B), Status.FAILED),
        ('environment="X=,command=" ' + _pub(KEY_B), Status.FAILED),
        ('permitopen="h:1,command=" ' + _pub(KEY_B), Status.FAILED),
        # Whatever can start a shell or run another program forces nothing.
        *(
            (f'command="{c}" ' + _pub(KEY_B), Status.FAILED)
            for c in (
                "$SHELL",
                "'/bin/bash'",
                "VAR=1 bash",
                "true; bash",
                "nice bash",
                "python3",
                "/usr/bin/script -q /dev/null",
                "tmux",
                "/usr/bin/env sh",
            )
        ),
        ('command="/usr/bin/rrsync /data" ' + _pub(KEY_B), Status.WARNED),
    ):
        ctx = new_context(Sold("n1"), Runner({"cat ~/.ssh/authorized_keys": ok(text)}), Level.QUICK)
        ev = await ctx.probe.run("authorized-keys", "cat ~/.ssh/authorized_keys")
        result = keys.judge_keys(ev, (FP_A,))
        assert result.status is status, (text, result.words)
        assert FP_B in result.words and "\x1b" not in result.words


async def test_authorized_keys_the_node_will_not_show_are_never_a_pass() -> None:
    for stderr, said in (
        ("cat: /root/.ssh/authorized_keys: Permission denied\n", "could not be read"),
        ("cat: /root/.ssh/authorized_keys: No such file or directory\n", "reads keys from else"),
    ):
        runner = Runner({"cat ~/.ssh/authorized_keys": CommandResult(1, "", stderr)})
        ctx = new_context(Sold("n1"), runner, Level.QUICK)
        ev = await ctx.probe.run("authorized-keys", "cat ~/.ssh/authorized_keys")
        result = keys.judge_keys(ev, (FP_A,))
        assert result.status is Status.NOT_CHECKED and said in result.words


async def test_a_stranger_in_authorized_keys2_fails_and_other_sources_warn() -> None:
    """sshd reads .ssh/authorized_keys2 too by default: a key there logs in as well."""
    answers = good_node()
    answers["cat ~/.ssh/authorized_keys2"] = ok(_pub(KEY_B))
    statuses, results, _runner = await run_sshd(answers)
    assert statuses["sshd.keys"] is Status.FAILED
    keys = next(r for r in results if r.check == "sshd.keys")
    assert "authorized_keys2 line 1:" in keys.words and FP_B in keys.words


def test_keys_files_follow_authorizedkeysfile_and_refuse_what_they_cannot_read() -> None:
    from leases.accept.parse.sshdconf import parse_sshd_t

    conf = parse_sshd_t(
        "passwordauthentication no\n"
        "authorizedkeysfile .ssh/authorized_keys %h/.ssh/Extra /etc/ssh/keys/%u ../x\n"
        "authorizedkeyscommand /usr/bin/get-keys %u\n"
        "trustedusercakeys none\n"
    )
    paths, skipped = keys.keys_files(conf)
    assert paths == ["~/.ssh/authorized_keys", "~/.ssh/Extra"]  # the case kept
    assert skipped == ["/etc/ssh/keys/%u", "../x"]
    assert keys.cat_command("~/.ssh/Extra") == "cat ~/.ssh/Extra"
    assert keys.cat_command("/etc/ssh/a b") == "cat '/etc/ssh/a b'"
    sources = keys.judge_key_sources(conf, ("sshd-T",), skipped)
    assert sources.status is Status.WARNED
    assert "/etc/ssh/keys/%u ../x, which zuka did not read" in sources.words
    assert "AuthorizedKeysCommand /usr/bin/get-keys %u (sshd -T)" in sources.words
    # Without sshd's settings, OpenSSH's own two files.
    assert keys.keys_files(None) == (["~/.ssh/authorized_keys", "~/.ssh/authorized_keys2"], [])


async def test_a_file_the_node_hides_never_hides_a_stranger_found_in_another() -> None:
    runner = Runner({
        "cat ~/.ssh/authorized_keys": ok(_pub(KEY_A) + _pub(KEY_B)),
        "cat ~/.ssh/authorized_keys2": CommandResult(1, "", "cat: x: Permission denied\n"),
    })  # fmt: skip
    ctx = new_context(Sold("n1"), runner, Level.QUICK)
    first = await ctx.probe.run("authorized-keys", "cat ~/.ssh/authorized_keys")
    second = await ctx.probe.run("authorized-keys2", "cat ~/.ssh/authorized_keys2")
    failed = keys.judge_keys(first, (FP_A,), (second,))
    assert failed.status is Status.FAILED and "(also: ~/.ssh/authorized_keys2 could not" in (
        failed.words
    )
    clean = keys.judge_keys(first, (FP_A, FP_B), (second,))
    assert clean.status is Status.NOT_CHECKED  # what it could read is clean; the rest unread


def test_a_key_source_in_a_match_block_or_authorizedkeysfile_none_is_said() -> None:
    from leases.accept.parse.sshdconf import parse_config, parse_sshd_t

    conf = parse_config({
        "/etc/ssh/sshd_config": "PasswordAuthentication no\nMatch User ubuntu\n"
        " AuthorizedKeysCommand /opt/p/keys %u\n",
    })  # fmt: skip
    sources = keys.judge_key_sources(conf, ("sshd-config",))
    assert sources.status is Status.WARNED
    assert "AuthorizedKeysCommand /opt/p/keys %u for Match User ubuntu" in sources.words
    none = parse_sshd_t("passwordauthentication no\nauthorizedkeysfile none\n")
    assert keys.keys_files(none) == ([], [])
    said = keys.judge_key_sources(none, ("sshd-T",))
    assert said.status is Status.WARNED and "AuthorizedKeysFile none" in said.words


def test_absolute_keys_files_are_read_only_where_keys_live() -> None:
    from leases.accept.parse.sshdconf import parse_sshd_t

    conf = parse_sshd_t(
        "authorizedkeysfile /etc/shadow /proc/self/environ /srv/u/.ssh/keys /etc/ssh/keys/root\n"
    )
    paths, skipped = keys.keys_files(conf)
    assert paths == ["/srv/u/.ssh/keys", "/etc/ssh/keys/root"]
    assert skipped == ["/etc/shadow", "/proc/self/environ"]


async def test_match_blocks_for_this_login_are_applied_with_sshd_t_c() -> None:
    """Plain sshd -T applies no Match block: a "Match User root / PasswordAuthentication
    yes" shows only with -C and this login's user and address."""
    answers = good_node()
    plain = "/usr/sbin/sshd -T"  # the one that answers on this node
    with_c = answers[plain].stdout.replace(
        "passwordauthentication no", "passwordauthentication yes"
    )
    answers[plain + sshd.MATCH_THIS_LOGIN] = ok(with_c)
    statuses, results, runner = await run_sshd(answers)
    assert statuses["sshd.password"] is Status.FAILED
    password = next(r for r in results if r.check == "sshd.password")
    assert "Match blocks applied for this login (-C)" in password.words
    assert plain + sshd.MATCH_THIS_LOGIN in runner.sent


def test_kernels_command_formats_only_an_int() -> None:
    assert ports.kernels_command(8888, "::") == (
        "curl -s -m 3 -o /dev/null -w '%{http_code}' http://[::1]:8888/api/kernels"
    )


# -- host ------------------------------------------------------------------------------

DF = """\
Filesystem     Type    1024-blocks      Used Available Capacity Mounted on
overlay        overlay   104857600  52428800  52428800      50% /
/dev/nvme1n1   xfs      7516192768 104857600 7411335168       2% /data
tmpfs          tmpfs      16777216         0  16777216       0% /dev/shm
"""


async def run_host(
    answers: dict[str, CommandResult], rate: float | Exception | None, paths: tuple[str, ...]
) -> dict[str, CheckResult]:
    async def throughput(nbytes: int) -> float:
        assert nbytes == host.THROUGHPUT_BYTES
        if isinstance(rate, Exception):
            raise rate
        assert rate is not None
        return rate

    ctx = new_context(
        Sold("n1"),
        Runner(answers),
        Level.QUICK,
        Settings(data_paths=paths, min_free_gib=100),
        throughput=throughput if rate is not None else None,
    )
    return {r.check: r for r in await host.run(ctx)}


async def test_host_disk_and_throughput() -> None:
    paths = ("/", "/data", "/root/autodl-tmp", "/dev/shm")
    answers = {
        "df -PT -- / /data /root/autodl-tmp /dev/shm": CommandResult(
            1, DF, "df: /root/autodl-tmp: No such file or directory\n"
        )
    }
    got = await run_host(answers, 112e6, paths)
    status = {k: r.status for k, r in got.items()}
    assert status == {
        "host.disk:/root/autodl-tmp": Status.SKIPPED,
        # 52428800 KiB = 50.0 GiB free < 100, and overlay: two reasons, one warning.
        "host.disk:/": Status.WARNED,
        "host.disk:/data": Status.PASSED,  # 7411335168 KiB = 7068.0 GiB
        "host.disk:/dev/shm": Status.WARNED,  # 16 GiB and tmpfs
        "host.throughput": Status.PASSED,
    }
    words = got["host.disk:/"].words
    assert "less than 100 GiB free" in words and "50.0 GiB free of 100.0 GiB" in words
    assert "overlay does not survive the container" in words
    assert "does not survive a reboot" in got["host.disk:/dev/shm"].words
    assert "112.0 MB/s" in got["host.throughput"].words


async def test_slow_and_failed_throughput() -> None:
    df = {"df -PT -- /": ok(DF.split("\n", 2)[0] + "\n" + DF.split("\n")[2] + "\n")}
    slow = await run_host(df, 4e6, ("/",))
    t = slow["host.throughput"]
    assert t.status is Status.WARNED
    # 100e9 B / 4e6 B/s = 25000 s = 6.9 h
    assert "6.9 h" in t.words
    dead = await run_host(df, SshError("n1", NodeHealth.TIMEOUT, "no answer"), ("/",))
    assert dead["host.throughput"].status is Status.NOT_CHECKED
    local = await run_host(df, None, ("/",))
    assert local["host.throughput"].status is Status.SKIPPED


def test_key_options_are_read_as_sshd_reads_them() -> None:
    from leases.offboard.authkeys import key_options

    assert key_options('from="*,command=",no-pty') == [("from", "*,command="), ("no-pty", "")]
    assert key_options('command="echo \\"hi\\"",restrict') == [
        ("command", 'echo "hi"'),
        ("restrict", ""),
    ]


def test_data_paths_on_one_file_system_are_one_finding() -> None:
    from leases.accept.parse.df import DfReport, DiskSpace
    from leases.core.acceptance import Evidence

    root = DiskSpace("/", "overlay", "overlay", 50 * 2**20, 2 * 2**20, "/")
    report = DfReport(
        spaces=(root, DiskSpace("/root", "overlay", "overlay", 50 * 2**20, 2 * 2**20, "/"),
                DiskSpace("/data", "/dev/md0", "xfs", 7000 * 2**20, 6000 * 2**20, "/data")),
        missing=("/mnt",),
    )  # fmt: skip
    ev = Evidence("df", "df -PT -- / /root /data /mnt", 0, "", "")
    out = {r.check: r for r in host.judge_disk(report, Settings(), ev)}
    assert sorted(out) == ["host.disk:/", "host.disk:/data", "host.disk:/mnt"]
    assert out["host.disk:/"].title == "Disk /, /root"
    assert out["host.disk:/"].status is Status.WARNED
    assert "the same file system holds /root" in out["host.disk:/"].words
    assert out["host.disk:/data"].status is Status.PASSED
