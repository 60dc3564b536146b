"""`zuka doctor`'s look at the collector as a service: in a lab, the system units (written
by zuka, running where systemd runs) and who holds the poller lock (the service user, not a
person); for one person, their user unit if they installed one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from leases.app import service
from leases.app.doctor import Finding, Level, Setting
from leases.app.doctorlab import lab_of
from leases.core.i18n import _
from leases.core.textsafe import visible
from leases.lab.layout import Lab
from leases.service.units import Mode

AREA = "service"


def units(setting: Setting, *, root: Path | None = None) -> Iterator[Finding]:
    lab = lab_of(setting)
    mode = Mode.SYSTEM if lab is not None else Mode.USER
    home = setting.home or Path("/")
    state = service.status(
        mode, setting.ledger, root, home, lambda: setting.now, env=setting.env or None
    )
    collect = state.units[0]
    install = "sudo zuka service install --system" if lab else "zuka service install --user"
    if not collect.present:
        if lab is not None:
            yield Finding(
                AREA,
                Level.WARN,
                _(
                    "the lab's collector is not installed as a service: nobody's dashboard"
                    " polls a lab's fleet, so readings stop when no collector runs"
                ),
                install,
            )
        else:
            yield Finding(
                AREA,
                Level.OK,
                _("no collector service for this user (a dashboard polls while it is open)"),
                install,
            )
        return
    shown = visible(str(collect.path))
    if not collect.ours:
        yield Finding(
            AREA,
            Level.WARN,
            _("{path} was not written by zuka: doctor cannot say what it runs").format(path=shown),
            _("compare it with `{command} --dry-run`").format(command=install),
        )
    if collect.active is None:
        yield Finding(
            AREA,
            Level.OK,
            _(
                "{unit} is installed ({path}); systemd is not running here, so its state is"
                " not known"
            ).format(unit=collect.name, path=shown),
        )
    elif collect.active != "active":
        ctl = "systemctl" if lab else "systemctl --user"
        yield Finding(
            AREA,
            Level.FAIL,
            _("{unit} is installed but {state}").format(
                unit=collect.name, state=visible(collect.active)
            ),
            _("{ctl} status {unit}; {journal} -u {unit}; then {ctl} restart {unit}").format(
                ctl=ctl, unit=collect.name, journal="journalctl" if lab else "journalctl --user"
            ),
        )
    else:
        yield Finding(AREA, Level.OK, _("{unit} is active").format(unit=collect.name))
    if lab is not None:
        yield from _polled_by_the_service(lab, state.poller_user)


def _polled_by_the_service(lab: Lab, user: str | None) -> Iterator[Finding]:
    if user is not None and user != lab.service_user:
        yield Finding(
            AREA,
            Level.WARN,
            _(
                "the lab's fleet is polled by {user}, not by the service user {service}: a"
                " person's collector uses that person's keys"
            ).format(user=visible(user), service=lab.service_user),
            _("stop that collector; the service polls with its own key"),
        )
