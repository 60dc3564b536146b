"""zuka's own torch probe (`leases.accept.torchprobe`) prints one JSON line: read it into
a typed result. The node may print anything else around it (warnings, banners): the last
line that parses as a JSON object with a "gpus" list is the one; sizes are bounded.
Given the run's nonce, only a line whose "nonce" is it counts (a canned or planted line
without it is not this run's)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from leases.accept.parse._text import Problems, digits, lines_of
from leases.accept.words import _

MAX_GPUS = 64


@dataclass(frozen=True)
class TorchGpu:
    index: int
    name: str
    total_bytes: int | None
    allocated_bytes: int | None
    bf16_tflops: float | None
    mismatches: int | None  # burn only: results that differed from the first
    error: str
    # PCIe link (generation, lanes) read while host -> GPU copies ran; None when not read.
    pcie_load: tuple[int, int] | None = None


@dataclass(frozen=True)
class TorchRun:
    torch: str | None  # version, None: torch is not installed
    cuda: str | None
    gpus: tuple[TorchGpu, ...] = ()
    error: str = ""
    problems: tuple[str, ...] = ()


def _int(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**62 else None


def _float(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    f = float(v)
    return f if f == f and 0 <= f < 1e9 else None


def _link(v: object) -> tuple[int, int] | None:
    """ "4, 16" (nvidia-smi's gen and width, noheader, nounits) as (4, 16)."""
    words = [w.strip() for w in v.split(",")] if isinstance(v, str) and len(v) < 64 else []
    if len(words) != 2 or not all(digits(w) and len(w) <= 3 for w in words):
        return None
    return int(words[0]), int(words[1])


def _str(v: object, n: int = 200) -> str:
    return v[:n] if isinstance(v, str) else ""


def parse_torchrun(text: str, nonce: str | None = None) -> TorchRun:
    problems = Problems()
    data: dict[str, object] | None = None
    stale = False
    for line in reversed(lines_of(text)):
        line = line.strip()
        if not (line.startswith("{") and len(line) < 64 * 1024):
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict) and isinstance(obj.get("gpus"), list):
            if nonce is not None and obj.get("nonce") != nonce:
                stale = True
                continue
            data = obj
            break
    if data is None:
        problems.add(
            _(
                "no JSON line carrying this run's nonce was found in the output (a line"
                " without it is not from this run of zuka's probe)"
            )
            if stale
            else _("no JSON line from zuka's torch probe was found in the output")
        )
        return TorchRun(None, None, problems=problems.result())
    gpus: list[TorchGpu] = []
    raw = data["gpus"]
    assert isinstance(raw, list)
    for n, g in enumerate(raw[:MAX_GPUS]):
        if not isinstance(g, dict):
            problems.add(_("GPU entry {n} is not an object").format(n=n))
            continue
        index = _int(g.get("index"))
        gpus.append(
            TorchGpu(
                n if index is None else index,
                _str(g.get("name"), 120),
                _int(g.get("total_bytes")),
                _int(g.get("allocated_bytes")),
                _float(g.get("bf16_tflops")),
                _int(g.get("mismatches")),
                _str(g.get("error")),
                _link(g.get("pcie_load")),
            )
        )
    version = data.get("torch")
    cuda = data.get("cuda")
    return TorchRun(
        _str(version, 40) if isinstance(version, str) else None,
        _str(cuda, 40) if isinstance(cuda, str) else None,
        tuple(gpus),
        _str(data.get("error")),
        problems.result(),
    )
