"""The words of acceptance findings: `_`, `ngettext`, `pgettext` speaking the run's language
(English for what is stored, the language in use for what is shown), from leases.ssh.speech,
which the SSH messages a run keeps as evidence speak through too."""

from __future__ import annotations

from leases.ssh.speech import (
    N_,
    _,
    interconnect_words,
    ngettext,
    pgettext,
    speaking,
    speaking_now,
)

# The timed transfer's evidence says what became of the bytes (stored in English, as the
# command line; shown with _() where a finding is shown in full).
DISCARDED = N_("read and discarded over the node's SSH connection")

__all__ = [
    "DISCARDED",
    "N_",
    "_",
    "interconnect_words",
    "ngettext",
    "pgettext",
    "speaking",
    "speaking_now",
]
