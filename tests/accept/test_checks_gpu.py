"""The inventory, sharing and health checks: their judge functions on hand-made facts (each
trap its test, a clean node passes), and each CHECK.run on canned command outputs through a
tiny fake runner in this file. (The simulated node of leases/sim answers the same commands
later; these tests pin the checks' side of them.)
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from leases.accept.checks import health, inventory, sharing
from leases.accept.checks.smi import QUERY_GPU_OLD_COMMAND, TEXT_COMMAND, XML_COMMAND
from leases.accept.engine import Settings, Sold, new_context
from leases.accept.facts import GpuQuery, QueryProcess, SmiQuery
from leases.accept.parse.smiquery import QUERY_GPU_COMMAND, SmiRow
from leases.core.acceptance import CheckResult, Evidence, Level, Status
from leases.core.models import GpuProcess, NodeHealth
from leases.ssh.errors import SshError
from leases.ssh.stream import CommandResult
from leases.telemetry.nvsmi import APPS_COMMAND

DATA = Path(__file__).parent / "data"
H100_Q = (DATA / "thamada-H100SXMx8-q.txt").read_text(encoding="utf-8")
A100_MIG_XML = (DATA / "telegraf-a100-sxm4-v12.xml").read_text(encoding="utf-8")
VGPU_Q = (DATA / "cudaerror4vgpu-RTXA6000-24Q-q.txt").read_text(encoding="utf-8")
H100_BUSES = ["18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"]  # from the H100 -q, by eye
H100_UUID0 = "GPU-b42dd28e-ffdd-8720-1df0-98bd8cdc05b1"

NOT_PERMITTED = CommandResult(1, "", "dmesg: read kernel buffer failed: Operation not permitted\n")
NO_FILE = CommandResult(1, "", "cat: /etc/ld.so.preload: No such file or directory\n")


class FakeRunner:
    """Answers each command from a table; a command not in it is "not found" (exit 127)."""

    def __init__(self, answers: dict[str, CommandResult | Exception]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    async def run(self, cmd: str, timeout: float | None = None) -> CommandResult:
        self.asked.append(cmd)
        answer = self.answers.get(
            cmd, CommandResult(127, "", f"sh: 1: {cmd.split()[0]}: not found\n")
        )
        if isinstance(answer, Exception):
            raise answer
        return answer


def csv_row(i: int, name: str, pci: str, total: int, ecc: str = "Enabled", used: int = 1,
            driver: str = "565.57.01", power: str = "700.00, 700.00") -> str:  # fmt: skip
    return (
        f"{i}, {name}, 0x{pci.upper()}10DE, {total}, {used}, {driver}, {ecc}, Disabled, "
        f"{power}, 5, 16, 5, 16, 0x0000000000000001, GPU-{i}, 00000000:{H100_BUSES[i % 8]}:00.0"
    )


def clean_h100() -> dict[str, CommandResult | Exception]:
    rows = "\n".join(csv_row(i, "NVIDIA H100 80GB HBM3", "2330", 81559) for i in range(8))
    return {
        QUERY_GPU_COMMAND: CommandResult(0, rows + "\n", ""),
        XML_COMMAND: CommandResult(0, "", ""),  # prints nothing: -q text is read instead
        TEXT_COMMAND: CommandResult(0, H100_Q, ""),
        sharing.LIST_COMMAND: CommandResult(
            0, "".join(f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i})\n" for i in range(8)), ""
        ),
        sharing.PRELOAD_COMMAND: NO_FILE,
        sharing.ENV_COMMAND: CommandResult(1, "", ""),
        sharing.PATHS_COMMAND: CommandResult(
            2, "", "ls: cannot access '/usr/local/vgpu': No such file or directory\n"
        ),
        APPS_COMMAND: CommandResult(0, "", ""),
        health.DMESG_COMMAND: NOT_PERMITTED,
        health.JOURNAL_COMMAND: CommandResult(
            0, "Dec 01 10:00:00 node kernel: Linux version 6.8\n", ""
        ),
    }


async def run_checks(
    answers: dict[str, CommandResult | Exception], sold: Sold
) -> list[CheckResult]:
    ctx = new_context(sold, FakeRunner(answers), Level.QUICK)
    out: list[CheckResult] = []
    for check in (inventory.CHECK, sharing.CHECK, health.CHECK):
        out += await check.run(ctx)
    return out


def by_id(results: list[CheckResult]) -> dict[str, CheckResult]:
    return {r.check: r for r in results}


SOLD_H100 = Sold("n1", gpu_model="H100 SXM", gpu_count=8)


# --- whole runs on canned outputs ---


async def test_clean_h100_node_passes_every_check() -> None:
    results = by_id(await run_checks(clean_h100(), SOLD_H100))
    assert set(results) == {
        "inventory.count", "inventory.model", "inventory.vram", "inventory.driver",
        "sharing.vgpu", "sharing.mig", "sharing.limiter", "sharing.tenants", "sharing.memory",
        "health.memory", "health.power", "health.throttle", "health.xid",
    }  # fmt: skip
    assert {r.check: r.status for r in results.values() if r.status is not Status.PASSED} == {}
    assert results["inventory.driver"].found == "driver 565.57.01, CUDA 12.7"
    assert results["health.xid"].words == "no Xid line in the kernel log (journalctl -k)"
    assert results["inventory.vram"].evidence == ("query-gpu",)
    assert results["sharing.vgpu"].evidence == ("smi-q-x", "smi-q")


async def test_fake_vram_a100_fails_with_provider_words() -> None:
    answers = clean_h100()
    answers[QUERY_GPU_COMMAND] = CommandResult(
        0, csv_row(0, "NVIDIA A100-SXM4-80GB", "20b2", 24564, driver="535.54.03") + "\n", ""
    )
    sold = Sold("n1", gpu_model="A100 80GB", gpu_count=1)
    vram = by_id(await run_checks(answers, sold))["inventory.vram"]
    assert vram.status is Status.FAILED
    assert vram.words == (
        "GPU 0 reports 24564 MiB (memory.total, ECC Enabled); the A100 80GB has 81920 MiB (±3 %)"
    )
    assert vram.expected == "81920 MiB (±3 %)"


async def test_gpu_named_for_another_model_fails() -> None:
    answers = clean_h100()
    answers[QUERY_GPU_COMMAND] = CommandResult(
        0,
        csv_row(0, "NVIDIA GeForce RTX 4090", "2684", 24564, ecc="[N/A]") + "\n"
        + csv_row(1, "NVIDIA A100-SXM4-80GB", "2684", 81920) + "\n",
        "",
    )  # fmt: skip
    sold = Sold("n1", gpu_model="A100 80GB", gpu_count=2)
    model = by_id(await run_checks(answers, sold))["inventory.model"]
    assert model.status is Status.FAILED
    assert "GPU 0 is named 'NVIDIA GeForce RTX 4090'" in model.words
    assert (
        "GPU 1 is named 'NVIDIA A100-SXM4-80GB' but its PCI device id 2684 is the RTX 4090's"
        in model.words
    )
    assert model.words.startswith("the lease says A100 80GB; ")


async def test_mig_node_fails_sharing() -> None:
    answers = clean_h100()
    answers[XML_COMMAND] = CommandResult(0, A100_MIG_XML, "")
    answers[sharing.LIST_COMMAND] = CommandResult(
        0,
        "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-513536b6-7d19-9063-b049-1e69664bb298)\n"
        "  MIG 1g.10gb     Device  0: (UUID: MIG-a)\n  MIG 1g.10gb     Device  1: (UUID: MIG-b)\n",
        "",
    )
    mig = by_id(await run_checks(answers, SOLD_H100))["sharing.mig"]
    assert mig.status is Status.FAILED
    assert mig.words == (
        "GPU 0 MIG Enabled with 4 MIG devices; nvidia-smi -L lists 2 MIG devices: "
        "the GPUs are partitioned, and the lease sold whole GPUs"
    )


async def test_unlicensed_vgpu_fails_and_says_throttled() -> None:
    answers = clean_h100()
    answers[TEXT_COMMAND] = CommandResult(0, VGPU_Q, "")
    vgpu = by_id(await run_checks(answers, SOLD_H100))["sharing.vgpu"]
    assert vgpu.status is Status.FAILED
    assert vgpu.words.startswith(
        "GPU 0 is a vGPU (Virtualization Mode VGPU), licence Unlicensed "
        "(an unlicensed vGPU is throttled)"
    )


async def test_hami_limiter_signs_fail() -> None:
    answers = clean_h100()
    answers[sharing.PRELOAD_COMMAND] = CommandResult(0, "/usr/local/vgpu/libvgpu.so\n", "")
    answers[sharing.ENV_COMMAND] = CommandResult(0, "CUDA_DEVICE_MEMORY_LIMIT_0=3000m\n", "")
    answers[sharing.PATHS_COMMAND] = CommandResult(
        2, "/tmp/vgpulock\n", "ls: cannot access '/usr/local/vgpu': No such file or directory\n"
    )
    limiter = by_id(await run_checks(answers, SOLD_H100))["sharing.limiter"]
    assert limiter.status is Status.FAILED
    assert limiter.words.startswith(
        "/etc/ld.so.preload loads /usr/local/vgpu/libvgpu.so; "
        "CUDA_DEVICE_MEMORY_LIMIT_0=3000m is set; /tmp/vgpulock exists"
    )


async def test_limit_variables_that_could_not_be_read_are_no_pass() -> None:
    """grep exits 1 when nothing matched (a pass); 2 is an error: no answer, so no pass."""
    answers = clean_h100()
    answers[sharing.ENV_COMMAND] = CommandResult(2, "", "grep: Unmatched ( or \\(\n")
    limiter = by_id(await run_checks(answers, SOLD_H100))["sharing.limiter"]
    assert limiter.status is Status.WARNED
    assert "the limit variables could not be read" in limiter.words
    assert "exited 2 (grep: Unmatched" in limiter.words
    assert by_id(await run_checks(clean_h100(), SOLD_H100))["sharing.limiter"].status is (
        Status.PASSED
    )


async def test_other_tenant_process_fails() -> None:
    answers = clean_h100()
    answers[APPS_COMMAND] = CommandResult(0, f"{H100_UUID0}, 4242, 30000\n", "")
    tenants = by_id(await run_checks(answers, SOLD_H100))["sharing.tenants"]
    assert tenants.status is Status.FAILED
    assert tenants.words == (
        "GPU 0 runs pid 4242 using 30000 MiB: a node just handed over should run nothing"
    )


async def test_other_tenant_process_is_named_from_the_q_listing() -> None:
    """The compute-apps query names nothing; -q's entry for the same pid does."""
    answers = clean_h100()
    answers[APPS_COMMAND] = CommandResult(0, f"{H100_UUID0}, 4242, 30000\n", "")
    listed = (
        "    Processes\n        GPU instance ID                   : N/A\n"
        "        Compute instance ID               : N/A\n"
        "        Process ID                        : 4242\n"
        "            Type                          : C\n"
        "            Name                          : python\n"
        "            Used GPU Memory               : 30000 MiB\n"
    )
    text = H100_Q.replace("    Processes                             : None\n", listed, 1)
    answers[TEXT_COMMAND] = CommandResult(0, text, "")
    tenants = by_id(await run_checks(answers, SOLD_H100))["sharing.tenants"]
    assert tenants.status is Status.FAILED
    assert tenants.words == (
        "GPU 0 runs pid 4242 'python' using 30000 MiB: a node just handed over should run nothing"
    )


async def test_kernel_log_unreadable_is_skipped_with_reason() -> None:
    answers = clean_h100()
    answers[health.JOURNAL_COMMAND] = CommandResult(1, "", "No journal files were found.\n")
    xid = by_id(await run_checks(answers, SOLD_H100))["health.xid"]
    assert xid.status is Status.SKIPPED
    assert xid.words == (
        "skipped, because `dmesg` needs root here (dmesg: read kernel buffer failed: "
        "Operation not permitted) and `journalctl -k -b --no-pager -q` exited 1 "
        "(No journal files were found.)"
    )


async def test_xid_79_in_dmesg_fails() -> None:
    answers = clean_h100()
    answers[health.DMESG_COMMAND] = CommandResult(
        0, "[ 12.5] NVRM: Xid (PCI:0000:18:00): 79, pid=0, GPU has fallen off the bus.\n", ""
    )
    xid = by_id(await run_checks(answers, SOLD_H100))["health.xid"]
    assert xid.status is Status.FAILED
    assert xid.words.startswith("Xid 79 on PCI:0000:18:00 (pid=0, GPU has fallen off the bus.)")


async def test_no_nvidia_smi_is_not_checked_never_passed() -> None:
    results = await run_checks({}, SOLD_H100)
    statuses = {r.check: r.status for r in results}
    assert statuses["inventory.query"] is Status.NOT_CHECKED
    assert statuses["sharing.query"] is Status.NOT_CHECKED
    assert statuses["health.query"] is Status.NOT_CHECKED
    assert Status.PASSED not in statuses.values()
    words = by_id(results)["inventory.query"].words
    assert "nvidia-smi not found on the node" in words


async def test_unreachable_node_is_not_checked() -> None:
    down = SshError("n1", NodeHealth.UNREACHABLE, "connection refused")
    results = await run_checks(dict.fromkeys(clean_h100(), down), SOLD_H100)
    assert results[0].status is Status.NOT_CHECKED
    assert "connection refused" in results[0].words
    assert all(r.status in (Status.NOT_CHECKED, Status.SKIPPED) for r in results)


async def test_old_driver_query_is_retried_with_the_throttle_name() -> None:
    answers = clean_h100()
    answers[QUERY_GPU_COMMAND] = CommandResult(
        2, 'Field "clocks_event_reasons.active" is not a valid field to query.\n', ""
    )
    answers[QUERY_GPU_OLD_COMMAND] = CommandResult(
        0, csv_row(0, "Tesla V100-PCIE-32GB", "1db6", 32510, driver="470.129.06") + "\n", ""
    )
    sold = Sold("n1", gpu_model="V100 32GB", gpu_count=1)
    results = by_id(await run_checks(answers, sold))
    assert results["inventory.vram"].status is Status.PASSED
    assert results["inventory.model"].evidence == ("query-gpu", "query-gpu-old")


# --- inventory judges ---


def row(name: str = "NVIDIA H100 80GB HBM3", pci: str = "2330", total: int | None = 81559,
        ecc: str = "Enabled", index: int = 0) -> SmiRow:  # fmt: skip
    return SmiRow(index, name, pci, total, 1, "565.57.01", ecc, "Disabled", 700.0, 700.0,
                  5, 16, 5, 16, 1, f"GPU-{index}", "00000000:18:00.0")  # fmt: skip


def test_count_judge() -> None:
    two = [row(index=0), row(index=1)]
    assert inventory.judge_count(two, replace(SOLD_H100, gpu_count=2), ()).status is Status.PASSED
    short = inventory.judge_count(two, SOLD_H100, ())
    assert (short.status, short.words) == (
        Status.FAILED,
        "nvidia-smi --query-gpu lists 2 GPUs; the lease says 8",
    )
    assert inventory.judge_count(two, replace(SOLD_H100, gpu_count=1), ()).status is Status.WARNED
    assert inventory.judge_count(two, replace(SOLD_H100, gpu_count=0), ()).status is Status.SKIPPED


def test_vram_gddr_ecc_explains_the_loss() -> None:
    settings = Settings()
    sold = Sold("n", gpu_model="L40S")
    ecc_on = inventory.judge_vram([row("NVIDIA L40S", "26b9", 46068)], sold, settings, ())
    assert ecc_on.status is Status.PASSED
    # 46068 × 16 / 15 = 49139.2: 49140 is what an L40S shows with ECC off.
    assert "46068 MiB with ECC on, which takes 1/16 of GDDR memory (49140 MiB" in ecc_on.words
    ecc_off = inventory.judge_vram(
        [row("NVIDIA L40S", "26b9", 49140, "Disabled")], sold, settings, ()
    )
    assert ecc_off.status is Status.PASSED
    # A GDDR card whose ECC state is unknown may show either figure.
    unknown = inventory.judge_vram([row("NVIDIA L40S", "26b9", 49140, "")], sold, settings, ())
    assert unknown.status is Status.PASSED
    # 46068 with ECC off is 6 % short: not explained by ECC.
    short = inventory.judge_vram(
        [row("NVIDIA L40S", "26b9", 46068, "Disabled")], sold, settings, ()
    )
    assert short.status is Status.FAILED and "the L40S has 49140 MiB" in short.words


def test_vram_tolerance_edges() -> None:
    sold = Sold("n", gpu_model="A100 80GB")
    # 3 % of 81920 is 2457.6: 79463 is inside, 79462 outside.
    inside = inventory.judge_vram([row("A100", "20b2", 79463)], sold, Settings(), ())
    outside = inventory.judge_vram([row("A100", "20b2", 79462)], sold, Settings(), ())
    assert (inside.status, outside.status) == (Status.PASSED, Status.FAILED)
    bigger = inventory.judge_vram([row("A100", "20b2", 143771)], sold, Settings(), ())
    assert bigger.status is Status.WARNED  # more than sold is no loss


def test_vram_unknown_model_is_skipped() -> None:
    out = inventory.judge_vram(
        [row("NVIDIA B200", "2901", 183359)], Sold("n", gpu_model="B200"), Settings(), ()
    )
    assert (out.status, out.words) == (
        Status.SKIPPED,
        "skipped, because zuka has no nominal figures for B200",
    )


def test_vram_sold_without_size_uses_the_pci_id() -> None:
    sold = Sold("n", gpu_model="A100")
    out = inventory.judge_vram([row("NVIDIA A100-SXM4-40GB", "20b0", 40960)], sold, Settings(), ())
    assert out.status is Status.PASSED and "A100 40GB" in out.words


def test_cuda_below_12_warns() -> None:
    facts = SmiQuery(driver_version="470.129.06", cuda_version="11.4")
    out = inventory.judge_versions([replace(row(), driver_version="470.129.06")], facts, ())
    assert out.status is Status.WARNED
    assert (
        out.words
        == "driver 470.129.06, CUDA 11.4: CUDA below 12 (vast.ai's bar for verified hosts)"
    )


# --- sharing judges ---


def gpu(**kw: object) -> GpuQuery:
    base = GpuQuery(index=0, uuid="GPU-0", memory_used_mib=1, virtualization_mode="None")
    return replace(base, **kw)  # type: ignore[arg-type]


def test_pass_through_is_a_whole_gpu() -> None:
    facts = SmiQuery(gpus=(gpu(virtualization_mode="Pass-Through"),))
    assert sharing.judge_virtualisation(facts, ()).status is Status.PASSED


def test_unexplained_memory_warns_then_fails() -> None:
    small = SmiQuery(gpus=(gpu(memory_used_mib=900),))
    assert sharing.judge_unexplained(small, [], ()).status is Status.PASSED
    warn = sharing.judge_unexplained(SmiQuery(gpus=(gpu(memory_used_mib=2000),)), [], ())
    assert warn.status is Status.WARNED
    fail = sharing.judge_unexplained(SmiQuery(gpus=(gpu(memory_used_mib=6000),)), [], ())
    assert fail.status is Status.FAILED
    assert fail.words.startswith("GPU 0 has 6000 MiB in use, 6000 MiB of it by no process")
    # A visible process explains its memory: 6000 - 5500 = 500 left, under 1 GiB.
    proc = GpuProcess("n", "GPU-0", 7, "python", 5500.0)
    assert (
        sharing.judge_unexplained(SmiQuery(gpus=(gpu(memory_used_mib=6000),)), [proc], ()).status
        is Status.PASSED
    )
    # With a process present, 6000 - 100 = 5900 unexplained only warns.
    tiny = GpuProcess("n", "GPU-0", 7, "python", 100.0)
    assert (
        sharing.judge_unexplained(SmiQuery(gpus=(gpu(memory_used_mib=6000),)), [tiny], ()).status
        is Status.WARNED
    )


def test_graphics_processes_are_no_tenants() -> None:
    xorg = QueryProcess(1117, "G", "/usr/lib/xorg/Xorg", 23)
    assert (
        sharing.judge_tenants(SmiQuery(gpus=(gpu(processes=(xorg,)),)), [], ()).status
        is Status.PASSED
    )
    job = QueryProcess(9, "C", "python", 23)
    out = sharing.judge_tenants(SmiQuery(gpus=(gpu(processes=(job,)),)), [], ())
    assert out.status is Status.FAILED
    assert "GPU 0 runs pid 9 'python' using 23 MiB (nvidia-smi -q)" in out.words


def test_a_process_the_login_cannot_see_fails_one_it_can_see_warns() -> None:
    job = QueryProcess(9, "C", "python", 23)
    facts = SmiQuery(gpus=(gpu(processes=(job,)),))
    # pid 9 is in the node's process table: perhaps the lab's own job.
    seen = sharing.judge_tenants(facts, [], (), frozenset({1, 9}))
    assert seen.status is Status.WARNED and "perhaps the lab's own job" in seen.words
    # Not in it: another container or tenant holds the GPU.
    hidden = sharing.judge_tenants(facts, [], (), frozenset({1, 2}))
    assert hidden.status is Status.FAILED and "another container or tenant" in hidden.words
    pids = sharing.visible_pids(Evidence("ps", "ps -e -o pid=", 0, "    1\n  412\n", ""))
    assert pids == frozenset({1, 412})
    assert sharing.visible_pids(Evidence("ps", "ps", 1, "", "ps: not found")) is None


def test_limiter_signs_read_only_what_matters() -> None:
    def ev(key: str, out: str, status: int = 0) -> Evidence:
        return Evidence(key, key, status, out, "")

    assert (
        sharing.limiter_signs(ev("p", "/usr/lib/libjemalloc.so\n"), ev("e", "", 1), ev("l", "", 2))
        == []
    )
    signs = sharing.limiter_signs(
        ev("p", ""),
        ev("e", "CUDA_DEVICE_SM_LIMIT=50\nLD_PRELOAD=/usr/local/vgpu/libvgpu.so\n"),
        ev("l", "/usr/local/vgpu\n"),
    )
    assert signs == [
        "CUDA_DEVICE_SM_LIMIT=50 is set",
        "LD_PRELOAD=/usr/local/vgpu/libvgpu.so is set",
        "/usr/local/vgpu exists",
    ]


def test_mig_lines_of_a_real_listing() -> None:
    # `nvidia-smi -L` on an A100 in 7 MIG slices, driver 535.216.01 (DataDog/datadog-agent
    # pull request 33120, as posted).
    listing = (
        "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-7fdaf0a5-179b-f636-d15d-daf243e3ff16)\n"
        "  MIG 1g.10gb     Device  0: (UUID: MIG-feb88891-0321-5fef-9c87-d4af3b54259e)\n"
        "  MIG 1g.10gb     Device  1: (UUID: MIG-a25704ba-3a06-5299-a795-fd7cf4d13973)\n"
        "  MIG 1g.10gb     Device  2: (UUID: MIG-50f1c4c9-1508-5e8d-bb06-d08145b22e01)\n"
        "  MIG 1g.10gb     Device  3: (UUID: MIG-36c795f2-5cf7-55d6-af30-e535e79b7bb6)\n"
        "  MIG 1g.10gb     Device  4: (UUID: MIG-3f45d38c-8cee-503e-b806-a1f1bdceedeb)\n"
        "  MIG 1g.10gb     Device  5: (UUID: MIG-96655de9-9525-58f9-a62b-0e4c1cc1c265)\n"
        "  MIG 1g.10gb     Device  6: (UUID: MIG-1aae4990-b962-574e-8375-119d6d9b9687)\n"
    )
    assert sharing.mig_lines(listing) == 7


def test_mig_lines() -> None:
    assert (
        sharing.mig_lines("GPU 0: A100 (UUID: GPU-1)\n  MIG 3g.40gb     Device  0: (UUID: MIG-1)\n")
        == 1
    )
    assert sharing.mig_lines("GPU 0: A100 (UUID: GPU-1)\n") == 0


# --- health judges ---


def test_remapped_rows_and_retired_pages() -> None:
    def status(**kw: object) -> Status:
        return health.judge_memory(SmiQuery(gpus=(gpu(**kw),)), ()).status

    assert status(remapped_uncorrectable=0, remap_pending="No", remap_failure="No") is Status.PASSED
    assert status(remapped_uncorrectable=511) is Status.PASSED
    assert status(remapped_uncorrectable=512) is Status.FAILED
    assert status(remap_failure="Yes") is Status.FAILED
    assert status(remap_pending="Yes") is Status.WARNED
    assert status(retired_sbe=14) is Status.PASSED
    assert status(retired_sbe=10, retired_dbe=5) is Status.WARNED  # 15
    assert status(retired_sbe=60, retired_dbe=3) is Status.FAILED  # 63
    assert status(retired_pending="Yes") is Status.WARNED
    assert status(ecc_uncorrected_volatile=2) is Status.WARNED


def test_power_limit_against_default() -> None:
    def judged(limit: float | None, default: float | None) -> CheckResult:
        return health.judge_power(
            SmiQuery(gpus=(gpu(power_limit_w=limit, default_power_limit_w=default),)), ()
        )

    assert judged(700, 700).status is Status.PASSED
    assert judged(665, 700).status is Status.WARNED  # 95 %
    capped = judged(300, 400)  # 75 %
    assert capped.status is Status.FAILED
    assert (
        capped.words
        == "GPU 0: power limit 300 W, default 400 W (75 %): the GPUs are power-capped (nvidia-smi -q)"
    )
    assert judged(630, 700).status is Status.WARNED  # exactly 90 %: not below it
    assert judged(None, None).status is Status.SKIPPED


def test_throttle_reasons_at_idle() -> None:
    def judged(*reasons: str) -> Status:
        return health.judge_throttle(SmiQuery(gpus=(gpu(throttle_active=reasons),)), ()).status

    assert judged() is Status.PASSED
    assert judged("Idle", "SW Power Cap") is Status.PASSED
    assert judged("HW Slowdown", "HW Thermal Slowdown") is Status.WARNED


def test_xids() -> None:
    log = (
        "[1.0] NVRM: Xid (PCI:0000:18:00): 13, Graphics SM Warp Exception\n"
        "[2.0] NVRM: Xid (PCI:0000:2a:00): 31, pid=77, Ch 00000008, MMU Fault\n"
    )
    xids = health.xid_lines(log)
    assert [(x.bus, x.code) for x in xids] == [("0000:18:00", 13), ("0000:2a:00", 31)]
    out = health.judge_xids(xids, (), "dmesg")
    assert out.status is Status.WARNED and out.found == "2 Xid lines, codes 13, 31"
    fatal = health.xid_lines(
        log + "[3.0] NVRM: Xid (PCI:0000:5d:00): 48, An uncorrectable double bit error\n"
    )
    assert health.judge_xids(fatal, (), "dmesg").status is Status.FAILED
    assert health.xid_lines("NVRM: Xid (PCI:0000:18:00): 99999999999999, x") == []


async def test_engine_runs_the_three_families_cheapest_first() -> None:
    from datetime import UTC, datetime

    from leases.accept.engine import run

    runner = FakeRunner(clean_h100())
    ctx = new_context(SOLD_H100, runner, Level.QUICK)
    started: list[str] = []
    at = datetime(2026, 3, 1, tzinfo=UTC)
    checks = [health.CHECK, sharing.CHECK, inventory.CHECK]
    verdict = await run(checks, ctx, now=lambda: at, started=lambda c: started.append(c.id))
    assert started == ["inventory", "sharing", "health"]
    assert verdict.status is Status.PASSED
    # Each command ran once, though three families read nvidia-smi -q.
    assert runner.asked.count(XML_COMMAND) == 1 and runner.asked.count(TEXT_COMMAND) == 1


def test_vram_of_an_unknown_model_against_the_vram_sold() -> None:
    sold = Sold("n", gpu_model="B200", vram_gib=180)
    ok = inventory.judge_vram([row("NVIDIA B200", "2901", 183359)], sold, Settings(), ())
    assert ok.status is Status.PASSED  # 180 × 1024 = 184320; 183359 is 0.5 % short
    fake = inventory.judge_vram([row("NVIDIA B200", "2901", 24564)], sold, Settings(), ())
    assert fake.status is Status.FAILED
    assert fake.words == (
        "GPU 0 reports 24564 MiB (memory.total, ECC Enabled); zuka has no nominal figures "
        "for B200; the lease records 180 GiB per GPU, 172800 MiB (±3 %)"
    )  # with ECC on or off: 184320 × 15/16 = 172800 is the nearer figure


def test_model_from_the_pci_id_when_the_name_is_not_printed() -> None:
    sold = Sold("n", gpu_model="A100 80GB")
    assert inventory.judge_model([row("", "20b2")], sold, ()).status is Status.PASSED
    other = inventory.judge_model([row("", "2684")], sold, ())
    assert (
        other.status is Status.FAILED and "its PCI device id 2684 is the RTX 4090's" in other.words
    )
    unknown = inventory.judge_model([row("", "")], sold, ())
    assert unknown.status is Status.NOT_CHECKED
