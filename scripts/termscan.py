"""Which English words the Chinese catalogue says two ways: msgids that are one short term
(a column, a value's word, a label: up to three words), grouped by their English (any case,
context aside), with every translation they have. Prints the groups with more than one.

    PYTHONPATH=. python scripts/termscan.py
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from babel.messages.pofile import read_po

PO = Path(__file__).resolve().parents[1] / "leases/locale/zh_CN/LC_MESSAGES/zuka.po"
_TERM = re.compile(r"[A-Za-z][A-Za-z _-]{0,40}")


def groups() -> dict[str, dict[str, list[str]]]:
    with PO.open("rb") as fh:
        cat = read_po(fh)
    found: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for msg in cat:
        if not msg.id or not isinstance(msg.id, str) or not isinstance(msg.string, str):
            continue
        if not _TERM.fullmatch(msg.id) or len(msg.id.split()) > 3 or not msg.string:
            continue
        key = msg.id.lower().replace("_", " ").strip()
        found[key][msg.string].append(f"{msg.context or ''}|{msg.id}")
    return {k: dict(v) for k, v in found.items() if len(v) > 1}


if __name__ == "__main__":
    for english, said in sorted(groups().items()):
        print(english)
        for zh, where in said.items():
            print(f"    {zh}: {', '.join(where)}")
