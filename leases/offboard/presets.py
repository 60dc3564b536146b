"""The usual scratch roots and paths per kind of provider and platform, and the histories,
caches and credentials a lab leaves in the login user's home.

A preset adds roots (where a declared scratch_path may lie) and paths shredded by default
(a platform's per-instance data disk). Storage that outlives the instance (a platform's
shared network storage, shared by the lab's other instances) is a root and is named in the
plan's file-system facts, but it is never shredded whole by default: declare the paths in
it that belong to this lease as scratch_path resources.

Platform paths are as each platform's documentation describes its instances; a platform
that moves them is one line here, and [offboard] scratch_roots adds any root.
"""

from __future__ import annotations

from dataclasses import dataclass

from leases.core.i18n import N_
from leases.core.models import Provider, ProviderKind


@dataclass(frozen=True)
class Preset:
    name: str
    roots: tuple[str, ...] = ()  # where declared scratch paths may lie
    paths: tuple[str, ...] = ()  # shredded by default (the instance's own data disk)
    shared: tuple[str, ...] = ()  # outlives the instance: facts and a warning, no shred
    note: str = ""  # one line for the plan


_AUTODL = Preset(
    "AutoDL",
    roots=("/root/autodl-tmp", "/root/autodl-fs"),
    paths=("/root/autodl-tmp",),  # the instance's data disk
    shared=("/root/autodl-fs",),  # file storage: shared by the region's instances
    note=N_("autodl-fs is file storage shared by all instances in the region: it stays"),
)
_GPUSHARE = Preset(
    "GpuShare",
    roots=("/hy-tmp", "/hy-nas"),
    paths=("/hy-tmp",),  # the instance's data disk
    shared=("/hy-nas",),  # shared storage
    note=N_("hy-nas is shared storage that outlives the instance"),
)
_MATPOOL = Preset(
    "Matpool",
    roots=("/mnt",),
    shared=("/mnt",),  # the network disk, the same on every machine the account rents
    note=N_("/mnt is the account's network disk: it outlives the machine"),
)
_FEATURIZE = Preset(
    "Featurize",
    roots=("/home/featurize/work", "/home/featurize/data"),
    shared=("/home/featurize/work",),  # the work directory is kept between instances
    note=N_("the work directory is kept between instances"),
)
# Matched against the provider's name, lower-cased: its common spellings.
_PLATFORMS: tuple[tuple[tuple[str, ...], Preset], ...] = (
    (("autodl", "seetacloud"), _AUTODL),
    (("gpushare", "恒源云"), _GPUSHARE),
    (("matpool", "矩池云"), _MATPOOL),
    (("featurize",), _FEATURIZE),
)
_CLOUD = Preset(
    "cloud",
    roots=("/mnt", "/data"),
    note=(
        N_(
            "a cloud disk keeps what its provider's storage layer keeps: deleting the disk and "
            "its snapshots (the cloud steps) is the real control; shred is best effort"
        )
    ),
)
_PLATFORM = Preset(
    "platform", note=N_("declare the platform's data disk in [offboard] scratch_roots")
)
_COLO = Preset("colo", note=N_("declare the machine's scratch roots in [offboard] scratch_roots"))
_UNKNOWN = Preset(
    "no provider", note=N_("no provider recorded: only [offboard] scratch_roots apply")
)

# In the login user's home: shell and tool histories, then caches, then credentials the
# lab put there (tokens for model hubs, object stores, git, experiment trackers).
# Shells: bash, zsh (and prezto's .zhistory), ksh and busybox/Alpine ash (.sh_history,
# .ash_history), fish; then REPLs and database clients. Only names these tools write by
# default (macOS Terminal's .bash_sessions and .zsh_sessions are not on a Linux node).
HISTORIES: tuple[str, ...] = (
    ".bash_history",
    ".zsh_history",
    ".zhistory",
    ".sh_history",
    ".ash_history",
    ".local/share/fish/fish_history",
    ".node_repl_history",
    ".rediscli_history",
    ".python_history",
    ".lesshst",
    ".viminfo",
    ".wget-hsts",
    ".mysql_history",
    ".psql_history",
    ".sqlite_history",
    ".ipython/profile_default/history.sqlite",
)
CACHES: tuple[str, ...] = (
    ".cache/pip",
    ".cache/huggingface",
    ".cache/torch",
    ".cache/wandb",
    ".triton/cache",
    ".nv/ComputeCache",
    ".local/share/jupyter/runtime",
)
CREDENTIALS: tuple[str, ...] = (
    ".git-credentials",
    ".netrc",
    ".huggingface/token",
    ".kaggle/kaggle.json",
    ".aws/credentials",
    ".ossutilconfig",
    ".docker/config.json",
    ".config/gcloud",
    # Private keys the lab put in the login's own ~/.ssh (to pull from git, say): the
    # directory itself is kept, its authorized_keys is how zuka logs in until the revoke.
    ".ssh/id_ed25519",
    ".ssh/id_ecdsa",
    ".ssh/id_rsa",
    ".ssh/id_dsa",
)
HOME_ENTRIES: tuple[str, ...] = HISTORIES + CACHES + CREDENTIALS

# Where the lab's key is authorised, relative to the login user's home (sshd's default).
KEYS_FILE = ".ssh/authorized_keys"


def preset_for(provider: Provider | None) -> Preset:
    """The preset for a provider: its platform's by name, else its kind's."""
    if provider is None:
        return _UNKNOWN
    name = provider.name.lower()
    if provider.kind is ProviderKind.PLATFORM:
        for words, preset in _PLATFORMS:
            if any(w in name for w in words):
                return preset
        return _PLATFORM
    if provider.kind is ProviderKind.CLOUD:
        return _CLOUD
    return _COLO


def shared_note(path: str) -> str:
    """What the presets say of a shared path that outlives the instance ("" if none)."""
    for _, preset in _PLATFORMS:
        if path in preset.shared:
            return preset.note
    return ""
