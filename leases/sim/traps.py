"""What a simulated node can be wrong in, beside its load scenario: the traps a hand-over
acceptance must catch. A node carries any set of them (`SimNode.traps`)."""

from __future__ import annotations

from enum import StrEnum


class Trap(StrEnum):
    VGPU = "vgpu"  # a vGPU guest: Virtualization Mode VGPU, licence Unlicensed (Restricted)
    MIG = "mig"  # MIG enabled, two 3g instances per GPU (MIG-capable models only)
    HAMI = "hami"  # HAMi-core: ld.so.preload libvgpu, limit variables, memory.total sliced
    TENANT = "tenant"  # another tenant's compute processes on our GPUs
    GHOST_MEMORY = "ghost_memory"  # memory in use that no visible process explains
    PCIE_ONLY = "pcie_only"  # sold with NVLink, the box has PCIe only (and no InfiniBand)
    DEAD_LINK = "dead_link"  # GPU 0: one NVLink inactive, one at a lower rate
    NO_IB = "no_ib"  # ibstat is not installed (no InfiniBand tools)
    IB_DOWN = "ib_down"  # ports Initializing (no subnet manager) or Ethernet (RoCE)
    POWER_CAPPED = "power_capped"  # power.limit at 60 % of power.default_limit
    THROTTLED = "throttled"  # HW slowdown (power brake) active, even at idle
    REMAPPED_ROWS = "remapped_rows"  # GPU 0: 512 uncorrectable row remaps, failure Yes
    XID = "xid"  # Xid 79 and 48 in the kernel log
    DMESG_DENIED = "dmesg_denied"  # dmesg refused (dmesg_restrict); the journal still reads
    PASSWORD_SSHD = "password_sshd"  # sshd -T: passwordauthentication yes, permitrootlogin yes
    OPEN_JUPYTER = "open_jupyter"  # python3 jupyter on 0.0.0.0:8888, /api/kernels answers 200
    STRANGER_KEY = "stranger_key"  # a key nobody in the lab knows in authorized_keys
    SMALL_DISK = "small_disk"  # no /data volume; / is a 50 GB overlay, nearly full
    NO_TOOLS = "no_tools"  # no python3, dcgmi, nvbandwidth, all_reduce_perf
    NO_TORCH = "no_torch"  # python3 without torch
    SLOW_GPU = "slow_gpu"  # matmul at 40 % of nominal; nvbandwidth and all_reduce slow
    DCGM_FAIL = "dcgm_fail"  # dcgmi diag shows a Fail
