"""The fault log beside a ledger: tracebacks of failures while handling one node's data.

Such a failure becomes that node's state (`garbage`, with the reason) and a traceback
here, so that a bug or a hostile node is visible without ever stopping the poller.
The file is 0600 (tracebacks may quote node output; in a lab, 0640 in its faults/ folder,
where the lab's viewers read it), size-bounded and rotated, and every
record passes through textsafe.visible: a `cat` of the log obeys no escape sequence.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
from pathlib import Path
from typing import Any

from leases.core.textsafe import visible
from leases.lab.layout import find_lab
from leases.ledger.paths import fault_log_path

# 1 MiB a file, 3 old ones kept: a few thousand tracebacks, 4 MiB on disk at most.
MAX_BYTES = 1024 * 1024
BACKUPS = 3


class _PrivateRotatingHandler(logging.handlers.RotatingFileHandler):
    """A RotatingFileHandler whose files are created 0600 (0640 in a lab's faults/ folder:
    the lab's viewers read them), rotated ones included; never through a symlink."""

    file_mode = 0o600

    def _open(self) -> Any:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
        fd = os.open(self.baseFilename, flags, self.file_mode)
        return os.fdopen(fd, self.mode.replace("w", "a"), encoding=self.encoding)


class _VisibleFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return visible(super().format(record), keep_newlines=True)


_loggers: dict[Path, logging.Logger] = {}


def fault_logger(ledger_path: Path) -> logging.Logger:
    """The logger writing to this ledger's fault log (one per path and process)."""
    lab = find_lab(ledger_path)
    if lab is None:
        path = fault_log_path(ledger_path).resolve()
    else:
        path = lab.faults_dir / fault_log_path(ledger_path).name
    logger = _loggers.get(path)
    if logger is None:
        logger = logging.getLogger(f"zuka.faults.{len(_loggers)}")
        logger.propagate = False  # never to the terminal the dashboard draws on
        logger.setLevel(logging.INFO)
        handler = _PrivateRotatingHandler(
            path, maxBytes=MAX_BYTES, backupCount=BACKUPS, delay=True, encoding="utf-8"
        )
        if lab is not None:
            handler.file_mode = 0o640
        handler.setFormatter(_VisibleFormatter("%(asctime)s %(process)d %(message)s"))
        logger.addHandler(handler)
        _loggers[path] = logger
    return logger


def quiet_logger() -> logging.Logger:
    """Where faults go when no ledger is given: nowhere (tests, `zuka poll` without one)."""
    logger = logging.getLogger("zuka.faults.none")
    logger.propagate = False
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    return logger
