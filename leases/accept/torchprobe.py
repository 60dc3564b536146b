"""The script zuka runs with the node's python3 (`python3 -c SCRIPT`): zuka's own words,
never a node's. It prints ONE JSON line (see `leases.accept.parse.torchrun`).

Per GPU: time a BF16 matmul (n = 8192, 2·n³ flops each), then allocate 256 MiB blocks
until CUDA refuses or only 512 MiB of free memory is left, and report what it held (a
card whose CUDA cannot hold ~90 % of the memory nvidia-smi reports is shared or fake).
Then it copies host -> GPU while reading the PCIe link's current generation and width with
nvidia-smi: the link is compared at its rate only under load.
The burn variant repeats the matmul on fixed inputs for SECONDS and counts results that
differ from the first (silent data corruption, as gpu-burn compares).

Each run carries a fresh NONCE (hex zuka drew) that the script prints back in its JSON
line: zuka reads only the line that carries it, so a canned or planted JSON line is not
taken for this run's figures. The command (`command`) clears CUDA_VISIBLE_DEVICES and
sets CUDA_DEVICE_ORDER=PCI_BUS_ID, so that torch sees every GPU and its index i is
nvidia-smi's GPU i; the script does the same before importing torch.
"""

from __future__ import annotations

import re
import secrets
import shlex

_BODY = r"""import json, os, subprocess, sys, threading, time
os.environ.pop("CUDA_VISIBLE_DEVICES", None)
os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
out = {"torch": None, "cuda": None, "gpus": [], "error": "", "nonce": NONCE}
try:
    import torch
except Exception as e:
    out["error"] = str(e)[:200]
    print(json.dumps(out)); sys.exit(0)
out["torch"] = torch.__version__.split("+")[0]
out["cuda"] = torch.version.cuda
if not torch.cuda.is_available():
    out["error"] = "torch.cuda.is_available() is False"
    print(json.dumps(out)); sys.exit(0)
N = 8192
for i in range(torch.cuda.device_count()):
    g = {"index": i, "name": "", "total_bytes": 0, "allocated_bytes": 0,
         "bf16_tflops": 0.0, "error": ""}
    if BURN:
        g["mismatches"] = 0
    try:
        dev = torch.device("cuda", i)
        p = torch.cuda.get_device_properties(i)
        g["name"], g["total_bytes"] = p.name, int(p.total_memory)
        gen = torch.Generator(device=dev).manual_seed(1234)
        a = torch.randn(N, N, device=dev, dtype=torch.bfloat16, generator=gen)
        b = torch.randn(N, N, device=dev, dtype=torch.bfloat16, generator=gen)
        for _ in range(3):
            c = a @ b
        torch.cuda.synchronize(dev)
        reps, t0 = 20, time.perf_counter()
        for _ in range(reps):
            c = a @ b
        torch.cuda.synchronize(dev)
        g["bf16_tflops"] = round(2 * N**3 * reps / (time.perf_counter() - t0) / 1e12, 1)
        if BURN:
            ref = (a @ b).clone()
            end = time.monotonic() + SECONDS
            while time.monotonic() < end:
                if not torch.equal(a @ b, ref):
                    g["mismatches"] += 1
            del ref
        del a, b, c
        torch.cuda.empty_cache()
        blocks, block = [], 256 * 2**20
        while True:
            free, _ = torch.cuda.mem_get_info(dev)
            if free < block + 512 * 2**20:
                break
            try:
                blocks.append(torch.empty(block, dtype=torch.uint8, device=dev))
            except RuntimeError:
                break
        g["allocated_bytes"] = len(blocks) * block
        del blocks
        torch.cuda.empty_cache()
        # The PCIe link under load: nvidia-smi read while host -> GPU copies run (an idle
        # GPU drops its link generation to save power; only a loaded one shows its rate).
        host, seen = torch.empty(256 * 2**20, dtype=torch.uint8).pin_memory(), {}
        def sample():
            time.sleep(0.3)
            q = ["nvidia-smi", "-i", str(i), "--format=csv,noheader,nounits",
                 "--query-gpu=pcie.link.gen.gpucurrent,pcie.link.width.current"]
            r = subprocess.run(q, capture_output=True, text=True, timeout=10)
            seen["line"] = r.stdout.strip()[:40]
        t = threading.Thread(target=sample, daemon=True)
        t.start()
        stop = time.monotonic() + 15
        while t.is_alive() and time.monotonic() < stop:
            host.to(dev)
            torch.cuda.synchronize(dev)
        g["pcie_load"] = seen.get("line", "")
        del host
    except Exception as e:
        g["error"] = (type(e).__name__ + ": " + str(e))[:200]
    out["gpus"].append(g)
print(json.dumps(out))
"""

_NONCE = re.compile(r"[0-9a-f]{16,64}")


def new_nonce() -> str:
    """A fresh nonce for one run (32 hex digits)."""
    return secrets.token_hex(16)


def _nonce_line(nonce: str) -> str:
    if not _NONCE.fullmatch(nonce):
        raise ValueError("a nonce is 16 to 64 lower-case hex digits")
    return f'NONCE = "{nonce}"\n'


def torch_script(nonce: str) -> str:
    """The matmul and allocation probe, carrying this run's nonce."""
    return "# zuka-accept-torch v1\n" + _nonce_line(nonce) + "BURN = False\nSECONDS = 0\n" + _BODY


def burn_script(seconds: int, nonce: str) -> str:
    """The burn variant, bounded by `seconds` (an int zuka chose, never a node's word)."""
    bound = max(1, min(int(seconds), 24 * 3600))
    return (
        "# zuka-accept-burn v1\n" + _nonce_line(nonce) + f"BURN = True\nSECONDS = {bound}\n" + _BODY
    )


def command(script: str) -> str:
    """The command line that runs a script with every GPU visible in PCI bus order."""
    return "env -u CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER=PCI_BUS_ID python3 -c " + shlex.quote(
        script
    )
