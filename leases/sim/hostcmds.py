"""What a simulated node's host tools print for acceptance: sshd -T and sshd_config,
authorized_keys, ss, curl, df, dmesg and journalctl, ibstat, command -v, ls -d, and the
HAMi signs in ld.so.preload and env. Each trap changes the one tool that shows it."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime

from leases.sim.gpu import FAKE_VRAM_MODEL, Scenario, SimNode
from leases.sim.hostproc import df_all, grep_files, proc_file
from leases.sim.output import Answer, not_found
from leases.sim.specs import SPECS
from leases.sim.traps import Trap

VGPU_LIB = "/usr/local/vgpu/libvgpu.so"
HAMI_PATHS = ("/usr/local/vgpu", "/tmp/vgpulock")
STRANGER_KEY = (
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKmS4vU3xJ0w3m8pVqf6sB0c0Yb2yG7l1Z4nQm5o8Tq1 "
    "ops@previous-tenant"
)
JUPYTER_PORT = 8888
TOOL_PATHS = {
    "python3": "/usr/bin/python3",
    "dcgmi": "/usr/bin/dcgmi",
    "nvbandwidth": "/usr/local/bin/nvbandwidth",
    "all_reduce_perf": "/usr/local/bin/all_reduce_perf",
}
_HEAVY = frozenset({"python3", "dcgmi", "nvbandwidth", "all_reduce_perf"})
_SSHD = ("sshd", "/usr/sbin/sshd")
_KEYS = ("~/.ssh/authorized_keys", "/root/.ssh/authorized_keys", "$HOME/.ssh/authorized_keys")


def sliced(node: SimNode) -> bool:
    """Does HAMi-core sit between CUDA and the cards (the fake-VRAM scenario, or the trap)?"""
    return node.scenario is Scenario.FAKE_VRAM or Trap.HAMI in node.traps


def has_tool(node: SimNode, name: str) -> bool:
    if name in _HEAVY and Trap.NO_TOOLS in node.traps:
        return False
    if name == "ibstat":
        return ib_ports(node) > 0 and Trap.NO_IB not in node.traps
    return name in TOOL_PATHS or name in ("sshd", "ss", "df", "dmesg", "journalctl", "curl")


def ib_ports(node: SimNode) -> int:
    """Only NVLink boxes carry InfiniBand; a box that turned out PCIe-only carries none."""
    if Trap.PCIE_ONLY in node.traps or not node.model.nvlink or node.count < 8:
        return 0
    return SPECS[node.gpu_model].ib_ports


def hami_env(node: SimNode) -> dict[str, str]:
    if not sliced(node):
        return {}
    mib = FAKE_VRAM_MODEL.memory_mib if node.scenario is Scenario.FAKE_VRAM else None
    limit = mib if mib is not None else node.gpus[0].memory_total_mib
    env = {f"CUDA_DEVICE_MEMORY_LIMIT_{i}": f"{limit}m" for i in range(node.count)}
    return env | {
        "CUDA_DEVICE_SM_LIMIT": "100",
        "CUDA_DEVICE_MEMORY_SHARED_CACHE": "/tmp/vgpu/cache",
    }


def file_text(node: SimNode, path: str) -> str | None:
    """The text of the files acceptance reads; None for any other path."""
    if path == "/etc/ld.so.preload":
        return VGPU_LIB + "\n" if sliced(node) else ""
    if path == "/etc/ssh/sshd_config":
        return _sshd_config(node)
    if path in _KEYS:
        lines = [*node.keys, *([STRANGER_KEY] if Trap.STRANGER_KEY in node.traps else [])]
        return "".join(line + "\n" for line in lines)
    return None


def _sshd_config(node: SimNode) -> str:
    weak = Trap.PASSWORD_SSHD in node.traps
    return (
        "Include /etc/ssh/sshd_config.d/*.conf\n"
        f"PermitRootLogin {'yes' if weak else 'prohibit-password'}\n"
        f"PasswordAuthentication {'yes' if weak else 'no'}\n"
        "KbdInteractiveAuthentication no\n"
        "UsePAM yes\nX11Forwarding no\nPrintMotd no\n"
        "AcceptEnv LANG LC_*\nSubsystem sftp /usr/lib/openssh/sftp-server\n"
    )


def sshd_t(node: SimNode) -> Answer:
    """`sshd -T` as OpenSSH 9.6 prints it (lower-case keys, one a line), abridged."""
    weak = Trap.PASSWORD_SSHD in node.traps
    lines = [
        "port 22", "addressfamily any", "listenaddress [::]:22", "listenaddress 0.0.0.0:22",
        "usepam yes", "logingracetime 120", "x11forwarding no", "x11uselocalhost yes",
        "printmotd no", "permitemptypasswords no", "strictmodes yes", "tcpkeepalive yes",
        "pubkeyauthentication yes", "kbdinteractiveauthentication no",
        "hostbasedauthentication no", f"passwordauthentication {'yes' if weak else 'no'}",
        "maxauthtries 6", "maxsessions 10", "clientaliveinterval 0", "clientalivecountmax 3",
        f"permitrootlogin {'yes' if weak else 'without-password'}",
        "authorizedkeysfile .ssh/authorized_keys .ssh/authorized_keys2",
        "maxstartups 10:30:100", "subsystem sftp /usr/lib/openssh/sftp-server",
    ]  # fmt: skip
    return Answer("".join(line + "\n" for line in lines), "", 0)


def ss(node: SimNode, args: list[str]) -> Answer:
    if not args or not args[0].startswith("-") or "l" not in args[0]:
        return Answer("", "ss: the simulator answers only ss -ltnpH\n", 1)
    rows = [
        ("0.0.0.0:22", "0.0.0.0:*", 'users:(("sshd",pid=873,fd=3))'),
        ("[::]:22", "[::]:*", 'users:(("sshd",pid=873,fd=4))'),
    ]
    if Trap.OPEN_JUPYTER in node.traps:
        rows.append((f"0.0.0.0:{JUPYTER_PORT}", "0.0.0.0:*", 'users:(("python3",pid=4242,fd=6))'))
    head = (
        ""
        if "H" in args[0]
        else "State  Recv-Q Send-Q Local Address:Port Peer Address:Port Process\n"
    )
    body = "".join(f"LISTEN 0      128    {a:>20} {b:>15} {p}\n" for a, b, p in rows)
    return Answer(head + body, "", 0)


def curl(node: SimNode, args: list[str]) -> Answer:
    """Only `curl -s -m 3 -o /dev/null -w '%{http_code}' URL`: the code, or 000 (exit 7)."""
    url = next((a for a in args if a.startswith("http://")), "")
    if url.startswith(f"http://127.0.0.1:{JUPYTER_PORT}/") and Trap.OPEN_JUPYTER in node.traps:
        return Answer("200", "", 0)
    return Answer("000", "", 7)


# (mount point, device, type, 1024-blocks, used)
_MOUNTS = (
    ("/data", "/dev/md0", "xfs", 7_501_000_000, 412_000_000),
    ("/", "/dev/nvme0n1p2", "ext4", 1_921_725_720, 87_344_112),
)
_SMALL = (("/", "overlay", "overlay", 52_403_200, 48_911_104),)


def df(node: SimNode, args: list[str]) -> Answer:
    paths = [a for a in args if not a.startswith("-") and a != "--"]
    if not paths:  # every file system: the poller's host figures (leases.sim.hostproc)
        return df_all(node)
    mounts = _SMALL if Trap.SMALL_DISK in node.traps else _MOUNTS
    lines = ["Filesystem     Type     1024-blocks       Used  Available Capacity Mounted on"]
    for path in paths:
        if not path.startswith("/"):
            return Answer("", f"df: {path}: No such file or directory\n", 1)
        mount = next(m for m in mounts if path == m[0] or path.startswith(m[0].rstrip("/") + "/"))
        at, dev, kind, blocks, used = mount
        pct = -(-used * 100 // blocks)
        lines.append(f"{dev:<14} {kind:<8} {blocks:>11} {used:>10} {blocks - used:>10} "
                     f"{pct:>7}% {at}")  # fmt: skip
    return Answer("".join(line + "\n" for line in lines), "", 0)


def kernel_log(node: SimNode) -> list[tuple[float, str]]:
    """(seconds since boot, message) of the node's kernel log: boot, the NVIDIA driver, Xids."""
    driver = node.gpus[0].model.driver
    log = [
        (0.0, "Linux version 5.15.0-119-generic (buildd@lcy02-amd64-062) #129-Ubuntu SMP"),
        (11.482113, "nvidia: loading out-of-tree module taints kernel."),
        (11.873021, f"NVRM: loading NVIDIA UNIX x86_64 Kernel Module  {driver}"),
        (12.904417, "nvidia-uvm: Loaded the UVM driver, major device number 509."),
    ]  # fmt: skip
    if Trap.XID in node.traps:
        gpus = node.gpus
        bus = [f"PCI:0000:{g.bus_id.split(':')[1].lower()}:00" for g in gpus]
        log += [
            (80312.551203, f"NVRM: Xid ({bus[-1]}): 48, pid=30211, name=python3, An uncorrectable "
                           "double bit error (DBE) has been detected on GPU in the framebuffer "
                           "at partition 6, subpartition 0."),
            (91644.100921, f"NVRM: Xid ({bus[0]}): 79, pid=0, GPU has fallen off the bus."),
            (91644.100990, "NVRM: GPU at PCI:0000:" + bus[0][9:] + ": " + gpus[0].uuid),
        ]  # fmt: skip
    return log


def dmesg(node: SimNode) -> Answer:
    if Trap.DMESG_DENIED in node.traps:
        return Answer("", "dmesg: read kernel buffer failed: Operation not permitted\n", 1)
    return Answer("".join(f"[{t:>12.6f}] {m}\n" for t, m in kernel_log(node)), "", 0)


def journalctl(node: SimNode, now: datetime, args: list[str]) -> Answer:
    """`journalctl -k -b --no-pager -q`: the same kernel log with journal time stamps."""
    if "-k" not in args and "--dmesg" not in args:
        return Answer("", "journalctl: the simulator answers only the kernel log (-k)\n", 1)
    boot = now.timestamp() - 100_000
    out = []
    for t, m in kernel_log(node):
        stamp = datetime.fromtimestamp(boot + t, now.tzinfo).strftime("%b %d %H:%M:%S")
        out.append(f"{stamp} {node.name} kernel: {m}\n")
    return Answer("".join(out), "", 0)


def ibstat(node: SimNode) -> Answer:
    s = SPECS[node.gpu_model]
    blocks = []
    for i in range(ib_ports(node)):
        state, layer = "Active", "InfiniBand"
        if Trap.IB_DOWN in node.traps:
            state, layer = ("Initializing", "InfiniBand") if i % 2 == 0 else ("Active", "Ethernet")
        guid = f"0x{0x0C42A10300A1B200 + i * 0x10 + node.seed % 16:016x}"
        blocks.append(
            f"CA 'mlx5_{i}'\n\tCA type: {s.ib_ca_type}\n\tNumber of ports: 1\n"
            f"\tFirmware version: 28.39.1002\n\tHardware version: 0\n\tNode GUID: {guid}\n"
            f"\tSystem image GUID: {guid}\n\tPort 1:\n\t\tState: {state}\n"
            f"\t\tPhysical state: LinkUp\n\t\tRate: {s.ib_rate}\n\t\tBase lid: {i + 2}\n"
            f"\t\tLMC: 0\n\t\tSM lid: {1 if state == 'Active' else 0}\n"
            f"\t\tCapability mask: 0xa651e848\n\t\tPort GUID: {guid}\n\t\tLink layer: {layer}\n"
        )
    return Answer("".join(blocks), "", 0)


def command_v(node: SimNode, args: list[str]) -> Answer:
    """dash's `command -v A B...`: the path of each found, status 127 if any is missing."""
    if args[:1] != ["-v"]:
        return Answer("", "sh: 1: command: the simulator answers only command -v\n", 2)
    found = [TOOL_PATHS.get(a, f"/usr/bin/{a}") for a in args[1:] if has_tool(node, a)]
    missing = len(found) < len(args) - 1
    return Answer("".join(p + "\n" for p in found), "", 127 if missing else 0)


def ls_d(node: SimNode, args: list[str]) -> Answer:
    out, err = [], []
    for path in (a for a in args if not a.startswith("-")):
        there = (
            (sliced(node) and path in HAMI_PATHS)
            or path in node.files
            or any(f.startswith(path.rstrip("/") + "/") for f in node.files)
        )
        if there:
            out.append(path + "\n")
        else:
            err.append(f"ls: cannot access '{path}': No such file or directory\n")
    return Answer("".join(out), "".join(err), 2 if err else 0)


def answer_host(node: SimNode, argv: list[str], now: datetime) -> Answer | None:
    """The acceptance's host commands; None for any other (commands.py answers those)."""
    cmd, args = argv[0], argv[1:]
    handlers: dict[str, Callable[[], Answer]] = {
        "ss": lambda: ss(node, args),
        "curl": lambda: curl(node, args),
        "df": lambda: df(node, args),
        "dmesg": lambda: dmesg(node),
        "journalctl": lambda: journalctl(node, now, args),
        "command": lambda: command_v(node, args),
        "timeout": lambda: _timeout(node, args, now),
    }
    if cmd == "grep" and len([a for a in args if not a.startswith("-")]) >= 2:
        return grep_files(node, args, now)
    if cmd == "cat" and args and all(proc_file(node, a, now) is not None for a in args):
        return Answer("".join(proc_file(node, a, now) or "" for a in args), "", 0)
    if cmd in _SSHD:
        if args != ["-T"]:
            return Answer("", "sshd: the simulator answers only sshd -T\n", 1)
        return sshd_t(node)
    if cmd == "ibstat":
        return ibstat(node) if has_tool(node, "ibstat") else not_found(cmd)
    if cmd == "ls" and "-d" in args:
        return ls_d(node, args)
    handler = handlers.get(cmd)
    return handler() if handler is not None else None


def _timeout(node: SimNode, args: list[str], now: datetime) -> Answer:
    """`timeout SECONDS COMMAND...`: the command (nothing the simulator runs hangs)."""
    if len(args) < 2 or not (args[0].isascii() and args[0].isdigit()):
        return Answer("", "timeout: the simulator reads timeout SECONDS COMMAND\n", 125)
    found = answer_host(node, args[1:], now)
    return found if found is not None else not_found(args[1])


# The most `head -c N /dev/zero` prints (acceptance times a 64 MiB transfer).
_HEAD_MAX = 64 * 1024 * 1024


def head(args: list[str]) -> Answer:
    """`head -c N /dev/zero` only: the zeros a throughput measure reads."""
    if (
        len(args) == 3
        and args[0] == "-c"
        and args[1].isascii()
        and args[1].isdigit()
        and args[2] == "/dev/zero"
    ):
        return Answer("\0" * min(int(args[1]), _HEAD_MAX), "", 0)
    return Answer("", "head: the simulator reads only -c N /dev/zero\n", 1)


def grep(args: list[str], text: str) -> Answer:
    """grep [-E] [-i] [-v] PATTERN on text: 0 with lines found, 1 with none, 2 on an error."""
    flags = {a for a in args if a.startswith("-")}
    words = [a for a in args if not a.startswith("-")]
    if len(words) != 1 or not flags <= {"-E", "-i", "-v"}:
        return Answer("", "grep: the simulator reads grep [-E] [-i] [-v] PATTERN\n", 2)
    try:
        pattern = re.compile(words[0], re.IGNORECASE if "-i" in flags else 0)
    except re.error:
        return Answer("", "grep: Unmatched ( or \\(\n", 2)
    invert = "-v" in flags
    found = [ln for ln in text.splitlines() if (pattern.search(ln) is None) == invert]
    return Answer("".join(ln + "\n" for ln in found), "", 0 if found else 1)
