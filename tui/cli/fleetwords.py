"""The sentences of the fleet's commands (poll, collect, sim, node trust), in the language
in use: kept here so that tui.cli.fleet stays the commands' logic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from leases.core.i18n import _, ngettext


def not_a_key(exc: BaseException) -> str:
    return _("is not a private key zuka can use without a passphrase ({problem})").format(
        problem=exc
    )


def not_polling(node: str, problem: str) -> str:
    return _("zuka: not polling {node}: {problem}").format(node=node, problem=problem)


def collector_polls(pid: int | None) -> str:
    return _(
        "zuka: a collector (pid {pid}) polls this ledger: showing what it last wrote"
        " (--force polls anyway)"
    ).format(pid=pid)


def instance_state(node: str, instance: str | None, action: str, at: str) -> str:
    if action == "stop":
        said = _("zuka: {node}: its instance {instance} is stopped: recorded from {at}")
    else:
        said = _("zuka: {node}: its instance {instance} is running again: recorded from {at}")
    return said.format(node=node, instance=instance, at=at)


def another_poller(pid: int | None, path: Path) -> str:
    return _("zuka: another poller (pid {pid}) already polls {path}").format(pid=pid, path=path)


def collecting(nodes: int, interval: float, mode: str, every: float) -> str:
    return _(
        "zuka collect: {n} nodes, every {interval} s, {mode} mode, alerts every {every} s"
    ).format(n=nodes, interval=f"{interval:g}", mode=mode, every=f"{every:g}")


def metrics_at(where: str) -> str:
    return _("zuka collect: metrics at {where}").format(where=where)


def housekeeping_failed(problem: str) -> str:
    return _("zuka collect: housekeeping failed: {problem}").format(problem=problem)


def poller_stopped(problem: str, retry_in: float) -> str:
    return _("zuka collect: the poller stopped ({problem}); restarting in {seconds} s").format(
        problem=problem, seconds=f"{retry_in:g}"
    )


def already_trusted(node: str) -> str:
    return _("{node}: host key already trusted").format(node=node)


def key_changed(node: str, fingerprint: str) -> str:
    return _(
        "zuka: {node}: the host key CHANGED ({fingerprint}); refused. Ask the provider why"
        " (reinstall? another machine?) and, only if satisfied, remove the old line from the"
        " known_hosts file yourself."
    ).format(node=node, fingerprint=fingerprint)


def presents(node: str, offered: Any) -> str:
    return _("{node} ({host}:{port}) presents {algorithm} key {fingerprint}").format(
        node=node,
        host=offered.host,
        port=offered.port or 22,
        algorithm=offered.key.get_algorithm(),
        fingerprint=offered.fingerprint,
    )


def trusted(fingerprint: str, node: str) -> str:
    return _("trusted {fingerprint} for {node}").format(fingerprint=fingerprint, node=node)


def login_failed(node: str, problem: str) -> str:
    return _("zuka: {node}: key trusted, but logging in failed: {problem}").format(
        node=node, problem=problem
    )


def backfill_stopped(done: int, total: int) -> str:
    return ngettext(
        "stopped: history written for {done} of {total} simulated node (each whole); the"
        " others have none",
        "stopped: history written for {done} of {total} simulated nodes (each whole); the"
        " others have none",
        total,
    ).format(done=done, total=total)


def unserved(count: int, names: str) -> str:
    return ngettext(
        "zuka sim: the ledger also holds {n} node this fleet does not serve ({names}): it"
        " will show as unreachable; a new --ledger starts a fresh fleet",
        "zuka sim: the ledger also holds {n} nodes this fleet does not serve ({names}): they"
        " will show as unreachable; a new --ledger starts a fresh fleet",
        count,
    ).format(n=count, names=names)


def another_sim(pid: int | None) -> str:
    return _(
        "another zuka sim (pid {pid}) serves this ledger: stop it first, or give another --ledger"
    ).format(pid=pid)


def sim_up(count: int, first: int, last: int, days: float, path: Path) -> str:
    return (
        ngettext(
            "{n} simulated node on 127.0.0.1 ports {first}-{last}, {days} days of history in"
            " {path}",
            "{n} simulated nodes on 127.0.0.1 ports {first}-{last}, {days} days of history in"
            " {path}",
            count,
        ).format(n=count, first=first, last=last, days=f"{days:g}", path=path)
        + "\n"
        + _("watch them:  zuka --ledger {path}").format(path=path)
        + "\n"
        + _("or collect:  zuka collect --ledger {path}").format(path=path)
        + "\n"
        + _("Ctrl-C stops the fleet.")
        + "\n"
    )
