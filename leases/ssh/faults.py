"""What a failed connect means for a node: its health and a fault detail in words (never an
exception's repr), naming the hop that failed."""

from __future__ import annotations

import errno
import re
import socket

import asyncssh

from leases.core.models import NodeHealth
from leases.core.textsafe import visible
from leases.ssh import config as sshconfig
from leases.ssh import hostkeys
from leases.ssh.errors import HostKeyRejected, OfferedHostKey
from leases.ssh.keys import KeyFileRefused
from leases.ssh.route import Endpoint
from leases.ssh.speech import N_, _


class HopFailed(Exception):
    """A hop could not be reached, its message saying which (a jump host's is raised into
    every node behind it); at_node: the node itself failed, not a jump host on the way
    (told here, not read from the message: its words are in the language in use)."""

    def __init__(
        self,
        health: NodeHealth,
        message: str,
        offered: OfferedHostKey | None = None,
        *,
        at_node: bool = False,
    ) -> None:
        super().__init__(message)
        self.health = health
        self.message = message
        self.offered = offered
        self.at_node = at_node


def classify(
    exc: Exception, connect_timeout: float
) -> tuple[NodeHealth, str, OfferedHostKey | None]:
    """What a failed connect means for the node: its health, words, and any refused key."""
    if isinstance(exc, HostKeyRejected):
        return exc.health, exc.message, exc.offered
    if isinstance(exc, HopFailed):
        return exc.health, exc.message, exc.offered
    if isinstance(exc, sshconfig.ConfigRefused):
        return NodeHealth.REFUSED, _("refused by zuka, not connecting: {why}").format(why=exc), None
    if isinstance(exc, KeyFileRefused):
        return NodeHealth.AUTH_FAILED, str(exc), None
    if isinstance(exc, TimeoutError):
        words = _("no answer: connect timed out after {seconds:g} s")
        return NodeHealth.TIMEOUT, words.format(seconds=connect_timeout), None
    if isinstance(exc, asyncssh.PermissionDenied):
        # asyncssh's own words when every key was refused, else the server's (shown).
        reason = str(exc.reason)
        if not reason or reason.startswith("Permission denied"):
            reason = _("the server accepted none of our keys")
        words = _("authentication failed: {why}").format(why=visible(reason, 200))
        return NodeHealth.AUTH_FAILED, words, None
    if isinstance(exc, asyncssh.KeyImportError):
        words = _("cannot use the key: {why}").format(why=visible(str(exc), 200))
        return NodeHealth.AUTH_FAILED, words, None
    # DNS, refused, reset, protocol: the server is not reachable
    return NodeHealth.UNREACHABLE, _connect_words(exc), None


_ERRNO_WORDS = {
    errno.ECONNREFUSED: N_("connection refused"),
    errno.ECONNRESET: N_("connection reset by the server"),
    errno.EHOSTUNREACH: N_("no route to host"),
    errno.ENETUNREACH: N_("network unreachable"),
    errno.ETIMEDOUT: N_("no answer: connect timed out"),
}


def _connect_words(exc: BaseException) -> str:
    """Why a connect failed, in words, for a fault detail (not an exception's repr)."""
    if isinstance(exc, socket.gaierror):
        if exc.errno in (socket.EAI_AGAIN, getattr(socket, "EAI_SYSTEM", None)):
            return _("host name could not be looked up: DNS is not answering")
        return _("host name not found (DNS)")
    if isinstance(exc, asyncssh.ChannelOpenError):
        # The jump host could not reach the node. OpenSSH says "Connection refused";
        # asyncssh passes on Python's "[Errno 111] Connect call failed (...)".
        reason = visible(exc.reason, 200)
        code = re.match(r"\[Errno (\d+)\]", reason)
        if code and int(code[1]) in _ERRNO_WORDS:
            reason = _(_ERRNO_WORDS[int(code[1])])
        words = _("the jump host could not reach it: {why}")
        return words.format(why=reason[:1].lower() + reason[1:])
    if isinstance(exc, asyncssh.ConnectionLost):
        return _("connection closed by the server during the SSH handshake")
    if isinstance(exc, asyncssh.DisconnectError):
        words = _("the server ended the SSH handshake: {why}")
        return words.format(why=visible(exc.reason, 200))
    if isinstance(exc, OSError) and exc.errno in _ERRNO_WORDS:
        return _(_ERRNO_WORDS[exc.errno])
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror[:1].lower() + exc.strerror[1:]
    return describe(exc)


def hop_words(end: Endpoint) -> str:
    """A hop as a fault detail names it: user@host:port, the port always shown."""
    host = f"[{end.host}]" if ":" in end.host else end.host
    where = f"{host}:{end.port or hostkeys.DEFAULT_PORT}"
    return f"{end.user}@{where}" if end.user else where


def describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


_WHERE_RE = re.compile(
    r"node (?P<node>\S{1,300})(?: \(via jump host (?P<jump>\S{1,300})\))?: (?P<why>.*)", re.S
)
_TIMED_OUT_RE = re.compile(r"no answer: connect timed out after (?P<seconds>[0-9.]{1,12}) s")


def said_again(words: str) -> str:
    """A fault detail kept in English (acceptance evidence) in the language spoken now:
    "node HOST: connection refused" and its fixed reasons; any other words as they are."""
    found = _WHERE_RE.fullmatch(words)
    if found is None:
        return _reason(words)
    if found["jump"]:
        where = _("node {node} (via jump host {jump})").format(
            node=found["node"], jump=found["jump"]
        )
    else:
        where = _("node {node}").format(node=found["node"])
    return _("{where}: {why}").format(where=where, why=_reason(found["why"]))


def _reason(words: str) -> str:
    timed = _TIMED_OUT_RE.fullmatch(words)
    if timed is not None:
        seconds = float(timed["seconds"])
        return _("no answer: connect timed out after {seconds:g} s").format(seconds=seconds)
    return _(words) if words else words
