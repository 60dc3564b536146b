"""Work beside the poll that runs at most once every so many seconds (alerts, cloud states)."""

from __future__ import annotations

import time
from collections.abc import Callable


class Every:
    """At most once every `seconds` by a monotonic clock; the first ask is due."""

    def __init__(self, seconds: float, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self.monotonic = monotonic
        self._last: float | None = None

    def due(self) -> bool:
        return self._last is None or self.monotonic() - self._last >= self.seconds

    def take(self) -> bool:
        """Whether it is due, and if so, counts it as run now."""
        if not self.due():
            return False
        self._last = self.monotonic()
        return True
