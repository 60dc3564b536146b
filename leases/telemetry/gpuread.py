"""One reading of a node's GPUs over SSH, probing its nvidia-smi only when its fields are not
known: with the fields from before (this process's, or the ledger's leases.telemetry.
probecache) it is one command; without them the probe's first query, the full field set,
is the reading when the node knows every field. The host figures ride along when asked."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from leases.core.models import GpuSample
from leases.ssh.errors import OutputTooLarge, SshError
from leases.ssh.stream import CommandResult
from leases.telemetry import hoststats, nvsmi, nvsmiprobe, owners


@dataclass(frozen=True)
class GpuRead:
    """What one reading ran and got back."""

    fields: tuple[str, ...]  # the fields the query asked for
    probed: bool  # found by this reading (not the known ones)
    result: CommandResult  # the GPU query's own exit status, its output, stderr
    host: str | None  # the host figures' part of the output, when asked for


async def read_gpus(
    run: Callable[[str], Awaitable[CommandResult]],
    known: tuple[str, ...] | None,
    *,
    with_host: bool,
) -> GpuRead:
    """Read the GPUs with the known fields, else probe (nvsmiprobe.probe_read). Known
    fields the node now refuses one of (its driver changed under us) are probed afresh in
    the same reading. Raises NvsmiProbeError (with the host part on it) when probing fails,
    SshError as run does."""
    hosts: list[str | None] = [None]

    async def query(fields: tuple[str, ...]) -> CommandResult:
        command = nvsmi.query_command(fields)
        if not with_host:
            return await run(command)
        result = await run(hoststats.with_host(command))
        stdout, said, host = hoststats.split_output(result.stdout)
        hosts[0] = host
        status = result.exit_status if said is None else said  # the GPU query's own
        return CommandResult(status, stdout, result.stderr)

    if known is not None:
        result = await query(known)
        said = f"{result.stdout}\n{result.stderr}" if result.exit_status != 0 else ""
        if not said or nvsmiprobe.rejected_field(said) is None:  # only a failure is read
            return GpuRead(known, False, result, hosts[0])
    try:
        fields, result = await nvsmiprobe.probe_read(query)
    except nvsmiprobe.NvsmiProbeError as exc:
        exc.host = hosts[0]
        raise
    return GpuRead(fields, True, result, hosts[0])


def driver_of(samples: Sequence[GpuSample]) -> str:
    """The driver version a reading carried ("" when none, or none that reads as one)."""
    extra = samples[0].extra if samples else {}
    return nvsmiprobe.driver_word(extra.get(nvsmi.EXTRA_DRIVER_VERSION))


@dataclass(frozen=True)
class AppsRead:
    """The GPU processes with their owners (reading None: not read this time), and the
    host figures' part of the output when they were asked for with them (host_read)."""

    reading: owners.ProcessReading | None
    host_read: bool
    host: str | None = None


async def read_apps(
    run: Callable[[str], Awaitable[CommandResult]], node: str, *, host: bool
) -> AppsRead:
    """The compute apps, then every process's owner, in one round trip (leases.telemetry.
    owners). A node that floods us raises OutputTooLarge (that is its state); any other
    SSH failure or an unreadable answer is a reading not had."""
    command = owners.APPS_OWNERS_COMMAND
    try:
        result = await run(hoststats.with_host(command) if host else command)
    except OutputTooLarge:
        raise
    except SshError:
        return AppsRead(None, False)
    stdout, text = result.stdout, None
    if host:
        stdout, _, text = hoststats.split_output(stdout, last=True)
    try:
        return AppsRead(owners.parse_apps_owners(stdout, node), host, text)
    except nvsmi.NvsmiParseError:
        return AppsRead(None, host, text)
