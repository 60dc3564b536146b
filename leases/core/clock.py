"""The clock zuka reads: every "now" comes from a Clock passed in, so that tests and the
transcript can fix it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)
