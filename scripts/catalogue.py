"""zuka's message catalogues, made with Babel (a test and development tool; zuka itself
reads the compiled .mo files with the standard library's gettext).

    python scripts/catalogue.py update    # extract the source's strings, then bring the
                                          # template, both .po files and both .mo up to date
    python scripts/catalogue.py check     # what tests/i18n/test_catalogues.py checks
    python scripts/catalogue.py todo      # the Chinese translations still missing
    python scripts/catalogue.py fill T.json  # set Chinese translations from a JSON object:
                                          # {"msgid": "译文"}, a plural's list of forms, and
                                          # "context\u0004msgid" for a pgettext message
    python scripts/catalogue.py union A.po [B.po ...]
                                          # take translations from other .po files (a merge)

The template (leases/locale/zuka.pot) is every string marked with `_`, `N_`, `ngettext`
or `pgettext` in leases/ and tui/, sorted, with the files (no line numbers) it comes from.
English's catalogue says each string as it is written; Chinese's is written by hand,
following docs/GLOSSARY.md.
"""

from __future__ import annotations

import io
import re
import string as _string
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from babel.messages.catalog import Catalog, Message
from babel.messages.extract import extract_from_dir
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po, write_po

ROOT = Path(__file__).resolve().parent.parent
LOCALE = ROOT / "leases" / "locale"
DOMAIN = "zuka"
POT = LOCALE / f"{DOMAIN}.pot"
LANGS = ("en", "zh_CN")
SOURCES = ("leases", "tui")
KEYWORDS = {"_": None, "N_": None, "ngettext": (1, 2), "pgettext": ((1, "c"), 2)}
# A fixed date: the files change only when their messages do.
STAMP = datetime(2026, 1, 1, tzinfo=UTC)
# A %-conversion takes no space flag here: "50 % of hours" is a percent sign, not "% o".
PLACEHOLDER_RE = re.compile(
    r"\{\{|\}\}|\{([^{}]*)\}|%%|%(\([A-Za-z_]+\))?[-#0+]*(?:\d+|\*)?(?:\.\d+)?[sdirfgeExXoc]"
)


def po_path(lang: str) -> Path:
    return LOCALE / lang / "LC_MESSAGES" / f"{DOMAIN}.po"


def mo_path(lang: str) -> Path:
    return LOCALE / lang / "LC_MESSAGES" / f"{DOMAIN}.mo"


def _catalog(locale: str | None = None) -> Catalog:
    return Catalog(
        locale=locale,
        domain=DOMAIN,
        project="zuka",
        version="0.1",
        copyright_holder="zuka",
        msgid_bugs_address="",
        creation_date=STAMP,
        revision_date=STAMP,
        fuzzy=False,
    )


def extract() -> Catalog:
    """Every marked string of the source, with the files it appears in."""
    cat = _catalog()
    for source in SOURCES:
        found = extract_from_dir(
            str(ROOT / source),
            method_map=[("**.py", "python")],
            keywords=KEYWORDS,
            comment_tags=("i18n:",),
            strip_comment_tags=True,
        )
        for filename, _lineno, message, comments, context in found:
            path = f"{source}/{filename}"
            cat.add(message, None, [(path, None)], auto_comments=comments, context=context)
    return cat


def render(cat: Catalog) -> bytes:
    buf = io.BytesIO()
    write_po(buf, cat, width=100, sort_output=True, include_lineno=False, omit_header=False)
    # The same bytes whichever Babel wrote them.
    return re.sub(rb"Generated-By: Babel [^\\]*", b"Generated-By: Babel", buf.getvalue())


def compiled(cat: Catalog) -> bytes:
    buf = io.BytesIO()
    write_mo(buf, cat)
    return buf.getvalue()


def read(path: Path, locale: str | None = None) -> Catalog:
    with path.open("rb") as fh:
        return read_po(fh, locale=locale, domain=DOMAIN)


def _key(msg: Message) -> tuple[object, str | None]:
    return (msg.id, msg.context)


def updated(template: Catalog, lang: str, old: Catalog | None) -> Catalog:
    """lang's catalogue for template: English says each string as written; Chinese keeps
    every translation it had for a message still in the template."""
    cat = _catalog(lang)
    have = {_key(m): m for m in old if m.id} if old is not None else {}
    for msg in template:
        if not msg.id:
            continue
        if lang == "en":
            string: object = msg.id
        else:
            prior = have.get(_key(msg))
            string = prior.string if prior is not None and not prior.fuzzy else None
            if isinstance(msg.id, tuple | list) and not isinstance(string, tuple | list):
                string = ("",)
        cat.add(
            msg.id,
            string,
            list(msg.locations),
            auto_comments=list(msg.auto_comments),
            context=msg.context,
        )
    return cat


def update() -> None:
    template = extract()
    POT.parent.mkdir(parents=True, exist_ok=True)
    POT.write_bytes(render(template))
    for lang in LANGS:
        path = po_path(lang)
        old = read(path, lang) if path.exists() else None
        cat = updated(template, lang, old)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(render(cat))
        mo_path(lang).write_bytes(compiled(read(path, lang)))


def union(paths: Iterable[Path]) -> int:
    """Take the Chinese translations other .po files have for messages this one lacks
    (or has differently: theirs wins), then update. Returns how many were taken."""
    mine = read(po_path("zh_CN"), "zh_CN")
    taken = 0
    for path in paths:
        for msg in read(path, "zh_CN"):
            if not msg.id or not msg.string or msg.fuzzy:
                continue
            if isinstance(msg.string, tuple | list) and not all(msg.string):
                continue
            mine_msg = mine.get(msg.id, msg.context)
            if mine_msg is None:
                mine.add(msg.id, msg.string, list(msg.locations), context=msg.context)
                taken += 1
            elif mine_msg.string != msg.string:
                mine_msg.string = msg.string
                taken += 1
    po_path("zh_CN").write_bytes(render(mine))
    update()
    return taken


def fill(path: Path) -> tuple[int, list[str]]:
    """Set the Chinese translations a JSON file gives; returns how many were set and the
    ids it gives that the catalogue does not have (marked in no source yet)."""
    import json

    given: dict[str, str | list[str]] = json.loads(path.read_text(encoding="utf-8"))
    mine = read(po_path("zh_CN"), "zh_CN")
    done, unknown = 0, []
    for key, string in given.items():
        context, _, msgid = key.rpartition("\x04")
        msg = mine.get(msgid, context or None)
        if msg is None:
            unknown.append(key)
            continue
        msg.string = tuple(string) if isinstance(string, list) else string
        msg.flags.discard("fuzzy")
        done += 1
    po_path("zh_CN").write_bytes(render(mine))
    mo_path("zh_CN").write_bytes(compiled(read(po_path("zh_CN"), "zh_CN")))
    return done, unknown


def placeholders(text: str) -> list[str]:
    """A message's placeholders, whole and sorted: `{name}`, `{name!r:>8}`, `%(name)d`,
    `%s`. A translation must keep each as written: a changed conversion or format spec
    fails at runtime or says otherwise, and a field that walks attributes or items
    (`{x.__class__}`, `{x[0]}`) is refused outright (as `!bad`)."""
    out = []
    for m in PLACEHOLDER_RE.finditer(text):
        whole = m.group(0)
        if whole in ("{{", "}}", "%%"):
            continue
        if m.group(1) is not None:
            name = re.split(r"[!:]", m.group(1), maxsplit=1)[0]
            out.append(f"{whole}!bad" if not name or "." in name or "[" in name else whole)
        else:
            out.append(whole)
    return sorted(out)


class _AnyName(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "x"


def formats(text: str) -> set[str]:
    """How text can be formatted without an error: "format" (str.format's parse: no lone
    brace) and "percent" (`%` with names: no stray %). A translation must format wherever
    its message does: a lone `}` or a stray `%` passes a placeholder comparison, then
    fails at runtime."""
    out = set()
    try:
        list(_string.Formatter().parse(text))
        out.add("format")
    except ValueError:
        pass
    try:
        text % _AnyName()
        out.add("percent")
    except (ValueError, TypeError, KeyError):
        pass
    return out


def _strings(msg: Message) -> list[str]:
    s = msg.string
    if isinstance(s, tuple | list):
        return [x or "" for x in s]
    return [s or ""]


def _ids(msg: Message) -> list[str]:
    return list(msg.id) if isinstance(msg.id, tuple | list) else [msg.id]


def problems() -> list[str]:
    """Every way the catalogues are not what the source says: empty when they are."""
    out: list[str] = []
    template = extract()
    if not POT.exists() or POT.read_bytes() != render(template):
        out.append(f"{POT.relative_to(ROOT)} is stale: run `python scripts/catalogue.py update`")
    for lang in LANGS:
        path = po_path(lang)
        if not path.exists():
            out.append(f"{path.relative_to(ROOT)} is missing")
            continue
        cat = read(path, lang)
        have = {_key(m): m for m in cat if m.id}
        for msg in template:
            if not msg.id:
                continue
            got = have.get(_key(msg))
            label = f"{lang}: {_ids(msg)[0]!r}"
            if got is None:
                out.append(f"{label}: not in {path.relative_to(ROOT)}")
                continue
            strings = _strings(got)
            if got.fuzzy or not all(strings):
                out.append(f"{label}: not translated")
                continue
            wanted = placeholders(_ids(msg)[-1])
            can = formats(_ids(msg)[-1])
            for s in strings:
                if placeholders(s) != wanted:
                    out.append(f"{label}: placeholders {placeholders(s)} != {wanted}")
                elif not can <= formats(s):
                    out.append(f"{label}: {s!r} cannot be formatted as its message can")
        extra = set(have) - {_key(m) for m in template if m.id}
        if extra:
            out.append(f"{lang}: {len(extra)} messages no longer in the source")
        if not mo_path(lang).exists() or mo_path(lang).read_bytes() != compiled(cat):
            out.append(f"{mo_path(lang).relative_to(ROOT)} is stale")
    return out


def todo() -> list[str]:
    cat = read(po_path("zh_CN"), "zh_CN")
    return [_ids(m)[0] for m in cat if m.id and (m.fuzzy or not all(_strings(m)))]


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("update", "check", "todo", "union", "fill"):
        print(__doc__)
        return 2
    if argv[0] == "update":
        update()
    elif argv[0] == "union":
        print(f"{union(Path(p) for p in argv[1:])} translations taken")
    elif argv[0] == "fill":
        for name in argv[1:]:
            done, unknown = fill(Path(name))
            print(f"{name}: {done} set; {len(unknown)} not in the catalogue")
            for key in unknown:
                print(f"  not in the catalogue: {key!r}")
    elif argv[0] == "todo":
        for msgid in todo():
            print(msgid)
    else:
        found = problems()
        for p in found:
            print(p)
        return 1 if found else 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
