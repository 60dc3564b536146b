"""What a node says about the file system under a path, and where shred cannot guarantee
erasure there (after the GNU shred manual's list of file systems and devices it cannot
overwrite in place). Pure: the facts come in as text a node printed (hostile: bounded,
never trusted to be well formed), the caveats go out as lines for the evidence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from leases.core.i18n import N_
from leases.core.textsafe import visible

# Copy-on-write, log-structured or compressing: an overwrite lands in new blocks.
_COW = frozenset({"btrfs", "zfs", "bcachefs", "nilfs2", "f2fs", "apfs", "reiser4"})
# Journaling file systems the manual names as limiting shred (ext3/ext4: only with
# data=journal; XFS, JFS, ReiserFS in every mode).
_JOURNALED = frozenset({"xfs", "jfs", "reiserfs"})
_EXT = frozenset({"ext3", "ext4"})
_IN_MEMORY = frozenset({"tmpfs", "ramfs"})
_NETWORK = frozenset(
    {
        "nfs",
        "nfs4",
        "cifs",
        "smb3",
        "smbfs",
        "ceph",
        "glusterfs",
        "lustre",
        "9p",
        "beegfs",
        "gpfs",
        "virtiofs",
        "afs",
    }
)
_KNOWN = _COW | _JOURNALED | _EXT | _IN_MEMORY | _NETWORK | {"ext2", "overlay", "vfat", "exfat"}
# Device names and models of virtual and cloud block devices.
_VIRTUAL_SOURCE_RE = re.compile(r"/dev/(x?vd[a-z]+\d*|nbd\d+(p\d+)?|rbd\d+(p\d+)?)")
_CLOUD_MODEL_RE = re.compile(
    r"elastic block store|persistentdisk|qemu|virtual|vmware|cloud|ebs|blockvolume", re.I
)
_FIELD_MAX = 512  # a mount's fields are short; longer means garbage, cut for the evidence

# The lines the facts script prints, one fact each (see nodescripts.facts_script).
MOUNT = "mount"
DISK = "disk"
INSIDE = "inside"


@dataclass(frozen=True)
class FsFacts:
    path: str  # the path looked at (the declared one, or its nearest existing parent)
    mount: str = ""  # where its file system is mounted
    source: str = ""
    fstype: str = ""
    options: str = ""
    rotational: str = ""  # "1", "0" or "" when the node did not say
    model: str = ""
    inside: tuple[str, ...] = ()  # other file systems mounted below the path

    def as_facts(self) -> dict[str, str]:
        return {
            "path": self.path,
            "mount": self.mount,
            "source": self.source,
            "fstype": self.fstype,
            "options": self.options,
            "rotational": self.rotational,
            "model": self.model,
            "mounts_inside": " ".join(self.inside),
            "caveats": " | ".join(caveats(self)),
        }


def _unescape(field: str) -> str:
    r"""findmnt -r and lsblk -r write a space as \x20 (and other bytes likewise)."""
    text = re.sub(r"\\x([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), field)
    return visible(text, _FIELD_MAX)


def parse_facts(path: str, text: str) -> FsFacts:
    """The facts script's output: `path P`, `mount TARGET SOURCE FSTYPE OPTIONS`,
    `disk TYPE ROTA MODEL` (lsblk, partition then disk), `inside TARGET` lines."""
    looked_at = path
    mount = source = fstype = options = rota = model = ""
    inside: list[str] = []
    for line in text.splitlines()[:10_000]:
        word, _, rest = line.partition(" ")
        fields = rest.split(" ")
        if word == "path" and rest:
            looked_at = visible(rest, _FIELD_MAX)
        elif word == MOUNT and len(fields) >= 4 and not mount:
            mount, source, fstype, options = (_unescape(f) for f in fields[:4])
        elif word == DISK and len(fields) >= 2:
            kind, rota_word = fields[0], fields[1]
            if rota_word in ("0", "1") and (kind == "disk" or not rota):
                rota = rota_word
                model = _unescape(" ".join(fields[2:])).strip() if kind == "disk" else model
        elif word == INSIDE and rest:
            target = _unescape(rest)
            if target != path and target.startswith(path.rstrip("/") + "/"):
                inside.append(target)
    return FsFacts(looked_at, mount, source, fstype.lower(), options, rota, model, tuple(inside))


def caveats(facts: FsFacts) -> list[str]:
    """Why shred may leave the data readable here, one line each; [] when none is known."""
    out: list[str] = []
    fs = facts.fstype
    opts = facts.options.split(",")
    if not fs:
        out.append(N_("the node did not say which file system this is: erasure cannot be judged"))
    elif fs in _COW:
        out.append(
            N_("{fs} is copy-on-write or log-structured: overwrites go to new blocks").format(fs=fs)
        )
    elif fs in _JOURNALED:
        out.append(
            N_("{fs} is a journaling file system the shred manual names as not safe").format(fs=fs)
        )
    elif fs in _EXT and "data=journal" in opts:
        out.append(
            N_("{fs} with data=journal: file data also passes through the journal").format(fs=fs)
        )
    elif fs == "overlay":
        out.append(N_("overlay: a file copied up from an image layer keeps its lower-layer copy"))
    elif fs in _NETWORK or fs.startswith("fuse"):
        out.append(
            N_("{fs} is network or user-space storage: its server may cache or snapshot").format(
                fs=fs
            )
        )
    elif fs in _IN_MEMORY:
        out.append(
            N_("{fs} lives in memory: pages swapped out may remain on the swap device").format(
                fs=fs
            )
        )
    elif fs not in _KNOWN:
        out.append(
            N_("{fs} is not a file system zuka knows: erasure cannot be judged").format(fs=fs)
        )
    if any(o.startswith("compress") for o in opts):
        out.append(N_("compressed: shred cannot overwrite the stored blocks in place"))
    if facts.rotational == "0":
        out.append(
            N_("solid-state storage: wear levelling keeps old cells; shred cannot reach them")
        )
    if _VIRTUAL_SOURCE_RE.fullmatch(facts.source.split("[", 1)[0]) or _CLOUD_MODEL_RE.search(
        facts.model
    ):
        out.append(
            N_(
                "a virtual or cloud disk: the provider's storage may keep copies; deleting the "
                "disk and its snapshots is the real control"
            )
        )
    if facts.source.startswith("/dev/md"):
        out.append(N_("software RAID: redundant copies on other members"))
    if facts.inside:
        out.append(
            N_("other file systems mounted inside are not descended: {mounts}").format(
                mounts=" ".join(facts.inside)
            )
        )
    return out
