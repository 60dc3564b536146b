"""Parsing nvidia-smi: the query we send, the CSV it prints, and the ways it fails (those in
leases.telemetry.nvsmifailure, re-exported here).

Everything here is pure. Probing which fields a node knows is leases.telemetry.nvsmiprobe's,
reading the long-lived `-lms` stream leases.telemetry.nvsmistream's.
A value nvidia-smi cannot read (`[N/A]`, `[Not Supported]`, `[GPU requires reset]`...)
becomes None, never 0: a missing reading is unknown.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import compress
from operator import ne
from typing import Literal, Protocol

from leases.core.models import GpuProcess, GpuSample
from leases.core.readings import made_sample
from leases.telemetry.nvsmifailure import classify_failure, human_reason


class NvsmiParseError(ValueError):
    """nvidia-smi printed something we could not read; the message names line and field."""


# Keys under GpuSample.extra, shared with leases.telemetry.nvml so both sources read the same.
EXTRA_BUS_ID = "bus_id"
EXTRA_MAX_SM_CLOCK = "max_sm_clock_mhz"
EXTRA_PERSISTENCE = "persistence"
EXTRA_DRIVER_VERSION = "driver_version"
EXTRA_THROTTLE_REASONS = "throttle_reasons"

QUERY_FIELDS: tuple[str, ...] = (
    "index",
    "uuid",
    "name",
    "pci.bus_id",
    "utilization.gpu",
    "utilization.memory",
    "memory.used",
    "memory.total",
    "temperature.gpu",
    "power.draw",
    "power.limit",
    "clocks.sm",
    "clocks.max.sm",
    "pstate",
    "fan.speed",
    "mig.mode.current",
    "persistence_mode",
    "driver_version",
    "ecc.errors.uncorrected.volatile.total",
    "clocks_throttle_reasons.active",
)

# Without these a reading says nothing useful; a node that rejects one is a fault.
REQUIRED_FIELDS: frozenset[str] = frozenset(
    {"index", "uuid", "name", "memory.total", "utilization.gpu", "memory.used"}
)

# No process_name: the one free text nvidia-smi would print here (see parse_compute_apps).
APPS_FIELDS: tuple[str, ...] = ("gpu_uuid", "pid", "used_memory")
APPS_COMMAND = (
    f"nvidia-smi --query-compute-apps={','.join(APPS_FIELDS)} --format=csv,noheader,nounits"
)

_Kind = Literal["index", "text", "opt_text", "number", "count", "mig", "extra"]


@dataclass(frozen=True)
class _Field:
    target: str  # a GpuSample attribute, or a key under GpuSample.extra for kind "extra"
    kind: _Kind


_FIELDS: dict[str, _Field] = {
    "index": _Field("index", "index"),
    "uuid": _Field("uuid", "text"),
    "name": _Field("name", "text"),
    "pci.bus_id": _Field(EXTRA_BUS_ID, "extra"),
    "utilization.gpu": _Field("util_gpu", "number"),
    "utilization.memory": _Field("util_mem", "number"),
    "memory.used": _Field("mem_used_mib", "number"),
    "memory.total": _Field("mem_total_mib", "number"),
    "temperature.gpu": _Field("temp_c", "number"),
    "power.draw": _Field("power_w", "number"),
    "power.limit": _Field("power_limit_w", "number"),
    "clocks.sm": _Field("sm_clock_mhz", "number"),
    "clocks.max.sm": _Field(EXTRA_MAX_SM_CLOCK, "extra"),
    "pstate": _Field("pstate", "opt_text"),
    "fan.speed": _Field("fan_pct", "number"),
    "mig.mode.current": _Field("mig", "mig"),
    "persistence_mode": _Field(EXTRA_PERSISTENCE, "extra"),
    "driver_version": _Field(EXTRA_DRIVER_VERSION, "extra"),
    "ecc.errors.uncorrected.volatile.total": _Field("ecc_uncorrected", "count"),
    "clocks_throttle_reasons.active": _Field(EXTRA_THROTTLE_REASONS, "extra"),
    # Newer drivers' name for the same bit mask.
    "clocks_event_reasons.active": _Field(EXTRA_THROTTLE_REASONS, "extra"),
}
# Every field name zuka ever asks for: a probe kept in the ledger (leases.telemetry.probecache)
# holding any other name is not trusted into a command.
KNOWN_FIELDS: frozenset[str] = frozenset(_FIELDS)

# Only these characters ever reach the remote shell inside a query command.
_FIELD_NAME = re.compile(r"[a-z0-9_.]+")
_NUMBER = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
# Longest number we try to read; anything longer is garbage, not a reading.
_MAX_NUMBER_CHARS = 64

# Sane bounds of what a real nvidia-smi prints. A value outside them makes the reading
# garbage (the node's state, with the field named), so nothing downstream (the packed
# roll-ups hold an index in one byte, power in 0.1 W steps in two) ever sees it.
# GPUs per node: the largest single machines expose 16 (HGX-2, DGX-2) to 20 (PCIe
# boxes); MIG instances are not rows of --query-gpu. 128 leaves room and fits a byte.
MAX_GPUS = 128
MAX_GPU_INDEX = MAX_GPUS - 1
# Text a row carries: a GPU name or uuid is under 100 characters, a bus id 16.
_MAX_TEXT_CHARS = 256
# A busy 8-GPU node runs tens of compute processes, a shared one hundreds.
_MAX_PROCESSES = 4096
_MIB_MAX = 16 * 1024 * 1024  # 16 TiB of GPU memory: 50x a B300's 288 GB
BOUNDS: dict[str, tuple[float, float]] = {
    "index": (0, MAX_GPU_INDEX),
    "util_gpu": (0, 100),
    "util_mem": (0, 100),
    "mem_used_mib": (0, _MIB_MAX),
    "mem_total_mib": (0, _MIB_MAX),
    "temp_c": (-50, 250),
    "power_w": (0, 6000),  # a GB200 superchip draws ~2.7 kW; the packed form ends at 6553 W
    "power_limit_w": (0, 6000),
    "sm_clock_mhz": (0, 10000),
    "fan_pct": (0, 200),  # some boards report a little over 100 %
    "ecc_uncorrected": (0, 2**63 - 1),  # stored in SQLite JSON: an int64
    "pid": (0, 2**32 - 1),
    "used_mib": (0, _MIB_MAX),
}


def _field_spec(field: str) -> _Field:
    # A field zuka has no slot for still travels, as a string under extra.
    spec = _FIELDS.get(field)
    return spec if spec is not None else _Field(field, "extra")


def check_fields(fields: Sequence[str]) -> None:
    if not fields:
        raise ValueError("no nvidia-smi query fields given")
    for f in fields:
        if not _FIELD_NAME.fullmatch(f):
            raise ValueError(f"not an nvidia-smi field name: {f!r}")
    if len(set(fields)) != len(fields):
        raise ValueError(f"duplicate nvidia-smi query fields: {', '.join(fields)}")


def query_command(fields: Sequence[str], loop_ms: int | None = None) -> str:
    """The nvidia-smi command line for `fields`; with loop_ms, a stream every loop_ms ms."""
    command = _query(tuple(fields))
    if loop_ms is not None:
        if isinstance(loop_ms, bool) or not isinstance(loop_ms, int) or loop_ms <= 0:
            raise ValueError(f"loop_ms must be a positive whole number of ms, not {loop_ms!r}")
        command += f" -lms {loop_ms}"
    return command


@functools.lru_cache(maxsize=64)
def _query(fields: tuple[str, ...]) -> str:
    # Cached: a poller asks with the same fields every round (a failing list raises, and
    # lru_cache does not remember raises).
    check_fields(fields)
    return f"nvidia-smi --query-gpu={','.join(fields)} --format=csv,noheader,nounits"


# --- parsing one reading ---

_UNKNOWN_WORDS = frozenset({"", "n/a", "not supported", "unknown"})


def _is_unknown(token: str) -> bool:
    # nvidia-smi brackets every value it could not read: [N/A], [Not Supported],
    # [Unknown Error], [GPU requires reset], [Insufficient Permissions]...
    if not token:
        return True
    first = token[0]
    if first == "[":
        return token[-1] == "]"
    # Only the words in _UNKNOWN_WORDS start with n or u: skip lower() for everything else.
    return first in "nNuU" and token.lower() in _UNKNOWN_WORDS


def _fail(line_no: int, field: str, problem: str) -> NvsmiParseError:
    return NvsmiParseError(f"nvidia-smi line {line_no}, field {field!r}: {problem}")


def _shown(token: str) -> str:
    return repr(token if len(token) <= 40 else token[:40] + "...")


def _bounded(value: float, target: str, line_no: int, field: str, token: str) -> None:
    bounds = BOUNDS.get(target)
    if bounds is not None and not bounds[0] <= value <= bounds[1]:
        lo, hi = (_format_number(b) for b in bounds)
        raise _fail(line_no, field, f"{_shown(token)} is outside {lo}..{hi}")


def _number(token: str, line_no: int, field: str, target: str = "") -> float:
    digits = token.replace(".", "", 1)
    if digits.isdigit() and digits.isascii() and len(token) <= _MAX_NUMBER_CHARS:
        # What nvidia-smi prints ("386.74", "87"): ASCII digits with at most one point
        # always match _NUMBER, and 64 digits are finite (a busy GPU's power is a new
        # token every reading, so this is the common way in, without the pattern).
        value = float(token)
    else:
        if len(token) > _MAX_NUMBER_CHARS or not _NUMBER.fullmatch(token):
            raise _fail(line_no, field, f"expected a number, got {_shown(token)}")
        value = float(token)
        if not math.isfinite(value):
            raise _fail(line_no, field, f"number out of range: {_shown(token)}")
    _bounded(value, target, line_no, field, token)
    return value


def _whole(token: str, line_no: int, field: str, target: str = "") -> int:
    # ASCII digits only ([0-9]+: isdigit alone takes other scripts' digits too).
    if len(token) > _MAX_NUMBER_CHARS or not (token.isdigit() and token.isascii()):
        raise _fail(line_no, field, f"expected a whole number, got {_shown(token)}")
    value = int(token)
    _bounded(value, target, line_no, field, token)
    return value


def _text(token: str, line_no: int, field: str, limit: int = _MAX_TEXT_CHARS) -> str:
    if len(token) > limit:
        raise _fail(line_no, field, f"longer than {limit} characters: {_shown(token)}")
    return token


def sample_problem(sample: GpuSample) -> str | None:
    """What is out of bounds in a reading from any source (NVML too), or None.

    parse_query already refuses such values line by line; this guards every other way
    a GpuSample is made, before it is stored.
    """
    for target, (lo, hi) in BOUNDS.items():
        value = getattr(sample, target, None)
        if value is None or isinstance(value, bool):
            continue
        if not isinstance(value, int | float) or not math.isfinite(value):
            return f"GPU {sample.index}: {target} is not a finite number: {value!r}"
        if not lo <= value <= hi:
            return f"GPU {sample.index}: {target} {value!r} is outside {lo:g}..{hi:g}"
    for target in ("uuid", "name", "pstate"):
        text = getattr(sample, target)
        if text is not None and len(text) > _MAX_TEXT_CHARS:
            return f"GPU {sample.index}: {target} longer than {_MAX_TEXT_CHARS} characters"
    return None


def _mig(token: str, line_no: int, field: str) -> bool:
    word = token.lower()
    if word == "enabled":
        return True
    if word == "disabled":
        return False
    raise _fail(line_no, field, f"expected Enabled or Disabled, got {_shown(token)}")


def _lines(text: str) -> list[tuple[int, str]]:
    """(1-based line number, stripped line) for each non-blank line."""
    lines = []
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.strip()
        if line:
            lines.append((number, line))
    return lines


@functools.lru_cache(maxsize=64)
def _specs(fields: tuple[str, ...]) -> tuple[tuple[str, str, _Kind], ...]:
    """(field, target, kind) for each queried field, worked out once per field list."""
    return tuple((f, spec.target, spec.kind) for f in fields for spec in (_field_spec(f),))


# What a number-like token parsed to, by (kind, target, token): a fleet's readings repeat
# the same few hundred tokens ("87", "[N/A]", "Enabled"), and a token's value and its checks
# depend on its kind and target only, never on the line or the field's name (which only an
# error names: refused tokens are never held). Cleared whole when full, so a node sending
# endless new tokens costs a parse each, never memory.
_TOKENS: dict[tuple[str, str, str], object] = {}
_TOKENS_MAX = 8_192
_MISSING = object()


def _token_value(kind: str, target: str, token: str, line_no: int, field: str) -> object:
    """A number, index, count or MIG token's value (None when unknown); raises when bad."""
    unknown = _is_unknown(token)
    if kind == "number":
        return None if unknown else _number(token, line_no, field, target)
    if kind == "index":
        if unknown:
            raise _fail(line_no, field, f"GPU index is required, got {_shown(token)}")
        return _whole(token, line_no, field, "index")
    if unknown:
        return None
    if kind == "count":
        return _whole(token, line_no, field, target)
    return _mig(token, line_no, field)


_HELD_KINDS = frozenset({"number", "index", "count", "mig"})


def parse_row(line: str, line_no: int, fields: Sequence[str]) -> dict[str, object]:
    """One CSV row as GpuSample keyword arguments (without node and at)."""
    return row_values(row_tokens(line, line_no, fields), line_no, fields)


def row_values(
    tokens: Sequence[str],
    line_no: int,
    fields: Sequence[str],
    before: tuple[Sequence[str], dict[str, object]] | None = None,
) -> dict[str, object]:
    """What a row's tokens (row_tokens) say, as parse_row gives it. before: the same GPU's
    row read last with the same fields, its tokens and what they gave: only the tokens
    that changed are read again (a busy GPU's power and utilisation), which gives what
    reading them all would, since a token's value and checks depend on its field alone
    and every token held was read without fault (so the first bad token raises, as it
    would in a whole row's order).
    Not where two fields share a target: then every token is read."""
    specs = _specs(tuple(fields))
    if before is not None and _distinct_targets(tuple(fields)):
        old_tokens, old = before
        values = dict(old)
        extra: dict[str, str] = dict(old["extra"])  # type: ignore[call-overload]
        added = False
        # Which tokens changed, found in C (map and compress): a busy GPU's row changes in
        # a few of its twenty.
        for at in compress(range(len(specs)), map(ne, tokens, old_tokens)):
            spec, token = specs[at], tokens[at]
            if spec[2] != "extra":
                put_token(values, extra, spec, token, line_no)
                continue
            one: dict[str, str] = {}
            put_token(values, one, spec, token, line_no)
            target = spec[1]
            if target not in one:
                extra.pop(target, None)  # unknown now: not there
            else:
                added = added or target not in extra
                extra[target] = one[target]
        if added:  # in the fields' order, as a whole row's parse puts them
            extra = {t: extra[t] for _, t, kind in specs if kind == "extra" and t in extra}
        values["extra"] = extra
        return values
    values, extra = {}, {}
    for spec, token in zip(specs, tokens, strict=True):
        put_token(values, extra, spec, token, line_no)
    values["extra"] = extra
    return values


@functools.lru_cache(maxsize=64)
def _distinct_targets(fields: tuple[str, ...]) -> bool:
    return len({target for _, target, _ in _specs(fields)}) == len(fields)


def held_index(token: str) -> int | None:
    """The GPU index a short index token was read as before (None: not held)."""
    value = _TOKENS.get(("index", "index", token))
    return value if type(value) is int else None


def row_tokens(line: str, line_no: int, fields: Sequence[str]) -> list[str]:
    """A CSV row's tokens, one a field; raises when their count is not the fields'."""
    tokens = list(map(str.strip, line.split(",")))
    if len(tokens) != len(fields):
        raise NvsmiParseError(
            f"nvidia-smi line {line_no}: expected {len(fields)} comma-separated values, "
            f"got {len(tokens)}: {_shown(line)}"
        )
    return tokens


def put_token(
    values: dict[str, object],
    extra: dict[str, str],
    spec: tuple[str, str, _Kind],
    token: str,
    line_no: int,
) -> None:
    """Set what one token of a row says (parse_row's step for one field): its target in
    values, or its key in extra (an unknown extra sets nothing); raises when bad."""
    field, target, kind = spec
    if kind in _HELD_KINDS:
        if len(token) > _MAX_NUMBER_CHARS:
            values[target] = _token_value(kind, target, token, line_no, field)
            return
        # Only short tokens are held: "[" + 60,000 characters + "]" is a valid unknown,
        # and 8,192 of those would be gigabytes.
        key = (kind, target, token)
        value = _TOKENS.get(key, _MISSING)
        if value is _MISSING:
            value = _token_value(kind, target, token, line_no, field)
            if len(_TOKENS) >= _TOKENS_MAX:
                _TOKENS.clear()
            _TOKENS[key] = value
        values[target] = value
        return
    unknown = _is_unknown(token)
    if kind == "text":
        values[target] = "" if unknown else _text(token, line_no, field)
    elif unknown:
        if kind != "extra":
            values[target] = None
    elif kind == "opt_text":
        values[target] = _text(token, line_no, field)
    else:
        extra[target] = _text(token, line_no, field)


def require_index(fields: Sequence[str]) -> None:
    _checked_with_index(tuple(fields))


@functools.lru_cache(maxsize=64)
def _checked_with_index(fields: tuple[str, ...]) -> None:
    # Cached: the poller parses the same field list every round. A failing list raises,
    # and lru_cache does not remember raises.
    check_fields(fields)
    if "index" not in fields:
        raise ValueError("nvidia-smi query fields must include 'index'")


def as_sample(values: dict[str, object], node: str, at: datetime) -> GpuSample:
    """The sample of a row's values (parse_row's: only GpuSample's fields, each checked)."""
    return made_sample(node, at, values)


class Memo(Protocol):
    """What parse_query asks of a memo (leases.telemetry.rowmemo.RowMemo, which imports this
    module)."""

    def parse(self, line: str, line_no: int, fields: Sequence[str]) -> dict[str, object]: ...

    def again(
        self, text: str, fields: Sequence[str], node: str, at: datetime
    ) -> list[GpuSample] | None: ...

    def keep_output(self, text: str, node: str, samples: Sequence[GpuSample]) -> None: ...


def parse_query(
    text: str, fields: Sequence[str], node: str, at: datetime, memo: Memo | None = None
) -> list[GpuSample]:
    """One `--query-gpu=... --format=csv,noheader,nounits` output as samples, in order.

    Blank output gives []. Anything unreadable (wrong column count, text where a number
    belongs, a repeated index or uuid) raises NvsmiParseError naming the line and field;
    no other exception escapes for any text. With a memo (leases.telemetry.rowmemo), rows
    it holds are not parsed again (the checks between rows still run), and an output the
    same as the last one is not split again.
    """
    require_index(fields)
    if memo is not None and (again := memo.again(text, fields, node, at)) is not None:
        return again
    samples: list[GpuSample] = []
    seen_index: set[int] = set()
    seen_uuid: set[str] = set()
    parse = parse_row if memo is None else memo.parse
    for line_no, line in _lines(text):
        values = parse(line, line_no, fields)
        index = values["index"]
        assert isinstance(index, int)
        if index in seen_index:
            raise _fail(line_no, "index", f"GPU index {index} appears twice")
        if len(samples) >= MAX_GPUS:
            raise _fail(line_no, "index", f"more than {MAX_GPUS} GPUs listed")
        seen_index.add(index)
        uuid = values.get("uuid", "")
        if isinstance(uuid, str) and uuid:
            if uuid in seen_uuid:
                raise _fail(line_no, "uuid", f"GPU uuid {uuid} appears twice")
            seen_uuid.add(uuid)
        samples.append(as_sample(values, node, at))
    if memo is not None:
        memo.keep_output(text, node, samples)
    return samples


# --- writing one reading: the inverse of parse_query, for simulated nodes and tests ---


def _format_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def format_query(samples: Iterable[GpuSample], fields: Sequence[str]) -> str:
    """The CSV nvidia-smi would print for `samples` (unknown values as [N/A])."""
    check_fields(fields)
    lines = []
    for sample in samples:
        tokens = []
        for field in fields:
            spec = _field_spec(field)
            if spec.kind == "extra":
                tokens.append(sample.extra.get(spec.target, "[N/A]"))
                continue
            value = getattr(sample, spec.target)
            if value is None or value == "":
                tokens.append("[N/A]")
            elif spec.kind == "mig":
                tokens.append("Enabled" if value else "Disabled")
            elif spec.kind == "number":
                tokens.append(_format_number(value))
            else:
                tokens.append(str(value))
        lines.append(", ".join(tokens) + "\n")
    return "".join(lines)


# --- compute processes ---


def parse_compute_apps(text: str, node: str) -> list[GpuProcess]:
    """`--query-compute-apps=gpu_uuid,pid,used_memory` output as processes (unnamed).

    Every row is exactly three values, none of them free text. The process name is not
    asked for: nvidia-smi prints it raw, and a process can name itself anything, line
    breaks and commas included, so a named row list can be forged by any process on the
    GPU (a second row giving its memory to pid 1). Where a name is wanted it is read from
    the node's /proc (leases.telemetry.procinfo), by a pid taken from this list.
    """
    processes: list[GpuProcess] = []
    width = len(APPS_FIELDS)
    for line_no, line in _lines(text):
        if line.lower().startswith("no running"):  # "No running processes found"
            continue
        tokens = line.split(",")
        if len(tokens) != width:
            raise NvsmiParseError(
                f"nvidia-smi compute apps line {line_no}: expected {width} comma-separated"
                f" values ({','.join(APPS_FIELDS)}), got {len(tokens)}: {_shown(line)}"
            )
        uuid, pid_token, memory = (token.strip() for token in tokens)
        if len(processes) >= _MAX_PROCESSES:
            raise _fail(line_no, "pid", f"more than {_MAX_PROCESSES} processes listed")
        if not uuid or _is_unknown(uuid):
            raise _fail(line_no, "gpu_uuid", f"GPU uuid is required, got {_shown(uuid)}")
        pid = _whole(pid_token, line_no, "pid", "pid")
        used = None if _is_unknown(memory) else _number(memory, line_no, "used_memory", "used_mib")
        uuid = _text(uuid, line_no, "gpu_uuid")
        processes.append(GpuProcess(node=node, gpu_uuid=uuid, pid=pid, used_mib=used))
    return processes


__all__ = [
    "APPS_COMMAND",
    "APPS_FIELDS",
    "BOUNDS",
    "EXTRA_BUS_ID",
    "EXTRA_DRIVER_VERSION",
    "EXTRA_MAX_SM_CLOCK",
    "EXTRA_PERSISTENCE",
    "EXTRA_THROTTLE_REASONS",
    "MAX_GPUS",
    "MAX_GPU_INDEX",
    "QUERY_FIELDS",
    "REQUIRED_FIELDS",
    "NvsmiParseError",
    "as_sample",
    "check_fields",
    "classify_failure",
    "format_query",
    "held_index",
    "human_reason",
    "parse_compute_apps",
    "parse_query",
    "parse_row",
    "put_token",
    "query_command",
    "require_index",
    "row_tokens",
    "row_values",
    "sample_problem",
]
