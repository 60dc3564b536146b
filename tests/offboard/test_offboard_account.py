"""When the provider's account has an alias (`provider edit --account-alias`), it is typed
at confirmation too, on the command line (--account) and in the dashboard (after the
node's name, a space): a lab with a test and a production account reads, and types,
which one it is about to delete in."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Static

from leases.config.sections import Config
from leases.core.errors import InputError
from leases.ledger.store import Ledger
from leases.offboard import evidence, runner
from tests.support.cli import Cli
from tests.support.offboard_files import PLANNERS, calls
from tests.support.waiting import wait_until
from tests.tui.test_offboard_screen import answer, app_on, factory, idle, opened, said, states
from tui.screens.ask import AskScreen
from tui.screens.offboard import OffboardScreen


@pytest.fixture
def aliased(fleet: Path, cli: Cli) -> Path:
    r = cli("provider", "edit", "Cloudy", "--account-alias", "lab-prod")
    assert r.code == 0, r.err
    return fleet


def test_the_alias_is_typed_too_or_nothing_runs(aliased: Path, ledger_path: Path, cli: Cli) -> None:
    with Ledger.open(ledger_path) as ledger:
        node = ledger.node("n1")
        fresh = runner.replan(ledger, node, Config(), PLANNERS)
        evidence.store(ledger, fresh)
        for typed in (None, "lab-test", "LAB-PROD", " lab-prod"):
            with pytest.raises(InputError) as refused:
                runner.confirmed(ledger, node, fresh, "n1", typed)
            assert refused.value.field == "account"
            assert "bills the account 'lab-prod'" in refused.value.reason
        assert runner.confirmed(ledger, node, fresh, "n1", "lab-prod").plan == fresh
    # The command line: refused without --account, in words.
    assert cli("offboard", "n1").code == 0
    r = cli("offboard", "n1", "--execute", "--confirm", "n1")
    assert r.code == 2 and "--account lab-prod" in r.err
    r = cli("offboard", "n1", "--skip", "manual:release-instance", "--reason", "x",
            "--confirm", "n1", "--account", "lab-test")  # fmt: skip
    assert r.code == 2 and "bills the account" in r.err
    assert calls(aliased) == []


async def test_the_dashboard_asks_for_the_alias_after_the_name(
    aliased: Path, ledger_path: Path
) -> None:
    app = app_on(ledger_path)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(
            app, OffboardScreen("n1", drivers=factory(aliased), planners=PLANNERS)
        )
        await pilot.press("a")
        await wait_until(lambda: isinstance(app.screen, AskScreen), what="the question")
        prompt = str(app.screen.query_one("#ask-prompt", Static).render())
        assert "a space and the account's alias (lab-prod)" in prompt
        await answer(pilot, app, "n1")
        await idle(screen, pilot)
        assert "refused, nothing was run" in said(screen) and "lab-prod" in said(screen)
        assert calls(aliased) == [] and set(states(screen).values()) == {"pending"}
        await pilot.press("a")
        await answer(pilot, app, "n1 lab-prod")
        await idle(screen, pilot)
        assert "offboarding finished" in said(screen), said(screen)
