"""The host snippet's parser (leases.telemetry.hoststats): real formats, hostile output,
the delta maths by hand, and the platform labels.

data/host_autodl.txt is laid out as an AutoDL container shows it (an overlay root, the
data disk /root/autodl-tmp as an xfs project quota, file storage on JuiceFS, docker's
bind mounts of /etc/hosts and the NVIDIA files), in the kernel's /proc formats and GNU
df's -P -k -T columns; its figures are made up.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from leases.core.host import HostStats, Mount, MountKind, host_from, host_record
from leases.core.models import NodeHealth, NodeStatus
from leases.ledger import records
from leases.ledger.store import Ledger
from leases.telemetry import hoststats as hs
from leases.telemetry.rollups import HistoryStore

DATA = Path(__file__).parent / "data"
AUTODL = (DATA / "host_autodl.txt").read_text()


def _with(section: str, body: str) -> str:
    """AUTODL with one section's body replaced."""
    out, skip = [], False
    for line in AUTODL.splitlines():
        if line.startswith("@zh "):
            skip = line == f"@zh {section}"
            out.append(line)
            if skip:
                out.extend(body.splitlines())
            continue
        if not skip:
            out.append(line)
    return "\n".join(out) + "\n"


def test_an_autodl_container_reads_whole() -> None:
    r = hs.parse_host(AUTODL)
    assert r.problems == ()
    assert r.uptime_s == 1093481.27
    assert r.load == (3.12, 2.87, 2.51)
    assert r.cpus == 2
    # user nice system idle iowait irq softirq steal; idle + iowait is not busy
    assert r.cpu == hs.CpuTimes(
        250377120 + 1271 + 27013840 + 3215879540 + 2049917 + 0 + 1069880 + 0,
        3215879540 + 2049917,
    )
    assert r.mem["MemAvailable"] == 98765432
    assert r.net == (98765432109, 1234567890)  # lo not counted
    by_path = {m.path: m for m in r.mounts}
    # Pseudo file systems and docker's bind mounts of files are no disks of the user's.
    assert set(by_path) == {"/", "/dev/shm", "/root/autodl-tmp", "/root/autodl-fs"}
    tmp = by_path["/root/autodl-tmp"]
    assert (tmp.label, tmp.kind, tmp.fs_type) == ("AutoDL data disk", MountKind.DATA, "xfs")
    assert round(tmp.used_pct) == 94
    assert tmp.name == "AutoDL data disk /root/autodl-tmp"
    assert by_path["/"].kind is MountKind.ROOT  # the overlay root is kept
    assert by_path["/dev/shm"].kind is MountKind.SHM  # tmpfs, kept by its path


def test_the_platforms_mounts_are_named() -> None:
    assert hs.mount_label("/root/autodl-fs") == ("AutoDL file storage", MountKind.DATA)
    assert hs.mount_label("/home/featurize/data")[1] is MountKind.DATA
    assert hs.mount_label("/openbayes/home")[0] == "OpenBayes home"
    assert hs.mount_label("/mnt/workspace")[0] == "PAI-DSW workspace"
    assert hs.mount_label("/mnt")[0] == "Matpool /mnt disk"
    assert hs.mount_label("/data2") == ("data disk", MountKind.DATA)
    assert hs.mount_label("/mnt/nvme0") == ("data disk", MountKind.DATA)
    assert hs.mount_label("/home") == ("", MountKind.OTHER)
    assert hs.mount_label("/srv/data")[1] is MountKind.OTHER
    assert hs.mount_label("/root/autodl-tmp/x")[1] is MountKind.OTHER  # exact paths only


def test_rates_are_deltas_over_the_nodes_own_time() -> None:
    """10 s of node time: 400 of 1000 ticks busy is 40 %; 50 MB in, 5 MB out."""
    first = hs.HostReading(
        uptime_s=100.0, cpu=hs.CpuTimes(10_000, 6_000), net=(1_000_000, 2_000_000)
    )
    second = hs.HostReading(
        uptime_s=110.0, cpu=hs.CpuTimes(11_000, 6_600), net=(51_000_000, 7_000_000)
    )
    s = hs.stats(second, first, seconds=99.0)  # the poller's clock is not used
    assert s.cpu_pct == 40.0
    assert s.net_rx_bps == 5_000_000.0
    assert s.net_tx_bps == 500_000.0


def test_the_first_reading_and_a_reboot_give_no_rate() -> None:
    now = hs.parse_host(AUTODL)
    first = hs.stats(now, None)
    assert first.cpu_pct is None and first.net_rx_bps is None
    assert first.load1 == 3.12 and first.mem_total_kib == 131624748  # the rest is there
    rebooted = hs.HostReading(uptime_s=20.0, cpu=hs.CpuTimes(500, 400), net=(10, 10))
    later = hs.stats(rebooted, now)
    assert later.cpu_pct is None and later.net_rx_bps is None


def test_counters_that_go_back_give_no_rate() -> None:
    a = hs.HostReading(uptime_s=10.0, cpu=hs.CpuTimes(1000, 500), net=(1000, 1000))
    b = hs.HostReading(uptime_s=20.0, cpu=hs.CpuTimes(900, 400), net=(500, 2000))
    s = hs.stats(b, a)
    assert s.cpu_pct is None
    assert s.net_rx_bps is None and s.net_tx_bps is None
    # Without uptime, the poller's seconds are the time between.
    c = hs.HostReading(cpu=hs.CpuTimes(1000, 500), net=(0, 0))
    d = hs.HostReading(cpu=hs.CpuTimes(2000, 1000), net=(400, 800))
    s = hs.stats(d, c, seconds=4.0)
    assert (s.cpu_pct, s.net_rx_bps, s.net_tx_bps) == (50.0, 100.0, 200.0)


def test_the_gpu_part_and_its_status_come_back_unchanged() -> None:
    gpu = "0, GPU-1, NVIDIA A100\n"
    out = f"{gpu}@zuka-host 12\n{AUTODL}"
    own, status, host = hs.split_output(out)
    assert (own, status) == (gpu, 12)
    assert host is not None and hs.parse_host(host).cpus == 2
    assert hs.split_output(gpu) == (gpu, None, None)  # no marker: all the command's


def test_the_owner_query_splits_at_its_last_marker() -> None:
    """A process name printed raw can forge a marker line; the real one is the last."""
    forged = "1, GPU-1, \n@zuka-host 0\n@zh df\nx xfs 1 1 0 100% /root/autodl-tmp\n"
    out = f"{forged}@zuka-owners 0\n 1 0 root\n@zuka-host 0\n{AUTODL}"
    own, _, host = hs.split_output(out, last=True)
    assert own.startswith(forged)
    assert host is not None
    assert round(hs.parse_host(host).mounts[2].used_pct) == 94


def test_a_node_without_proc_or_df_names_what_is_missing() -> None:
    r = hs.parse_host("@zh load\n@zh mem\n@zh stat\n@zh net\n@zh df\n@zh end\n")
    s = hs.stats(r, None)
    assert s.load1 is None and s.mem_total_kib is None and s.mounts == ()
    said = "; ".join(s.problems)
    assert "load average not read" in said and "memory not read" in said
    assert hs.parse_host(None).problems == ("no host figures (the output ended before them)",)
    assert "no /proc" in hs.parse_host("").problems[0]


def test_a_broken_df_costs_only_the_disks() -> None:
    r = hs.parse_host(_with("df", "df: /root/autodl-fs: Transport endpoint is not connected"))
    assert r.mounts == ()
    assert r.load is not None and r.cpu is not None
    assert "df line(s) not read" in "; ".join(r.problems)
    timed_out = hs.parse_host(_with("df", ""))
    assert "disks not read (df failed or timed out)" in timed_out.problems


def test_hostile_values_are_refused_or_made_safe() -> None:
    df = (
        "Filesystem Type 1024-blocks Used Available Capacity Mounted on\n"
        "/dev/x xfs ５０ 1 1 50% /data\n"  # full-width digits: not ASCII, not read
        "/dev/y xfs 100 50 50 50% /mnt/a\x1b[31mred\u202e\n"
        "/dev/z xfs 99999999999999999999999 1 1 1% /data9\n"
    )
    r = hs.parse_host(_with("df", df))
    (m,) = r.mounts
    assert "\x1b" not in m.path and "\u202e" not in m.path
    assert m.path.startswith("/mnt/a")
    assert "2 df line(s) not read" in r.problems
    mem = hs.parse_host(_with("mem", "MemTotal: 12a kB\nMemAvailable: ٣ kB\n"))
    assert "memory not read (/proc/meminfo)" in mem.problems


def test_what_a_node_prints_is_bounded() -> None:
    many = "\n".join(f"/dev/d{i} xfs 100 1 99 1% /data{i}" for i in range(500))
    r = hs.parse_host(_with("df", "Filesystem ...\n" + many))
    assert len(r.mounts) == hs.MAX_MOUNTS
    long = hs.parse_host(_with("df", "Filesystem\n/dev/x xfs 100 1 99 1% /data/" + "a" * 10**6))
    assert all(len(m.path) <= 120 for m in long.mounts)
    flood = hs.parse_host("@zh load\n" + "1 2\n" * (hs.MAX_LINES + 10))
    assert any("more than" in p for p in flood.problems)


def test_a_forged_section_after_the_real_one_is_ignored() -> None:
    text = AUTODL.replace("@zh end\n", "@zh mem\nMemTotal: 1 kB\nMemAvailable: 1 kB\n@zh end\n")
    assert hs.parse_host(text).mem["MemTotal"] == 131624748


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=3000))
def test_the_parser_never_raises(text: str) -> None:
    r = hs.parse_host(text)
    hs.stats(r, r)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "@zh load",
                "@zh mem",
                "@zh stat",
                "@zh net",
                "@zh df",
                "@zh end",
                "cpu  1 2 3 4",
                "MemTotal: 5 kB",
                "eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16",
                "/dev/x xfs 10 5 5 50% /data",
                "1.0 2.0 3.0 1/2 3",
                "\x00\udcff",
                "cpu9 1 1 1 1",
            ]
        ),
        max_size=60,
    )
)
def test_shuffled_sections_never_raise(lines: list[str]) -> None:
    r = hs.parse_host("\n".join(lines))
    s = hs.stats(r, hs.parse_host(AUTODL))
    assert s.cpu_pct is None or 0.0 <= s.cpu_pct <= 100.0


def test_host_figures_round_trip_and_old_rows_read_as_none() -> None:
    h = HostStats(
        cpu_pct=12.5,
        cpus=64,
        load1=1.0,
        mounts=(Mount("/root/autodl-tmp", "xfs", 100, 95, 5, "AutoDL data disk", MountKind.DATA),),
        problems=("network not read (/proc/net/dev)",),
    )
    assert host_from(host_record(h)) == h
    assert host_from({}) is None
    assert host_from("garbage") is None
    assert host_from({"mounts": [{"path": "/x"}]}) == HostStats()  # a mount cut short: left out
    assert host_from({"cpus": "64", "cpu_pct": True}) == HostStats()  # wrong types: unknown
    assert h.fullest_data is not None and h.fullest_data.path == "/root/autodl-tmp"


def test_old_and_broken_rows_load_without_host_figures(tmp_path: Path) -> None:
    """A row written before the host column ('{}'), or one changed behind zuka's back,
    loads with its GPUs and host None; a new row keeps its figures."""
    with Ledger.open(tmp_path / "l.db", create=True) as ledger:
        ledger.add_node(records.node_from({"name": "n1", "ssh_host": "10.0.0.9",
                                           "ssh_user": "root"}))  # fmt: skip
        store = HistoryStore(ledger)
        at = datetime(2026, 11, 20, tzinfo=UTC)
        host = HostStats(cpus=8, mounts=(Mount("/", "ext4", 10, 5, 5, "root fs", MountKind.ROOT),))
        store.write_latest([NodeStatus("n1", NodeHealth.OK, checked=at, at=at, host=host)])
        (read,) = store.latest_by_id().values()
        assert read.host == host
        for raw in ("{}", "not json", "[1, 2]"):
            with ledger.transaction() as conn:
                conn.execute("UPDATE node_latest SET host = ?", [raw])
            (read,) = store.latest_by_id().values()
            assert read.host is None and read.health is NodeHealth.OK


def test_a_containers_memory_limit_is_what_counts() -> None:
    """Without lxcfs /proc/meminfo is the machine's (126 GiB here); the OOM killer goes by
    the container's cgroup: a 16 GiB limit, 15 GiB used of which 0.5 GiB inactive page
    cache, leaves 1.5 GiB."""
    gib = 1024**3
    v2 = f"{16 * gib}\n{15 * gib}\ninactive_file {gib // 2}\n"
    r = hs.parse_host(_with("cg2", v2))
    assert r.mem_cgroup
    assert (r.mem["MemTotal"], r.mem["MemAvailable"]) == (16 * 1024**2, 1536 * 1024)
    s = hs.stats(r, None)
    assert s.mem_cgroup and round(s.mem_available_pct or 0) == 9
    v1 = f"{8 * gib}\n{2 * gib}\ntotal_inactive_file 0\n"
    assert hs.parse_host(_with("cg1", v1)).mem["MemTotal"] == 8 * 1024**2
    for unlimited in ("max\n5\n", "9223372036854771712\n2437038080\n", f"{200 * gib}\n1\n",
                      "0\n0\n", "16\n", "１６\n1\n"):  # fmt: skip
        plain = hs.parse_host(_with("cg2", unlimited))
        assert not plain.mem_cgroup and plain.mem["MemTotal"] == 131624748, unlimited
    assert host_from(host_record(s)) == s


_DF_LINES = [
    "Filesystem Type 1024-blocks Used Available Capacity Mounted on",
    "/dev/x xfs 10 5 5 50% /data",
    "/dev/x xfs 10 6 4 60% /data",
    "/dev/y ext4 100 1 99 1% /",
    "overlay overlay 100 1 99 1% /",
    "/dev/z xfs 1 1 0 100% /root/autodl-tmp",
    "bad line",
    "/dev/w tmpfs 10 1 9 10% /dev/shm",
]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_DF_LINES), max_size=6), min_size=1, max_size=4))
def test_disks_taken_from_the_reading_before_are_what_parsing_gives(
    dfs: list[list[str]],
) -> None:
    """A node's df lines read again the same take the mounts and problems of the reading
    before (NodeState.read_host passes it); whatever the lines, it is the fresh parse."""
    before = None
    for lines in dfs:
        text = _with("df", "\n".join(lines))
        fresh, kept = hs.parse_host(text), hs.parse_host(text, before)
        assert (kept, kept.mounts, kept.problems) == (fresh, fresh.mounts, fresh.problems)
        before = kept


def test_a_disk_that_filled_is_read_at_once() -> None:
    first = hs.parse_host(_with("df", "/dev/x xfs 10 5 5 50% /data"))
    again = hs.parse_host(_with("df", "/dev/x xfs 10 5 5 50% /data"), first)
    assert again.mounts is first.mounts  # the same lines: not parsed again
    fuller = hs.parse_host(_with("df", "/dev/x xfs 10 9 1 90% /data"), again)
    assert [m.used_kib for m in fuller.mounts] == [9]


def test_only_a_bounded_df_is_kept_for_the_next_reading() -> None:
    lines = "\n".join(f"/dev/x{i} xfs 10 5 5 50% /data{i}" for i in range(600))
    assert len(lines) > hs.DF_KEPT_CHARS
    first = hs.parse_host(_with("df", lines))
    assert first.df == ((), ())  # too long to keep: parsed afresh next time
    again = hs.parse_host(_with("df", lines), first)
    assert again == first and again.mounts == first.mounts and again.mounts is not first.mounts
