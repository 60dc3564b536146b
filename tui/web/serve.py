"""`zuka web`: the same dashboard in a browser tab, served by textual-serve.

textual-serve starts one dashboard process per browser tab (`python -m tui.web.serve --ledger
PATH`), each a normal ZukaApp drawing through Textual's web driver; the poller lock beside
the ledger still lets only one of them poll. It listens on 127.0.0.1 unless another
address is asked for by name: whoever reaches it can edit the ledger, so anything else is
said loudly. Every request must carry this run's secret token (tui.web.guard), printed once
in the URL the user opens.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import re
import shlex
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from leases.core.errors import InputError
from leases.core.i18n import EN, LANGS, _, language, set_language
from leases.ledger.paths import resolve_ledger_path

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
# A host name to listen on: letters, digits, dots and dashes, no leading dash.
_HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_host(host: str) -> str:
    """The address to listen on, refused by name when it is not an address or host name."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    if not _HOST_NAME.fullmatch(host):
        raise InputError("--host", host, _("not an IP address or host name to listen on"))
    return host


def check_port(port: int) -> int:
    if not 1 <= port <= 65535:
        raise InputError("--port", str(port), _("a TCP port is 1 to 65535"))
    return port


def exposure_warning(host: str, port: int) -> str | None:
    """What to tell the user before listening beyond this machine, or None."""
    if is_loopback(host):
        return None
    return _(
        "serving on {host}:{port}, beyond this machine: there is no password but the token "
        "in the URL, sent in clear over plain HTTP, and whoever holds it can change the ledger. "
        "Prefer 127.0.0.1 and an SSH tunnel (ssh -L {port}:127.0.0.1:{port} THIS-HOST)."
    ).format(host=host, port=port)


def child_command(ledger: Path, config: str | None, *, readonly: bool = False) -> str:
    """The shell command textual-serve runs for each tab (it starts it through a shell):
    every word quoted, the ledger path and config path included. `exec`, so that the
    process the server signals and reaps is the dashboard itself, not a shell above it."""
    argv = [sys.executable, "-m", "tui.web.serve", "--ledger", str(ledger)]
    if language() != EN:  # each tab speaks the language `zuka web` was started in
        argv += ["--lang", language()]
    if readonly:
        argv.append("--read-only")
    if config is not None:
        argv += ["--config", config]
    return "exec " + shlex.join(argv)


@contextmanager
def _demo_ledger(given: str | None) -> Iterator[Path]:
    """The demo fleet (simulated nodes with history) for as long as the server runs."""
    from leases.sim.demofleet import prepare
    from tui.dashboard.signals import ended_by_signals

    # SIGHUP too: textual-serve stops on SIGTERM and SIGINT only (the folder stays otherwise).
    with ended_by_signals(), tempfile.TemporaryDirectory(prefix="zuka-web-demo-") as tmp:
        path = Path(given) if given else Path(tmp) / "demo.db"
        if path.exists():
            raise InputError("ledger", str(path), _("zuka web --demo builds a new ledger"))
        print(_("starting 12 simulated GPU nodes with 30 days of history..."), file=sys.stderr)
        # textual-serve logs at INFO: the simulated nodes' every SSH connection would flood it.
        logging.getLogger("asyncssh").setLevel(logging.WARNING)
        runner = prepare(path)
        try:
            yield path
        finally:
            runner.stop()


def web(args: argparse.Namespace, out: TextIO) -> int:
    """`zuka web`: serve until ctrl+c."""
    from leases.config.load import load_user_config
    from tui.dashboard.keymap import check_keys
    from tui.web.guard import DEFAULT_MAX_SESSIONS, ZukaServer, check_max_sessions, new_token

    # A bad config is refused here, in the terminal, rather than in every tab.
    check_keys(load_user_config(args.config).keys)
    host = check_host(args.host if args.host is not None else DEFAULT_HOST)
    port = check_port(args.port if args.port is not None else DEFAULT_PORT)
    cap = getattr(args, "max_sessions", None)
    cap = check_max_sessions(cap if cap is not None else DEFAULT_MAX_SESSIONS)
    warning = exposure_warning(host, port)
    if warning is not None:
        print(_("zuka: warning: {warning}").format(warning=warning), file=sys.stderr)
    with _demo_ledger(args.ledger) if args.demo else _given(args.ledger) as path:
        readonly = bool(getattr(args, "read_only", False)) or _in_lab(path)
        if readonly:
            print(
                _(
                    "zuka: the web dashboards are read-only (a lab's ledger: whoever holds the"
                    " token is not known by name, so they read only; editors change things from"
                    " their own terminal)"
                )
                if _in_lab(path)
                else _("zuka: the web dashboards are read-only"),
                file=sys.stderr,
            )
        command = child_command(path, args.config, readonly=readonly)
        server = ZukaServer(
            command, host=host, port=port, token=new_token(), max_sessions=cap, out=out
        )
        server.serve()
    return 0


def _in_lab(path: Path) -> bool:
    from leases.lab.layout import find_lab

    return find_lab(path) is not None


@contextmanager
def _given(ledger: str | None) -> Iterator[Path]:
    from tui.dashboard.source import check_ledger

    path = resolve_ledger_path(ledger)
    # A file that is not a zuka ledger is refused here, once, not in every tab.
    check_ledger(path)
    yield path


def main_child(argv: Sequence[str] | None = None) -> int:
    """One tab's dashboard (started by textual-serve with its web driver)."""
    from tui.dashboard import gcpolicy
    from tui.dashboard.app import ZukaApp

    parser = argparse.ArgumentParser(prog="python -m tui.web.serve")
    parser.add_argument("--ledger", required=True)
    parser.add_argument("--config")
    parser.add_argument("--read-only", action="store_true")
    parser.add_argument("--lang", choices=LANGS, default=EN)
    args = parser.parse_args(argv)
    set_language(args.lang)
    if args.config is not None:
        # This process is the tab's own: the app loads the config and shows its problems.
        os.environ["ZUKA_CONFIG"] = args.config
    gcpolicy.tune()  # this process is the tab's dashboard's own
    path = Path(args.ledger)
    from tui.dashboard.source import check_ledger

    # A reader's ledger (this user may not write it) is opened read-only too.
    readonly = check_ledger(path) or args.read_only
    ZukaApp(path, readonly=readonly).run()
    return 0


if __name__ == "__main__":
    sys.exit(main_child())
