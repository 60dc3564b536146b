"""`df -PT -- PATH...`: the file system, its type and its space for each path asked about.

df prints one line per path that exists, in the order asked, and names each missing one on
stderr; the lines are matched back to the paths in that order. POSIX output (-P): sizes in
1024-byte blocks, one line per file system however long its name. Hostile text: never
raises; what could not be read is in `problems`."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from leases.accept.words import _

_LINE_RE = re.compile(r"(\S+)\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+%|-)\s+(/.*)")
_MISSING_RE = re.compile(r"df: ['‘\"]?(/.*?)['’\"]?: No such file or directory")
MAX_LINES = 1000


@dataclass(frozen=True)
class DiskSpace:
    path: str  # the path asked about
    filesystem: str  # "/dev/nvme0n1p2", "overlay"
    fstype: str  # "ext4", "overlay", "tmpfs"
    size_kib: int
    available_kib: int
    mount: str


@dataclass(frozen=True)
class DfReport:
    spaces: tuple[DiskSpace, ...] = ()
    missing: tuple[str, ...] = ()  # paths df said do not exist
    problems: tuple[str, ...] = ()


def parse_df(stdout: str, stderr: str, paths: Sequence[str]) -> DfReport:
    rows = []
    problems: list[str] = []
    for number, line in enumerate(stdout.split("\n")[:MAX_LINES], 1):
        if not line.strip() or line.startswith("Filesystem"):
            continue
        m = _LINE_RE.fullmatch(line.rstrip())
        if m is None:
            if len(problems) < 20:
                problems.append(_("df line {line} not read").format(line=number))
            continue
        rows.append(m)
    said_missing = {m.group(1) for m in _MISSING_RE.finditer(stderr[:65536])}
    missing = tuple(p for p in paths if p in said_missing)
    present = [p for p in paths if p not in said_missing]
    if len(present) != len(rows):
        problems.append(
            _(
                "df printed {count} file systems for {paths} paths: which is which cannot be told"
            ).format(count=len(rows), paths=len(present))
        )
        return DfReport((), missing, tuple(problems))
    spaces = tuple(
        DiskSpace(path, m.group(1), m.group(2), int(m.group(3)), int(m.group(5)), m.group(7))
        for path, m in zip(present, rows, strict=True)
    )
    return DfReport(spaces, missing, tuple(problems))
