"""A clock a test sets and moves: calling it gives `now` (inject it where zuka takes a clock)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass
class SetClock:
    now: datetime

    def __call__(self) -> datetime:
        return self.now
