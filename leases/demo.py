"""The example fleet behind `zuka demo`: leases/data/demo_fleet.json, moved to today.

The file is an ordinary `zuka export` with an `anchor` date; every date in it is shifted
by whole days so that the demo's leases are as fresh today as on the day it was written.
It ships inside the package and is read through importlib.resources, so an installed
wheel finds it wherever it lives.
"""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from leases import fields, transfer
from leases.ledger import Ledger

DEMO_FILE: Traversable = files("leases") / "data" / "demo_fleet.json"
_MOMENTS = {"start", "end", "ended_at", "lease_start", "created", "deleted_at", "verified_at"}
_DAYS = {"deposit_paid_on", "deposit_refunded_on"}


def demo_today(now: datetime) -> date:
    """The demo's today at now: the date in its leases' billing zone (Asia/Shanghai). The
    UTC date is a day behind it from 16:00 to 24:00 UTC, and a demo moved to it has every
    lease end a day early, as seen from Shanghai, on the evenings in UTC."""
    return now.astimezone(ZoneInfo(fields.DEFAULT_TZ)).date()


def demo_records(today: date, path: Traversable = DEMO_FILE) -> transfer.Export:
    text = path.read_text(encoding="utf-8")
    anchor = date.fromisoformat(json.loads(text)["anchor"])
    shift = timedelta(days=(today - anchor).days)
    data = transfer.from_json(text)
    return {kind: [_shifted(rec, shift) for rec in rows] for kind, rows in data.items()}


def _shifted(rec: dict[str, Any], shift: timedelta) -> dict[str, Any]:
    out = dict(rec)
    for key, value in rec.items():
        if value is None:
            continue
        if key in _MOMENTS:
            out[key] = (datetime.fromisoformat(value) + shift).isoformat()
        elif key in _DAYS:
            out[key] = (date.fromisoformat(value) + shift).isoformat()
    return out


def build_demo_ledger(path: Path, today: date) -> Ledger:
    ledger = Ledger.open(path, actor="zuka demo")
    ledger.import_records(demo_records(today))
    return ledger
