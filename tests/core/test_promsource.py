"""The Prometheus source's pasted text: the label-matcher list read with a strict grammar
(good, bad and hostile), the selector rebuilt quoted, and the URL check."""

from __future__ import annotations

import pytest

from leases.core.errors import InputError
from leases.core.promsource import (
    Matcher,
    check_match,
    check_token_file,
    check_url,
    parse_matchers,
    quote,
)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ('Hostname="gpu-07"', (Matcher("Hostname", "=", "gpu-07"),)),
        ('{Hostname="gpu-07"}', (Matcher("Hostname", "=", "gpu-07"),)),
        (
            ' Hostname = "a" ,gpu=~"0|1", job!="x",  _k!~"y.*", ',
            (
                Matcher("Hostname", "=", "a"),
                Matcher("gpu", "=~", "0|1"),
                Matcher("job", "!=", "x"),
                Matcher("_k", "!~", "y.*"),
            ),
        ),
        (r'a="say \"hi\" \\ ok"', (Matcher("a", "=", 'say "hi" \\ ok'),)),
        ('a=""', (Matcher("a", "=", ""),)),
        ('a="机房-7"', (Matcher("a", "=", "机房-7"),)),
    ],
)
def test_good_matchers_are_read(text: str, want: tuple[Matcher, ...]) -> None:
    assert parse_matchers(text) == want


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("Hostname=gpu-07", "a value goes in quotes after the operator"),
        ('Hostname=="gpu-07"', "a value goes in quotes"),
        ("Hostname='gpu-07", "closing quote"),
        (r"a='\d'", "backslash"),
        ('Hostname:"gpu-07"', "=, !=, =~ or !~"),
        ('Hostname="gpu-07" job="x"', "comma"),
        ('Hostname="gpu-07', "closing quote"),
        ('1abc="x"', "label name"),
        ('a.b="x"', "=, !=, =~ or !~"),
        ('__name__="up"', "__name__"),
        ("", "no matcher"),
        ("  ,  ", "label name"),
        ("{}", "no matcher"),
        ('a=~"[unclosed"', "regular expression"),
        (r'a="\d"', "backslash"),
        ('a="x"}', "comma"),
        ('{a="x"', "label name"),
    ],
)
def test_bad_matchers_are_refused_saying_what(text: str, said: str) -> None:
    with pytest.raises(InputError) as got:
        parse_matchers(text)
    assert got.value.field == "prom_match"
    assert said in got.value.reason
    # Readable: the text as typed once, never a repr nesting its quotes.
    assert got.value.value is None and "\\'" not in str(got.value)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("Hostname='gpu-09'", 'Hostname="gpu-09"'),
        ("Hostname=`gpu-09`", 'Hostname="gpu-09"'),
        (r"a='it\'s', b=`C:\raw\`", 'a="it\'s", b="C:\\\\raw\\\\"'),
        ("a='say \"hi\"'", r'a="say \"hi\""'),
        ("gpu=~'0|1'", 'gpu=~"0|1"'),
    ],
)
def test_single_and_back_quotes_are_taken_as_promql_does(text: str, want: str) -> None:
    assert check_match(text) == want
    assert parse_matchers(want) == parse_matchers(text)


def test_a_refusal_shows_an_example_with_the_nodes_name() -> None:
    with pytest.raises(InputError) as got:
        check_match("Hostname=gpu-09", "gpu-09")
    assert got.value.reason == (
        'a value goes in quotes after the operator, as in Hostname="gpu-09" (at character 10);'
        " in: Hostname=gpu-09"
    )
    with pytest.raises(InputError) as got:
        parse_matchers("")
    assert 'as in Hostname="gpu-07"' in got.value.reason


@pytest.mark.parametrize(
    "text",
    [
        'Hostname="gpu-07"} or vector(1) or {a="b"',  # selector injection
        'Hostname="gpu-07"}[5m]',
        'Hostname="gpu-07"\n, job="x"',  # a newline between matchers
        'Hostname="gpu\n07"',  # a newline inside a value
        'Hostname="gpu\x1b[31m07"',  # a terminal escape inside a value
        'Hostname="gpu-07" # comment',
        'Hostname="a",' * 17,  # too many matchers
        'a="' + "x" * 300 + '"',  # a value too long
        'a="' + "x" * 10_000 + '"',  # 10 KB
        "x" * 10_240,
        "a=`x`y`",
        "a=`x\ny`",
        "a='x' or b=\"y\"",
    ],
)
def test_hostile_matchers_are_refused(text: str) -> None:
    with pytest.raises(InputError):
        parse_matchers(text)


def test_the_selector_is_rebuilt_quoted_never_the_text_as_typed() -> None:
    pasted = r' {Hostname = "a\"b\\" ,gpu=~"0|1"} '
    stored = check_match(pasted)
    assert stored == r'Hostname="a\"b\\", gpu=~"0|1"'
    assert parse_matchers(stored) == parse_matchers(pasted)  # reads back the same
    assert quote('x"} or up{"') == r'"x\"} or up{\""'
    hostile = 'x"} or up{'
    assert parse_matchers("a=" + quote(hostile))[0].value == hostile


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("http://prom:9090", "http://prom:9090"),
        ("https://prom.lab.example/", "https://prom.lab.example"),
        ("HTTP://10.0.0.5:9090/prometheus/", "http://10.0.0.5:9090/prometheus"),
        ("http://[::1]:9090", "http://[::1]:9090"),
    ],
)
def test_good_urls(text: str, want: str) -> None:
    assert check_url(text) == want


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("prom:9090", "scheme"),
        ("prom", "scheme"),
        ("ftp://prom:9090", "scheme"),
        ("file:///etc/passwd", "scheme"),
        ("http://user:pw@prom:9090", "no user or password"),
        ("http://token@prom:9090", "no user or password"),
        ("http://prom:9090/?query=up", "no ?query"),
        ("http://prom:9090/#x", "no ?query"),
        ("http://prom:99999", "not a URL"),
        ("http://", "host"),
        ("http://prom:9090/a b", "no spaces"),
        ("http://prom:9090/\n", "no spaces"),
        ("http://prom:9090/../../x", "path"),
        ("http://pr%6fm:9090", "host"),
        ("http://" + "a" * 400, "at most"),
    ],
)
def test_bad_urls_are_refused_saying_what(text: str, said: str) -> None:
    with pytest.raises(InputError) as got:
        check_url(text)
    assert said in got.value.reason
    assert "pw" not in str(got.value.value)


def test_a_token_file_is_a_path_never_the_token() -> None:
    assert check_token_file("~/.config/zuka/prom.token") == "~/.config/zuka/prom.token"
    with pytest.raises(InputError):
        check_token_file("/tmp/a\nb")
    with pytest.raises(InputError):  # the token itself pasted in
        check_token_file("glpat-AbCdEf1234567890XyZw")


@pytest.mark.parametrize(
    ("pattern", "said"),
    [
        ("(?=a)", "lookahead (?=...)"),
        ("a(?!b)", "lookahead (?!...)"),
        ("(?<=a)b", "lookbehind (?<=...)"),
        ("(?<!a)b", "lookbehind (?<!...)"),
        (r"(a)\1", "backreference \\1"),
        ("(?P<x>a)(?P=x)", "backreference (?P=name)"),
        ("(?>ab)", "atomic group"),
        ("a++", "possessive quantifier ++"),
        ("a{2}+", "possessive quantifier }+"),
        ("(a)?(?(1)b|c)", "conditional"),
        ("a(?#note)", "comment"),
        ("(?x)a b", "flag (?x)"),
        (r"a\Z", "\\Z"),
        (r"\u0041", "escape \\u"),
        (r"\U00000041", "escape \\U"),
        (r"\N{DIGIT ONE}", "escape \\N"),
        ("x{,3}", "quantifier {,n}"),
    ],
)
def test_what_re2_refuses_is_refused(pattern: str, said: str) -> None:
    with pytest.raises(InputError) as got:
        parse_matchers(f"Hostname=~{quote(pattern)}")
    assert f"Prometheus's regular expressions (RE2) have no {said}" in got.value.reason


@pytest.mark.parametrize(
    "pattern",
    ["gpu-0[1-9]", "(?i)GPU.*", "(?P<n>a)|b", "(?:a|b)+", "[(?=]x", r"a\.b", "[\\]]+", "x{1,3}"],
)
def test_what_re2_takes_is_taken(pattern: str) -> None:
    assert parse_matchers(f"a=~{quote(pattern)}")[0].value == pattern
