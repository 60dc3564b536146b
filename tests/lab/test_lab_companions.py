"""A lab ledger's -wal and -shm, which only root may make in the lab's folder: root's
reads leave them in place (the same files), so a member's open, the collector's start
among them, never finds them gone; a member waits a moment for root's own write to make
them again, and is refused, naming the file and the fix, when they stay gone."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from leases.lab.layout import Lab, LabError
from leases.ledger import labfiles
from leases.ledger.store import Ledger


def test_roots_read_leaves_the_labs_wal_and_shm_where_they_are(lab: Lab) -> None:
    wal, shm = lab.folder / "ledger.db-wal", lab.folder / "ledger.db-shm"
    # A second name for each holds its file: a file removed and made again is another one.
    held = [lab.folder / "held-wal", lab.folder / "held-shm"]
    for name, path in zip(held, (wal, shm), strict=True):
        os.link(path, name)
    try:
        with Ledger.open(lab.ledger, readonly=True) as led:
            assert led.providers() == []
        assert os.path.samefile(wal, held[0]) and os.path.samefile(shm, held[1])
    finally:
        for name in held:
            name.unlink()


def test_a_member_waits_for_the_companions_root_makes_again(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.db"
    ledger.touch()
    (tmp_path / "ledger.db-wal").touch()
    shm = tmp_path / "ledger.db-shm"
    maker = threading.Timer(0.2, shm.touch)  # root's close, then after_root_use
    maker.start()
    try:
        labfiles.refuse_missing_companions(ledger, wait_s=60.0)
    finally:
        maker.cancel()
    assert shm.exists()


def test_companions_that_stay_gone_are_refused_naming_the_file(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.db"
    ledger.touch()
    (tmp_path / "ledger.db-wal").touch()
    ticks = iter([0.0, 0.5, 1.0, 1.5, 2.0])
    slept: list[float] = []
    with pytest.raises(LabError) as refused:
        labfiles.refuse_missing_companions(
            ledger, wait_s=2.0, clock=lambda: next(ticks), sleep=slept.append
        )
    said = str(refused.value)
    assert f"{tmp_path / 'ledger.db-shm'}: is missing" in said
    assert "sudo zuka lab repair" in said
    assert len(slept) == 3  # waited until the deadline, then said so
