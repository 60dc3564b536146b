"""One reading of a node's GPUs over SSH, probing its nvidia-smi only when its fields are not
known: with the fields from before (this process's, or the ledger's leases.telemetry.
probecache) it is one command; without them the probe's first query, the full field set,
is the reading when the node knows every field. The host figures ride along when asked,
and so, with known fields, do the compute apps and their owners: the sweep that reads them
is still one round trip (with_apps)."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from leases.core.models import GpuSample
from leases.ssh.errors import OutputTooLarge, SshError
from leases.ssh.stream import CommandResult
from leases.telemetry import hoststats, nvsmi, nvsmiprobe, owners

# Ends the GPU query's part of a reading that carries the compute apps, with its exit status,
# on a line of its own even when nvidia-smi's output did not end in a newline. The first
# such line: the GPU query prints no process's words (the apps part comes after it).
GPUS_MARK = "@zuka-gpus"
_GPUS_LINE = re.compile(rf"\n{re.escape(GPUS_MARK)} ([0-9]{{1,3}})\r?\n")
# The shell variable holding the GPU query's status (the command runs in a subshell: a
# kept-open shell keeps none of it).
_STATUS = "zuka_s"


@dataclass(frozen=True)
class AppsRead:
    """The GPU processes with their owners (reading None: not read this time), and the
    host figures' part of the output when they were asked for with them (host_read)."""

    reading: owners.ProcessReading | None
    host_read: bool
    host: str | None = None


@dataclass(frozen=True)
class GpuRead:
    """What one reading ran and got back."""

    fields: tuple[str, ...]  # the fields the query asked for
    probed: bool  # found by this reading (not the known ones)
    result: CommandResult  # the GPU query's own exit status, its output, stderr
    host: str | None  # the host figures' part of the output, when asked for
    apps: AppsRead | None = None  # the compute apps, when they rode along (with_apps)


def with_apps(query: str, *, host: bool) -> str:
    """The GPU query, its marker line, then the owner query (only when the GPU query
    succeeded: its nvidia-smi would fail the same way, and slowly, within the same
    timeout), then the host snippet: what a sweep that reads the processes sends, in one
    round trip. The host part comes last, after the last HOST_MARK line: before it, the
    owner query's command lines (a tenant's words) hold no line break, and after it the
    only text a tenant names (df's mount paths) can start no line with "@" (see
    hoststats)."""
    apps = f'if [ "${_STATUS}" = 0 ]; then {owners.APPS_OWNERS_COMMAND}; fi'
    text = f"{query}; {_STATUS}=$?; printf '\\n{GPUS_MARK} %s\\n' \"${_STATUS}\"; {apps}"
    return f"({hoststats.with_host(text) if host else text})"


def unwrap_apps(command: str) -> tuple[str, bool] | None:
    """(the GPU query, whether the host snippet follows) of a command with_apps made;
    None for any other command (the simulated nodes answer it part by part)."""
    at = command.find(f"; {_STATUS}=$?; ")
    if not command.startswith("(") or at < 0:
        return None
    query = command[1:at]
    return next(((query, h) for h in (False, True) if command == with_apps(query, host=h)), None)


def split_apps(stdout: str) -> tuple[str, int | None, str | None]:
    """(the GPU query's output, its exit status, the rest) around GPUS_MARK's first line;
    no marker: the whole output, its status and the rest None."""
    match = _GPUS_LINE.search(stdout)
    if match is None:
        return stdout, None, None
    return stdout[: match.start()], int(match.group(1)), stdout[match.end() :]


async def read_gpus(
    run: Callable[[str], Awaitable[CommandResult]],
    known: tuple[str, ...] | None,
    *,
    with_host: bool,
    apps_of: owners.OwnersMemo | None = None,
) -> GpuRead:
    """Read the GPUs with the known fields, else probe (nvsmiprobe.probe_read). Known
    fields the node now refuses one of (its driver changed under us) are probed afresh in
    the same reading. apps_of, the node's owner-query memo: with known fields, its compute
    apps and their owners ride on the same command (GpuRead.apps; the host figures then come after
    them). Raises NvsmiProbeError (with the host part on it) when probing fails, SshError
    as run does."""
    # Most readings of a warm poller: the known fields' query alone, without query()'s parts.
    plain = apps_of is None and not with_host
    if known is not None and plain:
        result = await run(nvsmi.query_command(known))
        if answered(result):
            return GpuRead(known, False, result, None)
    hosts: list[str | None] = [None]
    apps: list[AppsRead | None] = [None]
    ride = [apps_of if known is not None else None]  # with the known fields' query alone

    async def query(fields: tuple[str, ...]) -> CommandResult:
        command = nvsmi.query_command(fields)
        if (memo := ride[0]) is not None:
            ride[0] = None
            riding = _riding(await run(with_apps(command, host=with_host)), memo, host=with_host)
            if riding is not None:
                result, hosts[0], apps[0] = riding
                return result
            # No marker came back (a forced command, a wrapper): nothing of that output is
            # trusted to be the GPU query's. Asked alone, as before; the apps after it.
        if not with_host:
            return await run(command)
        result, hosts[0] = _hosted(await run(hoststats.with_host(command)))
        return result

    if known is not None and not plain:
        result = await query(known)
        if answered(result):
            return GpuRead(known, False, result, hosts[0], apps[0])
    try:
        fields, result = await nvsmiprobe.probe_read(query)
    except nvsmiprobe.NvsmiProbeError as exc:
        exc.host = hosts[0]
        raise
    return GpuRead(fields, True, result, hosts[0], apps[0])


def known_command(known: tuple[str, ...], *, with_host: bool, apps: bool) -> str:
    """What a reading with known fields sends (read_gpus' first command): the query alone,
    with the host snippet after it, or with the apps riding on it (with_apps)."""
    command = nvsmi.query_command(known)
    if apps:
        return with_apps(command, host=with_host)
    return hoststats.with_host(command) if with_host else command


def known_read(
    known: tuple[str, ...],
    result: CommandResult,
    *,
    with_host: bool,
    apps_of: owners.OwnersMemo | None,
) -> GpuRead | None:
    """The reading the answer to known_command(known, ...) gives, as read_gpus takes it
    (apps_of: the apps rode on it, parsed through the node's memo). None where read_gpus
    would go on: the apps' marker missing (the query asked again alone) or a field
    refused (probed afresh)."""
    host, apps = None, None
    if apps_of is not None:
        riding = _riding(result, apps_of, host=with_host)
        if riding is None:
            return None
        result, host, apps = riding
    elif with_host:
        result, host = _hosted(result)
    return GpuRead(known, False, result, host, apps) if answered(result) else None


def _riding(
    result: CommandResult, memo: owners.OwnersMemo, *, host: bool
) -> tuple[CommandResult, str | None, AppsRead] | None:
    """The GPU query's own result, the host part and the apps of an answer to with_apps;
    None when its marker did not come back."""
    stdout, said, rest = split_apps(result.stdout)
    if said is None or rest is None:
        return None
    got = _apps_from(rest, memo, host=host)
    return CommandResult(said, stdout, result.stderr), got.host, AppsRead(got.reading, False)


def _hosted(result: CommandResult) -> tuple[CommandResult, str | None]:
    """The GPU query's own result and the host part of an answer to hoststats.with_host."""
    stdout, said, host = hoststats.split_output(result.stdout)
    status = result.exit_status if said is None else said  # the GPU query's own
    return CommandResult(status, stdout, result.stderr), host


def answered(result: CommandResult) -> bool:
    """Whether the known fields' query was answered (well, or with a failure of its own),
    not refused for a field the node's nvidia-smi no longer knows (then it is probed)."""
    if result.exit_status == 0:
        return True
    return nvsmiprobe.rejected_field(f"{result.stdout}\n{result.stderr}") is None


def driver_of(samples: Sequence[GpuSample]) -> str:
    """The driver version a reading carried ("" when none, or none that reads as one)."""
    extra = samples[0].extra if samples else {}
    return nvsmiprobe.driver_word(extra.get(nvsmi.EXTRA_DRIVER_VERSION))


async def read_apps(
    run: Callable[[str], Awaitable[CommandResult]], memo: owners.OwnersMemo, *, host: bool
) -> AppsRead:
    """The compute apps, then every GPU process's owner, in one round trip (leases.
    telemetry.owners), parsed through the node's memo. A node that floods us raises
    OutputTooLarge (that is its state); any other SSH failure or an unreadable answer is a
    reading not had."""
    command = owners.APPS_OWNERS_COMMAND
    try:
        result = await run(hoststats.with_host(command) if host else command)
    except OutputTooLarge:
        raise
    except SshError:
        return AppsRead(None, False)
    return _apps_from(result.stdout, memo, host=host)


def _apps_from(stdout: str, memo: owners.OwnersMemo, *, host: bool) -> AppsRead:
    """The owner query's output (the host part after it when `host`) as an AppsRead."""
    text = None
    if host:
        stdout, _, text = hoststats.split_output(stdout, last=True)
    try:
        return AppsRead(memo.parse(stdout), host, text)
    except nvsmi.NvsmiParseError:
        return AppsRead(None, host, text)
