"""`zuka doctor` in a lab install: whose ledger this is, what this user may do in it (by
their groups, as the files' ACLs will judge), and the lab's files as the lab's rules want
them (leases.lab.perms), in place of the one-user ledger's 0600 rule."""

from __future__ import annotations

from collections.abc import Iterator

from leases.app import service
from leases.app.doctor import Finding, Level, Setting
from leases.core.i18n import _
from leases.core.textsafe import visible
from leases.lab import perms, roles
from leases.lab.layout import Lab, LabError, find_lab
from leases.lab.roles import Role

AREA = "lab"


def lab_of(setting: Setting) -> Lab | None:
    try:
        return find_lab(setting.ledger)
    except LabError:
        return None


def membership(setting: Setting) -> Iterator[Finding]:
    """Whether the ledger is a lab's, and what this user's groups let them do in it."""
    try:
        lab = find_lab(setting.ledger)
    except LabError as exc:
        yield Finding(AREA, Level.FAIL, visible(str(exc)))
        return
    if lab is None:
        return
    user = roles.me()
    have = roles.roles_of(lab, roles.my_groups())
    said = _("the ledger is the lab's in {folder}").format(folder=visible(str(lab.folder)))
    yield Finding(AREA, Level.OK, said)
    if user == lab.service_user:
        yield Finding(
            AREA,
            Level.OK,
            _(
                "{user} is the lab's service user: it owns and writes the ledger and polls"
                " with the collector's own key"
            ).format(user=user),
        )
        yield from _collector_key(lab)
        return
    if user == "root":
        yield Finding(
            AREA,
            Level.OK,
            _(
                "root: the lab's modes and ACLs do not bind root, so root's commands say"
                " nothing of what a member may do; run doctor as each member to see theirs"
            ),
        )
        return
    if Role.VIEW not in have and user not in ("root", lab.service_user):
        yield Finding(
            AREA,
            Level.FAIL,
            _("{user} is not in the lab's group {group}: the ledger cannot be opened").format(
                user=user, group=lab.viewers
            ),
            _(
                "ask the lab's admin: sudo zuka lab add-user {user} --role view (then log in again)"
            ).format(user=user),
        )
        return
    may = [r.value for r in Role if r in have] or [_("nothing")]
    yield Finding(AREA, Level.OK, _("{user} may: {roles}").format(user=user, roles=", ".join(may)))
    needs = (
        (Role.EDIT, _("to change leases, nodes and resources or trust host keys, {user} needs"
                      " group {group}")),
        (Role.OFFBOARD, _("to run offboarding, {user} needs group {group}")),
    )  # fmt: skip
    for role, what in needs:
        if role not in have and Role.VIEW in have:
            yield Finding(
                AREA,
                Level.OK,
                what.format(user=user, group=roles.group_of(lab, role)),
                f"sudo zuka lab add-user {user} --role {role.value}",
            )


def files(setting: Setting) -> Iterator[Finding]:
    """The lab's files as the lab wants them (owner, mode, ACL), each wrong one with its fix;
    what this user may not look at is said, not judged."""
    lab = lab_of(setting)
    if lab is None:
        return
    found = perms.check(lab)
    for f in found:
        yield Finding("permissions", Level.FAIL, visible(f"{f.path}: {f.problem}"), visible(f.fix))
    hidden = perms.unseen(lab)
    if not found:
        seen = _("the lab's files are as the lab wants them")
        if hidden:
            seen += " " + _("(not looked at, this user may not: {names})").format(
                names=", ".join(p.name for p in hidden)
            )
        yield Finding("permissions", Level.OK, visible(seen))


def is_service_user(setting: Setting) -> bool:
    lab = lab_of(setting)
    return lab is not None and roles.me() == lab.service_user


def _collector_key(lab: Lab) -> Iterator[Finding]:
    """The collector's key as `zuka service install` checks it (its owner and mode)."""
    key = lab.collector_key
    problems = service.service_key_problems(key, lab.service_user)
    for problem in problems:
        yield Finding("ssh keys", Level.FAIL, visible(problem), "sudo zuka lab repair")
    if not problems:
        yield Finding(
            "ssh keys",
            Level.OK,
            _(
                "the collector's key {key} is the service user's alone; give its public half"
                " to each node: zuka lab pubkey"
            ).format(key=key),
        )
