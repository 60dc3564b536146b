"""A GPU model's name as people type it, made comparable: "h800", "H800 80GB", "NVIDIA
H800-SXM5" and "A800-SXM4-80G" are the H800 (or the A800) to a quote, which matches offers
and leases by it. For matching only: what was typed is kept and shown.

The key drops what does not change which card it is for a price book: the vendor and
brand words (NVIDIA, Tesla, GeForce, RTX, GTX), the memory size (80GB, 80G, 96 GiB), the
form factor and memory kind (SXM4, SXM5, PCIe, NVL, HBM3); what is left is upper-cased,
without spaces, dashes or underscores ("RTX 4090 D" is 4090D, not 4090). A name of
nothing but such words keeps them all (a model typed as "PCIe" still matches itself).
Two names whose memory sizes differ are two cards (same_model)."""

from __future__ import annotations

import re
import unicodedata

_NOISE = re.compile(
    r"^(?:NVIDIA|TESLA|GEFORCE|RTX|GTX|"
    r"\d+(?:\.\d+)?\s*(?:G|GB|GIB)|"
    r"SXM\d*|PCIE\d*|NVL\d*|HBM\d*E?)$"
)
_WORDS = re.compile(r"[^0-9A-Z.]+")
_SIZE_APART = re.compile(r"(\d)\s+(GIB|GB|G)\b")  # "80 GB" is one word: 80GB


def gpu_key(typed: str) -> str:
    """The model as a quote compares it ("H800 80GB" -> "H800"); "" for nothing typed."""
    text = _SIZE_APART.sub(r"\1\2", unicodedata.normalize("NFKC", typed).upper())
    words = [w for w in _WORDS.split(text) if w]
    kept = [w for w in words if not _NOISE.match(w)]
    return "".join(kept or words)


_SIZE = re.compile(r"(?<![0-9.])(\d+(?:\.\d+)?)\s*(?:GIB|GB|G)\b")


def memory_gb(typed: str) -> float | None:
    """The memory size a name says ("A100 80GB" -> 80.0), None when it says none."""
    found = _SIZE.findall(unicodedata.normalize("NFKC", typed).upper())
    return float(found[-1]) if found else None


def same_model(a: str, b: str) -> bool:
    """Whether two typed names are the same card (never for an empty name): the same key,
    and the same memory where both names say one (an A100 40GB is not an A100 80GB to a
    quote; "A100" is either)."""
    key = gpu_key(a)
    if not key or key != gpu_key(b):
        return False
    ma, mb = memory_gb(a), memory_gb(b)
    return ma is None or mb is None or ma == mb
