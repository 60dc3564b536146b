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

from leases.core import fields
from leases.ledger import transfer
from leases.ledger.store import Ledger
from leases.money import periods

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
    out = {kind: [_shifted(rec, shift) for rec in rows] for kind, rows in data.items()}
    _whole_months(data.get("leases", []), out)
    return out


def _whole_months(before: list[dict[str, Any]], out: dict[str, list[dict[str, Any]]]) -> None:
    """A lease of whole calendar months stays one. Moved by days, October 15 to November
    15 would become, in late February, January 13 to February 12: a month and a started
    day, billed as two. Its end keeps its distance from today (what the demo's alerts
    show: "ends in 5 d"); its start is worked out again, whole months before; the lease it
    renews ends there; and resources follow their lease's start."""
    leases = out.get("leases", [])
    moved: dict[tuple[str, str], str] = {}  # (node, start shifted by days) -> its start now
    starts: dict[tuple[str, str], str] = {}  # (node, old start) -> new start
    order = sorted(range(len(before)), key=lambda i: str(before[i]["start"]), reverse=True)
    for i in order:
        old, new = before[i], leases[i]
        node, shifted = str(old["node"]), str(new["start"])
        moved[(node, shifted)] = shifted
        if old.get("end") is None:
            starts[(node, str(old["start"]))] = shifted
            continue
        tz = ZoneInfo(str(old.get("billing_tz") or fields.DEFAULT_TZ))
        start0, end0 = datetime.fromisoformat(old["start"]), datetime.fromisoformat(old["end"])
        months = next(
            (k for k in range(1, 61) if periods.boundary(start0, "month", k, tz) == end0), None
        )
        renewed = starts.get((node, str(old["end"])))  # the lease that follows on, moved
        end = datetime.fromisoformat(renewed or str(new["end"]))
        if months is None:
            start = datetime.fromisoformat(shifted)
        else:
            start = periods.boundary(end, "month", -months, tz)
            if periods.boundary(start, "month", months, tz) != end.astimezone(tz):
                end = periods.boundary(start, "month", months, tz)  # a clamped month's end
        if old.get("ended_at") == old["end"]:
            new["ended_at"] = end.isoformat()
        new["start"], new["end"] = start.isoformat(), end.isoformat()
        moved[(node, shifted)] = new["start"]
        starts[(node, str(old["start"]))] = new["start"]
    for res in out.get("resources", []):
        key = (str(res.get("node")), str(res.get("lease_start")))
        if key in moved:
            res["lease_start"] = moved[key]


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
    # Made-up entries by a made-up actor: from nowhere, whoever builds the demo and wherever.
    ledger = Ledger.open(path, actor="zuka demo", origin="")
    ledger.import_records(demo_records(today))
    return ledger
