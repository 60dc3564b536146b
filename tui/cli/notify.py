"""`zuka notify test`: one message to every configured URL, each result in words."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from leases.config.load import load_user_config
from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.severity import Severity
from leases.core.textsafe import visible
from leases.notify.message import Message
from leases.notify.send import send_all
from leases.notify.url import parse_target
from tui.cli import output


def test(args: argparse.Namespace, out: TextIO) -> int:
    """Exit 0 when every URL took the message, 1 when one did not, 2 when there is none."""
    config = load_user_config(args.config)
    for warning in config.warnings:
        print(_("zuka: warning: {warning}").format(warning=visible(warning)), file=sys.stderr)
    urls = [args.url] if args.url else list(config.notify.urls)
    if not urls:
        raise InputError(
            "notify.urls",
            None,
            _("no notification URL configured: add urls to [notify] or pass --url"),
        )
    targets = [parse_target(u) for u in urls]
    message = Message(
        _("test message"),
        _("zuka notify test: if you read this, notifications reach you."),
        Severity.INFO,
        "notify-test",
    )
    results = send_all(targets, message, config.notify.timeout_s)
    if args.json:
        output.dump_json(
            [{"url": r.target.masked, "ok": r.ok, "detail": r.detail} for r in results], out
        )
    else:
        for r in results:
            said = _("sent to {url}: {detail}") if r.ok else _("failed: {url}: {detail}")
            print(said.format(url=r.target.masked, detail=visible(r.detail)), file=out)
    return 0 if all(r.ok for r in results) else 1
