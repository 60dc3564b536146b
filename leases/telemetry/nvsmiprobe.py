"""Probing a node's nvidia-smi: which of our query fields it knows, and why it fails when
it cannot answer at all. It only awaits the runner it is given."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeVar

from leases.core.models import NodeHealth
from leases.telemetry.nvsmi import (
    EXTRA_DRIVER_VERSION,
    KNOWN_FIELDS,
    QUERY_FIELDS,
    REQUIRED_FIELDS,
    check_fields,
    classify_failure,
    query_command,
)
from leases.telemetry.words import REASONS


class NvsmiProbeError(RuntimeError):
    """Probing the query fields failed; `health` says why, in the poller's terms. `host`:
    the host figures' part of the last output, when the caller read them with it."""

    def __init__(self, health: NodeHealth, message: str) -> None:
        super().__init__(message)
        self.health = health
        self.host: str | None = None


class CommandOutput(Protocol):
    """What probe needs from a finished command: leases.ssh.stream.CommandResult, or a test's own.

    A protocol, so that parsing never imports asyncssh.
    """

    @property
    def exit_status(self) -> int | None: ...
    @property
    def stdout(self) -> str: ...
    @property
    def stderr(self) -> str: ...


# Seen in the field (issues corpus): composable-resource-operator#37 gets
#   'Field "device_minor" is not a valid field to query.\n\n' on stdout, exit 2;
# telegraf#6573 quotes it with typographic quotes on Windows; candle#733 "compute_cap".
_REJECTED = re.compile(
    r"Field\s+[\"“”'‘’]?([^\"“”'‘’\s]+)[\"“”'‘’]?\s+is\s+not\s+a\s+valid\s+field\s+to\s+query",
    re.IGNORECASE,
)


def rejected_field(output: str) -> str | None:
    """The field nvidia-smi refused as "not a valid field to query", if any."""
    match = _REJECTED.search(output)
    return match.group(1) if match else None


_R = TypeVar("_R", bound=CommandOutput)


async def probe(
    run: Callable[[str], Awaitable[CommandOutput]],
    fields: Sequence[str] = QUERY_FIELDS,
) -> tuple[str, ...]:
    """The subset of `fields` this node's nvidia-smi accepts, in order (see probe_read)."""

    async def query(kept: tuple[str, ...]) -> CommandOutput:
        return await run(query_command(kept))

    return (await probe_read(query, fields))[0]


async def probe_read(
    run: Callable[[tuple[str, ...]], Awaitable[_R]],
    fields: Sequence[str] = QUERY_FIELDS,
) -> tuple[tuple[str, ...], _R]:
    """The subset of `fields` this node's nvidia-smi accepts, in order, and the output of
    the query that accepted them (run(fields) runs the query for those fields): a node
    that knows every field is probed and read in one command.

    Drops one rejected optional field per try (an old driver refuses one at a time), so it
    runs at most len(fields) + 1 commands. Raises NvsmiProbeError when a required field is
    refused or the command fails for another reason (health from classify_failure).
    """
    kept = list(fields)
    check_fields(kept)
    for _ in range(len(kept) + 1):
        result = await run(tuple(kept))
        if result.exit_status == 0:
            return tuple(kept), result
        field = rejected_field(f"{result.stdout}\n{result.stderr}")
        if field is None or field not in kept:
            health = classify_failure(result.exit_status, result.stdout, result.stderr)
            raise NvsmiProbeError(health, _failure_message(health, result))
        if field in REQUIRED_FIELDS:
            raise NvsmiProbeError(
                NodeHealth.GARBAGE,
                f"nvidia-smi on this node does not know the required field {field!r}",
            )
        kept.remove(field)
        if not kept:
            break
    raise NvsmiProbeError(NodeHealth.GARBAGE, "nvidia-smi rejected every query field")


# A driver version as nvidia-smi prints it (535.104.05, 550.54.15): digits and dots.
_DRIVER = re.compile(r"[0-9][0-9.]{0,31}")


def driver_word(value: object) -> str:
    """The driver version a reading carried, or "" when it carried none that reads as one."""
    return value if isinstance(value, str) and _DRIVER.fullmatch(value) else ""


def checked_probe(fields: object, driver: object) -> tuple[str, ...] | None:
    """Fields kept from an earlier probe (read back from the ledger, so possibly edited
    behind zuka's back), or None when they are not a probe's: not a list of distinct field
    names zuka asks for, holding every required one and driver_version, or a driver that
    is not a version. Without the driver no driver change would ever drop the probe: a node
    whose nvidia-smi gives none is probed each time."""
    if not isinstance(fields, list) or not 0 < len(fields) <= len(KNOWN_FIELDS):
        return None
    if not all(isinstance(f, str) and f in KNOWN_FIELDS for f in fields):
        return None
    if len(set(fields)) != len(fields) or not set(fields) >= REQUIRED_FIELDS:
        return None
    if EXTRA_DRIVER_VERSION not in fields:
        return None
    if not isinstance(driver, str) or not driver or driver_word(driver) != driver:
        return None
    return tuple(fields)


def _failure_message(health: NodeHealth, result: CommandOutput) -> str:
    said = (result.stderr.strip() or result.stdout.strip()).splitlines()
    detail = f" ({said[0][:200]})" if said else ""
    # Kept (a poll gap's detail): in English, as REASONS holds it.
    return f"{REASONS[health]}; exit status {result.exit_status}{detail}"
