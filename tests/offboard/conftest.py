"""Fixtures the offboarding tests share: node n1's ledger and the real files it stands for."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import Cli


@pytest.fixture
def fleet(cli: Cli, ledger_path: Path, tmp_path: Path) -> Path:
    """Node n1 on a cloud provider (account 111), a lease with a deposit, two scratch
    files and a bucket recorded in the ledger, and the real files and bucket directory
    they stand for under tmp_path/root. Returns the root."""
    for args in (
        (
            "provider",
            "add",
            "Cloudy",
            "--kind",
            "cloud",
            "--account-id",
            "111",
            "--region",
            "cn-north-1",
        ),
        ("node", "add", "n1", "--ssh", "ssh -p 1 root@127.0.0.1", "--provider", "Cloudy"),
        (
            "lease",
            "add",
            "n1",
            "--billing",
            "monthly",
            "--price",
            "100",
            "--start",
            "2025-06-01",
            "--end",
            "2030-01-01",
            "--deposit",
            "500",
        ),
        ("resource", "add", "n1", "--kind", "scratch_path", "--id", "/data/a"),
        ("resource", "add", "n1", "--kind", "scratch_path", "--id", "/data/b"),
        ("resource", "add", "n1", "--kind", "bucket", "--id", "bkt-1", "--region", "cn-north-1"),
    ):
        r = cli(*args)
        assert r.code == 0, r.err
    root = tmp_path / "root"
    (root / "node" / "data").mkdir(parents=True)
    for name in ("a", "b", "keep"):
        (root / "node" / "data" / name).write_text(f"secret {name}\n")
    for bucket in ("bkt-1", "not-ours"):
        (root / "cloud" / "111" / bucket).mkdir(parents=True)
        (root / "cloud" / "111" / bucket / "obj").write_text("x")
    return root
