"""`zuka doctor` run by each member of a real lab: what their groups let them do, the lab's
files judged by the lab's rules (not the one-user 0600 rule), and a drifted file's fix."""

from __future__ import annotations

import json
import os
from typing import Any

from leases.lab.layout import Lab
from tests.support.labs import root, zuka_in
from tests.support.unixusers import LabUsers


def _doctor(u: LabUsers, lab: Lab, user: str) -> list[dict[str, Any]]:
    done = zuka_in(u, lab, user, "doctor", "--json")
    assert done.returncode in (0, 1), done.stderr
    found: list[dict[str, Any]] = json.loads(done.stdout)
    return found


def _what(found: list[dict[str, Any]], area: str) -> list[str]:
    return [f"{f['level']}: {f['what']}" for f in found if f["area"] == area]


def test_each_member_is_told_what_they_may_do(lab: Lab, lab_users: LabUsers) -> None:
    u = lab_users
    viewer = _doctor(u, lab, u.viewer)
    said = _what(viewer, "lab")
    assert f"ok: {u.viewer} may: view" in said
    assert any(f"needs group {u.editors}" in s for s in said)
    perms = _what(viewer, "permissions")
    assert perms and all(not p.startswith("fail") for p in perms), perms
    assert not any("0600" in p or "chmod 600" in p for p in perms)  # not the one-user rule
    editor = _what(_doctor(u, lab, u.editor), "lab")
    assert f"ok: {u.editor} may: view, edit" in editor
    outsider = _doctor(u, lab, u.outsider)
    assert any(f["level"] == "fail" for f in outsider)
    assert any(u.viewers in f["what"] or u.viewers in f["fix"] for f in outsider), outsider


def test_a_drifted_ledger_is_a_failure_with_the_repair(lab: Lab, lab_users: LabUsers) -> None:
    u = lab_users
    mode = os.stat(lab.ledger).st_mode & 0o7777
    os.chmod(lab.ledger, 0o644)  # root, by hand: the ACL's mask and others' bits change
    try:
        found = _doctor(u, lab, u.editor)
        fails = [f for f in found if f["area"] == "permissions" and f["level"] == "fail"]
        assert fails and any("ledger.db" in f["what"] for f in fails), found
        assert any("zuka lab repair" in f["fix"] for f in fails)
    finally:
        done = root("lab", "repair", "--folder", str(lab.folder), "--yes")
        assert done.returncode == 0, done.stderr
    assert os.stat(lab.ledger).st_mode & 0o7777 == mode
    after = _doctor(u, lab, u.editor)
    assert not [f for f in after if f["area"] == "permissions" and f["level"] == "fail"]


def test_the_service_user_is_told_it_writes_and_polls_with_the_collectors_key(
    lab: Lab, lab_users: LabUsers
) -> None:
    u = lab_users
    found = _doctor(u, lab, u.service)
    said = _what(found, "lab")
    assert any("is the lab's service user: it owns and writes the ledger" in s for s in said)
    keys = _what(found, "ssh keys")
    assert any(f"the collector's key {lab.collector_key} is the service user's alone" in k
               for k in keys), keys  # fmt: skip
    assert not any("ssh-keygen" in f["fix"] for f in found)  # not a person's ~/.ssh
