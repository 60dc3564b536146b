"""Hand-over acceptance as a use case: what the ledger says the node is (sold_of), one run
over SSH or on this machine for a `--local` node (accept), stored with its evidence on the
audit chain, read back (last, history), and the words a provider accepts (to_json,
report_md in leases.app.acceptreport).

A node that cannot be reached is stored as "not checked", never "passed".
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from leases.accept import engine
from leases.accept.engine import Check, PasswordProof, Sold, Throughput
from leases.accept.localrun import LocalRunner, nvml_evidence
from leases.accept.probe import Runner
from leases.accept.window import returnable_until
from leases.accept.words import speaking
from leases.config.sections import AcceptConfig, Config
from leases.core import fields
from leases.core.acceptance import CheckResult, Evidence, Level, Status, Verdict
from leases.core.i18n import EN, _, language
from leases.core.models import Interconnect, Lease, Node, ResourceKind
from leases.ledger import acceptance_rows
from leases.ledger.acceptance_rows import StoredRun
from leases.ledger.store import Ledger


@dataclass(frozen=True)
class Stored:
    """One stored run with what it means for the lease: until when the node can be
    handed back (None: not known, or no lease)."""

    id: int
    node: str
    lease_start: datetime | None
    lease_tz: str
    provider: str | None
    verdict: Verdict
    status: Status
    returnable_until: date | None
    window_known: bool
    sold: Sold | None = None
    # The findings as the run showed them (in shown_lang); the verdict's are English. Words of
    # one showing, not of the record: a run read back from the ledger is the same run.
    shown: tuple[CheckResult, ...] = dataclasses.field(default=(), compare=False)
    shown_lang: str = dataclasses.field(default=EN, compare=False)


def _fingerprint_of(key_path: str) -> str | None:
    from leases.offboard.authkeys import fingerprint_of  # asyncssh key reading, when asked

    try:
        return fingerprint_of(key_path)
    except Exception:  # no such file, not a key: that key is simply not expected
        return None


def expected_keys(ledger: Ledger, node: Node, lease: Lease | None) -> tuple[str, ...]:
    """Fingerprints of the keys the lab expects on the node: its ssh_key resources (of the
    lease, else of every lease) and the key zuka logs in with."""
    found: list[str] = []
    for _id, start, res in ledger.resources(node.name):
        if res.kind is not ResourceKind.SSH_KEY:
            continue
        if lease is None or start == lease.start:
            found.append(res.native_id)
    if node.ssh.key_path:
        fp = _fingerprint_of(node.ssh.key_path)
        if fp:
            found.append(fp)
    return tuple(dict.fromkeys(found))


def sold_of(ledger: Ledger, node: Node, lease: Lease | None) -> Sold:
    """What the ledger says the node is, under the lease it is accepted for."""
    return Sold(
        node=node.name,
        gpu_model=node.gpu_model,
        gpu_count=node.gpu_count,
        vram_gib=node.vram_gib,
        interconnect=node.interconnect,
        nvlinks=node.nvlinks,
        ib_gbps=node.ib_gbps,
        expected_keys=expected_keys(ledger, node, lease),
        local=node.local,
    )


def window(ledger: Ledger, node: Node, lease: Lease | None) -> tuple[date | None, bool]:
    """(the last day the provider takes the node back, whether the window is known):
    the lease's start day (in its billing zone) plus the provider's return_days."""
    days = ledger.provider(node.provider).return_days if node.provider else None
    if days is None or lease is None:
        return None, days is not None
    return returnable_until(lease.start, lease.billing_tz, days), True


SOLD_KEY = "sold"


def _sold_evidence(sold: Sold) -> Evidence:
    facts = dataclasses.asdict(sold) | {"interconnect": sold.interconnect.value}
    return Evidence(SOLD_KEY, "what the ledger says was sold (zuka's own record)", 0,
                    json.dumps(facts, sort_keys=True), "")  # fmt: skip


def _sold_from(verdict: Verdict) -> Sold | None:
    """What was sold as the run kept it (None: a run kept before it was, or unreadable)."""
    for ev in verdict.evidence:
        if ev.key == SOLD_KEY:
            try:
                facts = json.loads(ev.stdout)
                facts["interconnect"] = Interconnect(facts["interconnect"])
                facts["expected_keys"] = tuple(facts["expected_keys"])
                return Sold(**facts)
            except (ValueError, KeyError, TypeError):
                return None
    return None


def _stored(ledger: Ledger, run: StoredRun, sold: Sold | None = None) -> Stored:
    node = ledger.node_by_id(run.node_id)
    lease = None
    if run.lease_id is not None:
        with contextlib.suppress(LookupError, ValueError):  # IndexError is a LookupError
            lease = ledger.lease_by_id(run.lease_id)  # deleted since: the run stands alone
    until, known = (None, False) if node is None else window(ledger, node, lease)
    return Stored(
        id=run.id,
        node=run.node,
        lease_start=None if lease is None else lease.start,
        lease_tz=fields.DEFAULT_TZ if lease is None else lease.billing_tz,
        provider=None if node is None else node.provider,
        verdict=run.verdict,
        status=run.status,
        returnable_until=until,
        window_known=known,
        sold=sold if sold is not None else _sold_from(run.verdict),
    )


def _default_checks() -> tuple[Check, ...]:
    from leases.accept.registry import checks

    return checks()


async def accept(
    ledger: Ledger,
    name: str,
    config: Config,
    *,
    level: Level,
    clock: Callable[[], datetime],
    started: engine.Started | None = None,
    found: engine.Found | None = None,
    runner: Runner | None = None,
    checks: Sequence[Check] | None = None,
    password_proof: PasswordProof | None = None,
    throughput: Throughput | None = None,
    nvml: Any = None,
) -> Stored:
    """Run the acceptance checks of `level` on the node and store the verdict."""
    node = ledger.node(name)
    assert node.id is not None
    lease = ledger.current_lease(node.name, clock())
    sold = sold_of(ledger, node, lease)
    session: Any = None
    if runner is None:
        if node.local:
            runner = LocalRunner()
        else:
            from leases.ssh.session import NodeSession
            from leases.telemetry.wiring import ssh_options

            if ledger.path is None:
                raise ValueError(
                    _("an SSH node's acceptance needs a ledger file (its trust store)")
                )
            from leases.accept import sshproofs

            options = ssh_options(ledger.path)
            session = NodeSession(node, options)
            runner = session
            if password_proof is None:
                password_proof = sshproofs.password_proof(node, options)
            if throughput is None:
                throughput = sshproofs.throughput(session)
    ctx = engine.new_context(
        sold,
        runner,
        level,
        config.accept,
        password_proof=None if node.local else password_proof,
        throughput=None if node.local else throughput,
    )
    if node.local:
        with speaking(EN):  # evidence is stored: in English
            ctx.probe.record(await asyncio.to_thread(nvml_evidence, nvml))
    shown: list[CheckResult] = []
    lang = language()
    try:
        verdict = await engine.run(
            _default_checks() if checks is None else checks,
            ctx,
            now=clock,
            started=started,
            found=found,
            shown=shown,
        )
    finally:
        if session is not None:
            with contextlib.suppress(Exception):
                await session.close()
    # What the checks compared against is evidence too: kept with the run (and its digest),
    # so a report read later says what was sold then, whatever the ledger says since.
    verdict = dataclasses.replace(verdict, evidence=(*verdict.evidence, _sold_evidence(sold)))
    lease_id = None if lease is None else lease.id
    run = acceptance_rows.store(ledger, node.id, node.name, lease_id, verdict)
    said = dataclasses.replace(_stored(ledger, run, sold), shown=tuple(shown), shown_lang=lang)
    return said if len(said.shown) == len(said.verdict.results) else _stored(ledger, run, sold)


def told(s: Stored, settings: AcceptConfig | None = None) -> tuple[CheckResult, ...]:
    """The run's findings in the language in use: as the run showed them where it spoke
    it, else judged again from the stored evidence (leases.accept.retell); English is the
    verdict's own."""
    lang = language()
    if lang == EN:
        return s.verdict.results
    if s.shown and s.shown_lang == lang:
        return s.shown
    from leases.accept.retell import retold

    return retold(s.verdict, s.sold, _default_checks(), settings)


def last(ledger: Ledger, name: str) -> Stored | None:
    """The node's latest stored run (refused when changed outside zuka)."""
    node = ledger.node(name)
    assert node.id is not None
    run_id = acceptance_rows.last_id(ledger, node.id)
    return None if run_id is None else _stored(ledger, acceptance_rows.load(ledger, run_id))


def history(ledger: Ledger, name: str) -> list[Stored]:
    """Every stored run of the node, oldest first."""
    node = ledger.node(name)
    assert node.id is not None
    return [
        _stored(ledger, acceptance_rows.load(ledger, i))
        for i in acceptance_rows.run_ids(ledger, node.id)
    ]
