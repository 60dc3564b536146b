"""The user's CLI templates beside the config (`cloud/*.toml`) are hostile input: a FIFO,
a link, a huge or deeply nested file, a program that is a relative path or shell words.
Each is refused with a message naming the file, never a hang or a traceback."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
from pathlib import Path

import pytest

from leases.core.errors import InputError
from leases.offboard.cloud.access import CloudError
from leases.offboard.cloud.cmd import load_templates, run_command

GOOD = (
    'name = "volc"\nprogram = "{program}"\nproviders = ["volc"]\n'
    '[whoami]\nargv = ["sts", "GetCallerIdentity"]\naccount = "AccountId"\n'
    '[snapshot]\ndelete = ["ecs", "DeleteSnapshot", "--SnapshotId", "{{id}}"]\n'
    'verify = ["ecs", "DescribeSnapshots", "--SnapshotIds", "{{id}}"]\n'
)


def refused(folder: Path) -> InputError:
    """load_templates(folder), in a thread that must end within 10 s (a FIFO used to
    block the reader for good): its InputError."""
    said: list[BaseException | None] = []

    def load() -> None:
        try:
            load_templates(folder)
            said.append(None)
        except BaseException as exc:  # what the caller would see, whatever it is
            said.append(exc)

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    worker.join(10)
    assert said, "loading the templates did not end"
    assert isinstance(said[0], InputError), repr(said[0])
    return said[0]


def test_a_fifo_named_like_a_template_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "aliyun.toml"
    os.mkfifo(fifo)
    try:
        exc = refused(tmp_path)
        assert str(fifo) in exc.field and "not a regular file" in exc.reason
    finally:
        # A reader still blocked on it (the old code) is let go.
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


def test_a_link_is_not_followed(tmp_path: Path) -> None:
    real = tmp_path / "real.txt"
    real.write_text(GOOD.format(program="ve"))
    (tmp_path / "volc.toml").symlink_to(real)
    exc = refused(tmp_path)
    assert "volc.toml" in exc.field and "cannot open" in exc.reason


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("a = " + "[" * 20000 + "]" * 20000 + "\n", "nested too deeply"),
        ("a = " + "{b = " * 5000 + "1" + "}" * 5000 + "\n", "nested too deeply"),
        ('name = "x"\n[whoami\n', "not valid TOML"),
        ("x" * (70 * 1024), "at most"),
    ],
    ids=["arrays", "tables", "broken", "huge"],
)
def test_a_bad_file_is_refused_naming_it(tmp_path: Path, text: str, why: str) -> None:
    (tmp_path / "deep.toml").write_text(text)
    exc = refused(tmp_path)
    assert "deep.toml" in exc.field and why in exc.reason


def test_bytes_that_are_not_text_are_refused(tmp_path: Path) -> None:
    (tmp_path / "bin.toml").write_bytes(b'name = "\xff\xfe"\n')
    assert "not UTF-8" in refused(tmp_path).reason


@pytest.mark.parametrize(
    "program",
    [
        "./aliyun",
        "bin/aliyun",
        "aliyun; rm -rf /",
        "sh -c id",
        "$(id)",
        "/tmp/aliyun",
        "/home/lab/bin/aliyun",
        "/usr/bin/../../tmp/aliyun",
        "/usr/bin//aliyun",
        "-aliyun",
    ],
)
def test_a_program_must_be_a_name_on_path_or_under_a_trusted_folder(
    tmp_path: Path, program: str
) -> None:
    (tmp_path / "volc.toml").write_text(GOOD.format(program=program))
    exc = refused(tmp_path)
    assert exc.field.endswith("volc.toml: program")


@pytest.mark.parametrize("program", ["ve", "aliyun-cli", "/usr/local/bin/ve", "/opt/ve/bin/ve"])
def test_names_and_trusted_paths_are_taken(tmp_path: Path, program: str) -> None:
    (tmp_path / "volc.toml").write_text(GOOD.format(program=program))
    assert load_templates(tmp_path)["volc"].program == program


def test_a_bare_name_is_never_found_through_a_relative_path_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PATH=bin (or "" or "."): a file of the working directory would run as the cloud's
    CLI. Only absolute PATH entries are searched."""
    (tmp_path / "bin").mkdir()
    exe = tmp_path / "bin" / "aliyun"
    exe.write_text(f"#!{sys.executable}\nprint('ran')\n")
    exe.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CloudError, match="not found on PATH"):
        asyncio.run(run_command(["aliyun"], {"PATH": "bin:.:"}, 10))
    ran = asyncio.run(run_command(["aliyun"], {"PATH": str(tmp_path / "bin")}, 10))
    assert ran.stdout.strip() == "ran"
