"""Words that cross the parts of zuka, in Chinese: a renewal's refused --until said of the
current lease's end; the alerts' check speaks English for what it stores in its own thread
only, while another thread keeps drawing in Chinese."""

from __future__ import annotations

import threading

import pytest

from leases.core import i18n
from leases.core.i18n import EN, ZH
from leases.core.spoken import ends_in
from tests.support.cli import Cli


def test_a_renewal_before_the_current_end_is_refused_of_that_end(cli: Cli) -> None:
    assert cli("node", "add", "n", "--ssh", "root@10.0.0.9").code == 0
    made = cli("lease", "add", "n", "--billing", "monthly", "--price", "100",
               "--start", "2026-11-01", "--end", "2026-12-01")  # fmt: skip
    assert made.code == 0, made.err
    en = cli("lease", "renew", "n", "--until", "2026-11-15")
    assert en.code == 2
    assert "--until: must be after the current lease's end 2026-12-01 00:00" in en.err
    zh = cli("lease", "renew", "n", "--until", "2026-11-15", "--lang", "zh_CN")
    assert zh.code == 2
    assert "须晚于当前租约的到期时间 2026-12-01 00:00" in zh.err
    assert len(cli("lease", "list", "n", "--json").out.split('"start"')) == 2  # nothing written


def test_speaking_english_in_a_worker_thread_leaves_the_main_thread_chinese() -> None:
    i18n.set_language(ZH)
    inside = threading.Event()
    leave = threading.Event()
    said: dict[str, str] = {}

    def worker() -> None:
        with i18n.speaking(EN):
            inside.set()
            leave.wait(10)
            said["worker"] = ends_in(1)

    t = threading.Thread(target=worker)
    t.start()
    assert inside.wait(10)
    said["main"] = ends_in(1)
    leave.set()
    t.join(10)
    assert said == {"worker": "ends in 1 d", "main": "1天后到期"}


def test_stored_offboarding_text_is_said_again_without_backtracking() -> None:
    """A node's line that holds a message's words out of order (the attacker review's
    case: a regex of lazy groups took 16 s at 60 words, hours at a few hundred) is matched
    in one pass and shown as it is; a stored sentence after a path is said in Chinese."""
    from leases.core.retold import MAX_CHARS, shown

    i18n.set_language(ZH)
    hostile = "#, valid until " + "a " * 300
    assert shown(hostile) == hostile
    assert shown(" | ".join(["x: y"] * 500)) == " | ".join(["x: y"] * 500)  # too many parts
    assert shown("x" * (MAX_CHARS + 1)) == "x" * (MAX_CHARS + 1)
    said = shown("/data/a: is a symbolic link: refused, not followed")
    assert said == "/data/a：是符号链接：已拒绝，未跟随"


def test_a_text_of_many_short_parts_is_looked_up_a_bounded_number_of_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Fifty parts of thirteen each, under 2,000 characters: each part was tried against
    every message, a second a call; now at most MAX_LOOKUPS lookups, then shown as it is."""
    from leases.core import retold

    i18n.set_language(ZH)
    looked: list[str] = []
    whole = retold._whole

    def counted(text: str, depth: int, *, exact: bool) -> str:
        looked.append(text)
        return whole(text, depth, exact=exact)

    monkeypatch.setattr(retold, "_whole", counted)
    hostile = " | ".join(["; ".join(["a"] * 13)] * 50)[: retold.MAX_CHARS]
    assert retold.shown(hostile) == hostile
    assert len(looked) <= retold.MAX_LOOKUPS + 1
    looked.clear()
    assert retold.shown(hostile) == hostile and looked == []  # said once, then remembered


def test_a_lease_not_ended_is_not_an_open_alert(cli: Cli) -> None:
    """ "open" is two words in Chinese: a lease not yet ended (未结束) is no alert left
    unhandled (未处理), which the new-user review found in `lease list`."""
    assert cli("node", "add", "n", "--ssh", "root@10.0.0.9").code == 0
    # By the hour with no end: not ended, whatever day the test runs on.
    made = cli("lease", "add", "n", "--billing", "hourly", "--price", "5",
               "--start", "2026-11-01")  # fmt: skip
    assert made.code == 0, made.err
    listed = cli("lease", "list", "--lang", "zh_CN").out
    assert "未结束" in listed and "未处理" not in listed
    assert " open " in cli("lease", "list").out + " "
