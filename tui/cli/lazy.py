"""The handlers whose modules load only when their command runs, one typed loader each:
asyncssh, the poller, Textual and the money reports cost hundreds of ms to import, which
`zuka --help`, `zuka node list` and the other ledger commands should not pay. Each body
imports its module by name, so mypy checks the handler is there and takes (args, out)."""

from __future__ import annotations

import argparse
from typing import TextIO


def dashboard(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import dashboard

    return dashboard.dashboard(args, out)


def demo(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli.demo import run_demo

    return run_demo(args)


def web(args: argparse.Namespace, out: TextIO) -> int:
    from tui.web import serve

    return serve.web(args, out)


def accept(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import accept

    return accept.accept(args, out)


def node_trust(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import fleet

    return fleet.node_trust(args, out)


def poll(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import fleet

    return fleet.poll(args, out)


def collect(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import fleet

    return fleet.collect(args, out)


def sim(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import fleet

    return fleet.sim(args, out)


def config_check(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import config

    return config.check(args, out)


def config_show(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import config

    return config.show(args, out)


def doctor(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import doctor

    return doctor.run(args, out)


def notify_test(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import notify

    return notify.test(args, out)


def money_report(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import money

    return money.money_report(args, out)


def cost(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import cost

    return cost.cost(args, out)


def plan_hybrid(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import money

    return money.plan_hybrid(args, out)


def plan_buy(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import money

    return money.plan_buy(args, out)


def alerts_list(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import alerts

    return alerts.list_alerts(args, out)


def alerts_check(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import alerts

    return alerts.check_now(args, out)


def alerts_ack(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import alerts

    return alerts.ack(args, out)


def alerts_snooze(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import alerts

    return alerts.snooze(args, out)


def offboard(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import offboard

    return offboard.offboard(args, out)


def offer_add(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import offers

    return offers.offer_add(args, out)


def offer_list(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import offers

    return offers.offer_list(args, out)


def offer_edit(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import offers

    return offers.offer_edit(args, out)


def offer_delete(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import offers

    return offers.offer_delete(args, out)


def plan_job(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import offers

    return offers.plan_job(args, out)


def bill_import(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import bills

    return bills.bill_import(args, out)


def bill_list(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import bills

    return bills.bill_list(args, out)


def bill_delete(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import bills

    return bills.bill_delete(args, out)


def bill_check(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import bills

    return bills.bill_check(args, out)


# Issue 20: prepaid balances and invoices.


def provider_topup(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import balances

    return balances.provider_topup(args, out)


def provider_balance(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import balances

    return balances.provider_balance(args, out)


def invoice_add(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import invoices

    return invoices.invoice_add(args, out)


def invoice_list(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import invoices

    return invoices.invoice_list(args, out)


def invoice_edit(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import invoices

    return invoices.invoice_edit(args, out)


def invoice_delete(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import invoices

    return invoices.invoice_delete(args, out)


def lease_refund(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import deposits

    return deposits.lease_refund(args, out)


def lease_refunds(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import deposits

    return deposits.lease_refunds(args, out)


def ssh(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import ssh

    return ssh.ssh(args, out)


def ps(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import processes

    return processes.ps(args, out)


def kill(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import processes

    return processes.kill(args, out)


def service_install(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import service

    return service.service_install(args, out)


def service_status(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import service

    return service.service_status(args, out)


def service_uninstall(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import service

    return service.service_uninstall(args, out)


def lab(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli import lab

    return lab.lab(args, out)
