"""The route to a node: the node and the jump hosts before it, as zuka resolves them
through the ssh config, every value through the ledger's own validators."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from leases.core.errors import InputError
from leases.core.models import SshTarget
from leases.ssh import config as sshconfig
from leases.ssh import hostkeys
from leases.ssh import login as sshcmd
from leases.ssh.speech import _


@dataclass(frozen=True)
class Endpoint:
    """One server a connect reaches, a jump host or the node, as zuka resolved it."""

    host: str
    port: int | None = None
    user: str | None = None
    key_files: tuple[str, ...] = ()  # IdentityFile lines of ~/.ssh/config; missing ones skipped
    identities_only: bool = False

    def __str__(self) -> str:
        where = hostkeys.host_pattern(self.host, self.port)
        return f"{self.user}@{where}" if self.user else where


@dataclass(frozen=True)
class Route:
    node: Endpoint
    hops: tuple[Endpoint, ...] = ()


def _checked(what: str, value: str, check: Callable[[str, str], str] = sshcmd.check_host) -> str:
    """A value from the ledger or the ssh config, through the ledger's own validator."""
    try:
        return check(value, what)
    except InputError as exc:
        raise sshconfig.ConfigRefused(f"{what} {exc.value!r} {exc.reason}") from None


def _endpoint(
    host: str, port: int | None, user: str | None, conf: sshconfig.HostConfig
) -> Endpoint:
    if conf.refusals:
        words = _("ssh config for {host}: {refusals}")
        raise sshconfig.ConfigRefused(words.format(host=host, refusals=_("; ").join(conf.refusals)))
    user = user or conf.user
    return Endpoint(
        _checked("HostName", conf.hostname or host),
        port if port is not None else conf.port,
        _checked("User", user, sshcmd.check_user) if user else None,
        conf.identity_files,
        conf.identities_only,
    )


def resolve_route(target: SshTarget, config_paths: Sequence[Path]) -> Route:
    """Where a connect to target goes, through the ssh config as zuka reads it (see
    leases.ssh.config). The ledger's port, user and jump win over the config's, as ssh's
    command-line options do. Raises sshconfig.ConfigRefused."""
    conf = sshconfig.host_config(_checked("host", target.host), config_paths)
    node = _endpoint(target.host, target.port, target.user, conf)
    jump = target.jump or conf.proxy_jump
    hops: list[Endpoint] = []
    if jump and jump.lower() != "none":
        parsed = _hops(jump)
        for hop in parsed:
            hop_conf = sshconfig.host_config(_checked("jump host", hop.host), config_paths)
            own = hop_conf.proxy_jump
            # `Host * / ProxyJump bastion` matches the bastion too: ssh would loop on it.
            if own and own.lower() != "none" and not _names_itself(own, hop.host):
                raise sshconfig.ConfigRefused(
                    _(
                        "jump host {host} has a ProxyJump of its own in the ssh config; zuka does"
                        " not chain those: give the whole chain as the node's jump"
                    ).format(host=hop.host)
                )
            hops.append(_endpoint(hop.host, hop.port, hop.user, hop_conf))
    return Route(node, tuple(hops))


def _hops(spec: str) -> list[sshcmd.JumpHop]:
    try:
        return sshcmd.parse_jump_hops(spec, "ProxyJump")
    except InputError as exc:
        raise sshconfig.ConfigRefused(f"ProxyJump {exc.value!r}: {exc.reason}") from None


def _names_itself(spec: str, host: str) -> bool:
    try:
        return all(h.host == host for h in _hops(spec))
    except sshconfig.ConfigRefused:
        return False
