"""The simulated node answers every acceptance command in the real tools' formats: each
trap changes what its command prints, a clean node prints what a healthy box prints, and
the answers travel over the in-process SSH server."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import asyncssh
import pytest

from leases.ledger import records
from leases.sim import SimFleet, SimNode, answer
from leases.sim.demoledger import demo_records
from leases.sim.ledger import sim_node_for
from leases.sim.traps import Trap

NOW = datetime(2026, 12, 1, 4, 0, tzinfo=UTC)
FIELDS = (
    "index,name,pci.device_id,memory.total,memory.used,driver_version,ecc.mode.current,"
    "mig.mode.current,power.limit,power.default_limit,pcie.link.gen.max,pcie.link.width.max,"
    "pcie.link.gen.gpucurrent,pcie.link.width.current,clocks_event_reasons.active,uuid,pci.bus_id"
)
QUERY = f"nvidia-smi --query-gpu={FIELDS} --format=csv,noheader,nounits"
APPS = "nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv,noheader,nounits"
TOOLS = "command -v python3 dcgmi nvbandwidth all_reduce_perf gpu_burn"
TORCH = "python3 -c '# zuka-accept-torch v1\nimport torch\n'"
BURN = "python3 -c '# zuka-accept-burn v1\nSECONDS=60\n'"
CURL = "curl -s -m 3 -o /dev/null -w '%{http_code}' http://127.0.0.1:8888/api/kernels"
ALL_REDUCE = "all_reduce_perf -b 8 -e 1G -f 2 -g 8"
NVB = "nvbandwidth -t host_to_device_memcpy_ce device_to_host_memcpy_ce"


def said(node: SimNode, command: str) -> str:
    out, err, _ = answer(node, command, NOW)
    return out + err


def idle_node(model: str, *traps: Trap, count: int = 8) -> SimNode:
    # idle_monthly at 04:00 UTC on a Tuesday (12:00 in Shanghai, day 2 of the week): seed 0
    # is busy on days 0 and 3 only, so the node is idle.
    from leases.sim import Scenario

    return SimNode("box", model, count, Scenario.IDLE_MONTHLY, seed=0, traps=frozenset(traps))


# (trap, model, command, what only the trapped node prints)
CASES = [
    (Trap.VGPU, "A100", "nvidia-smi -q", "Virtualization Mode               : VGPU"),
    (Trap.VGPU, "A100", "nvidia-smi -q", "License Status                    : Unlicensed (Restricted)"),
    (Trap.VGPU, "A100", "nvidia-smi -q -x", "<virtualization_mode>VGPU</virtualization_mode>"),
    (Trap.MIG, "A100", "nvidia-smi -L", "  MIG 3g.40gb     Device  0: (UUID: MIG-"),
    (Trap.MIG, "A100", QUERY, ", Enabled, Enabled, "),
    (Trap.MIG, "H100", "nvidia-smi -q -x", "<current_mig>Enabled</current_mig>"),
    (Trap.HAMI, "A100", "cat /etc/ld.so.preload", "/usr/local/vgpu/libvgpu.so"),
    (Trap.HAMI, "A100", "env", "CUDA_DEVICE_MEMORY_LIMIT_0=24576m"),
    (Trap.HAMI, "A100", "ls -d /usr/local/vgpu /tmp/vgpulock", "/usr/local/vgpu\n/tmp/vgpulock\n"),
    (Trap.HAMI, "V100", QUERY, ", 3000, "),
    (Trap.TENANT, "A100", APPS, ", 3145000, python3, 20480"),
    (Trap.TENANT, "A100", "nvidia-smi -q", "Process ID                        : 3145000"),
    (Trap.PCIE_ONLY, "A100", "nvidia-smi topo -m", "GPU0\t X \tPIX\tNODE"),
    (Trap.DEAD_LINK, "H100", "nvidia-smi nvlink -s", "\t Link 3: <inactive>\n"),
    (Trap.DEAD_LINK, "H100", "nvidia-smi nvlink -s", "\t Link 5: 13.281 GB/s\n"),
    (Trap.DEAD_LINK, "H100", "nvidia-smi topo -m", "GPU0\t X \tNV17\tNV17"),
    (Trap.NO_IB, "H100", "ibstat", "sh: 1: ibstat: not found\n"),
    (Trap.IB_DOWN, "H100", "ibstat", "\t\tState: Initializing\n"),
    (Trap.IB_DOWN, "A100", "ibstat", "\t\tLink layer: Ethernet\n"),
    (Trap.POWER_CAPPED, "H100", QUERY, ", 420.00, 700.00, "),
    (Trap.POWER_CAPPED, "H100", "nvidia-smi -q", "Current Power Limit               : 420.00 W"),
    (Trap.THROTTLED, "A100", QUERY, ", 0x0000000000000089, "),
    (Trap.THROTTLED, "A100", "nvidia-smi -q", "HW Power Brake Slowdown       : Active"),
    (Trap.REMAPPED_ROWS, "A100", "nvidia-smi -q", "Uncorrectable Error               : 512"),
    (Trap.REMAPPED_ROWS, "A100", "nvidia-smi -q -x", "<remapped_row_failure>Yes</remapped_row_failure>"),
    (Trap.REMAPPED_ROWS, "V100", "nvidia-smi -q", "Double Bit ECC                    : 64"),
    (Trap.XID, "H100", "dmesg", "NVRM: Xid (PCI:0000:18:00): 79, pid=0, GPU has fallen off the bus."),
    (Trap.XID, "H100", "dmesg", "NVRM: Xid (PCI:0000:db:00): 48, pid=30211, name=python3, An uncorr"),
    (Trap.DMESG_DENIED, "A10", "dmesg", "dmesg: read kernel buffer failed: Operation not permitted\n"),
    (Trap.PASSWORD_SSHD, "A10", "sshd -T", "\npasswordauthentication yes\n"),
    (Trap.PASSWORD_SSHD, "A10", "/usr/sbin/sshd -T", "\npermitrootlogin yes\n"),
    (Trap.PASSWORD_SSHD, "A10", "cat /etc/ssh/sshd_config", "\nPasswordAuthentication yes\n"),
    (Trap.OPEN_JUPYTER, "A10", "ss -ltnpH", "0.0.0.0:8888       0.0.0.0:* users:((\"python3\",pid=4242"),
    (Trap.OPEN_JUPYTER, "A10", CURL, "200"),
    (Trap.STRANGER_KEY, "A10", "cat ~/.ssh/authorized_keys", "ops@previous-tenant\n"),
    (Trap.SMALL_DISK, "A10", "df -PT -- /data", "overlay        overlay     52403200   48911104    3492096      94% /"),
    (Trap.NO_TOOLS, "A10", "dcgmi diag -r 1", "sh: 1: dcgmi: not found\n"),
    (Trap.NO_TOOLS, "A10", TORCH, "sh: 1: python3: not found\n"),
    (Trap.NO_TORCH, "A10", TORCH, '"error": "No module named \'torch\'"'),
    (Trap.DCGM_FAIL, "H100", "dcgmi diag -r 2", "| GPU Memory                | Fail - GPU: 2"),
    (Trap.DCGM_FAIL, "H100", "dcgmi diag -r 1", "| Page Retirement/Row Remap | Fail"),
]  # fmt: skip


@pytest.mark.parametrize(("trap", "model", "command", "text"), CASES)
def test_each_trap_shows_in_its_command(trap: Trap, model: str, command: str, text: str) -> None:
    assert text in said(idle_node(model, trap), command)
    assert text not in said(idle_node(model), command)


def test_every_trap_has_a_case() -> None:
    assert {c[0] for c in CASES} | {Trap.GHOST_MEMORY, Trap.SLOW_GPU} == set(Trap)


def test_ghost_memory_is_used_memory_no_process_explains() -> None:
    clean, ghost = idle_node("A100"), idle_node("A100", Trap.GHOST_MEMORY)
    assert said(ghost, APPS) == said(clean, APPS) == ""  # idle: no process at all
    used = [int(line.split(", ")[4]) for line in said(ghost, QUERY).splitlines()]
    before = [int(line.split(", ")[4]) for line in said(clean, QUERY).splitlines()]
    # 35 % of 81920 MiB is 28672 MiB on top of the driver's ~500 MiB reservation.
    assert [u - b for u, b in zip(used, before, strict=True)] == [28672] * 8


def test_clean_h100_query_gpu_fields() -> None:
    row = said(idle_node("H100", count=2), QUERY).splitlines()[0].split(", ")
    assert row[:4] == ["0", "NVIDIA H100 80GB HBM3", "0x233010DE", "81559"]
    # driver, ECC, MIG, power limit = default, PCIe gen 5 x16 max, gen 1 at idle, idle reason
    assert row[5:15] == ["550.54.15", "Enabled", "Disabled", "700.00", "700.00", "5", "16", "1",
                         "16", "0x0000000000000001"]  # fmt: skip
    assert row[16] == "00000000:18:00.0"


def test_clean_q_text_and_xml_agree() -> None:
    node = idle_node("A100", count=2)
    text = said(node, "nvidia-smi -q")
    assert text.startswith("\n==============NVSMI LOG==============\n\nTimestamp ")
    assert "\nGPU 00000000:18:00.0\n    Product Name                          : NVIDIA A100" in text
    assert "        Virtualization Mode               : None\n" in text
    assert "        Remapping Failure Occurred        : No\n" in text
    assert "                Max                       : 4\n" in text  # PCIe generation
    xml = said(node, "nvidia-smi -q -x")
    assert xml.startswith('<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM ')
    root = ET.fromstring(xml)
    gpus = root.findall("gpu")
    assert [g.get("id") for g in gpus] == ["00000000:18:00.0", "00000000:2A:00.0"]
    assert gpus[0].findtext("fb_memory_usage/total") == "81920 MiB"
    assert gpus[0].findtext("pci/pci_device_id") == "0x20B210DE"
    assert gpus[0].findtext("retired_pages/double_bit_retirement/retired_count") == "N/A"
    assert gpus[0].findtext("mig_devices").strip() == "None"  # type: ignore[union-attr]
    assert gpus[0].findtext("gpu_power_readings/default_power_limit") == "400.00 W"


def test_fake_vram_node_lies_alike_everywhere() -> None:
    from leases.sim import Scenario

    node = SimNode("cheap", "A100", 2, Scenario.FAKE_VRAM, vram_gib=80, spoof_name=True)
    assert said(node, "nvidia-smi --query-gpu=name,memory.total --format=csv,noheader,nounits") \
        == "NVIDIA A100-SXM4-80GB, 24564\n" * 2  # fmt: skip
    assert "    Product Name                          : NVIDIA A100-SXM4-80GB" in said(
        node, "nvidia-smi -q"
    )
    assert "        Total                             : 24564 MiB" in said(node, "nvidia-smi -q")
    root = ET.fromstring(said(node, "nvidia-smi -q -x"))
    assert [g.findtext("fb_memory_usage/total") for g in root][-2:] == ["24564 MiB"] * 2
    assert "/usr/local/vgpu/libvgpu.so" in said(node, "cat /etc/ld.so.preload")


def test_clean_node_host_commands() -> None:
    node = idle_node("H100")
    ss = said(node, "ss -ltnpH").splitlines()
    assert [line.split()[3] for line in ss] == ["0.0.0.0:22", "[::]:22"]
    sshd = said(node, "sshd -T").splitlines()
    assert "passwordauthentication no" in sshd and "kbdinteractiveauthentication no" in sshd
    assert "permitrootlogin without-password" in sshd
    assert answer(node, CURL, NOW) == ("000", "", 7)
    df = said(node, "df -PT -- /data /root").splitlines()
    assert df[1].split() == ["/dev/md0", "xfs", "7501000000", "412000000", "7089000000", "6%",
                             "/data"]  # fmt: skip
    assert df[2].split()[1] == "ext4" and df[2].split()[-1] == "/"
    assert "Xid" not in said(node, "dmesg") and "NVRM: loading NVIDIA" in said(node, "dmesg")
    assert answer(node, TOOLS, NOW) == (
        "/usr/bin/python3\n/usr/bin/dcgmi\n/usr/local/bin/nvbandwidth\n"
        "/usr/local/bin/all_reduce_perf\n", "", 127,  # gpu_burn is not there
    )  # fmt: skip
    ib = said(node, "ibstat")
    assert ib.count("CA 'mlx5_") == 8 and ib.count("\t\tRate: 400\n") == 8
    assert ib.count("\t\tState: Active\n") == 8
    assert said(idle_node("A100"), "ibstat").count("\t\tRate: 200\n") == 8
    assert said(idle_node("RTX 4090"), "ibstat") == "sh: 1: ibstat: not found\n"


def test_journal_reads_the_kernel_log_when_dmesg_is_denied() -> None:
    node = idle_node("A100", Trap.DMESG_DENIED, Trap.XID)
    log = said(node, "journalctl -k -b --no-pager -q")
    assert (
        " box kernel: NVRM: Xid (PCI:0000:18:00): 79, pid=0, GPU has fallen off the bus.\n" in log
    )


def test_nvlink_status_per_model() -> None:
    h100 = said(idle_node("H100", count=1), "nvidia-smi nvlink -s").splitlines()
    assert h100[0].startswith("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-")
    assert h100[1:] == [f"\t Link {i}: 26.562 GB/s" for i in range(18)]
    a100 = said(idle_node("A100", count=1), "nvidia-smi nvlink -s").splitlines()
    assert a100[1:] == [f"\t Link {i}: 25.000 GB/s" for i in range(12)]
    pcie = said(idle_node("A100", Trap.PCIE_ONLY, count=2), "nvidia-smi nvlink -s").splitlines()
    assert len(pcie) == 2 and all(line.startswith("GPU ") for line in pcie)


def test_torch_script_answers() -> None:
    out = json.loads(said(idle_node("H100", count=2), TORCH))
    assert (out["torch"], out["cuda"], out["error"]) == ("2.3.1", "12.1", "")
    gpu = out["gpus"][0]
    assert gpu["total_bytes"] == 81559 * 2**20
    # ~80 % of 989, within the seeded +-2 %.
    assert 0.78 * 989 <= gpu["bf16_tflops"] <= 0.82 * 989 and gpu["error"] == ""
    assert 0 < gpu["allocated_bytes"] < gpu["total_bytes"]
    slow = json.loads(said(idle_node("H100", Trap.SLOW_GPU, count=2), TORCH))["gpus"][0]
    assert 0.39 * 989 <= slow["bf16_tflops"] <= 0.41 * 989
    v100 = json.loads(said(idle_node("V100", count=1), TORCH))["gpus"][0]
    assert v100["bf16_tflops"] is None and "bf16" in v100["error"]
    burn = json.loads(said(idle_node("A10", count=1), BURN))["gpus"][0]
    assert burn["mismatches"] == 0 and 0.78 * 125 <= burn["bf16_tflops"] <= 0.82 * 125
    assert answer(idle_node("A10"), "python3 -c 'print(1)'", NOW).exit_status == 2
    assert said(idle_node("A10", count=1), TORCH) == said(idle_node("A10", count=1), TORCH)


def test_torch_script_through_zukas_command_echoes_the_nonce() -> None:
    from leases.accept.torchprobe import burn_script, command, torch_script

    nonce = "0123456789abcdef" * 2
    sent = command(torch_script(nonce))
    assert sent.startswith("env -u CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER=PCI_BUS_ID python3 -c ")
    out = json.loads(said(idle_node("H100", count=2), sent))
    assert out["nonce"] == nonce and len(out["gpus"]) == 2
    burn = json.loads(said(idle_node("A10", count=1), command(burn_script(60, nonce))))
    assert burn["nonce"] == nonce and burn["gpus"][0]["mismatches"] == 0
    none = json.loads(said(idle_node("A10", Trap.NO_TORCH, count=1), sent))
    assert none["nonce"] == nonce and none["torch"] is None
    # A script without zuka's nonce line is answered without one.
    assert json.loads(said(idle_node("A10", count=1), TORCH))["nonce"] is None


def _busbw_at_1g(text: str) -> float:
    row = next(line for line in text.splitlines() if line.split()[:1] == ["1073741824"])
    return float(row.split()[7])


def test_all_reduce_bus_bandwidth() -> None:
    text = said(idle_node("A100"), ALL_REDUCE)
    assert text.startswith("# nThread 1 nGpus 8 minBytes 8 maxBytes 1073741824 step: 2(factor)")
    assert "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : " in text
    # 231 GB/s at 1 GiB less the latency term: 231 * 1024 / (1024 + 8) = 229.2, +-2 %.
    assert 224 <= _busbw_at_1g(text) <= 234
    assert 470 <= _busbw_at_1g(said(idle_node("H100"), ALL_REDUCE)) <= 490
    assert 27 <= _busbw_at_1g(said(idle_node("A100", Trap.PCIE_ONLY), ALL_REDUCE)) <= 29
    assert _busbw_at_1g(said(idle_node("A100", Trap.SLOW_GPU), ALL_REDUCE)) < 71


def test_nvbandwidth_sums() -> None:
    text = said(idle_node("A100"), NVB)
    assert "Running host_to_device_memcpy_ce.\nmemcpy CE CPU(row) -> GPU(column) bandwidth" in text
    sums = [float(line.split()[-1]) for line in text.splitlines() if line.startswith("SUM ")]
    assert len(sums) == 2 and all(0.98 * 8 * 25.6 <= s <= 1.02 * 8 * 25.6 for s in sums)
    slow = said(idle_node("A100", Trap.SLOW_GPU), NVB)
    assert float(slow.split("SUM host_to_device_memcpy_ce ")[1].split()[0]) < 8 * 25.6 * 0.4


def test_dcgmi_clean_tables() -> None:
    r1 = said(idle_node("H100"), "dcgmi diag -r 1")
    assert r1.startswith("Successfully ran diagnostic for group.\n+----")
    assert "| GPU Device IDs Detected   | 2330,2330,2330,2330,2330,2330,2330,2330        |" in r1
    assert "Fail" not in said(idle_node("H100"), "dcgmi diag -r 3")
    assert "+-----  Integration  -------+" in said(idle_node("H100"), "dcgmi diag -r 2")
    widths = {len(line) for line in said(idle_node("H100"), "dcgmi diag -r 3").splitlines()[1:]}
    assert widths == {78}


def test_demo_ledger_nodes_carry_traps() -> None:
    nodes = {rec["name"]: rec for rec in demo_records(NOW.date())["nodes"]}
    pcie = sim_node_for(records.node_from(nodes["volc-a100-ablation"]))
    assert nodes["volc-a100-ablation"]["interconnect"] == "nvlink"
    assert Trap.PCIE_ONLY in pcie.traps and "NV12" not in said(pcie, "nvidia-smi topo -m")
    weak = sim_node_for(records.node_from(nodes["gpushare-4090-c"]))
    assert weak.traps == {Trap.PASSWORD_SSHD, Trap.OPEN_JUPYTER}
    fake = sim_node_for(records.node_from(nodes["matpool-a100-x"]))
    assert fake.traps == frozenset() and fake.gpus[0].memory_total_mib == 24564
    clean = [n for n in nodes.values() if not any(t.startswith("sim-trap:") for t in n["tags"])]
    assert len(clean) >= len(nodes) // 2


# --- over the in-process SSH server ---------------------------------------------------


@pytest.fixture
async def fleet(tmp_path: Path) -> AsyncIterator[SimFleet]:
    nodes = [SimNode("good", "H100", 8, seed=1),
             SimNode("bad", "H100", 8, seed=2, traps=frozenset({Trap.DEAD_LINK, Trap.XID,
                                                               Trap.PASSWORD_SSHD}))]  # fmt: skip
    async with SimFleet(nodes, clock=lambda: NOW) as f:
        f.write_known_hosts(tmp_path / "known_hosts")
        f.write_client_key(tmp_path)
        yield f


async def test_acceptance_commands_over_ssh(fleet: SimFleet, tmp_path: Path) -> None:
    async def run(name: str, command: str) -> tuple[str, int]:
        ep = fleet[name]
        async with asyncssh.connect(
            ep.host, ep.port, username="root", known_hosts=str(tmp_path / "known_hosts"),
            client_keys=[str(tmp_path / "id_ed25519")], agent_path=None, config=[],
        ) as conn:  # fmt: skip
            result = await conn.run(command)
            return str(result.stdout) + str(result.stderr), result.exit_status or 0

    for command in ("nvidia-smi nvlink -s", "sshd -T", "dmesg", QUERY, "nvidia-smi -q -x", TORCH):
        good, bad = await run("good", command), await run("bad", command)
        assert good == (said(fleet["good"].node, command), 0)
        assert bad == (said(fleet["bad"].node, command), 0)
    assert "<inactive>" in (await run("bad", "nvidia-smi nvlink -s"))[0]
    assert "passwordauthentication yes" in (await run("bad", "sshd -T"))[0]
    assert (await run("good", TOOLS))[1] == 127


def test_entry_point_takes_traps() -> None:
    from leases.sim.__main__ import node_from_env

    node = node_from_env({"ZUKA_SIM_MODEL": "A10", "ZUKA_SIM_TRAPS": "no_torch,xid"})
    assert node.traps == {Trap.NO_TORCH, Trap.XID}
    assert node_from_env({"ZUKA_SIM_MODEL": "A10"}).traps == frozenset()


def test_the_shell_pipes_into_grep_as_the_limiter_check_asks() -> None:
    env = "env | grep -E '^(CUDA_DEVICE_MEMORY_LIMIT|CUDA_DEVICE_SM_LIMIT|LD_PRELOAD)'"
    hami = SimNode("h", "V100", 2, traps=frozenset({Trap.HAMI}))
    out, err, status = answer(hami, env, NOW)
    assert status == 0 and err == ""
    assert out.splitlines()[0].startswith("CUDA_DEVICE_MEMORY_LIMIT_0=")
    assert "PATH=" not in out  # only what grep let through
    assert answer(SimNode("c", "V100", 2), env, NOW) == ("", "", 1)  # nothing matched
    assert answer(hami, "env | grep -E '('", NOW)[2] == 2
    assert answer(hami, "env | sort", NOW)[2] == 127
    assert answer(hami, "| grep x", NOW)[2] == 2
