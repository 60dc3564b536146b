"""A bearer-token file as a test needs it: a private file of the user's by default (what
leases.core.tokenfile takes), or with the mode a test of a refusal gives."""

from __future__ import annotations

from pathlib import Path


def token_file(folder: Path, text: str, mode: int = 0o600, name: str = "prom.token") -> Path:
    path = folder / name
    path.write_text(text)
    path.chmod(mode)
    return path
