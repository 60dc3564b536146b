"""Where a notification may go (issue 16): every spelling of a metadata or private
address judged like its canonical form, names resolved and judged, and judged again at
send time, the connection made to the very address that was judged.

Names are resolved through an injected resolver where a test needs a name to resolve to
169.254.169.254 (no test may reach such an address, nor control real DNS): it stands in
for getaddrinfo, and the HTTP clients then connect to what it returned, on 127.0.0.1."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leases.core.errors import InputError
from leases.notify.host import canonical, refusal, system_resolver
from leases.notify.send import send
from leases.notify.url import parse_target
from tests.notify.test_notify import MSG, Hook

METADATA_V4 = ["169.254.169.254", "169.254.0.23", "169.254.170.2", "100.100.100.200"]
V4 = ipaddress.IPv4Address


def _part(value: int, style: str) -> str:
    if style == "hex":
        return hex(value)
    if style == "HEX":
        return "0X" + format(value, "X")
    if style == "oct":
        return "0" + format(value, "o")
    return str(value)


@st.composite
def v4_addresses(draw: st.DrawFn) -> V4:
    """Metadata addresses, link-local, private and loopback ranges, and any address."""
    return draw(
        st.one_of(
            st.sampled_from([V4(a) for a in METADATA_V4]),
            st.integers(0, 0xFFFF).map(lambda n: V4((169 << 24) | (254 << 16) | n)),
            st.integers(0, 0xFFFFFF).map(lambda n: V4((10 << 24) | n)),
            st.integers(0, 0xFFFFF).map(lambda n: V4((172 << 24) | (16 << 16) | n)),
            st.integers(0, 0xFFFF).map(lambda n: V4((192 << 24) | (168 << 16) | n)),
            st.integers(0, 0xFFFFFF).map(lambda n: V4((127 << 24) | n)),
            st.integers(0, 0xFFFFFFFF).map(V4),
        )
    )


@st.composite
def v4_spellings(draw: st.DrawFn, address: V4) -> str:
    """One of the spellings inet_aton (and so getaddrinfo) reads as address: 1 to 4
    parts, each decimal, hex or octal, the last filling the bytes left."""
    n = int(address)
    parts = draw(st.integers(1, 4))
    octets = list(address.packed)
    values = [*octets[: parts - 1], n & ((1 << (8 * (5 - parts))) - 1)]
    styles = st.sampled_from(["dec", "hex", "HEX", "oct"])
    return ".".join(_part(v, draw(styles)) for v in values)


@given(st.data())
def test_every_v4_spelling_is_judged_like_its_address(data: st.DataObject) -> None:
    address = data.draw(v4_addresses())
    spelled = data.draw(v4_spellings(address))
    # The C library's own reading is the oracle: what getaddrinfo would connect to.
    assert V4(socket.inet_aton(spelled)) == address, spelled
    assert canonical(spelled) == address, spelled
    assert refusal(spelled) == refusal(str(address)), spelled
    decorated = data.draw(
        st.sampled_from(
            [spelled + ".", f"[::ffff:{address}]", f"::{address}", f"64:ff9b::{address}",
             f"[::ffff:{int(address) >> 16:x}:{int(address) & 0xFFFF:x}]",
             str(address).translate(str.maketrans("0123456789.", "０１２３４５６７８９．"))]
        )
    )  # fmt: skip
    if int(address) > 1 or not decorated.startswith("::"):  # ::, ::1 are themselves
        assert canonical(decorated) == address, decorated
        assert refusal(decorated) == refusal(str(address)), decorated
    for url in (f"json://{spelled}/x", f"dingtalk+http://{spelled}/robot/send?access_token=t"):
        assert _refused_as_destination(url) == (refusal(str(address)) is not None), url


def _refused_as_destination(url: str) -> bool:
    """Whether parse_target refuses url for where it points (apprise may refuse some
    spellings for its own reasons: those are not what is tested here)."""
    try:
        parse_target(url, resolve=_nowhere)
    except InputError as err:
        return "not a notification URL" in err.reason
    return False


@given(
    st.one_of(
        st.integers(0, (1 << 118) - 1).map(lambda n: ipaddress.IPv6Address((0xFE80 << 112) | n)),
        st.integers(0, (1 << 121) - 1).map(lambda n: ipaddress.IPv6Address((0xFC << 120) | n)),
        st.just(ipaddress.IPv6Address("fd00:ec2::254")),
        st.just(ipaddress.IPv6Address("::1")),
        st.integers(1 << 96, (1 << 128) - 1).map(ipaddress.IPv6Address),
    ),
    st.sampled_from(["compressed", "exploded", "upper", "zone", "zone25"]),
)
def test_every_v6_spelling_is_judged_like_its_address(
    address: ipaddress.IPv6Address, style: str
) -> None:
    spelled = {
        "compressed": address.compressed,
        "exploded": address.exploded,
        "upper": address.exploded.upper(),
        "zone": f"{address.compressed}%eth0",
        "zone25": f"{address.compressed}%25eth0",
    }[style]
    n = int(address)
    expected: ipaddress.IPv4Address | ipaddress.IPv6Address = address
    if address.ipv4_mapped is not None or address in ipaddress.ip_network("64:ff9b::/96"):
        expected = V4(n & 0xFFFFFFFF)  # what a connect to it reaches
    assert canonical(f"[{spelled}]") == expected
    assert refusal(f"[{spelled}]") == refusal(str(expected))
    if address.is_link_local or str(address) == "fd00:ec2::254":
        assert refusal(spelled) is not None


@pytest.mark.parametrize(
    "host",
    [
        "2852039166", "0xa9fea9fe", "0XA9FEA9FE", "[::ffff:169.254.169.254]", "[::ffff:a9fe:a9fe]",
        "0251.0376.0251.0376", "169.254.43518", "169.16689662", "0xa9.0xfe.0xa9.0xfe",
        "100.100.100.200", "169.254.0.23", "[fd00:ec2::254]", "[fe80::1%25eth0]",
        "169.254.169.254.", "metadata.tencentyun.com", "METADATA.GOOGLE.INTERNAL.",
        "１６９．２５４．１６９．２５４", "metadata.azure.internal",
    ],
)  # fmt: skip
def test_the_reviewed_bypasses_are_refused(host: str) -> None:
    for url in (f"json://{host}/latest", f"wecom+http://{host}/cgi-bin/webhook/send?key=k"):
        if not url.isascii() and url.startswith("wecom"):
            continue  # a robot's URL must be ASCII anyway
        with pytest.raises(InputError) as err:
            parse_target(url, resolve=_nowhere)
        assert err.value.field == "notify.urls"


@pytest.mark.parametrize("host", ["127.0.0.1", "10.1.2.3", "192.168.0.9", "localhost", "proxy.lab"])
def test_loopback_and_private_webhooks_stay_allowed(host: str) -> None:
    """A lab may post to its own internal webhook or proxy (the policy before issue 16)."""
    parse_target(f"dingtalk+http://{host}:9/robot/send?access_token=t")
    parse_target(f"json://{host}:9/x")


# -- names: resolved when the config is read, and again when sending --------------------------


def _nowhere(host: Any, port: Any, *args: Any) -> list[tuple[Any, ...]]:
    raise socket.gaierror(socket.EAI_NONAME, "no such name (test resolver)")


def _resolving(table: dict[str, str]) -> Any:
    """A resolver answering for the test's own names; every other name as the system does."""

    def resolve(host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0,
                flags: int = 0) -> list[tuple[Any, ...]]:  # fmt: skip
        name = host.decode() if isinstance(host, bytes) else str(host)
        if name in table:
            address = table[name]
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, int(port or 0)))]
        return system_resolver(host, port, family, type, proto, flags)

    return resolve


def test_a_name_resolving_to_a_metadata_address_is_refused_when_read() -> None:
    evil = _resolving({"hooks.rebind.test": "169.254.169.254", "also.test": "100.100.100.200"})
    for url in ("dingtalk+http://hooks.rebind.test/robot/send?access_token=t",
                "json://also.test:8080/x"):  # fmt: skip
        with pytest.raises(InputError, match="resolves to"):
            parse_target(url, resolve=evil)
    # A name that does not resolve now is not refused for it: sending checks it again.
    parse_target("json://nowhere.invalid/x", resolve=_nowhere)
    # apprise URLs whose host is a token are never resolved (no token sent to DNS).
    seen: list[str] = []

    def spy(host: Any, *args: Any) -> list[tuple[Any, ...]]:
        seen.append(str(host))
        return _nowhere(host)

    parse_target("tgram://123456789:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA/12345", resolve=spy)
    assert seen == []


@pytest.fixture
def hook() -> Iterator[Hook]:
    h = Hook().start()
    yield h
    h.stop()


def test_a_name_rebound_to_the_metadata_service_at_send_time_is_not_sent(hook: Hook) -> None:
    """DNS rebinding: public (here 127.0.0.1) when the config is read, 169.254.169.254
    when sending. Sent through a resolver that answers 127.0.0.1, the message arrives: the
    client connects to the address that was checked (the name has no real DNS entry)."""
    name = "hooks.rebind.test"
    urls = [
        f"dingtalk+http://{name}:{hook.port}/robot/send?access_token=t",
        f"feishu+http://{name}:{hook.port}/open-apis/bot/v2/hook/x",
        f"json://{name}:{hook.port}/generic",
    ]
    honest = _resolving({name: "127.0.0.1"})
    rebound = _resolving({name: "169.254.169.254"})
    for url in urls:
        target = parse_target(url, resolve=honest)
        result = send(target, MSG, timeout=5, resolve=rebound)
        assert not result.ok
        assert "resolves to 169.254.169.254" in result.detail, result.detail
    assert hook.got == []
    for url in urls:
        result = send(parse_target(url, resolve=honest), MSG, timeout=5, resolve=honest)
        assert result.ok, result.detail
    assert len(hook.wait_for(3)) == 3


def test_localhost_is_resolved_for_real_and_sent(hook: Hook) -> None:
    target = parse_target(f"json://localhost:{hook.port}/x")
    assert send(target, MSG, timeout=5).ok
    assert hook.wait_for(1)[0].path == "/x"
