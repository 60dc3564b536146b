"""`zuka doctor`: what is wrong with this user's zuka (paths, permissions, the collector,
SSH keys, nodes), each finding with its fix; exit 1 when something must be fixed."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from rich.cells import cell_len

from leases.app import (
    doctor,
    doctorfiles,
    doctorkeys,
    doctorlab,
    doctorledger,
    doctorservice,
)
from leases.app.doctor import Finding, Level, Setting
from leases.config.load import load_user_config, resolve_config_path
from leases.core.clock import utc_now
from leases.core.errors import ConfigError
from leases.core.i18n import _
from leases.core.textsafe import visible
from leases.ledger.paths import ledger_choice


def _mark(level: Level) -> str:
    """A finding's mark, padded to one width (cells, not characters)."""
    word = {Level.OK: _("ok"), Level.WARN: _("warn"), Level.FAIL: _("FAIL")}[level]
    return word + " " * max(0, 4 - cell_len(word))


def _area(area: str) -> str:
    """A finding's area as a heading says it (JSON keeps the English area)."""
    words = {
        "paths": _("paths"),
        "config": _("config"),
        "permissions": _("permissions"),
        "lab": _("lab"),
        "service": _("service"),
        "ssh keys": _("ssh keys"),
        "nodes": _("nodes"),
        "collector": _("collector"),
    }
    return words.get(area, area)


def setting_of(args: argparse.Namespace) -> Setting:
    problems: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    config_path: Path | None = None
    try:
        config = load_user_config(args.config)
        config_path = config.path
        warnings = tuple(config.warnings)
    except ConfigError as exc:
        problems = tuple(exc.problems)
        config_path, _where = resolve_config_path(args.config)
    home = os.environ.get("HOME")
    ledger, why = ledger_choice(args.ledger)
    return Setting(
        ledger=ledger,
        ledger_source=why or _("the default place"),
        now=utc_now(),
        env=dict(os.environ),
        home=Path(home) if home else None,
        config_path=config_path,
        config_problems=problems,
        config_warnings=warnings,
    )


def findings(setting: Setting) -> list[Finding]:
    look = doctorledger.look(setting.ledger)
    give_key = _(
        "give this user's public key to the node: ssh-copy-id, or append ~/.ssh/id_ed25519.pub"
        " to ~/.ssh/authorized_keys on it"
    )

    def ledger_read(s: Setting) -> Iterable[Finding]:
        if look.problem:
            said = visible(look.problem)
            yield Finding(
                "paths", Level.FAIL, _("the ledger cannot be read: {said}").format(said=said)
            )

    def nodes(s: Setting) -> Iterable[Finding]:
        return doctor.node_findings(
            look.seen, now=s.now, polled_by=look.polled_by, give_key=give_key, total=look.total
        )

    def keys(s: Setting) -> Iterable[Finding]:
        if doctorlab.is_service_user(s):
            return []  # it logs in with the collector's key alone (said under lab)
        return doctorkeys.key_files(s, look.keys)

    sections = [
        doctorfiles.paths,
        doctorlab.membership,
        ledger_read,
        doctorfiles.private_files,
        doctorlab.files,
        nodes,
        doctorservice.units,
        doctorkeys.agent,
        keys,
    ]
    return doctor.diagnose(setting, sections)


def run(args: argparse.Namespace, out: TextIO) -> int:
    found = findings(setting_of(args))
    if args.json:
        print(doctor.as_json(found), file=out)
    else:
        area = ""
        for f in found:
            if f.area != area:
                area = f.area
                print(_("{area}:").format(area=_area(area)), file=out)
            print(f"  {_mark(f.level)}  {visible(f.what)}", file=out)
            if f.fix and f.level is not Level.OK:
                print("        " + _("fix: {fix}").format(fix=visible(f.fix)), file=out)
        level = doctor.worst(found)
        fails = sum(f.level is Level.FAIL for f in found)
        warns = sum(f.level is Level.WARN for f in found)
        print(
            _("all good")
            if level is Level.OK
            else _("{fails} to fix, {warns} to look at").format(fails=fails, warns=warns),
            file=out,
        )
    return 1 if doctor.worst(found) is Level.FAIL else 0
