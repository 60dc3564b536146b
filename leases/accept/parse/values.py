"""Reading one value as nvidia-smi prints it, in any of its output formats: "81559 MiB",
"700.00 W", "16x", "0x20B210DE", "N/A", "[Not Supported]". A value it could not read is
None (or ""), never 0: unknown stays unknown.
"""

from __future__ import annotations

import re

# Longest value kept as text: a GPU name or UUID is under 100 characters.
MAX_TEXT = 256
# More GPUs than any one machine has (the telemetry bound too).
MAX_GPUS = 128
# More processes than a shared node runs.
MAX_PROCESSES = 4096

_UNKNOWN = frozenset(
    {"", "n/a", "na", "not supported", "unknown", "unknown error", "none", "not available"}
)
_LEADING_NUMBER = re.compile(r"\s*([-+]?[0-9]{1,15}(?:\.[0-9]{1,9})?)(?![0-9.])")
_DEVICE_ID = re.compile(r"(?:0[xX])?([0-9a-fA-F]{4})(10[dD][eE])")


def unknown(value: str) -> bool:
    """Whether nvidia-smi said it could not read the value ("N/A", "[Not Supported]"...)."""
    text = value.strip()
    if text.startswith("[") and text.endswith("]"):
        return True
    return text.lower() in _UNKNOWN


def text(value: str | None, limit: int = MAX_TEXT) -> str:
    """The value stripped and bounded; "" for nothing."""
    if value is None:
        return ""
    out = value.strip()
    return out[:limit]


def number(value: str | None) -> float | None:
    """The number a value starts with ("700.00 W" -> 700.0, "16x" -> 16.0), None if none."""
    if value is None or unknown(value):
        return None
    found = _LEADING_NUMBER.match(value[:64])
    return float(found.group(1)) if found else None


def whole(value: str | None) -> int | None:
    """A whole number ("81559 MiB" -> 81559), None if the value is not one."""
    found = number(value)
    if found is None or found != int(found) or found < 0:
        return None
    return int(found)


def device_id(value: str | None) -> str:
    """The PCI device of nvidia-smi's "pci.device_id" ("0x20B210DE" or "20B210DE" -> "20b2";
    the lower four digits are the vendor, 10de for NVIDIA); "" if not one of NVIDIA's."""
    if value is None:
        return ""
    found = _DEVICE_ID.fullmatch(value.strip())
    return found.group(1).lower() if found else ""


def yes_no(value: str | None) -> str:
    """ "Yes"/"No" as printed, "" when unknown."""
    if value is None or unknown(value):
        return ""
    return text(value, 32)


def state(value: str | None) -> str:
    """A mode as printed ("Enabled", "Disabled", "Pass-Through"), "N/A" kept as "N/A"."""
    if value is None:
        return ""
    return text(value, 64)


def add(*values: int | None) -> int | None:
    """The sum of the values known, None if none is."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None
