"""English left in Chinese output: the words of a text, spoken under zh_CN, that are
neither data (node names, providers, models: given by the test), nor words every
language writes the same (commands, options, units, product names: WORDS), nor in a
command, path or URL. A string never wrapped for translation shows up here."""

from __future__ import annotations

import re
from collections.abc import Iterable

# Written the same in Chinese: product and protocol names, units, file formats, the
# words of commands and options people type (`zuka node add`), ISO codes.
WORDS = frozenset(
    """
    zuka GPU GPUs CPU CPUs RAM VRAM SSH sshd ssh NVLink NVSwitch PCIe InfiniBand IB RDMA
    NVML nvidia smi nvidia-smi dcgm dcgm-exporter DCGM ECC MIG MPS vGPU SXM NVL HBM CUDA
    Prometheus PromQL Grafana JSON CSV TOML SQLite Markdown md URL URLs HTTP HTTPS http
    https API IP TCP UDP DNS TLS SFTP S3 EC2 OSS COS TOS OBS AWS Aliyun DingTalk Feishu
    WeCom Lark apprise Textual tmux systemd journald root sudo umask PID PIDs UID ACL
    GiB MiB TiB KiB GB MB TB KB W kW kWh MHz GHz TFLOPS TFLOP FLOPS ms min CNY USD EUR
    HKD JPY RMB ISO UTC AutoDL UTF utf OK PATH HOME XDG ID IDs SHA sha sha256 ed25519
    rsa ecdsa SIGTERM SIGKILL Ctrl ctrl Esc Enter Tab Shift alt esc enter tab shift
    pgup pgdn fapiao VAT TUI CLI NCCL PyTorch torch
    shred dmesg journalctl ibstat dcgmi nvbandwidth nccl-tests curl lsblk findmnt lsattr
    chmod df btrfs zfs reflink boto3 stdio localhost Xid Xids HAMi GDDR RoCE Jupyter Gbps
    IANA ARN all-reduce NVLinks Bearer bearer
    matmul iperf A100 H100 H800 H200 H20 L40S L20 A800 RTX
    """.split()  # noqa: SIM905
)

_WORD_RE = re.compile(r"[A-Za-z][A-Za-z'’-]*[A-Za-z]|[A-Za-z]")
# Spans that are typed or read by machines, not sentences: `code`, --options, paths,
# URLs, $VARIABLES, [config] keys, dotted and snake_case names, emails, and a whole zuka
# command up to the next Chinese word (its values are typed too: --state offboarding).
_SPANS_RE = re.compile(
    r"`[^`]*`"
    r"|(?<![\w])--?[A-Za-z][\w-]*"
    r"|https?://\S+"
    r"|(?:~|\.{1,2})?/[\w./@%+-]+"
    r"|\$[A-Z_][A-Z0-9_]*"
    r"|\[[a-z_.]+\](?:\s+[a-z_]+)?"
    r"|\b[a-z_]+\.[a-z_.]+\b"
    r"|\b\w+@[\w.-]+"
    r"|\bzuka(?:\s+[^\s\u3000-\u9fff\uff00-\uffef]+)+"
    r"|\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b"
    r"|\b(?:Africa|America|Antarctica|Asia|Atlantic|Australia|Europe|Indian|Pacific|Etc)"
    r"/[A-Za-z_+-]+(?:/[A-Za-z_]+)?"
)


def stray_english(text: str, data: Iterable[str] = (), extra: Iterable[str] = ()) -> list[str]:
    """The English words of text that are not data, not in WORDS or extra, and not in a
    code span, option, path or URL; ALL-CAPS words (metavariables: NODE, PRICE) pass.
    Words of one or two letters pass (units, GPU indices: "d", "h", "ok")."""
    allowed = set(WORDS) | set(extra)
    for value in data:
        text = text.replace(value, " ")
    text = _SPANS_RE.sub(" ", text)
    found = []
    for word in _WORD_RE.findall(text):
        if len(word) <= 2 or word.isupper() or word in allowed:
            continue
        if any(c.isdigit() for c in word):
            continue
        found.append(word)
    return found
