"""The catalogues are what the source says: every marked string extracted (Babel, as CI
runs it) and in the template, translated into Chinese with the same placeholders, and the
compiled .mo files made from the .po files committed. `python scripts/catalogue.py update`
brings them up to date; `todo` lists what still needs a translation."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from leases.core import i18n

ROOT = Path(__file__).resolve().parents[2]


def _catalogue_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("zuka_catalogue", ROOT / "scripts/catalogue.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    return _catalogue_tool()


def test_catalogues_are_fresh_and_complete(tool: ModuleType) -> None:
    problems = tool.problems()
    assert not problems, "\n".join(problems[:60]) + f"\n({len(problems)} problems)"


def test_a_missing_translation_is_found(tool: ModuleType, tmp_path: Path) -> None:
    """The check itself can fail: an untranslated message and a translation that drops a
    placeholder are both named."""
    cat = tool.read(tool.po_path("zh_CN"), "zh_CN")
    template = tool.extract()
    some = next(m for m in template if m.id and isinstance(m.id, str) and "{" in m.id)
    ours = cat.get(some.id, some.context)
    ours.string = ""
    broken = tool.updated(template, "zh_CN", cat)
    assert not broken.get(some.id, some.context).string
    assert tool.placeholders("{a} and {b!r:>4}") == ["{a}", "{b!r:>4}"]
    assert tool.placeholders("%(prog)s: {x}") == ["%(prog)s", "{x}"]
    assert tool.placeholders("{{literal}} {n} 50% of 100 %% %s") == ["%s", "{n}"]
    # What fails or says otherwise at runtime is a different placeholder (the attacker
    # review's cases): a spec, a conversion, a dropped %s, an attribute walk.
    assert tool.placeholders("{x:.1f}") != tool.placeholders("{x:d}")
    assert tool.placeholders("{x!r}") != tool.placeholders("{x}")
    assert tool.placeholders("%s") != tool.placeholders("")
    assert tool.placeholders("{x.__class__}") != tool.placeholders("{x}")
    assert tool.placeholders("{x[0]}") != tool.placeholders("{x}")


def test_a_translation_that_cannot_be_formatted_is_found(tool: ModuleType) -> None:
    """A lone brace or a stray % keeps every placeholder (the comparison above passes) and
    fails only when formatted: the check formats each translation as its message can be."""
    assert tool.placeholders("节点 {node} 已添加}") == tool.placeholders("node {node} added")
    assert "format" not in tool.formats("节点 {node} 已添加}")
    assert "format" in tool.formats("node {node} added")
    assert "percent" not in tool.formats("%(prog)s：错误：%(message)s 100%")
    assert "percent" in tool.formats("%(prog)s: error: %(message)s")
    assert tool.formats("50 % of {n}") == {"format"}  # a % meant as text: % never applied


# What each catalogue's header must say: gettext evaluates Plural-Forms from the .mo, and a
# tampered one (plural=n/(n-1)) raises at the first ngettext.
PLURAL_FORMS = {"en": "nplurals=2; plural=(n != 1);", "zh_CN": "nplurals=1; plural=0;"}


def test_the_compiled_catalogues_ship_in_the_package() -> None:
    for lang in i18n.LANGS:
        cat = i18n.catalogue(lang)
        assert cat.info().get("language", "").replace("-", "_") in (lang, lang.lower())
        assert cat.info().get("plural-forms") == PLURAL_FORMS[lang]


def test_every_marked_message_reads_back_in_chinese(tool: ModuleType) -> None:
    """What the .mo holds is what the .po says, read through gettext as zuka reads it."""
    cat = tool.read(tool.po_path("zh_CN"), "zh_CN")
    with i18n.using(i18n.ZH):
        for msg in cat:
            if msg.id and isinstance(msg.id, str) and not msg.context and msg.string:
                assert i18n._(msg.id) == msg.string
