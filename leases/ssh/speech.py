"""The language a task speaks: a context variable over `leases.core.i18n`, so one task
(an acceptance run, a connect) can speak English for what is stored while the dashboard,
in another task, keeps its language. It lives in leases.ssh because both leases.ssh and
leases.accept speak through it (leases.ssh imports only leases.core); it belongs in
leases.core.i18n, where it would serve every module.

Acceptance findings and their evidence are written in English for this run only.

A finding is stored in English (the ledger, its audit digest and `--json` never change with
the language) and shown to a person in theirs. The engine therefore judges each check twice
over the same evidence: once speaking English (what is stored), once speaking the language
in use (what is shown). Which one a check speaks is a context variable, set by the engine
for its own task only, so a dashboard drawing in another task keeps its language.

The checks import `_` and `ngettext` from here instead of `leases.core.i18n`; the strings
are extracted into the one catalogue all the same.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from leases.core import i18n
from leases.core.i18n import N_
from leases.core.models import Interconnect

__all__ = [
    "N_",
    "_",
    "interconnect_words",
    "ngettext",
    "pgettext",
    "speaking",
    "speaking_now",
]

_speaking: ContextVar[str | None] = ContextVar("zuka_accept_speaking", default=None)


def _(message: str) -> str:
    """message in the language this run speaks (the language in use when none is set)."""
    lang = _speaking.get()
    if lang is None:
        return i18n._(message)
    return message and i18n.catalogue(lang).gettext(message)


def ngettext(singular: str, plural: str, n: int) -> str:
    lang = _speaking.get()
    if lang is None:
        return i18n.ngettext(singular, plural, n)
    return i18n.catalogue(lang).ngettext(singular, plural, n)


def pgettext(context: str, message: str) -> str:
    lang = _speaking.get()
    if lang is None:
        return i18n.pgettext(context, message)
    return i18n.catalogue(lang).pgettext(context, message)


def interconnect_words(link: Interconnect) -> str:
    """ "nvlink", "PCIe": how a person reads an interconnect (the ledger keeps the value)."""
    words = {
        Interconnect.NVLINK: pgettext("interconnect", "nvlink"),
        Interconnect.PCIE: pgettext("interconnect", "pcie"),
        Interconnect.UNKNOWN: pgettext("interconnect", "unknown"),
    }
    return words[link]


def speaking_now() -> str:
    """The language the checks speak now."""
    return _speaking.get() or i18n.language()


@contextmanager
def speaking(lang: str) -> Iterator[None]:
    """The checks speak lang inside the block (in this task and what it awaits)."""
    token = _speaking.set(lang)
    try:
        yield
    finally:
        _speaking.reset(token)
