"""The host snippet's usual output is read by one pattern (hoststats._USUAL, _by_pattern);
for every text the pattern matches, that gives what reading it line by line gives
(_by_lines), and whatever it does not match is read line by line. The texts: a node's and
a container's output as the snippet prints them, edited a little at random (a character,
a line put in or taken out) so that the pattern sometimes matches and sometimes not."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from leases.telemetry import hoststats as hs

# A bare-metal 8-GPU node as the snippet prints it (after the marker line); figures made up.
USUAL = """
@zh load
2678402.42 216263680.00
74.30 70.59 66.87 3/1412 40000
@zh mem
MemTotal:       1073741824 kB
MemAvailable:   446005510 kB
SwapTotal:              0 kB
SwapFree:               0 kB
@zh stat
cpu  141286809600 0 24932966400 202418749440 738754560 0 0 0 0 0
128
@zh net
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 57715200000 577152000 0 0 0 0 0 0 57715200000 577152000 0 0 0 0 0 0
  eth0: 519436800000000 371026285714 0 0 0 0 0 0 64929600000000 46378285714 0 0 0 0 0 0
@zh df
Filesystem     Type     1024-blocks       Used  Available Capacity Mounted on
/dev/nvme0n1p2 ext4      1921725720   87344112 1834381608       5% /
tmpfs          tmpfs      536870912    5368709  531502203       1% /dev/shm
/dev/md0       xfs       7501000000  412000000 7089000000       6% /data
@zh cg2
@zh cg1
@zh end
"""
# The same in a container with a 64 GiB memory limit (cgroup v2).
CONTAINER = USUAL.replace(
    "@zh cg2\n", "@zh cg2\n68719476736\n34359738368\ninactive_file 1073741824\n"
)
NEVER = re.compile(r"(?!)")

EDITS = " \t\r\n@0123456789.:kB-/\u0661\x1c\u3000x"
LINES = ["", " ", "\r", "@zh net", "@zh end", "@x", " @x", "cpu3 1 2 3 4", "7", "x" * 4097,
         "  eth1: " + " ".join(["5"] * 16), "9" * 21, "MemTotal: 5 kB"]  # fmt: skip


@st.composite
def edited(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from([USUAL, CONTAINER, USUAL.lstrip("\n"), USUAL.rstrip("\n")]))
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.integers(0, 3))
        at = draw(st.integers(0, len(text)))
        if kind == 3:  # a line made as long as reading line by line bears, or longer
            text = text[:at] + " " * draw(st.integers(4070, 4100)) + text[at:]
        elif kind == 0:  # characters changed or put in
            cut = draw(st.integers(0, 1))
            text = text[:at] + draw(st.text(alphabet=EDITS, max_size=4)) + text[at + cut :]
        else:
            lines = text.split("\n")
            i = min(at, len(lines) - 1)
            if kind == 1:
                lines.insert(i, draw(st.sampled_from(LINES)))
            else:
                del lines[i]
            text = "\n".join(lines)
    return text


def _line_by_line(text: str, before: hs.HostReading | None = None) -> hs.HostReading:
    """parse_host as it reads a text the pattern does not match."""
    usual, hs._USUAL = hs._USUAL, NEVER
    try:
        return hs.parse_host(text, before)
    finally:
        hs._USUAL = usual


@settings(max_examples=1500, deadline=None)
@given(edited())
def test_the_pattern_reads_what_reading_line_by_line_gives(text: str) -> None:
    problems: list[str] = []
    by_lines = hs._by_lines(text, problems)
    match = hs._USUAL.fullmatch(text)
    if match is not None:  # the same figures, and the same lines of what is read after them
        assert problems == [] and by_lines is not None
        *figures, rest = hs._by_pattern(match)
        assert figures == list(by_lines[:-1])
        assert rest == {name: by_lines[-1].get(name, []) for name in ("net", "df", "cg2", "cg1")}
    before = hs.parse_host(USUAL)
    for earlier in (None, before):
        got, want = hs.parse_host(text, earlier), _line_by_line(text, earlier)
        assert got == want and got.df == want.df  # df: not compared by ==


def test_the_usual_outputs_are_read_by_the_pattern_and_worked_out_by_hand() -> None:
    assert hs._USUAL.fullmatch(USUAL) and hs._USUAL.fullmatch(CONTAINER)
    r = hs.parse_host(USUAL)
    assert (r.uptime_s, r.load, r.cpus, r.problems) == (2678402.42, (74.3, 70.59, 66.87), 128, ())
    # user nice system idle iowait irq softirq steal; idle + iowait is not busy
    total = 141286809600 + 24932966400 + 202418749440 + 738754560
    assert r.cpu == hs.CpuTimes(total, 202418749440 + 738754560)
    assert r.mem == {"MemTotal": 1073741824, "MemAvailable": 446005510, "SwapTotal": 0,
                     "SwapFree": 0}  # fmt: skip
    assert r.net == (519436800000000, 64929600000000)  # lo not counted
    assert [m.path for m in r.mounts] == ["/", "/dev/shm", "/data"]
    c = hs.parse_host(CONTAINER)
    # 64 GiB limit; used 32 GiB less 1 GiB of inactive file pages: 33 GiB available
    assert c.mem_cgroup and c.mem["MemTotal"] == 64 * 1024**2
    assert c.mem["MemAvailable"] == (64 - 31) * 1024**2


def test_what_the_pattern_does_not_take_is_read_line_by_line() -> None:
    crlf = USUAL.replace("\n", "\r\n")
    blank = USUAL.replace("@zh df\n", "@zh df\n\n")
    forged = USUAL.replace("@zh cg2\n", "@zh mem\nMemTotal: 1 kB\n@zh cg2\n")
    long_uptime = USUAL.replace("2678402.42", "1" * 13)
    long_line = USUAL.replace("/dev/md0  ", "/dev/md0" + " " * 4100)
    after_end = USUAL + "@zh net\n"
    # Lines past MAX_LINE_CHARS, which reading line by line cuts (found by an attacker's
    # review: the pattern once read them whole).
    load = USUAL.replace("3/1412 40000", "x" * 4080 + " y")
    mem = USUAL.replace("MemTotal:       1073741824", "MemTotal:" + " " * 4082 + "1073741824")
    cpu = USUAL.replace("cpu  141286809600", "cpu" + " " * 4082 + "141286809600")
    cut = (load, mem, cpu)
    for text in (crlf, blank, forged, long_uptime, long_line, after_end, *cut):
        assert hs._USUAL.fullmatch(text) is None
        got = hs.parse_host(text)
        assert got == _line_by_line(text) and got.df == _line_by_line(text).df
    assert all(max(map(len, text.split("\n"))) > hs.MAX_LINE_CHARS for text in cut)
    assert hs.parse_host(load).load is None and hs.parse_host(cpu).cpu is None
    assert hs.parse_host(mem).mem["MemTotal"] == 10737  # "1073741824 kB" cut after "10737"
    assert hs.parse_host(forged).mem["MemTotal"] == 1073741824  # the forged one is ignored
    assert hs.parse_host(crlf).mem["MemTotal"] == 1073741824
