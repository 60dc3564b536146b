"""How zuka connects to nodes: timeouts, keepalives, backoff, connect and channel bounds,
output caps, ciphers, and where host keys, client keys and ssh config are read from."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Final

import asyncssh

from leases.ssh import config as sshconfig
from leases.ssh import hostkeys


class Default(Enum):
    TOKEN = "default"


# "Do what ssh would do": read ~/.ssh/config, use $SSH_AUTH_SOCK.
DEFAULT: Final = Default.TOKEN

# Output caps (characters; nvidia-smi prints ASCII, so about bytes). Sizes measured here:
# an 8-GPU --query-gpu round is ~2 KB, compute-apps with hundreds of processes ~50 KB,
# `nvidia-smi -q -x` of 8 GPUs ~150 KB, `topo -m` under 4 KB. 4 MiB is 25x the largest of
# them and small next to what a node pushing output as fast as it can sends in a second.
DEFAULT_MAX_OUTPUT = 4 * 1024 * 1024
# A real line is a few hundred characters (a CSV row; a process path is at most 4096).
DEFAULT_MAX_LINE = 64 * 1024


@dataclass(frozen=True)
class SshOptions:
    connect_timeout: float = 10.0  # TCP + handshake + auth, for the whole ProxyJump chain
    command_timeout: float = 10.0
    keepalive_interval: float = 15.0
    keepalive_count_max: int = 3
    backoff_base: float = 1.0
    backoff_cap: float = 60.0
    # Stock sshd: MaxStartups 10 unauthenticated connects, MaxSessions 10 channels. Those
    # are limits of one server, so connects are bounded per server (a node's sshd, by its
    # route, host and port; a jump host's own connect is one, shared by the nodes behind
    # it); the fleet-wide bound only spares the client's own CPU. A handshake costs
    # the client ~5 ms of CPU and ~8 round trips of waiting: at 32 a cold 300-node poll was
    # waves of round trips (5.0 s, 50 ms RTT); at 128, 3.1 s, bound by CPU (bench/poll.py).
    max_concurrent_connects: int = 128
    max_connects_per_host: int = 8
    # Nodes whose last connect failed get their own, smaller budget: live nodes never
    # queue behind dead ones.
    max_concurrent_retries: int = 8
    # A connect with no result after this long gives its fleet slot to the next node and
    # waits among at most max_stalled_connects others (a blackholed node costs no CPU).
    stall_after: float = 1.5
    max_stalled_connects: int = 512
    max_channels_per_connection: int = 8
    # A command that prints more than max_output characters, or a line longer than
    # max_line, is stopped (its channel closed): the node is `garbage` (OutputTooLarge).
    # A stream() has no total (it runs for hours) but the same line bound.
    max_output: int = DEFAULT_MAX_OUTPUT
    max_line: int = DEFAULT_MAX_LINE
    # Put first, ahead of asyncssh's defaults: aes128-gcm costs ~1/1.6 of chacha20 here.
    preferred_ciphers: tuple[str, ...] = ("aes128-gcm@openssh.com",)
    # The first file is zuka's own, where accepted keys go (see leases.ssh.hostkeys).
    known_hosts: tuple[Path, ...] = field(default_factory=hostkeys.default_known_hosts_paths)
    # None: the node's key_path plus whatever ~/.ssh/config and the agent offer.
    client_keys: Sequence[str | Path | asyncssh.SSHKey] | None = None
    agent_path: str | Default | None = DEFAULT  # None disables the agent
    # A service's own key (`zuka collect --identity`): every hop logs in with it alone, as
    # IdentitiesOnly would, never the agent, the node's key or the ssh config's IdentityFile.
    # It must be the running user's and closed to group and others (leases.ssh.keys).
    identity: Path | None = None
    # The ssh config files zuka resolves a node through (see leases.ssh.config); DEFAULT:
    # ~/.ssh/config and /etc/ssh/ssh_config; [] reads none. asyncssh itself never reads one.
    config: Sequence[str | Path] | Default = DEFAULT

    @property
    def config_paths(self) -> tuple[Path, ...]:
        if isinstance(self.config, Default):
            return sshconfig.default_config_paths()
        return tuple(Path(p) for p in self.config)

    @property
    def trust_path(self) -> Path:
        return self.known_hosts[0] if self.known_hosts else hostkeys.default_known_hosts_path()
