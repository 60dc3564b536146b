"""The node, lease and resource forms, driven by Pilot on real ledger files: a valid form
lands in the SQLite file; a refused one shows the CLI's very words and writes nothing."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
from textual import events
from textual.app import App
from textual.pilot import Pilot
from textual.widgets import Input, Select, TextArea

from leases.app.flags import LEASE_FLAGS, NODE_FLAGS, RESOURCE_FLAGS
from leases.core import fields
from leases.core.models import BillingType, ResourceKind
from leases.ledger.records import node_from
from leases.ledger.store import Ledger
from leases.sim.demoledger import build_demo_ledger
from tests.support.cli import Cli
from tests.support.waiting import wait_until
from tui.dashboard.app import ZukaApp
from tui.screens.fleet import FleetScreen
from tui.screens.lease_form import LeaseFormScreen, Mode
from tui.screens.node_form import NodeFormScreen
from tui.screens.resource_form import ResourceFormScreen
from tui.widgets.form import FormScreen, Refusal

NOW = datetime(2026, 11, 30, 9, 30, tzinfo=UTC)
TZ = "Asia/Shanghai"

Make = Callable[[Ledger], FormScreen[Any]]


class FormHost(App[None]):
    """A small app that opens one form on a ledger file and keeps what it was closed with."""

    TITLE = "zuka forms"

    def __init__(self, path: Path, make: Make) -> None:
        super().__init__()
        self.path = path
        self.make = make
        self.results: list[Any] = []

    def on_mount(self) -> None:
        self.ledger = Ledger.open(self.path, clock=lambda: NOW)
        self.push_screen(self.make(self.ledger), callback=self.results.append)

    def on_unmount(self) -> None:
        self.ledger.close()


@pytest.fixture(autouse=True)
def no_ssh_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The developer's ~/.ssh/config stays out: the node form reads its Host names."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


@pytest.fixture
def demo(ledger_path: Path) -> Path:
    build_demo_ledger(ledger_path, date(2026, 11, 30)).close()
    return ledger_path


def lease_form(node: str, mode: Mode) -> Make:
    return lambda ledger: LeaseFormScreen(ledger, node, mode=mode, clock=lambda: NOW, tz=TZ)


async def opened(pilot: Pilot[None]) -> FormScreen[Any]:
    """The form, once its ledger read has filled it."""
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, FormScreen)
    for widget in screen.query("Input, TextArea"):
        assert isinstance(widget, Input | TextArea)
        widget.cursor_blink = False  # stable snapshots
    return screen


def fill(screen: FormScreen[Any], **values: str | bool) -> None:
    for key, value in values.items():
        screen.field(key).value = value


async def save_ok(pilot: Pilot[None]) -> Any:
    """ctrl+s, then what the form was dismissed with."""
    app = pilot.app
    assert isinstance(app, FormHost)
    await pilot.press("ctrl+s")
    await wait_until(lambda: app.results, what="the form to close")
    return app.results[-1]


async def save_refused(pilot: Pilot[None], key: str | None) -> str:
    """ctrl+s, then the message shown under field `key` (None: on the form's line)."""
    screen = pilot.app.screen
    assert isinstance(screen, FormScreen)
    await pilot.press("ctrl+s")

    def message() -> str:
        if key is None:
            return screen.query_one("#form-message", Refusal).said
        return screen.field(key).message

    said = await wait_until(message, what=f"a message under {key}")
    assert pilot.app.screen is screen  # still open
    assert isinstance(pilot.app, FormHost) and pilot.app.results == []
    return said


def state(path: Path) -> tuple[Any, ...]:
    """Everything the ledger holds, the audit log's head included."""
    with Ledger.open(path, create=False) as ledger:
        return (ledger.export_records(), ledger.verify_audit().head_hash)


# -- node -------------------------------------------------------------------------------


async def test_pasting_a_console_login_adds_the_node(demo: Path) -> None:
    app = FormHost(demo, lambda ledger: NodeFormScreen(ledger, paste=True))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(pilot)
        assert app.focused is screen.field("ssh").input  # paste=True: straight in
        await pilot.press(*"new-4090")  # typed into the ssh field: then move it
        assert screen.field("ssh").value == "new-4090"
        fill(
            screen,
            ssh="登录指令：ssh -p 30022 root@connect.westb.seetacloud.com\n密码：hunter2hunter2",
            name="autodl-new",
            provider="AutoDL",
            channel="platform",
            gpu_count="8",
        )
        await pilot.pause()
        # The paste is cut to its command at once: no password left on the screen.
        assert screen.field("ssh").value == "ssh -p 30022 root@connect.westb.seetacloud.com"
        info = str(screen.query_one("#form-info").render())
        assert "ssh -p 30022 root@connect.westb.seetacloud.com" in info
        assert await save_ok(pilot) == "autodl-new"
    with Ledger.open(demo, create=False) as ledger:
        node = ledger.node("autodl-new")
        assert (node.ssh.host, node.ssh.port, node.ssh.user) == (
            "connect.westb.seetacloud.com", 30022, "root",
        )  # fmt: skip
        assert node.gpu_count == 8 and node.provider == "AutoDL"
        assert ledger.provider("AutoDL").kind.value == "platform"
        assert "hunter2" not in str(ledger.export_records())
        assert ledger.last_entries(1)[0].action == "node.add"


async def test_keys_typed_as_the_form_opens_land_in_its_first_field(demo: Path) -> None:
    app = FormHost(demo, lambda ledger: NodeFormScreen(ledger))
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press(*"gpu-7")  # at once, the ledger read may still run
        screen = await opened(pilot)
        assert app.focused is screen.field("name").input
        assert screen.field("name").value == "gpu-7"


async def test_the_lease_form_tabs_top_to_bottom_and_enter_opens_a_select(demo: Path) -> None:
    app = FormHost(demo, lease_form("aliyun-a10-burst", "add"))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(pilot)
        shown = [screen.field(spec.key).input for spec in screen.specs()]  # not folded
        order = []
        for _ in shown:
            order.append(app.focused)
            await pilot.press("tab")
        assert order == shown  # the first field first, then down the form
        screen.set_focus(screen.field("billing_type").input)
        select = screen.field("billing_type").input
        assert isinstance(select, Select)
        await pilot.press("enter")
        await wait_until(lambda: select.expanded, what="the select to open")
        await pilot.press("down", "enter")
        await wait_until(lambda: not select.expanded, what="the select to close")
        assert screen.field("billing_type").value != ""
        assert app.focused is select  # the choice is there to see


async def test_a_field_far_down_a_long_form_is_shown_at_80x24(demo: Path) -> None:
    """The lease form with its fold open is longer than 24 lines: the field with the
    cursor scrolls into view (the fields did not scroll: the last ones were off screen)."""
    app = FormHost(demo, lease_form("autodl-4090-a", "edit"))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await opened(pilot)
        keys = [f.spec.key for f in screen.fields()]
        assert keys.index("hourly_price") >= len(keys) - 4  # near the bottom
        last = screen.field("hourly_price")
        fill(screen, hourly_price="x")  # refused: the fold opens, the cursor goes there
        await pilot.press("ctrl+s")
        await wait_until(lambda: app.focused is last.input, what="the last field focused")

        def shown() -> bool:
            region = last.input.region
            return 0 <= region.y < 24 - 2 and region.height > 0  # above the buttons

        await wait_until(shown, what=f"{last.spec.key} on screen")


async def test_enter_after_choosing_in_a_select_moves_on(demo: Path) -> None:
    """Enter opens a select, Enter chooses; the next Enter moves to the next field, as tab
    does, instead of opening the list again."""
    app = FormHost(demo, lease_form("aliyun-a10-burst", "add"))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(pilot)
        select = screen.field("billing_type").input
        assert isinstance(select, Select) and app.focused is select
        await pilot.press("enter")
        await wait_until(lambda: select.expanded, what="the select to open")
        await pilot.press("down", "enter")
        await wait_until(lambda: not select.expanded, what="the select to close")
        chosen = screen.field("billing_type").value
        await pilot.press("enter")
        await wait_until(lambda: app.focused is screen.field("unit_price").input, what="next")
        assert not select.expanded and screen.field("billing_type").value == chosen
        # Back on it with shift+tab: Enter opens it again (nothing chosen since).
        await pilot.press("shift+tab")
        await wait_until(lambda: app.focused is select, what="back on the select")
        await pilot.press("enter")
        await wait_until(lambda: select.expanded, what="the select to open again")
        await pilot.press("escape")  # closes the list, not the form
        await wait_until(lambda: not select.expanded, what="the select to close")
        assert app.screen is screen and app.focused is select


async def test_a_refused_login_command_writes_nothing(demo: Path) -> None:
    before = state(demo)
    app = FormHost(demo, lambda ledger: NodeFormScreen(ledger))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(pilot)
        fill(screen, name="evil", ssh="ssh -o ProxyCommand='nc %h %p' root@host")
        said = await save_refused(pilot, "ssh")
        assert "does not honour the ssh option ProxyCommand" in said
        assert app.focused is screen.field("ssh").input
    assert state(demo) == before


async def test_editing_a_node_sends_only_what_changed(demo: Path) -> None:
    app = FormHost(demo, lambda ledger: NodeFormScreen(ledger, name="autodl-4090-a"))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(pilot)
        assert screen.field("name").value == "autodl-4090-a"
        assert screen.field("gpu_count").value == "8"
        fill(screen, name="autodl-4090-renamed", tags="lab,train")
        assert await save_ok(pilot) == "autodl-4090-renamed"
    with Ledger.open(demo, create=False) as ledger:
        node = ledger.node("autodl-4090-renamed")
        assert node.tags == ("lab", "train") and node.gpu_count == 8
        entry = ledger.last_entries(1)[0]
        assert entry.action == "node.edit"
        assert entry.before and entry.after
        changed = {k for k in entry.after if entry.before.get(k) != entry.after[k]}
        assert changed == {"name", "tags"}


async def test_escape_leaves_the_node_form_writing_nothing(demo: Path) -> None:
    before = state(demo)
    app = FormHost(demo, lambda ledger: NodeFormScreen(ledger))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(pilot)
        fill(screen, name="never", ssh="ssh root@10.0.0.9")
        await pilot.press("escape", "y", "enter")  # asked first: it was filled
        await wait_until(lambda: app.results, what="the form to close")
        assert app.results == [None]
    assert state(demo) == before


# -- lease ------------------------------------------------------------------------------


async def test_adding_a_lease_lands_in_the_ledger(demo: Path) -> None:
    with Ledger.open(demo, create=False) as ledger:
        ledger.add_node(node_from({"name": "fresh", "ssh_host": "10.0.0.8", "gpu_count": 4}))
    app = FormHost(demo, lease_form("fresh", "add"))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(pilot)
        assert screen.field("start").value == "2026-11-30 17:30"  # now, in the billing zone
        fill(screen, billing_type="card_hour", unit_price="1.98", cards_billed="4")
        assert await save_ok(pilot) is True
    with Ledger.open(demo, create=False) as ledger:
        (lease,) = ledger.leases("fresh")
        assert lease.billing_type is BillingType.CARD_HOUR
        assert str(lease.unit_price) == "1.98" and lease.cards_billed == 4
        assert lease.start == NOW


async def test_a_refused_lease_shows_the_message_under_its_field(demo: Path) -> None:
    before = state(demo)
    app = FormHost(demo, lease_form("aliyun-a10-burst", "edit"))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(pilot)
        assert screen.field("billing_type").value == "hourly"
        fill(screen, deposit_paid_on="2026-13-01")  # a folded field: the fold opens
        said = await save_refused(pilot, "deposit_paid_on")
        assert said == "--deposit-paid-on: has month 13: a month is 1 to 12 (got '2026-13-01')"
        assert app.focused is screen.field("deposit_paid_on").input
        fill(screen, deposit_paid_on="", unit_price="3.5")
        assert await save_ok(pilot) is True
    after = state(demo)
    assert after != before
    with Ledger.open(demo, create=False) as ledger:
        assert str(ledger.leases("aliyun-a10-burst")[0].unit_price) == "3.5"


async def test_renewing_a_monthly_lease(demo: Path) -> None:
    app = FormHost(demo, lease_form("h800-monthly-1", "renew"))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(pilot)
        assert "renewal starts at its end, 2026-12-10 00:00" in str(
            screen.query_one("#form-info").render()
        )
        assert not screen.query("#field-start")  # `lease renew` takes no --start
        said = await save_refused(pilot, "until")  # empty: never an open-ended renewal
        assert said.startswith("--until: is empty")
        fill(screen, until="2027-01-10", unit_price="48000")
        assert await save_ok(pilot) is True
    with Ledger.open(demo, create=False) as ledger:
        old, new = ledger.leases("h800-monthly-1")
        assert old.ended_at == old.end == new.start
        assert new.end == datetime(2027, 1, 10, tzinfo=new.start.tzinfo)
        assert str(new.unit_price) == "48000"


async def test_ending_a_lease(demo: Path) -> None:
    app = FormHost(demo, lease_form("volc-a100-ablation", "end"))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(pilot)
        fill(screen, at="2026-11-30 06:00")
        said = await save_refused(pilot, "at")
        assert said.startswith("--at: is before the lease start 2026-11-30 07:00")
        fill(screen, at="2026-11-30 17:00")
        assert await save_ok(pilot) is True
    with Ledger.open(demo, create=False) as ledger:
        (lease,) = ledger.leases("volc-a100-ablation")
        assert lease.ended_at == datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


async def test_the_end_form_says_it_cancels_the_renewal_not_started(demo: Path) -> None:
    with Ledger.open(demo, create=False, clock=lambda: NOW) as ledger:
        ledger.renew_lease("h800-monthly-1", "2027-01-10")
    app = FormHost(demo, lease_form("h800-monthly-1", "end"))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(pilot)
        info = str(screen.query_one("#form-info").render())
        assert "also cancels the renewal not started yet (from 2026-12-10 00:00)" in info


# -- resource ---------------------------------------------------------------------------


async def test_recording_a_resource(demo: Path) -> None:
    app = FormHost(demo, lambda ledger: ResourceFormScreen(ledger, "aliyun-a10-burst"))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(pilot)
        fill(screen, kind="bucket", native_id="Bad_Bucket")
        said = await save_refused(pilot, "native_id")
        assert "a bucket name is 3-63 of a-z, 0-9" in said
        fill(screen, kind="snapshot", native_id="s-bp1formtest0000000001", region="cn-hangzhou")
        assert await save_ok(pilot) is True
    with Ledger.open(demo, create=False) as ledger:
        rows = [r for n, _, r in ledger.resources("aliyun-a10-burst")]
        assert (ResourceKind.SNAPSHOT, "s-bp1formtest0000000001", "cn-hangzhou") in [
            (r.kind, r.native_id, r.region) for r in rows
        ]
        assert ledger.last_entries(1)[0].action == "resource.add"


# -- details a new user met -------------------------------------------------------------


async def test_a_refusal_goes_when_its_field_changes(demo: Path) -> None:
    app = FormHost(demo, lambda ledger: NodeFormScreen(ledger))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(pilot)
        fill(screen, name="n1", ssh="ssh h", gpu_count="eight")
        await save_refused(pilot, "gpu_count")
        fill(screen, gpu_count="8")
        await wait_until(lambda: screen.field("gpu_count").message == "", what="it to go")


async def test_an_empty_node_form_is_refused_for_its_name_first(demo: Path) -> None:
    app = FormHost(demo, lambda ledger: NodeFormScreen(ledger))
    async with app.run_test(size=(120, 36)) as pilot:
        await opened(pilot)
        said = await save_refused(pilot, "name")
        assert said.startswith("name: ")  # not `name (NAME): `


async def test_escape_asks_before_losing_what_was_typed(demo: Path) -> None:
    app = FormHost(demo, lambda ledger: NodeFormScreen(ledger))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(pilot)
        await pilot.press(*"half-typed", "escape")
        await wait_until(lambda: app.screen is not screen, what="the question")
        await pilot.press("escape")  # no: back to the form, as it was
        await wait_until(lambda: app.screen is screen, what="the form again")
        assert screen.field("name").value == "half-typed" and app.results == []
        await pilot.press("escape", "y", "enter")
        await wait_until(lambda: app.results, what="the form to close")
        assert app.results == [None]


async def test_the_add_lease_note_says_a_lease_bills_already(demo: Path) -> None:
    app = FormHost(demo, lease_form("aliyun-a10-burst", "add"))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(pilot)
        info = str(screen.query_one("#form-info").render())
        assert "aliyun-a10-burst: the lease billing now" in info
        assert "must start after it ends" in info


async def test_switches_say_on_or_off(demo: Path) -> None:
    app = FormHost(demo, lease_form("aliyun-a10-burst", "add"))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(pilot)
        state = screen.field("auto_renew").query_one(".form-switch-state")
        assert str(state.render()) == "off"
        fill(screen, auto_renew=True)
        await wait_until(lambda: str(state.render()) == "on", what="on")


async def test_the_node_form_sets_prometheus_readings_and_refuses_a_bad_url(demo: Path) -> None:
    before = state(demo)
    app = FormHost(demo, lambda ledger: NodeFormScreen(ledger, name="autodl-4090-a"))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(pilot)
        fill(screen, reading_source="prometheus", prom_url="http://169.254.169.254")
        said = await save_refused(pilot, "prom_url")
        assert "link-local or cloud metadata address" in said
        assert state(demo) == before
        fill(screen, prom_url="http://prom:9090", prom_match="Hostname=a")
        said = await save_refused(pilot, "prom_match")
        assert 'a value goes in quotes after the operator, as in Hostname="autodl-4090-a"' in said
        fill(screen, prom_match='Hostname="a"')
        assert await save_ok(pilot) == "autodl-4090-a"
    with Ledger.open(demo, create=False) as ledger:
        node = ledger.node("autodl-4090-a")
    assert (node.prom_url, node.prom_match) == ("http://prom:9090", 'Hostname="a"')
    assert node.reading_source is not None and node.reading_source.value == "prometheus"


async def test_editing_a_platform_node_shows_its_channel(demo: Path) -> None:
    app = FormHost(demo, lambda ledger: NodeFormScreen(ledger, name="autodl-4090-a"))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(pilot)
        assert screen.field("channel").value == "platform"
        fill(screen, tags="x")
        assert await save_ok(pilot) == "autodl-4090-a"


# -- the same words as the command line -------------------------------------------------

SAME_WORDS = [
    # (form, {field: value}, the field the message goes under, the same input to the CLI)
    (lambda ledger: NodeFormScreen(ledger), {"name": "n1", "ssh": "ssh host:22"}, "ssh",
     ["node", "add", "n1", "--ssh", "ssh host:22"]),
    (lambda ledger: NodeFormScreen(ledger), {"name": "n1", "ssh": "ssh h", "gpu_count": "eight"},
     "gpu_count", ["node", "add", "n1", "--ssh", "ssh h", "--gpus", "eight"]),
    (lambda ledger: NodeFormScreen(ledger), {"name": "bad name", "ssh": "ssh h"}, "name",
     ["node", "add", "bad name", "--ssh", "ssh h"]),
    (lease_form("autodl-4090-a", "edit"), {"unit_price": "-3"}, "unit_price",
     ["lease", "edit", "autodl-4090-a", "--price", "-3"]),
    (lease_form("autodl-4090-a", "edit"), {"cards_billed": "9"}, "cards_billed",
     ["lease", "edit", "autodl-4090-a", "--cards", "9"]),
    (lease_form("autodl-4090-a", "edit"), {"currency": "XYZ"}, "currency",
     ["lease", "edit", "autodl-4090-a", "--currency", "XYZ"]),
    (lease_form("h800-monthly-2", "renew"), {"until": "2026-11-01"}, "until",
     ["lease", "renew", "h800-monthly-2", "--until", "2026-11-01"]),
    (lease_form("aliyun-a10-burst", "end"), {"at": "yesterday"}, "at",
     ["lease", "end", "aliyun-a10-burst", "--at", "yesterday"]),
    (lambda ledger: ResourceFormScreen(ledger, "aliyun-a10-burst"),
     {"kind": "scratch_path", "native_id": "/data/../etc"}, "native_id",
     ["resource", "add", "aliyun-a10-burst", "--kind", "scratch_path", "--id", "/data/../etc"]),
]  # fmt: skip


@pytest.mark.parametrize(("make", "values", "key", "argv"), SAME_WORDS)
async def test_the_form_says_what_the_cli_says(
    demo: Path, cli: Cli, make: Make, values: dict[str, str], key: str, argv: list[str]
) -> None:
    before = state(demo)
    result = cli(*argv)
    assert result.code != 0 and state(demo) == before
    app = FormHost(demo, make)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(pilot)
        fill(screen, **values)
        said = await save_refused(pilot, key)
    assert result.err.strip() == f"zuka: error: {said}"
    assert state(demo) == before


# A form given several wrong fields: (the form, its wrong values, the CLI's command line
# with one of them, good values for the rest).
def _node_add(key: str, value: str) -> list[str]:
    name = value if key == "name" else "n1"
    ssh = value if key == "ssh" else "ssh h"
    flag = [] if key in ("name", "ssh") else [NODE_FLAGS[key][0], value]
    return ["node", "add", name, "--ssh", ssh, *flag]


def _resource_add(key: str, value: str) -> list[str]:
    given = {"kind": "bucket", "native_id": "good-bucket", key: value}
    return ["resource", "add", "aliyun-a10-burst",
            *(a for k, v in given.items() for a in (RESOURCE_FLAGS[k][0], v))]  # fmt: skip


ALL_AT_ONCE = [
    (lambda ledger: NodeFormScreen(ledger),
     {"name": "bad name", "ssh": "ssh -o ProxyCommand=x root@h", "gpu_count": "eight",
      "vram_gib": "0"}, _node_add),
    (lambda ledger: NodeFormScreen(ledger, name="autodl-4090-a"),
     {"ssh": "ssh -o ProxyCommand=x root@h", "gpu_count": "eight", "vram_gib": "0"},
     lambda key, value: ["node", "edit", "autodl-4090-a",
                         *(["--ssh", value] if key == "ssh" else [NODE_FLAGS[key][0], value])]),
    (lease_form("autodl-4090-a", "edit"),
     {"unit_price": "-3", "currency": "XYZ", "deposit_paid_on": "2026-13-01",
      "notice_days": "999"},
     lambda key, value: ["lease", "edit", "autodl-4090-a", LEASE_FLAGS[key][0], value]),
    (lambda ledger: ResourceFormScreen(ledger, "aliyun-a10-burst"),
     {"kind": "bucket", "native_id": "Bad_Bucket", "price": "abc", "created": "not a date"},
     _resource_add),
]  # fmt: skip


@pytest.mark.parametrize(("make", "values", "argv"), ALL_AT_ONCE)
async def test_every_wrong_field_is_said_at_once_in_the_clis_words(
    demo: Path, cli: Cli, make: Make, values: dict[str, str], argv: Callable[[str, str], list[str]]
) -> None:
    """One save shows each wrong field's refusal under it, the words the CLI prints for
    that value, and writes nothing."""
    before = state(demo)
    words = {}
    for key, value in values.items():
        if key == "kind":
            continue  # a good value here: it picks the id's rule
        result = cli(*argv(key, value))
        assert result.code != 0, key
        words[key] = result.err.strip().removeprefix("zuka: error: ")
    assert state(demo) == before
    app = FormHost(demo, make)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(pilot)
        fill(screen, **values)
        await pilot.press("ctrl+s")
        await wait_until(
            lambda: {k: screen.field(k).message for k in words} == words,
            what="every wrong field's message",
        )
        first = next(f for f in screen.fields() if f.spec.key in words)
        assert app.focused is first.input  # the first wrong field, top to bottom
        assert app.results == [] and app.screen is screen
    assert state(demo) == before


async def test_a_resource_after_the_end_goes_to_the_lease_that_ran(demo: Path) -> None:
    """The lease ended and its renewal cancelled: the form names the lease that ran (the
    one Ledger.add_resource picks), never the cancelled renewal."""
    with Ledger.open(demo, create=False, clock=lambda: NOW) as ledger:
        ledger.renew_lease("h800-monthly-1", "2027-01-10")
        ledger.end_lease("h800-monthly-1")
        ran, cancelled = ledger.leases("h800-monthly-1")
    app = FormHost(demo, lambda ledger: ResourceFormScreen(ledger, "h800-monthly-1"))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(pilot)
        info = str(screen.query_one("#form-info").render())
        assert "cancelled" not in info and ran.start.strftime("from %Y-%m-%d %H:%M") in info
        fill(screen, kind="snapshot", native_id="s-bp1formtest0000000002", region="cn-beijing")
        assert await save_ok(pilot) is True
    with Ledger.open(demo, create=False) as ledger:
        (res,) = [r for _, _, r in ledger.resources("h800-monthly-1")
                  if r.native_id == "s-bp1formtest0000000002"]  # fmt: skip
        assert res.lease_id == ran.id != cancelled.id


async def test_an_unknown_node_is_said_on_the_message_line(demo: Path) -> None:
    app = FormHost(demo, lambda ledger: ResourceFormScreen(ledger, "nope"))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(pilot)
        assert "no node of that name" in screen.query_one("#form-message", Refusal).said


async def test_every_form_binding_has_an_id_and_a_tooltip() -> None:
    for screen in (NodeFormScreen, LeaseFormScreen, ResourceFormScreen):
        for binding in screen.BINDINGS:
            assert not isinstance(binding, tuple)
            assert binding.id and binding.id.startswith(binding.id.split("-form-")[0])
            assert binding.description and binding.tooltip
    assert {b.id for b in LeaseFormScreen.BINDINGS if not isinstance(b, tuple)} == {
        "lease-form-save",
        "lease-form-cancel",
        "lease-form-quit",  # ctrl+c (tests/tui/test_ctrl_c.py)
    }


def test_fields_follow_the_records_options() -> None:
    """A field per option, labelled with the CLI's flag: a new option is a new field."""
    from leases.app.flags import LEASE_FLAGS, RESOURCE_FLAGS

    lease = LeaseFormScreen.__new__(LeaseFormScreen)
    lease.mode = "add"
    keys = {s.key for s in [*lease.specs(), *lease.more()]}
    assert keys == {*LEASE_FLAGS, "auto_renew"}
    res = ResourceFormScreen.__new__(ResourceFormScreen)
    assert {s.key for s in [*res.specs(), *res.more()]} == set(RESOURCE_FLAGS)
    price = next(s for s in lease.specs() if s.key == "unit_price")
    assert price.label == "unit price  --price"


# -- snapshots --------------------------------------------------------------------------

SNAPSHOTS = {
    "node_add_paste": lambda ledger: NodeFormScreen(ledger, paste=True),
    "lease_add": lease_form("aliyun-a10-burst", "add"),
    "lease_renew": lease_form("h800-monthly-1", "renew"),
    "lease_end": lease_form("volc-a100-ablation", "end"),
    "resource_add": lambda ledger: ResourceFormScreen(ledger, "aliyun-a10-burst"),
}


@pytest.mark.parametrize("size", [(120, 36), (80, 24)], ids=["120x36", "80x24"])
@pytest.mark.parametrize("name", list(SNAPSHOTS))
def test_form_snapshot(snap_compare, demo: Path, name: str, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    async def ready(pilot: Pilot[None]) -> None:
        screen = await opened(pilot)
        if name == "node_add_paste":
            fill(
                screen,
                name="autodl-new",
                ssh="ssh -p 30022 root@connect.westb.seetacloud.com",
                gpu_count="x",
            )
            await save_refused(pilot, "gpu_count")
        await pilot.pause()

    assert snap_compare(FormHost(demo, SNAPSHOTS[name]), terminal_size=size, run_before=ready)


async def test_a_form_on_the_dashboard_writes_beside_its_open_ledger(demo: Path) -> None:
    """Pushed on the real app, as the fleet screen's `l` does: the write (in a thread, on
    a connection of its own) is seen through the dashboard's own connection."""
    app = ZukaApp(demo, clock=lambda: NOW, poll=False, refresh_s=3600)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        assert app.ledger is not None
        done: list[bool | None] = []
        app.push_screen(
            LeaseFormScreen(app.ledger, "volc-a100-ablation", mode="end", clock=app.clock, tz=TZ),
            callback=done.append,
        )
        await opened(pilot)
        await pilot.press("ctrl+s")
        await wait_until(lambda: done, what="the form to close")
        assert done == [True]
        (lease,) = app.ledger.leases("volc-a100-ablation")
        assert lease.ended_at == NOW


@pytest.mark.parametrize("opener", ["n", "l", "x"])
async def test_keys_typed_right_after_the_opening_key_go_to_the_form(
    demo: Path, opener: str
) -> None:
    """`n` then at once `s`, `g`, `o`...: typed before the form has mounted, they must not
    sort, group or start an offboarding on the fleet underneath; they are the form's."""
    app = ZukaApp(demo, clock=lambda: NOW, poll=False, refresh_s=3600)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(lambda: app._reads >= 3, what="the third read")
        await app.workers.wait_for_complete()
        await pilot.pause()
        fleet = app.screen
        assert isinstance(fleet, FleetScreen)
        before = (fleet.sort_key, fleet.reverse, fleet.group, len(app.screen_stack))
        # As a terminal delivers a burst: every key queued before any is handled
        # (pilot.press waits for the app to be idle after each key, which hides this).
        for key in (opener, *"sgo5", "tab"):
            app.post_message(events.Key(key, key if len(key) == 1 else None))
        screen = await opened(pilot)
        # The tab, last, moved the cursor on: every key before it reached the form.
        second = screen.fields()[1]

        def on_second() -> bool:  # its input may mount after the field itself
            inputs = second.query(".form-input")
            return bool(inputs) and app.focused is inputs.first()

        try:
            await wait_until(on_second, what="the tab typed last")
        except AssertionError as exc:  # say where the cursor went instead (seen once in CI)
            chain = [w.id for w in screen.focus_chain]
            raise AssertionError(f"{exc}; focused: {app.focused!r}; chain: {chain}") from exc
        after = (fleet.sort_key, fleet.reverse, fleet.group, len(app.screen_stack) - 1)
        assert after == before
        assert app.screen_stack[-2] is fleet  # the form on the fleet, nothing between
        if opener == "n":  # a text field first: what was typed is there
            assert screen.fields()[0].value == "sgo5"


async def test_a_filter_typed_in_one_burst_with_slash_is_the_filters_text(demo: Path) -> None:
    """`/qwen` arriving at once (a slow SSH link delivers keys in bursts): the `q` must not
    quit, the `l` of `/idle` must not open a lease form, `a` must not open the alerts."""
    app = ZukaApp(demo, clock=lambda: NOW, poll=False, refresh_s=3600)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(lambda: app._reads >= 3, what="the third read")
        await pilot.pause()
        fleet = app.screen
        assert isinstance(fleet, FleetScreen)
        for key in ("slash", *"qwen", "space", *"idle", "space", *"alert"):
            app.post_message(
                events.Key(key, " " if key == "space" else key if len(key) == 1 else "/")
            )
        box = fleet.query_one("#fleet-filter", Input)
        await wait_until(lambda: box.value == "qwen idle alert", what="the filter's text")
        assert app.screen is fleet and app.is_running and len(app.screen_stack) == 1


async def test_a_burst_never_runs_a_key_of_the_screen_it_opened(
    demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`o` then `a` at once: the `a` was typed at the fleet (alerts); on the offboarding
    screen it would run every step. Keys typed before a screen that is not a form opened
    are dropped, never handed to it."""
    from tui.screens.offboard import OffboardScreen

    ran: list[str] = []
    monkeypatch.setattr(OffboardScreen, "action_run_all", lambda self: ran.append("all"))
    app = ZukaApp(demo, clock=lambda: NOW, poll=False, refresh_s=3600)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(lambda: app._reads >= 3, what="the third read")
        await pilot.pause()
        for key in ("o", "a", "a"):
            app.post_message(events.Key(key, key))
        await wait_until(lambda: isinstance(app.screen, OffboardScreen), what="offboarding")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert ran == [] and isinstance(app.screen, OffboardScreen)


async def test_a_lease_added_to_a_node_with_one_running_starts_where_it_ends(demo: Path) -> None:
    """Not now: the ledger refuses a lease that overlaps the one billing (a new user's
    first try at a follow-on lease was refused with the form's own default)."""
    with Ledger.open(demo) as ledger:
        node_id = ledger.node("colo-njidc-4090").id
        assert node_id is not None
        billing = ledger.billing(NOW)[node_id]
        ends = billing.paid_until or billing.lease.end
        assert ends is not None
        shown = fields.shown(ends, billing.lease.billing_tz)
    app = FormHost(demo, lease_form("colo-njidc-4090", "add"))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(pilot)
        assert screen.field("start").value == shown
        info = str(screen.query_one("#form-info").render())
        assert f"starts after it ends: from {shown}" in info
