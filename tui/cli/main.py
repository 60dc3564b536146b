"""The `zuka` command line. With no subcommand it opens the dashboard.

Bad input exits with status 2 and a message naming the field; nothing is written.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Sequence
from typing import TextIO

from leases.core.i18n import EN, N_, LanguageError, _, language
from leases.core.textsafe import visible
from tui.cli import (
    argwords,
    billargs,
    choicewords,
    labargs,
    lazy,
    offboardargs,
    pollargs,
    serviceargs,
)
from tui.cli.acceptargs import accept_options
from tui.cli.handled import Handler, handled
from tui.cli.language import apply as speak
from tui.cli.language import lang_help
from tui.cli.metricsargs import metrics_options
from tui.cli.parsing import Parser, tty_flag_first
from tui.cli.quickexit import QUICK_EXIT, quick_exit

# What `zuka audit accept` takes: every kind of row the chain checks (leases.ledger.rowaudit
# ENTITIES, written out so that the parser does not import the ledger; a test holds them equal).
ACCEPTABLE = ("provider", "node", "lease", "resource", "stop",
              "deposit_refund", "invoice", "balance", "bill", "offer")  # fmt: skip

# Commands that run and log rather than print a result: --json would be ignored.
NO_JSON = frozenset({"sim", "collect", "web", "ssh", "service", "lab"})


_Parser = Parser


def _ledger_help() -> str:
    from leases.ledger.paths import default_ledger_path

    return _(
        "ledger file (default: $ZUKA_LEDGER, else the system config's [lab] ledger, else {path})"
    ).format(path=default_ledger_path())


DEMO_LEDGER_HELP = N_(
    "build the demo ledger in this new file and keep it (default: a temporary file, deleted "
    "when the demo ends; $ZUKA_LEDGER is not used)"
)


def _common(*, screen: bool = False, ledger_help: str = "") -> _Parser:
    """Options every subcommand takes, before or after the subcommand's name. A screen takes
    --json only to refuse it by name (main), so its help does not offer it."""
    p = _Parser(add_help=False)
    p.add_argument("--ledger", default=argparse.SUPPRESS, help=ledger_help or _ledger_help())
    p.add_argument("--lang", default=argparse.SUPPRESS, help=lang_help())
    p.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS,
        help=argparse.SUPPRESS if screen else _("print JSON"),
    )
    p.add_argument(
        "--config",
        default=argparse.SUPPRESS,
        help=_(
            "config file, laid over the system config /etc/zuka/config.toml and its secrets"
            " file (default: $ZUKA_CONFIG, else config.toml in the user config directory)"
        ),
    )
    return p


WIDE = N_("a line a row, however wide (default: fit the terminal; 80 columns when not one)")
# A plan never mixes currencies: it prices from the leases in one, and reads prices given
# with its flags in it.
_PLAN_CURRENCY = N_(
    "plan in this currency: from the leases in it, prices given read in it (default: the"
    " leases' one currency; required when they have several)"
)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; only="poll": the parser of `zuka poll` alone (pollargs.narrow), which
    imports none of the other commands' modules."""
    common = _common()
    parser = _Parser(
        prog="zuka",
        description=_("zuka (租卡): the ledger and dashboard of a lab's rented GPU nodes"),
        parents=[common],
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def cmd(
        parent: argparse._SubParsersAction[_Parser],
        name: str,
        handler: Handler,
        help: str,
        options: _Parser = common,
    ) -> _Parser:
        p = parent.add_parser(name, help=help, description=help, parents=[options])
        p.set_defaults(handler=handler)
        return p

    if only == "poll":
        pollargs.poll_options(cmd(sub, "poll", lazy.poll, _(pollargs.POLL_HELP)))
        return parser
    from tui.cli import accountflags
    from tui.cli import audit as audit_cmd
    from tui.cli import leases as lease_cmd
    from tui.cli import nodes as node_cmd
    from tui.cli import offerargs as offer_args
    from tui.cli import providers as provider_cmd
    from tui.cli import resources as resource_cmd
    from tui.cli import transfer as transfer_cmd

    demo = _common(screen=True, ledger_help=_(DEMO_LEDGER_HELP))
    cmd(
        sub,
        "demo",
        lazy.demo,
        _("open the dashboard on an example fleet in a temporary ledger"),
        demo,
    )
    cmd(
        sub,
        "dashboard",
        lazy.dashboard,
        _("open the dashboard (the default)"),
        _common(screen=True),
    )
    web = _("serve the dashboard to a browser tab (textual-serve)")
    p = cmd(sub, "web", lazy.web, web, _common(screen=True))
    p.add_argument("--host", help=_("address to listen on (default 127.0.0.1; any other warns)"))
    p.add_argument("--port", type=int, help=_("TCP port (default 8000)"))
    p.add_argument("--demo", action="store_true", help=_("serve the demo fleet, as `zuka demo`"))
    p.add_argument("--max-sessions", type=int, help=_("dashboard tabs at once (default 4)"))
    read_only = _("the dashboards only read the ledger (always so on a lab's ledger)")
    p.add_argument("--read-only", action="store_true", help=read_only)

    prov = sub.add_parser("provider", help=_("clouds, rental platforms and data centres"))
    provs = prov.add_subparsers(dest="action", required=True, parser_class=_Parser)
    p = cmd(provs, "add", provider_cmd.provider_add, _("add a provider"))
    p.add_argument("name")
    provider_cmd.provider_options(p, required=True)
    cmd(provs, "list", provider_cmd.provider_list, _("list providers"))
    p = cmd(
        provs,
        "edit",
        provider_cmd.provider_edit,
        _("change a provider's account, region or credentials"),
    )
    p.add_argument("name")
    provider_cmd.provider_edit_options(p)
    # Issue 20: prepaid balances (provider topup/balance) and invoices (tui/cli/balances.py,
    # tui/cli/invoices.py).
    p = cmd(provs, "topup", lazy.provider_topup, _("record money put on the provider account"))
    accountflags.topup_options(p)
    balance_help = _("a provider account's prepaid balance, burn and run-out (--set: read it)")
    p = cmd(provs, "balance", lazy.provider_balance, balance_help)
    accountflags.balance_options(p)
    inv = sub.add_parser("invoice", help=_("invoices (fapiao) on a provider's charges"))
    invs = inv.add_subparsers(dest="action", required=True, parser_class=_Parser)
    p = cmd(invs, "add", lazy.invoice_add, _("record an invoice a provider issued"))
    accountflags.invoice_options(p, editing=False)
    p = cmd(invs, "list", lazy.invoice_list, _("list invoices with their VAT"))
    p.add_argument("--month", metavar="YYYY-MM", help=_("those whose period meets the month"))
    p.add_argument("--provider", help=_("of this provider"))
    p = cmd(invs, "edit", lazy.invoice_edit, _("change an invoice"))
    p.add_argument("id", type=int, help=_("its ID (zuka invoice list)"))
    accountflags.invoice_options(p, editing=True)
    p = cmd(invs, "delete", lazy.invoice_delete, _("delete an invoice recorded by mistake"))
    p.add_argument("id", type=int, help=_("its ID (zuka invoice list)"))

    node = sub.add_parser("node", help=_("rented nodes"))
    nodes = node.add_subparsers(dest="action", required=True, parser_class=_Parser)
    p = cmd(nodes, "add", node_cmd.node_add, _("add a node"))
    p.add_argument("name")
    node_cmd.node_options(p)
    p = cmd(nodes, "list", node_cmd.node_list, _("list nodes with their current lease"))
    p.add_argument("--all", action="store_true", help=_("include released nodes"))
    p = cmd(nodes, "show", node_cmd.node_show, _("a node, its leases and resources"))
    p.add_argument("name")
    p = cmd(nodes, "edit", node_cmd.node_edit, _("change a node's fields"))
    p.add_argument("name")
    p.add_argument("--rename", metavar="NEW_NAME")
    node_cmd.node_options(p, editing=True)
    p = cmd(
        nodes,
        "archive",
        node_cmd.node_archive,
        _("mark a node released (its leases must have ended)"),
    )
    p.add_argument("name")
    p = cmd(
        nodes, "restore", node_cmd.node_restore, _("bring back the latest archived node of a name")
    )
    p.add_argument("name")
    p = cmd(nodes, "delete", node_cmd.node_delete, _("delete a node recorded by mistake"))
    p.add_argument("name")
    p.add_argument(
        "--force",
        action="store_true",
        help=_("also delete its ended leases, resources, GPU history"),
    )
    p = cmd(nodes, "trust", lazy.node_trust, _("check and accept a node's SSH host key"))
    p.add_argument("name")
    p.add_argument("--fingerprint", metavar="SHA256:...", help=_("accept only this key (scripts)"))

    p = cmd(sub, "ssh", lazy.ssh, _("open a shell (or tmux) on a node, the way zuka polls it"))
    p.add_argument("node")
    tmux_help = _("attach the tmux session SESSION (default zuka), creating it if none")
    p.add_argument("--tmux", nargs="?", const="zuka", metavar="SESSION", help=tmux_help)
    tty_help = _("ask for a terminal (PTY) for COMMAND too, as ssh -t (a shell always has one)")
    p.add_argument("-t", "--tty", action="store_true", help=tty_help)
    remote_help = _("run COMMAND instead (quote it as one word when it holds its own --)")
    p.add_argument("remote", nargs="*", metavar="-- COMMAND", help=remote_help)

    lease = sub.add_parser("lease", help=_("leases: a node's billing terms over time"))
    leases = lease.add_subparsers(dest="action", required=True, parser_class=_Parser)
    p = cmd(leases, "add", lease_cmd.lease_add, _("add a lease to a node"))
    p.add_argument("node")
    lease_cmd.lease_options(p, required=True)
    p = cmd(
        leases, "renew", lease_cmd.lease_renew, _("renew the open lease: a new lease from its end")
    )
    p.add_argument("node")
    p.add_argument("--until", required=True, metavar="DATE", help=_("end of the renewed period"))
    lease_cmd.lease_options(p, required=False, renewing=True)
    p = cmd(leases, "end", lease_cmd.lease_end, _("record that the open lease ended"))
    p.add_argument("node")
    p.add_argument("--at", metavar="TIME", help=_("when (default: now)"))
    p = cmd(leases, "stop", lease_cmd.lease_stop, _("record that the node was stopped (billing by"
            " the lease's --stopped-billing)"))  # fmt: skip
    p.add_argument("node")
    p.add_argument("--at", metavar="TIME", help=_("when (default: now)"))
    p = cmd(leases, "resume", lease_cmd.lease_resume, _("record that the stopped node runs again"))
    p.add_argument("node")
    p.add_argument("--at", metavar="TIME", help=_("when (default: now)"))
    p = cmd(
        leases,
        "edit",
        lease_cmd.lease_edit,
        _("change a lease (deposit refund, notes, corrections)"),
    )
    p.add_argument("node")
    lease_cmd.lease_options(p, required=False, editing=True)
    p = cmd(leases, "delete", lease_cmd.lease_delete, _("delete a lease recorded by mistake"))
    p.add_argument("node")
    p.add_argument("--start", required=True, metavar="WHEN", help=_("the lease that starts then"))
    p.add_argument("--force", action="store_true", help=_("also delete its resources"))
    p = cmd(leases, "list", lease_cmd.lease_list, _("list leases"))
    p.add_argument("node", nargs="?")
    p.add_argument("--open", action="store_true", help=_("only leases that have not ended"))
    p = cmd(leases, "refund", lazy.lease_refund, _("record a deposit (or part of it) come back"))
    p.add_argument("node")
    p.add_argument("--amount", required=True, metavar="X", help=_("the amount back (52,000.50)"))
    p.add_argument("--on", required=True, metavar="YYYY-MM-DD", help=_("the day it came back"))
    p.add_argument("--lease-start", metavar="WHEN", help=_("the lease whose deposit it is "
                   "(default: the lease billing now, else the latest)"))  # fmt: skip
    p.add_argument("--notes", help=_("a word on it (a transfer's reference)"))
    p = cmd(leases, "refunds", lazy.lease_refunds, _("list deposits: paid, back, outstanding"))
    p.add_argument("node", nargs="?")

    res = sub.add_parser("resource", help=_("disks, snapshots, buckets... that belong to a lease"))
    ress = res.add_subparsers(dest="action", required=True, parser_class=_Parser)
    p = cmd(ress, "add", resource_cmd.resource_add, _("record a resource of a node's lease"))
    p.add_argument("node")
    resource_cmd.resource_options(p)
    p = cmd(
        ress, "edit", resource_cmd.resource_edit, _("mark a resource deleted or verified by hand")
    )
    p.add_argument("node")
    resource_cmd.resource_options(p, editing=True)
    p = cmd(ress, "list", resource_cmd.resource_list, _("list resources"))
    p.add_argument("node", nargs="?")

    pollargs.poll_options(cmd(sub, "poll", lazy.poll, _(pollargs.POLL_HELP)))
    p = cmd(sub, "ps", lazy.ps, _("every GPU process across the fleet: user, memory, command"))
    p.add_argument("--user", help=_("only this user's processes (a prefix)"))
    p.add_argument("--node", help=_("only this node's processes (a prefix)"))
    p.add_argument("--sort", default="node", choices=("node", "user", "memory", "share",
                   "elapsed", "command"), type=choicewords.typed("ps sort"),
                   help=choicewords.help_of("ps sort", _("order (default node)")))  # fmt: skip
    p = cmd(sub, "kill", lazy.kill, _("stop a GPU process: SIGTERM, then SIGKILL after --grace"))
    p.add_argument("node")
    p.add_argument("pid", type=int)
    p.add_argument(
        "--grace", type=float, default=10.0, help=_("seconds before SIGKILL (default 10)")
    )
    p.add_argument(
        "--yes-i-typed", metavar="PID", help=_("the pid again, to confirm without a prompt")
    )
    p = cmd(
        sub, "collect", lazy.collect, _("poll the fleet headless, writing history to the ledger")
    )
    p.add_argument(
        "--interval", type=float, default=5.0, help=_("seconds between readings (default 5)")
    )
    p.add_argument(
        "--flush",
        type=float,
        default=5.0,
        help=_("seconds between writes of the latest readings to the ledger (default 5)"),
    )
    p.add_argument(
        "--mode",
        choices=("stream", "exec"),
        default="stream",
        type=choicewords.typed("collect mode"),
        help=choicewords.help_of(
            "collect mode",
            _("stream: one long-lived nvidia-smi per node (default); exec: one query per poll"),
        ),
    )
    p.add_argument("--minute-days", type=int, default=14, help=_("keep minute roll-ups N days"))
    p.add_argument(
        "--alerts-every",
        type=float,
        default=60.0,
        metavar="S",
        help=_("evaluate alerts (and notify) every S seconds at most (default 60)"),
    )
    p.add_argument(
        "--cloud-every",
        type=float,
        default=300.0,
        metavar="S",
        help=_(
            "read the state of nodes' cloud instances (--instance-id) every S seconds and"
            " record their stops (default 300; 0: never)"
        ),
    )
    metrics_options(p)  # --metrics-listen, --metrics-token-file, --metrics-money
    p.add_argument(
        "--identity",
        metavar="FILE",
        help=_(
            "log in to every node with this private key alone, never an SSH agent (a"
            " service's own key: it must be yours and not readable by group or others)"
        ),
    )
    serviceargs.service_options(sub, cmd, lazy)
    p = cmd(sub, "sim", lazy.sim, _("run simulated GPU nodes registered in a ledger (foreground)"))
    p.add_argument("--nodes", type=int, default=12, help=_("how many (default 12)"))
    p.add_argument("--history", type=float, default=30, metavar="DAYS", help=_("backfilled days"))

    p = cmd(sub, "log", audit_cmd.log, _("the audit history of every change"))
    p.add_argument("node", nargs="?", help=_("one node's history, across its renames"))
    p.add_argument(
        "--archived", action="store_true", help=_("the latest archived node of that name")
    )
    p.add_argument("--user", metavar="NAME", help=_("only the entries this user wrote"))
    p.add_argument("--wide", action="store_true", help=_(WIDE))
    p = cmd(
        sub, "undo", audit_cmd.undo, _("undo the last change in the audit log (again: redo it)")
    )
    p.add_argument(
        "--any-user",
        action="store_true",
        help=_("undo the last change even when another user made it"),
    )
    p.add_argument(
        "--entry",
        type=int,
        metavar="ID",
        help=_(
            "the id of the entry you mean to undo (see `zuka log`): refused if the last"
            " change is another one"
        ),
    )

    audit = sub.add_parser("audit", help=_("the audit log's integrity"))
    audits = audit.add_subparsers(dest="action", required=True, parser_class=_Parser)
    p = cmd(
        audits, "verify", audit_cmd.audit_verify, _("check the audit log's hash chain and triggers")
    )
    p.add_argument(
        "--anchor",
        metavar="ID:HASH",
        help=_("an entry id and hash printed by an earlier verify, kept elsewhere"),
    )
    p = cmd(
        audits,
        "accept",
        audit_cmd.audit_accept,
        _("take a row changed outside zuka (as `audit verify` lists it) as it is, on the chain"),
    )
    p.add_argument("entity", choices=ACCEPTABLE, type=choicewords.typed("audit entity"),
                   help=choicewords.help_of("audit entity"))  # fmt: skip
    p.add_argument("id", type=int, help=_("the row's id, as `zuka audit verify` names it"))

    p = cmd(sub, "accept", lazy.accept, _("hand-over acceptance: is the node what was sold?"))
    accept_options(p)
    config = sub.add_parser("config", help=_("the config file: thresholds, notify URLs, currency"))
    configs = config.add_subparsers(dest="action", required=True, parser_class=_Parser)
    cmd(configs, "check", lazy.config_check, _("check the config: every bad key and value"))
    cmd(configs, "show", lazy.config_show, _("every setting's value and where it came from"))

    doctor = _(
        "what is wrong here (paths, permissions, the collector, SSH keys, nodes) and its fix"
    )
    cmd(sub, "doctor", lazy.doctor, doctor)

    notify = sub.add_parser("notify", help=_("notifications to chat robots, email, webhooks"))
    notifys = notify.add_subparsers(dest="action", required=True, parser_class=_Parser)
    p = cmd(notifys, "test", lazy.notify_test, _("send a test message to every URL"))
    p.add_argument("--url", help=_("send to this URL instead of the configured ones"))

    p = cmd(sub, "report", lazy.money_report, _("a month's cost, idle yuan, users"))
    p.add_argument("--month", required=True, metavar="YYYY-MM", help=_("in the billing time zone"))
    p.add_argument("--format", choices=("md", "csv", "json"), default="md")
    by = "report by"
    p.add_argument("--by", choices=("lease", "user", "project"), default="lease",
                   type=choicewords.typed(by), help=choicewords.help_of(by))  # fmt: skip
    p.add_argument("-o", "--output", metavar="FILE", help=_("write to FILE instead of stdout"))
    billargs.add_bill_commands(sub, cmd, _Parser)  # zuka bill import/list/delete/check
    p = cmd(sub, "cost", lazy.cost, _("what each lease billing now costs"))
    p.add_argument("node", nargs="?", metavar="NODE", help=_("only this node"))
    p.add_argument("--days", type=int, default=30, help=_("measured window (default 30)"))
    p.add_argument("--wide", action="store_true", help=_(WIDE))
    plan = sub.add_parser("plan", help=_("what to rent next, from measured demand"))
    plans = plan.add_subparsers(dest="action", required=True, parser_class=_Parser)
    p = cmd(plans, "hybrid", lazy.plan_hybrid, _("monthly base + hourly burst"))
    p.add_argument("--days", type=int, default=30, help=_("measured window (default 30)"))
    p.add_argument("--hourly", metavar="PRICE", help=_("a card's price an hour"))
    p.add_argument("--monthly", metavar="PRICE", help=_("a card's price a month"))
    p.add_argument("--gpu-model", metavar="M", help=_("only nodes of this GPU model"))
    p.add_argument("--currency", metavar="C", help=_(_PLAN_CURRENCY))
    p = cmd(plans, "buy", lazy.plan_buy, _("owning cards against renting them"))
    for flag, text in (
        ("--card-price", _("a card's purchase price")),
        ("--life-years", _("years the cards are written off over")),
        ("--power-w", _("a card's draw while busy, in watts (cooling included)")),
        ("--kwh", _("the price of a kWh")),
        ("--hosting", _("hosting a month, for all the cards")),
    ):
        p.add_argument(flag, required=True, metavar="N", help=text)
    p.add_argument("--cards", type=int, help=_("cards to buy (default: the cards rented now)"))
    p.add_argument(
        "--utilisation",
        metavar="U",
        help=_("busy share 0-1, or a percent: 65%% (default: measured)"),
    )
    p.add_argument("--days", type=int, default=30, help=_("measured window (default 30)"))
    p.add_argument("--gpu-model", metavar="M", help=_("only nodes of this GPU model"))
    p.add_argument("--currency", metavar="C", help=_(_PLAN_CURRENCY))
    offer_args.add(sub, plans, cmd)  # zuka offer ..., zuka plan job

    p = cmd(
        sub,
        "alerts",
        lazy.alerts_list,
        _("open alerts, evaluated now: leases ending, idle cards, starved jobs, unreachable nodes"),
    )
    p.add_argument("--all", action="store_true", help=_("also cleared, acknowledged, snoozed ones"))
    p.add_argument("--wide", action="store_true", help=_(WIDE))
    alerts = p.add_subparsers(dest="action", parser_class=_Parser, metavar="ACTION")
    p = cmd(alerts, "check", lazy.alerts_check, _("evaluate now and print what changed"))
    p.add_argument("--wide", action="store_true", help=_(WIDE))
    p = cmd(alerts, "ack", lazy.alerts_ack, _("acknowledge an alert: hidden until it clears"))
    p.add_argument("id")
    p = cmd(alerts, "snooze", lazy.alerts_snooze, _("hide an alert for a while"))
    p.add_argument("id")
    p.add_argument(
        "--for", dest="for_", required=True, metavar="DURATION", help=_("30m, 2h, 1d or 1w")
    )

    p = cmd(
        sub,
        "offboard",
        lazy.offboard,
        _("offboarding: the plan (a dry run), --execute --confirm NODE, --recheck, --report"),
    )
    offboardargs.offboard_options(p)

    labargs.lab_options(sub, lambda parent, name, help: cmd(parent, name, lazy.lab, help))

    p = cmd(sub, "export", transfer_cmd.export, _("write the whole ledger as CSV or JSON"))
    p.add_argument(
        "--format", choices=("csv", "json"), help=_("default: from the -o file name, else json")
    )
    p.add_argument("-o", "--output", metavar="FILE", help=_("write to FILE instead of stdout"))
    p = cmd(
        sub,
        "import",
        transfer_cmd.import_,
        _("add an export (CSV or JSON) to the ledger, all or nothing"),
    )
    p.add_argument("file", help=_("a file written by `zuka export`, or - for stdin"))
    p.add_argument(
        "--format",
        choices=("csv", "json"),
        help=_("default: from the file name (.csv, .json), else from its first line"),
    )

    return parser


@functools.lru_cache(maxsize=8)
def _parser(ledger_help: str, only: str | None = None, lang: str = "") -> argparse.ArgumentParser:
    """build_parser, once per process and help text (the one part that depends on the
    environment). Building it costs about 14 ms, most of a quick command's time, and
    the tests call main() thousands of times; parse_args leaves a parser unchanged. In
    Chinese its positionals are named as a Chinese usage and error show them (argwords)."""
    parser = build_parser(only)
    if lang and lang != EN:
        argwords.name_positionals(parser)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    return dispatch(argv, out)[0]


def run() -> None:
    """The `zuka` command: main, then the process ends, at once after the commands of
    QUICK_EXIT (tui.cli.quickexit)."""
    code, command = dispatch()
    if command in QUICK_EXIT:
        quick_exit(code)
    sys.exit(code)


def dispatch(
    argv: Sequence[str] | None = None, out: TextIO | None = None
) -> tuple[int, str | None]:
    """Parse argv and run its command: its exit status and the command's name (None when
    none ran)."""
    out = out or sys.stdout
    words = tty_flag_first(list(sys.argv[1:] if argv is None else argv))
    try:
        speak(words)
    except LanguageError as exc:
        print(_("zuka: error: {message}").format(message=visible(str(exc))), file=sys.stderr)
        return 2, None
    # A command with --json speaks English whatever lang is: its parser is English's.
    parser = _parser(_ledger_help(), pollargs.narrow(words), language())
    args = parser.parse_args(words)
    args.ledger = getattr(args, "ledger", None)
    args.json = getattr(args, "json", False)
    args.config = getattr(args, "config", None)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        handler = lazy.dashboard
    if args.json and handler in (lazy.dashboard, lazy.demo):
        parser.error(_("--json: the dashboard is a screen, not JSON; for JSON use a listing, "
                       "e.g. `zuka node list --json`"))  # fmt: skip
    if args.json and args.command in NO_JSON:
        parser.error(_("--json: `zuka {command}` prints no JSON; for JSON use a listing, e.g. "
                       "`zuka poll --once --json`").format(command=args.command))  # fmt: skip
    return handled(handler, args, out), args.command


if __name__ == "__main__":
    run()
