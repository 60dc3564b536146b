"""The words of leases.ssh.login's refusals: what each ssh option zuka does not honour is,
and why (marked for the catalogue, said with `_` where a refusal is written)."""

from __future__ import annotations

from leases.ssh.speech import N_

# Options that take an argument, which zuka does not honour: refused, saying what they are.
REFUSED_WITH_ARG = {
    "B": N_("binding to an interface"),
    "b": N_("a bind address"),
    "c": N_("a cipher choice"),
    "E": N_("a log file"),
    "e": N_("an escape character"),
    "F": N_("another ssh config file"),
    "m": N_("a MAC choice"),
    "O": N_("a control command"),
    "Q": N_("a query"),
    "S": N_("a control socket"),
    "W": N_("stdio forwarding"),
    "w": N_("tunnel forwarding"),
}
REFUSED_FLAGS = {"G": N_("printing the config"), "V": N_("printing the version")}
OPTION_REASONS = {
    "proxycommand": N_("zuka never runs a local command to connect; use ProxyJump (-J)"),
    "localcommand": N_("zuka never runs a local command"),
    "permitlocalcommand": N_("zuka never runs a local command"),
    "hostname": N_("give the real host in the command itself"),
    "stricthostkeychecking": N_("zuka always checks host keys against its own trust store"),
    "userknownhostsfile": N_("zuka always checks host keys against its own trust store"),
    "globalknownhostsfile": N_("zuka always checks host keys against its own trust store"),
    "localforward": N_("give the forward as -L [bind_address:]port:host:hostport"),
    "remoteforward": N_("give the forward as -R [bind_address:]port:host:hostport"),
    "dynamicforward": N_("give the forward as -D [bind_address:]port"),
}
# Port forwards kept as the node's tunnels (check_tunnel), by option letter.
TUNNELS = {
    "L": N_("local port forwarding"),
    "R": N_("remote port forwarding"),
    "D": N_("dynamic port forwarding"),
}
# Any other option zuka does not honour.
REMOVE_IT = N_("remove it")
# What Python's shlex says of a line it cannot split.
SHLEX_WORDS = frozenset({N_("No closing quotation"), N_("No escaped character")})
