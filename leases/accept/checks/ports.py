"""The node's listening ports, for the sshd family: which listen on all interfaces against
the expected ones (`ss -ltnpH`, else /proc/net/tcp), and whether any of them answers
Jupyter's `/api/kernels` without a token, asked from the node itself. What could not be
read (lines of the listing, ports beyond MAX_PROBED_PORTS) is named, never passed.
"""

from __future__ import annotations

from leases.accept.engine import Context, Settings
from leases.accept.parse.listen import Listener, Listening, parse_proc_net_tcp, parse_ss
from leases.accept.probe import Probe, missing_tool, why_unread
from leases.accept.words import _
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
    ports = ", ".join(map(str, settings.ports))
    want = _("on all interfaces only {ports} and {low}-{high}").format(
        ports=ports, low=low, high=high
    )
    title = _("Listening ports")
    unread = "; ".join(visible(p, 120) for p in listening.problems[:_SHOWN])
    if listening.problems and not listening.sockets:
        words = _("not checked: no listening socket could be read from the listing ({unread})")
        words = words.format(unread=unread)
        return CheckResult("sshd.ports", title, Status.NOT_CHECKED, words, want, unread, keys)
    open_ = [s for s in listening.sockets if s.all_interfaces]
    strays = [s for s in open_ if not expected_port(s.port, settings)]
    if strays:
        shown = ", ".join(_socket_words(s) for s in strays[:_SHOWN])
        if len(strays) > _SHOWN:
            shown = _("{listed} and {count} more").format(listed=shown, count=len(strays) - _SHOWN)
        words = _("listening on all interfaces outside the expected ports: {ports}")
        words = words.format(ports=shown)
        if unread:
            gaps = _("{words}; lines of the listing not read: {unread}")
            words = gaps.format(words=words, unread=unread)
        return CheckResult("sshd.ports", title, Status.WARNED, words, want, shown, keys)
    found = ", ".join(_socket_words(s) for s in open_[:_SHOWN]) or _("nothing on all interfaces")
    if unread:
        words = _("only expected ports listen on all interfaces among those read ({found}), but"
                  " lines of the listing were not read: {unread}")  # fmt: skip
        words = words.format(found=found, unread=unread)
        found_words = _("{found}; not read: {unread}").format(found=found, unread=unread)
        return CheckResult("sshd.ports", title, Status.WARNED, words, want, found_words, keys)
    if remote and not _sshd_seen(listening, settings):
        words = _("the listing shows no sshd listening (no sshd process, nothing on {ports})"
                  " though zuka is logged in over SSH: the listing is suspect (another network"
                  " namespace, or output not as it is): {found}")  # fmt: skip
        words = words.format(ports=ports, found=found)
        return CheckResult("sshd.ports", title, Status.WARNED, words, want, found, keys)
    words = _("only expected ports listen on all interfaces: {found}").format(found=found)
    return CheckResult("sshd.ports", title, Status.PASSED, words, want, found, keys)


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
    check, title = "sshd.services", _("Services open without a token")
    want = _("no service on all interfaces answering /api/kernels without a token")
    gaps: list[str] = []
    if not_asked:
        listed = ", ".join(_socket_words(s) for s in not_asked[:_SHOWN])
        if len(not_asked) > _SHOWN:
            listed = _("{listed} and {count} more").format(
                listed=listed, count=len(not_asked) - _SHOWN
            )
        line = _("{count} port(s) on all interfaces not asked (zuka asks at most {most}): {ports}")
        gaps.append(line.format(count=len(not_asked), most=MAX_PROBED_PORTS, ports=listed))
    if unread:
        line = _("lines of the listing not read: {unread}")
        gaps.append(line.format(unread="; ".join(visible(p, 120) for p in unread[:_SHOWN])))
    said = _("; ").join(gaps)
    if not answers:
        if unread:
            words = _("not checked: no port was asked, and the listing was not read whole ({why})")
            words = words.format(why=said)
            return CheckResult(check, title, Status.NOT_CHECKED, words, want, said, keys)
        words = _("no service besides the expected ones listens on all interfaces")
        return CheckResult(check, title, Status.PASSED, words, want, "", keys)
    if all(missing_tool(ev) for _s, ev in answers):
        words = _("skipped, because curl is not on the node: services listening on all"
                  " interfaces were not asked")  # fmt: skip
        return CheckResult(check, title, Status.SKIPPED, words, want, "", keys)
    open_ = [s for s, ev in answers if ev.exit_status == 0 and ev.stdout.strip() == "200"]
    if open_:
        shown = ", ".join(_socket_words(s) for s in open_)
        words = _(
            "anyone who reaches the node can run code: {ports} answers GET /api/kernels"
            " with 200 without a token (a Jupyter server with no token or password)"
        )
        words = words.format(ports=shown)
        return CheckResult(check, title, Status.FAILED, words, want, shown, keys)
    asked = ", ".join(str(s.port) for s, _ev in answers)
    if gaps:
        found = _("asked: {asked}; {gaps}").format(asked=asked, gaps=said)
        words = _("no port asked answered /api/kernels without a token ({found})")
        words = words.format(found=found)
        return CheckResult(check, title, Status.WARNED, words, want, found, keys)
    words = _("no port on all interfaces answered /api/kernels without a token (asked: {asked})")
    words = words.format(asked=asked)
    return CheckResult(check, title, Status.PASSED, words, want, asked, keys)


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
        why = _("ss: {ss}; /proc/net/tcp: {proc}").format(
            ss=why_unread(ev), proc=why_unread(fallback) or _("empty")
        )
        return None, keys, why
    return parse_proc_net_tcp(fallback.stdout), keys, ""


async def check_ports(ctx: Context) -> list[CheckResult]:
    listening, keys, why = await read_listening(ctx.probe)
    if listening is None:
        words = _("not checked: the listening ports could not be read ({why})")
        words = words.format(why=visible(why, 300))
        title = _("Listening ports")
        return [CheckResult("sshd.ports", title, Status.NOT_CHECKED, words, evidence=keys)]
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
            (*keys, *(ev.key for _s, ev in answers)),
            not_asked=tuple(targets[len(answers) :]),
            unread=listening.problems,
        )
    )
    return out
