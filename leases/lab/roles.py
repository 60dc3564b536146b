"""Roles in a lab install, by Unix group: viewers open the dashboard, reports and alerts;
editors change leases, nodes and resources and trust host keys; offboarding needs its own
group. The files' modes and ACLs (leases.lab.perms) are what enforce them; these words
say, before anything is tried, which group an action needs and whether this user is in it.
"""

from __future__ import annotations

import enum
import grp
import os
import pwd
import shlex
from collections.abc import Iterable

from leases.core.i18n import _
from leases.lab.layout import DEFAULT_FOLDER, Lab


class Role(enum.Enum):
    VIEW = "view"
    EDIT = "edit"
    OFFBOARD = "offboard"


def group_of(lab: Lab, role: Role) -> str:
    """The Unix group that gives a role in this lab."""
    return {Role.VIEW: lab.viewers, Role.EDIT: lab.editors, Role.OFFBOARD: lab.offboard}[role]


def roles_of(lab: Lab, groups: Iterable[str]) -> frozenset[Role]:
    """The roles a member of these groups has (pure)."""
    have = set(groups)
    return frozenset(role for role in Role if group_of(lab, role) in have)


def my_groups() -> frozenset[str]:
    """The names of the groups this process runs with (its real groups, as the kernel
    checks them: not what $USER says)."""
    names: set[str] = set()
    for gid in {os.getegid(), *os.getgroups()}:
        try:
            names.add(grp.getgrgid(gid).gr_name)
        except KeyError:
            continue
    return frozenset(names)


def me() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


def refusal(lab: Lab, role: Role, action: str, user: str) -> str:
    """The words of an action refused for want of a role: which group it needs, and how
    the lab's admin gives it."""
    group = group_of(lab, role)
    folder = "" if lab.folder == DEFAULT_FOLDER else f" --folder {shlex.quote(str(lab.folder))}"
    return _(
        "{action} needs group {group} in this lab ({folder}), and {user} is not "
        "in it: ask the lab's admin to run `sudo zuka lab add-user {user} --role "
        "{value}{folder2}`, then log in again"
    ).format(
        action=action, group=group, folder=lab.folder, user=user, value=role.value, folder2=folder
    )
