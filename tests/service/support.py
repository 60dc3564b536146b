"""A lab-like folder for the service tests: owned by the service user (not part A's lab
folder, which these tests do not depend on), with a root-owned marker naming the test's
users, a ledger with one simulated node that accepts only the collector's own key."""

from __future__ import annotations

import os
import pwd
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import asyncssh

from leases.lab.layout import Lab
from leases.ledger.store import Ledger
from leases.sim.fleet import SimFleet
from leases.sim.ledger import FleetThread, attach, register_sim_nodes, sim_nodes_of
from tests.support.unixusers import LabUsers, shared_tmp


@dataclass
class ServiceFolder:
    lab: Lab
    key: asyncssh.SSHKey  # the collector's own
    runner: FleetThread | None = None

    @property
    def fleet(self) -> SimFleet:
        assert self.runner is not None
        return self.runner.fleet


def chown_tree(folder: Path, user: str, group_gid: int) -> None:
    uid = pwd.getpwnam(user).pw_uid
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in [*dirnames, *filenames]:
            os.chown(os.path.join(dirpath, name), uid, group_gid, follow_symlinks=False)
    os.chown(folder, uid, group_gid)


def make_service_folder(users: LabUsers, *, node: bool = True) -> Iterator[ServiceFolder]:
    """The folder, its marker, the collector's key (0600, the service user's) and, with
    node, a ledger whose one simulated node accepts that key alone."""
    top = shared_tmp()
    lab = users.lab(top / "lab")
    lab.folder.mkdir(mode=0o750)
    key = asyncssh.generate_private_key("ssh-ed25519")
    sf = ServiceFolder(lab, key)
    try:
        lab.collector_key_dir.mkdir(mode=0o700)
        lab.collector_key.write_bytes(key.export_private_key("openssh"))
        lab.collector_key.chmod(0o600)
        if node:
            with Ledger.open(lab.ledger) as ledger:
                nodes = register_sim_nodes(ledger, 1, datetime.now(UTC))
                sims = sim_nodes_of(nodes)
                # The node's authorized_keys: the collector's key, nobody else's (the
                # ledger's own key for it, written by attach, is refused).
                sims[0].keys[:] = [key.export_public_key().decode().strip()]
                sf.runner = FleetThread(sims)
                attach(ledger, lab.ledger, sf.runner.start())
        gid = pwd.getpwnam(users.service).pw_gid
        chown_tree(lab.folder, users.service, gid)
        lab.marker.write_text(lab.marker_text())  # root's, 0644: the lab's marker
        lab.marker.chmod(0o644)
        yield sf
    finally:
        if sf.runner is not None:
            sf.runner.stop()
        shutil.rmtree(top, ignore_errors=True)
