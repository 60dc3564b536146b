"""leases.offboard.paths, presets, erasure and authkeys: which paths may be shredded, how
they are quoted, what a node's file-system facts mean for shred, and finding the lab's
key in a hostile authorized_keys text. Pure: no node, no files (but real `sh` for quoting).
"""

from __future__ import annotations

import base64
import shlex
import subprocess

import asyncssh
import pytest
from hypothesis import given
from hypothesis import strategies as st

from leases.core.errors import InputError
from leases.core.models import Provider, ProviderKind
from leases.offboard import authkeys, erasure, nodescripts, paths, presets

ROOTS = ("/root/autodl-tmp", "/data/scratch")


# -- paths ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/root/autodl-tmp",
        "/root/autodl-tmp/ckpt",
        "/data/scratch/run-1/epoch_3.pt",
        "/data/scratch/a:b@c+d=e,f",
    ],
)
def test_paths_under_a_root_pass(path: str) -> None:
    assert paths.check_scratch_path(path, ROOTS) == path


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("/", "whole file system"),
        ("root/autodl-tmp/x", "absolute"),
        ("/root/autodl-tmp/../../etc", "'..'"),
        ("/root/autodl-tmp/./x", "normalised"),
        ("/root/autodl-tmp//x", "'//'"),
        ("/root/autodl-tmp/x/", "trailing"),
        ("/root/autodl-tmpx", "outside the declared roots"),
        ("/root", "system directory"),
        ("/etc/passwd", "system directory"),
        ("/root/autodl-tmp/.ssh", ".ssh"),
        ("/root/autodl-tmp/x; rm -rf /", "shell characters"),
        ("/root/autodl-tmp/$(reboot)", "shell characters"),
        ("/root/autodl-tmp/a\nb", "shell characters"),
        ("/root/autodl-tmp/it's", "shell characters"),
        ('/root/autodl-tmp/"q"', "shell characters"),
        ("/root/autodl-tmp/*", "globs"),
        ("/root/autodl-tmp/x\x1b[2J", "shell characters"),
    ],
)
def test_bad_paths_are_refused_with_the_field_and_why(path: str, words: str) -> None:
    with pytest.raises(InputError) as caught:
        paths.check_scratch_path(path, ROOTS)
    assert caught.value.field == "scratch_path"
    assert words in caught.value.reason
    assert "\x1b" not in str(caught.value.value) and "\n" not in str(caught.value.value)


def test_no_roots_means_nothing_may_be_shredded() -> None:
    with pytest.raises(InputError, match="no scratch roots"):
        paths.check_scratch_path("/data/x", ())


@pytest.mark.parametrize("root", ["/", "/etc", "/usr/local", "relative", "/a/../b"])
def test_bad_roots_are_refused(root: str) -> None:
    with pytest.raises(InputError):
        paths.check_scratch_path("/data/scratch/x", (root,))


# Text made of what attacks are built from: separators, dots, shell and control characters.
_hostile = st.text(
    alphabet=st.sampled_from(list("/.a-_ ;|&$()`'\"\\\n\r\t*?[]~{}<>!#\x00\x1b\u202e"))
    | st.characters(),
    max_size=40,
)


@given(suffix=_hostile, root=st.sampled_from(ROOTS))
def test_whatever_passes_is_under_a_root_and_one_plain_word(suffix: str, root: str) -> None:
    candidate = root + suffix
    try:
        checked = paths.check_scratch_path(candidate, ROOTS)
    except InputError:
        return
    parts = checked.split("/")
    assert checked.startswith("/") and ".." not in parts and "." not in parts
    assert any(paths.under(checked, r) for r in ROOTS)
    assert all(c.isalnum() or c in "/._@+=,:-" for c in checked)
    assert shlex.split(paths.quoted(checked)) == [checked]


@given(escape=st.sampled_from(["/..", "/../..", "/x/../..", "/../../etc/passwd"]), tail=_hostile)
def test_traversal_is_always_refused(escape: str, tail: str) -> None:
    with pytest.raises(InputError):
        paths.check_scratch_path(ROOTS[0] + escape + ("/" + tail if tail else ""), ROOTS)


@given(word=st.sampled_from(["; rm -rf /", "$(rm -rf /)", "`id`", "\nrm -rf /", "' || '", '"']))
def test_injection_is_refused_in_scratch_and_home_paths(word: str) -> None:
    with pytest.raises(InputError):
        paths.check_scratch_path(f"{ROOTS[0]}/x{word}", ROOTS)
    with pytest.raises(InputError):
        paths.check_home_entry(f".cache/x{word}")


@pytest.mark.parametrize("rel", ["../etc", "/etc/passwd", ".ssh/authorized_keys", "a//b", "~x"])
def test_bad_home_entries_are_refused(rel: str) -> None:
    with pytest.raises(InputError):
        paths.check_home_entry(rel)


def test_a_checked_path_reaches_sh_as_exactly_itself() -> None:
    path = "/data/scratch/a:b@c+d=e,f-g_h.i"
    out = subprocess.run(
        ["sh", "-c", f"printf %s {paths.quoted(path)}"], capture_output=True, text=True, check=True
    )
    assert out.stdout == path


def test_every_preset_path_and_root_passes_the_checks() -> None:
    for kind in ProviderKind:
        for name in ["AutoDL", "GpuShare 恒源云", "Matpool 矩池云", "Featurize", "Other"]:
            preset = presets.preset_for(Provider(kind=kind, name=name))
            for root in preset.roots:
                paths.check_root(root)
            for path in preset.paths:
                paths.check_scratch_path(path, preset.roots)
            assert set(preset.shared) <= set(preset.roots)
    for rel in presets.HOME_ENTRIES:
        paths.check_home_entry(rel)
    paths.check_home_entry(presets.KEYS_FILE, keys=True)
    with pytest.raises(InputError):
        paths.check_home_entry(presets.KEYS_FILE)


def test_presets_by_platform_and_kind() -> None:
    autodl = presets.preset_for(Provider(kind=ProviderKind.PLATFORM, name="AutoDL"))
    assert autodl.paths == ("/root/autodl-tmp",) and autodl.shared == ("/root/autodl-fs",)
    assert presets.preset_for(Provider(kind=ProviderKind.PLATFORM, name="恒源云")).name == (
        "GpuShare"
    )
    assert presets.preset_for(Provider(kind=ProviderKind.CLOUD, name="Aliyun")).paths == ()
    assert presets.preset_for(Provider(kind=ProviderKind.COLO, name="IDC")).roots == ()
    assert presets.preset_for(None).roots == ()


# -- erasure ----------------------------------------------------------------------


def _facts(fstype: str, options: str = "rw", source: str = "/dev/sda1", rota: str = "1") -> str:
    return (
        f"path /data/scratch\nmount /data {source} {fstype} {options}\n"
        f"disk part {rota} \ndisk disk {rota} ST4000NM000A\ninside /data/scratch/nfs\n"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (_facts("ext4", "rw,relatime,data=ordered"), []),
        (_facts("ext4", "rw,data=journal"), ["data=journal"]),
        (_facts("xfs"), ["journaling"]),
        (_facts("btrfs", "rw,compress=zstd"), ["copy-on-write", "compressed"]),
        (_facts("zfs"), ["copy-on-write"]),
        (_facts("overlay", source="overlay"), ["lower-layer"]),
        (_facts("nfs4", source="10.0.0.2:/export"), ["network"]),
        (_facts("fuse.juicefs", source="JuiceFS:lab"), ["network"]),
        (_facts("ext4", rota="0"), ["solid-state"]),
        (_facts("ext4", source="/dev/vdb1"), ["virtual or cloud"]),
        (_facts("ext4", source="/dev/md0"), ["RAID"]),
        (_facts("weirdfs"), ["not a file system zuka knows"]),
        ("", ["did not say"]),
    ],
)
def test_caveats_follow_the_shred_manual(text: str, expected: list[str]) -> None:
    found = erasure.parse_facts("/data/scratch", text.replace("/data/scratch/nfs", "/elsewhere"))
    said = erasure.caveats(found)
    assert len(said) == len(expected), said
    for line, words in zip(said, expected, strict=True):
        assert words in line


def test_facts_name_mounts_inside_and_the_disk_model() -> None:
    found = erasure.parse_facts("/data/scratch", _facts("ext4"))
    assert found.inside == ("/data/scratch/nfs",)
    assert found.model == "ST4000NM000A" and found.rotational == "1"
    assert "not descended" in found.as_facts()["caveats"]


def test_hostile_facts_are_bounded_and_visible() -> None:
    text = (
        "mount /data\\x20x /dev/sda1 ext4\x1b]0;pwned\x07 rw,"
        + "A" * 100_000
        + "\ndisk disk 7 x\ndisk disk 0 \x1b[31mRED\n"
        + "inside /data/scratch/\x1b[2J\n" * 20_000
    )
    found = erasure.parse_facts("/data/scratch", text)
    assert found.mount == "/data x"
    assert "\x1b" not in found.fstype and "\x07" not in found.fstype
    assert len(found.options) <= 512
    assert found.rotational == "0" and "\x1b" not in found.model
    assert all("\x1b" not in m for m in found.inside)
    assert len(found.inside) < 10_000


# -- authorized_keys ----------------------------------------------------------------


def _pub(key: asyncssh.SSHKey, comment: str = "") -> str:
    return key.export_public_key().decode().strip() + (f" {comment}" if comment else "")


def test_find_key_by_fingerprint_among_options_and_decoys() -> None:
    ours, theirs = (asyncssh.generate_private_key("ssh-ed25519") for _ in range(2))
    fp = ours.get_fingerprint("sha256")
    blob = base64.b64encode(ours.public_data).decode()
    text = "\n".join(
        [
            "# a comment naming " + _pub(ours),
            _pub(theirs, "platform"),
            f'command="echo {_pub(ours)}",no-pty ' + _pub(theirs),  # ours only in an option
            'from="10.0.0.0/8",command="a \\" b" ' + _pub(ours, "lab"),
            _pub(ours),
            "garbage \x1b[2J line",
            "ssh-ed25519 not-base64!",
        ]
    )
    found = authkeys.find_key(text, fp)
    assert found.blobs == (blob,)
    assert found.lines == 2 and found.keys == 4


def test_fingerprints_and_blobs_are_checked() -> None:
    key = asyncssh.generate_private_key("ssh-ed25519")
    assert authkeys.check_fingerprint(key.get_fingerprint("sha256"))
    for bad in ["SHA256:x", "MD5:aa", "SHA256:" + "A" * 42 + ";", ""]:
        with pytest.raises(InputError):
            authkeys.check_fingerprint(bad)
    for bad_blob in ["AAAA; rm -rf /", "$(id)AAAAAAAAAAAAAAAA", "A" * 17]:
        with pytest.raises(InputError):
            authkeys.check_blob(bad_blob)


def test_the_revoke_script_quotes_each_blob() -> None:
    key = asyncssh.generate_private_key("ssh-ed25519")
    blob = base64.b64encode(key.public_data).decode()
    script = nodescripts.revoke_script(presets.KEYS_FILE, [blob])
    assert f"-e {blob} --" in script or f"-e '{blob}' --" in script
    assert "set -- .ssh/authorized_keys\n" in script and '"$HOME/$1"' in script


def test_find_key_reads_lines_and_options_as_sshd_does() -> None:
    """sshd (auth2-pubkeyfile.c, sshkey_advance_past_options) ends a line only at \\n and
    takes only \\" as an escape inside options: a line it reads as our key is found."""
    ours, theirs = (asyncssh.generate_private_key("ssh-ed25519") for _ in range(2))
    fp = ours.get_fingerprint("sha256")
    blob = base64.b64encode(ours.public_data).decode()
    for line in [
        # A form feed inside a quoted option: one line to sshd, two to str.splitlines.
        f'command="a\x0cb" {_pub(ours)}',
        # \\ is no escape to sshd: the quote after it is escaped, the option goes on.
        f'command="x\\\\" {_pub(theirs)}" {_pub(ours)}',
        f'command="a\x85b\u2028c" {_pub(ours)}\r',
    ]:
        found = authkeys.find_key(line + "\n" + _pub(theirs), fp)
        assert found.blobs == (blob,), repr(line)


@pytest.mark.parametrize(
    ("rel", "ok"),
    [
        (".ssh/id_ed25519", True),
        (".ssh/id_rsa", True),
        (".ssh/id_ecdsa_sk", True),
        (".ssh/authorized_keys", False),  # the lab's key: the revoke step's, never cleared
        (".ssh", False),
        (".ssh/config", False),
        (".ssh/id_ed25519.pub", False),
        (".ssh/sub/id_rsa", False),
    ],
)
def test_only_private_key_files_are_cleared_under_the_logins_ssh(rel: str, ok: bool) -> None:
    from leases.offboard.paths import check_home_entry

    if ok:
        assert check_home_entry(rel) == rel
    else:
        with pytest.raises(InputError, match=r"\.ssh directory is not a cache"):
            check_home_entry(rel)
