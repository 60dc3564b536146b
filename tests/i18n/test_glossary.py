"""The Chinese catalogue follows docs/GLOSSARY.md: no translation uses a word the glossary
refuses (its "not" column), and every term it names is used as it says where the English
message is that term alone."""

from __future__ import annotations

import re
from pathlib import Path

from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parents[2]
ROW_RE = re.compile(r"^\|(?P<en>[^|]+)\|(?P<zh>[^|]+)\|(?P<not>[^|]*)\|(?P<note>[^|]*)\|$")


def glossary() -> list[tuple[str, str, list[str]]]:
    rows = []
    for line in (ROOT / "docs/GLOSSARY.md").read_text(encoding="utf-8").splitlines():
        m = ROW_RE.match(line.strip())
        if m is None or m["en"].strip() in ("English", "---"):
            continue
        refused = [w.strip() for w in m["not"].split("/") if w.strip()]
        rows.append((m["en"].strip(), m["zh"].strip(), refused))
    return rows


def _translations() -> list[tuple[str, str]]:
    path = ROOT / "leases/locale/zh_CN/LC_MESSAGES/zuka.po"
    with path.open("rb") as fh:
        cat = read_po(fh)
    out = []
    for msg in cat:
        if not msg.id:
            continue
        ids = msg.id if isinstance(msg.id, tuple | list) else (msg.id,)
        strings = msg.string if isinstance(msg.string, tuple | list) else (msg.string,)
        out.extend((ids[0], s) for s in strings if s)
    return out


def test_the_glossary_is_read() -> None:
    rows = glossary()
    assert len(rows) > 50
    assert ("deposit", "押金", ["保证金"]) in rows


def test_no_translation_uses_a_refused_word() -> None:
    refused = {w: (en, zh) for en, zh, nots in glossary() for w in nots}
    found = [
        f"{msgid!r} -> {s!r}: {w!r} (the glossary says {refused[w][1]!r} for {refused[w][0]!r})"
        for msgid, s in _translations()
        for w in refused
        if w in s
    ]
    assert not found, "\n".join(found)
