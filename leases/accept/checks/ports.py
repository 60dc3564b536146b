"""The node's listening ports, for the sshd family: which listen on all interfaces against
the expected ones (`ss -ltnpH`, else /proc/net/tcp), and whether any of them answers
Jupyter's `/api/kernels` without a token, asked from the node itself. What could not be
read (lines of the listing, ports beyond MAX_PROBED_PORTS) is named, never passed.
"""

from __future__ import annotations

from leases.accept.engine import Context, Settings
from leases.accept.parse.listen import Listener, Listening, parse_proc_net_tcp, parse_ss
from leases.accept.probe import Probe, missing_tool, why_unread
from leases.core.acceptance import CheckResult, Evidence, Status
from leases.core.textsafe import visible

MAX_PROBED_PORTS = 16
_SHOWN = 8  # items named in one finding; the rest counted


# -- listening ports -------------------------------------------------------------------


def expected_port(port: int, settings: Settings) -> bool:
    low, high = settings.training_ports
    return port in settings.ports or low <= port <= high


def _sshd_seen(listening: Listening, settings: Settings) -> bool:
    """Whether an sshd (by its process name, or on an expected SSH port) listens."""
    return any(s.process.startswith("sshd") or s.port in settings.ports for s in listening.sockets)


def judge_ports(
    listening: Listening, settings: Settings, keys: tuple[str, ...], *, remote: bool = False
) -> CheckResult:
    """The ports listening on all interfaces against the expected ones. Lines of the
    listing not read make it at best a warning naming them (nothing read: not checked);
    `remote` (zuka is logged in over SSH) with no sshd listening makes the listing suspect."""
    low, high = settings.training_ports
    want = f"on all interfaces only {', '.join(map(str, settings.ports))} and {low}-{high}"
    unread = "; ".join(visible(p, 120) for p in listening.problems[:_SHOWN])
    if listening.problems and not listening.sockets:
        return CheckResult(
            "sshd.ports",
            "Listening ports",
            Status.NOT_CHECKED,
            f"not checked: no listening socket could be read from the listing ({unread})",
            want,
            unread,
            keys,
        )
    gaps = f"; lines of the listing not read: {unread}" if unread else ""
    open_ = [s for s in listening.sockets if s.all_interfaces]
    strays = [s for s in open_ if not expected_port(s.port, settings)]
    if strays:
        shown = ", ".join(_socket_words(s) for s in strays[:_SHOWN])
        more = f" and {len(strays) - _SHOWN} more" if len(strays) > _SHOWN else ""
        return CheckResult(
            "sshd.ports",
            "Listening ports",
            Status.WARNED,
            f"listening on all interfaces outside the expected ports: {shown}{more}{gaps}",
            want,
            shown + more,
            keys,
        )
    found = ", ".join(_socket_words(s) for s in open_[:_SHOWN]) or "nothing on all interfaces"
    if unread:
        return CheckResult(
            "sshd.ports",
            "Listening ports",
            Status.WARNED,
            f"only expected ports listen on all interfaces among those read ({found}), but "
            f"lines of the listing were not read: {unread}",
            want,
            f"{found}; not read: {unread}",
            keys,
        )
    if remote and not _sshd_seen(listening, settings):
        return CheckResult(
            "sshd.ports",
            "Listening ports",
            Status.WARNED,
            "the listing shows no sshd listening (no sshd process, nothing on "
            f"{', '.join(map(str, settings.ports))}) though zuka is logged in over SSH: the "
            f"listing is suspect (another network namespace, or output not as it is): {found}",
            want,
            found,
            keys,
        )
    return CheckResult(
        "sshd.ports",
        "Listening ports",
        Status.PASSED,
        f"only expected ports listen on all interfaces: {found}",
        want,
        found,
        keys,
    )


def _socket_words(s: Listener) -> str:
    name = f" ({visible(s.process, 40)})" if s.process else ""
    return f"{visible(s.address, 60)}:{s.port}{name}"


def kernels_command(port: int, address: str) -> str:
    """curl for /api/kernels on a port the node listed; the port is an int zuka formats."""
    host = "[::1]" if ":" in address else "127.0.0.1"
    return f"curl -s -m 3 -o /dev/null -w '%{{http_code}}' http://{host}:{int(port)}/api/kernels"


def judge_services(
    answers: list[tuple[Listener, Evidence]],
    keys: tuple[str, ...],
    *,
    not_asked: tuple[Listener, ...] = (),
    unread: tuple[str, ...] = (),
) -> CheckResult:
    """The ports asked for /api/kernels. Ports on all interfaces not asked (over
    MAX_PROBED_PORTS) or lines of the listing not read make a clean answer a warning
    naming them; with nothing asked and lines not read, not checked."""
    check, title = "sshd.services", "Services open without a token"
    want = "no service on all interfaces answering /api/kernels without a token"
    gaps: list[str] = []
    if not_asked:
        more = f" and {len(not_asked) - _SHOWN} more" if len(not_asked) > _SHOWN else ""
        gaps.append(
            f"{len(not_asked)} port(s) on all interfaces not asked (zuka asks at most "
            f"{MAX_PROBED_PORTS}): "
            + ", ".join(_socket_words(s) for s in not_asked[:_SHOWN])
            + more
        )
    if unread:
        gaps.append("lines of the listing not read: " + "; ".join(
            visible(p, 120) for p in unread[:_SHOWN]
        ))  # fmt: skip
    if not answers:
        if unread:
            return CheckResult(
                check, title, Status.NOT_CHECKED,
                "not checked: no port was asked, and the listing was not read whole ("
                + "; ".join(gaps) + ")", want, "; ".join(gaps), keys,
            )  # fmt: skip
        return CheckResult(
            check,
            title,
            Status.PASSED,
            "no service besides the expected ones listens on all interfaces",
            want,
            "",
            keys,
        )
    if all(missing_tool(ev) for _, ev in answers):
        return CheckResult(
            check,
            title,
            Status.SKIPPED,
            "skipped, because curl is not on the node: services listening on "
            "all interfaces were not asked",
            want,
            "",
            keys,
        )
    open_ = [s for s, ev in answers if ev.exit_status == 0 and ev.stdout.strip() == "200"]
    if open_:
        shown = ", ".join(_socket_words(s) for s in open_)
        return CheckResult(
            check,
            title,
            Status.FAILED,
            f"anyone who reaches the node can run code: {shown} answers "
            "GET /api/kernels with 200 without a token (a Jupyter server with "
            "no token or password)",
            want,
            shown,
            keys,
        )
    asked = ", ".join(str(s.port) for s, _ in answers)
    if gaps:
        found = f"asked: {asked}; " + "; ".join(gaps)
        return CheckResult(
            check,
            title,
            Status.WARNED,
            f"no port asked answered /api/kernels without a token ({found})",
            want,
            found,
            keys,
        )
    return CheckResult(
        check,
        title,
        Status.PASSED,
        f"no port on all interfaces answered /api/kernels without a token (asked: {asked})",
        want,
        asked,
        keys,
    )


# Where a token-less Jupyter (or TensorBoard, Gradio) most likely is: asked first.
LIKELY_PORTS = (8888, 8889, 6006, 7860)
_LIKELY_NAMES = ("jupyter", "notebook", "lab")


def probe_order(sockets: list[Listener]) -> list[Listener]:
    """The likely services first: a port Jupyter, TensorBoard or Gradio takes, or a process
    named like Jupyter; then any Python process; then the rest, each in the listing's order."""

    def rank(s: Listener) -> int:
        name = s.process.lower()
        if s.port in LIKELY_PORTS or any(w in name for w in _LIKELY_NAMES):
            return 0
        return 1 if "python" in name else 2

    return sorted(sockets, key=rank)


async def read_listening(probe: Probe) -> tuple[Listening | None, tuple[str, ...], str]:
    ev = await probe.run("listen", "ss -ltnpH")
    if ev.failure:
        return None, (ev.key,), ev.failure
    if ev.exit_status == 0:
        return parse_ss(ev.stdout), (ev.key,), ""
    fallback = await probe.run("listen-proc", "cat /proc/net/tcp /proc/net/tcp6")
    keys = (ev.key, fallback.key)
    if fallback.failure or not fallback.stdout.strip():
        return None, keys, f"ss: {why_unread(ev)}; /proc/net/tcp: {why_unread(fallback) or 'empty'}"
    return parse_proc_net_tcp(fallback.stdout), keys, ""


async def check_ports(ctx: Context) -> list[CheckResult]:
    listening, keys, why = await read_listening(ctx.probe)
    if listening is None:
        words = f"not checked: the listening ports could not be read ({visible(why, 300)})"
        return [
            CheckResult("sshd.ports", "Listening ports", Status.NOT_CHECKED, words, evidence=keys)
        ]
    out = [judge_ports(listening, ctx.settings, keys, remote=not ctx.sold.local)]
    targets = probe_order(
        [s for s in listening.sockets if s.all_interfaces and s.port not in ctx.settings.ports]
    )
    answers: list[tuple[Listener, Evidence]] = []
    for s in targets[:MAX_PROBED_PORTS]:
        ev = await ctx.probe.run(f"http-{s.port}", kernels_command(s.port, s.address), 10.0)
        answers.append((s, ev))
        if missing_tool(ev):
            break  # no curl: asking again would say the same
    out.append(
        judge_services(
            answers,
            (*keys, *(ev.key for _, ev in answers)),
            not_asked=tuple(targets[len(answers) :]),
            unread=listening.problems,
        )
    )
    return out
