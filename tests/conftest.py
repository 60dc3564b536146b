"""Shared fixtures: a ledger file in tmp_path and the CLI run in-process."""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.configuration import set_hypothesis_home_dir

from tests.support.cli import Cli, CliResult
from tests.support.sshfixtures import FakeNode, TestKeys
from tui.cli.main import main

# Off for the whole session too, before any fixture runs: a module- or session-scoped
# fixture (a lab made by `zuka lab init` as root) runs before the function-scoped one below,
# and `lab init` writes the system config where there is none: the host's /etc/zuka.
os.environ["ZUKA_SYSTEM_CONFIG"] = ""
# English unless a test asks for another language: a developer's zh_CN locale (or config)
# would otherwise change every message the suite reads. Tests of the choice clear it.
os.environ["ZUKA_LANG"] = "en"


@pytest.fixture(autouse=True)
def _no_system_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads the host's own /etc/zuka (a developer's lab would leak into the
    suite): the system config is off unless a test names one ($ZUKA_SYSTEM_CONFIG)."""
    monkeypatch.setenv("ZUKA_SYSTEM_CONFIG", "")


@pytest.fixture(autouse=True)
def _english_after() -> Iterator[None]:
    """Each test starts, and leaves the process, speaking English (the language is the
    process's, and main() or a test may change it)."""
    from leases.core.i18n import EN, set_language

    set_language(EN)
    yield
    set_language(EN)


@pytest.fixture(scope="module")
def keys() -> TestKeys:
    """Client and host keys for the in-process SSH nodes, one set per test module."""
    return TestKeys.generate()


@pytest.fixture
async def node(keys: TestKeys) -> AsyncIterator[FakeNode]:
    """One in-process SSH node that answers like a GPU node."""
    async with FakeNode(keys) as fake:
        yield fake


@pytest.fixture
def ledger_path(tmp_path: Path) -> Path:
    return tmp_path / "ledger.db"


@pytest.fixture
def cli(ledger_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    """Run `zuka ARGS... --ledger ledger_path` in this process."""

    def run(*args: str, ledger: Path | None = None) -> CliResult:
        out = io.StringIO()
        capsys.readouterr()
        try:
            code = main([*args, "--ledger", str(ledger or ledger_path)], out=out)
        except SystemExit as exc:  # argparse errors
            code = int(exc.code or 0)
        captured = capsys.readouterr()
        return CliResult(code, out.getvalue() + captured.out, captured.err)

    return run


@pytest.fixture
def z(cli: Cli) -> Cli:
    """`cli` on a ledger holding provider P (a rental platform) and node n (8 GPUs at P):
    what the money tests type their leases on."""
    assert cli("provider", "add", "P", "--kind", "platform").code == 0
    added = cli("node", "add", "n", "--ssh", "root@10.0.0.9", "--gpus", "8", "--provider", "P")
    assert added.code == 0, added.err
    return cli


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    """A moto server (S3, EC2, STS) for the test module that asks for it."""
    from tests.support.cloudfixtures import start_moto

    server, endpoint = start_moto()
    try:
        yield endpoint
    finally:
        server.stop()


@pytest.fixture
def endpoint(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh moto, its built-in images off (moto reads the variable when a region's
    backend is made, after the reset)."""
    from tests.support.cloudfixtures import reset_moto

    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    reset_moto(moto_endpoint)
    return moto_endpoint


# Hypothesis keeps no example database in the checkout: one rare failing example must not
# fail every later run of a clone. Under CI the examples are derived from each test's
# name (derandomize), so a CI run is repeatable; locally they are random. No deadline and
# no too-slow check: a shared 2-core machine makes single examples slow now and then.
_STEADY = {
    "database": None,
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow],
}
settings.register_profile("zuka", **_STEADY)
settings.register_profile("zuka-ci", **_STEADY, derandomize=True)
settings.load_profile("zuka-ci" if os.environ.get("CI") else "zuka")
# Hypothesis's other files (its unicode table and constants caches, patches for failing
# examples) go to one place outside the checkout, shared by runs and xdist workers (it
# writes them atomically), instead of a `.hypothesis/` wherever pytest was started.
set_hypothesis_home_dir(
    os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY")
    or Path(tempfile.gettempdir()) / f"zuka-hypothesis-{os.getuid()}"
)


@pytest.hookimpl(optionalhook=True)  # known only where pytest-xdist is loaded
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: two workers a core. Many tests wait on a peer (an SSH server, a timeout,
    a child process) more than they compute, so one worker a core leaves the cores idle;
    two a core keeps the suite near a minute on 2 cores (58-76 s against 80 s). At most 8:
    each worker starts its own SSH servers and sshd, and more buys nothing here."""
    return min(8, 2 * (os.cpu_count() or 1))
