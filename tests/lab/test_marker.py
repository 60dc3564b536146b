"""The marker that makes a folder a lab's, read as untrusted: only root's, a regular file,
valid TOML with known keys and usable names; no marker (or no folder) is a one-user ledger."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from leases.lab.layout import Lab, LabError, find_lab

# A marker counts only when root's: the files these tests write must be.
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a lab's marker must be root's")


def _marker(folder: Path, text: str, mode: int = 0o644) -> Path:
    marker = folder / "zuka-lab.toml"
    marker.write_text(text)
    marker.chmod(mode)
    return marker


def test_no_marker_or_no_folder_is_a_one_user_ledger(tmp_path: Path) -> None:
    assert find_lab(tmp_path / "ledger.db") is None
    afile = tmp_path / "f"
    afile.write_text("")
    assert find_lab(afile / "ledger.db") is None
    assert find_lab(tmp_path / ("x" * 300) / "ledger.db") is None


def test_a_good_marker_names_the_lab(tmp_path: Path) -> None:
    _marker(tmp_path, 'viewers = "lab"\nservice_user = "zsvc"\n')
    assert find_lab(tmp_path / "ledger.db") == Lab(tmp_path, viewers="lab", service_user="zsvc")


@pytest.mark.parametrize(
    ("text", "mode", "words"),
    [
        ('viewers = "lab"\n', 0o664, "is not root's alone"),
        ('viewers = "lab"\n', 0o646, "is not root's alone"),
        ("viewers = [\n", 0o644, "is not valid TOML"),
        ('viewers = "lab"\nadmins = "x"\n', 0o644, "unknown keys 'admins'"),
        ('viewers = "x; rm -rf /"\n', 0o644, "is not a usable Unix name"),
        ("viewers = 7\n", 0o644, "must be a name in quotes"),
        ("# " + "x" * 5000 + "\n", 0o644, "is larger than a lab's marker"),
        ('viewers = "\\u001b[2J"\n', 0o644, "is not a usable Unix name"),
    ],
)
def test_a_bad_marker_is_refused_in_words(tmp_path: Path, text: str, mode: int, words: str) -> None:
    _marker(tmp_path, text, mode)
    with pytest.raises(LabError, match=words):
        find_lab(tmp_path / "ledger.db")


def test_a_linked_marker_is_not_followed(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    _marker(real, 'viewers = "lab"\n')
    (tmp_path / "zuka-lab.toml").symlink_to(real / "zuka-lab.toml")
    with pytest.raises(LabError, match="cannot be read"):
        find_lab(tmp_path / "ledger.db")


def test_a_users_config_called_lab_toml_beside_the_ledger_is_no_marker(tmp_path: Path) -> None:
    """The README's own example names a config `lab.toml`: beside a ledger (root's, as
    every file a root user writes), it must not make the folder a lab's."""
    (tmp_path / "lab.toml").write_text('[billing]\ncurrency = "USD"\n')
    (tmp_path / "lab.toml").chmod(0o600)
    assert find_lab(tmp_path / "ledger.db") is None
