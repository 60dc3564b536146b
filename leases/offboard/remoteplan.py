"""The node's offboarding steps over SSH (plan_remote), from the ledger's facts and the
provider's preset; their driver is leases.offboard.remote.

In order: GPU processes still running (the checklist waits for the user's consent when
any are), each declared path's file-system facts (with where shred cannot guarantee
erasure), shred of the declared scratch paths file by file, the declared histories, caches
and credentials in the login user's home, the lab's key out of every keys file sshd reads
and zuka's run directory off the node (the last SSH step), and a fresh login with that key
refused (the proof).
"""

from __future__ import annotations

from leases.core.i18n import N_
from leases.core.models import ResourceKind
from leases.core.textsafe import visible
from leases.offboard import authkeys, paths, presets
from leases.offboard.steps import Phase, PlanInput, Step, params
from leases.telemetry import nvsmi


def plan_remote(facts: PlanInput) -> list[Step]:
    """The SSH steps for one node, from the ledger's facts and the presets. Raises
    InputError naming a declared path that may not be shredded (nothing is planned)."""
    node = facts.node
    if node.local:
        return []  # read through NVML here: there is no node to log in to
    preset = presets.preset_for(facts.provider)
    roots = scratch_roots(facts)
    declared: dict[str, int | None] = {p: None for p in preset.paths}
    for res in facts.resources:
        if res.kind is ResourceKind.SCRATCH_PATH:
            paths.check_scratch_path(
                res.native_id, roots, field=f"scratch_path resource {visible(res.native_id, 80)}"
            )
            declared[res.native_id] = res.id
    for path in declared:
        paths.check_scratch_path(path, roots)
    shred_paths = sorted(declared)
    looked_at = sorted({*shred_paths, *preset.shared})

    steps = [
        Step(
            key="gpu-processes",
            phase=Phase.PROCESSES,
            driver="ssh",
            action="gpu-processes",
            target=node.name,
            destructive=False,
            describe=N_("{command}, then each pid's owner (ps) and command line (/proc)").format(
                command=nvsmi.APPS_COMMAND
            ),
        )
    ]
    for path in looked_at:
        shared = path in preset.shared
        steps.append(
            Step(
                key=f"facts:{path}",
                phase=Phase.FACTS,
                driver="ssh",
                action="fs-facts",
                target=path,
                destructive=False,
                describe=(
                    N_(
                        "findmnt -T {path}; lsblk -s (file system, mount options, disk);"
                        " outlives the instance: {note}"
                    )
                    if shared
                    else N_("findmnt -T {path}; lsblk -s (file system, mount options, disk)")
                ).format(path=paths.quoted(path), note=preset.note),
                params=params(path=path, shared="yes" if shared else "no"),
            )
        )
    for path in shred_paths:
        outer = next((o for o in shred_paths if o != path and paths.under(path, o)), None)
        # A path inside another is a declared resource (preset paths do not nest): its
        # step stays, as the one that marks that resource deleted once read back.
        describe = (
            N_("shred -n 1 -z and unlink each regular file in {path} {rules}")
            if outer is None
            else N_(
                "shred -n 1 -z and unlink each regular file in {path} {rules} (inside {outer},"
                " shredded by that step first: this one reads back what is left and marks the"
                " ledger's resource deleted)"
            )
        ).format(path=paths.quoted(path), rules=_WALK_RULES, outer=outer)
        steps.append(
            Step(
                key=f"shred:{path}",
                phase=Phase.SHRED,
                driver="ssh",
                action="shred",
                target=path,
                destructive=True,
                describe=describe,
                params=params(
                    path=path,
                    root=paths.root_of(path, roots),
                    inside="\n".join(x for x in shred_paths if x != path and paths.under(x, path)),
                ),
                resource_id=declared[path],
            )
        )
    for rel in presets.HOME_ENTRIES:
        steps.append(
            Step(
                key=f"clear:~/{rel}",
                phase=Phase.CLEAR,
                driver="ssh",
                action="clear",
                target=f"~/{rel}",
                destructive=True,
                describe=N_(
                    "shred -n 1 -z and unlink ~/{path} (each regular file in it) {rules}; on"
                    " network storage, asks first"
                ).format(path=paths.check_home_entry(rel), rules=_WALK_RULES),
                params=params(home=rel),
            )
        )
    steps += _key_steps(facts)
    return steps


# What the walker (nodewalk.py) promises, in the words of each step that runs it: the plan
# a person confirms says what runs, not a find command that would not.
_WALK_RULES = N_(
    "by zuka's walker (python3 on the node): no link followed, a file written only if it is "
    "the file listed, hard-linked files only unlinked, mounts inside refused, the login's own "
    "~/.ssh kept; without python3, find -P -xdev -execdir shred, only where no other user "
    "may rename"
)


def scratch_roots(facts: PlanInput) -> tuple[str, ...]:
    """Where declared paths may lie on this node: its provider's preset and the config's
    [offboard] scratch_roots (what RemoteDriver checks every path against again)."""
    preset = presets.preset_for(facts.provider)
    return tuple(dict.fromkeys((*preset.roots, *facts.config.offboard.scratch_roots)))


def _key_steps(facts: PlanInput) -> list[Step]:
    """Revoke, then prove, for each ssh_key resource (by fingerprint), else for the key
    the node's login names (key_path); without either, a revoke step that says so."""
    key_path = facts.node.ssh.key_path or ""
    keys: list[tuple[str, str, int | None]] = []  # (fingerprint, key_path, resource id)
    for res in facts.resources:
        if res.kind is ResourceKind.SSH_KEY:
            fp = authkeys.check_fingerprint(
                res.native_id, f"ssh_key resource {visible(res.native_id, 80)}"
            )
            keys.append((fp, key_path, res.id))
    if not keys:
        keys.append(("", key_path, None))
    keys_file = presets.KEYS_FILE
    steps = []
    for fp, path, res_id in keys:
        # A fingerprint in full is a random-looking word: in a step's key it would reach the
        # ledger's notes (the resource marked verified), which refuse such words as secrets.
        name = f"{fp[:15]}#{res_id}" if fp else path or "unknown"
        steps.append(
            Step(
                key=f"revoke-key:{name}",
                phase=Phase.REVOKE,
                driver="ssh",
                action="revoke-key",
                target=fp or name,
                destructive=True,
                describe=N_(
                    "remove the lines holding {key} from every keys file sshd reads"
                    " (~/{keys_file}, authorized_keys2, sshd's AuthorizedKeysFile), each"
                    " rewritten by a file beside it and mv, links refused; first removes"
                    " ~/.zuka-offboard (zuka's run files)"
                ).format(key=_holder(fp, path), keys_file=keys_file),
                params=params(fingerprint=fp, key_path=path, keys_file=keys_file),
                resource_id=res_id,
            )
        )
        steps.append(
            Step(
                key=f"prove-refused:{name}",
                phase=Phase.PROVE,
                driver="ssh",
                action="prove-refused",
                target=fp or name,
                destructive=False,
                describe=_refused(name),
                params=params(fingerprint=fp, key_path=path),
            )
        )
    return steps


def _refused(name: str) -> str:
    """What a login check proves, as stored (English); a key none recorded ("unknown") is
    a message of its own, so that Chinese says it in words and not as "unknown"."""
    if name == "unknown":
        return N_("a fresh login offering only unknown: must be refused")
    return N_("a fresh login offering only {key}: must be refused").format(key=name)


def _holder(fingerprint: str, key_path: str) -> str:
    """The key a revoke step removes, as a person reads it in the plan."""
    if fingerprint:
        return N_("the public key {fingerprint}").format(fingerprint=fingerprint)
    if key_path:
        return N_("the public key of {path} (its fingerprint is in the evidence)").format(
            path=key_path
        )
    return N_("the lab's key: none recorded (the step says so when it runs)")
