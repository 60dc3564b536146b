"""Notification URLs: which kind each is (a chat robot zuka posts to itself, or an apprise
URL), checked and refused where unusable (leases.notify.host: never a link-local or cloud
metadata address), and masked wherever one is shown or stored (every query value, user and
password, apprise's +header and -param values). Read by the config's check as by the
sender and the notifier (leases.notify.send, leases.notify.outbox), which it does not
import.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from leases.core.errors import InputError
from leases.core.i18n import _, pgettext
from leases.core.textsafe import is_clean, visible
from leases.notify.host import Resolver, resolved_refusal, system_resolver

FIELD = "notify.urls"


class TargetKind(StrEnum):
    DINGTALK = "dingtalk"
    FEISHU = "feishu"
    WECOM = "wecom"
    APPRISE = "apprise"


def kind_word(kind: TargetKind) -> str:
    """A robot's kind as a message names it: "dingtalk" in English (as ever), 钉钉, 飞书,
    企业微信 in Chinese (the config and the URL keep the value)."""
    words = {
        TargetKind.DINGTALK: pgettext("robot", "dingtalk"),
        TargetKind.FEISHU: pgettext("robot", "feishu"),
        TargetKind.WECOM: pgettext("robot", "wecom"),
        TargetKind.APPRISE: pgettext("robot", "apprise"),
    }
    return words[kind]


_PREFIXES = {
    "dingtalk+": TargetKind.DINGTALK,
    "feishu+": TargetKind.FEISHU,
    "lark+": TargetKind.FEISHU,
    "wecom+": TargetKind.WECOM,
}
_HOSTS = {
    "oapi.dingtalk.com": TargetKind.DINGTALK,
    "open.feishu.cn": TargetKind.FEISHU,
    "open.larksuite.com": TargetKind.FEISHU,
    "qyapi.weixin.qq.com": TargetKind.WECOM,
}


@dataclass(frozen=True)
class Target:
    """One configured URL. repr shows it masked: the URL holds a token."""

    url: str = field(repr=False)
    kind: TargetKind
    # Where a robot message is posted (the secret taken out); the apprise URL otherwise.
    endpoint: str = field(repr=False)
    secret: str = field(default="", repr=False)

    @property
    def ref(self) -> str:
        """What the ledger stores instead of the URL."""
        return hashlib.sha256(self.url.encode()).hexdigest()[:32]

    @property
    def masked(self) -> str:
        return mask_url(self.url)


def _robot_kind(url: str) -> tuple[TargetKind, str] | None:
    """The robot kind and the http(s) URL, for a prefixed URL or a known robot host."""
    for prefix, kind in _PREFIXES.items():
        if url.lower().startswith(prefix):
            return kind, url[len(prefix) :]
    parts = urlsplit(url)
    if parts.scheme.lower() in ("http", "https"):
        kind_of_host = _HOSTS.get((parts.hostname or "").lower())
        if kind_of_host is not None:
            return kind_of_host, url
    return None


def parse_target(url: str, *, resolve: Resolver = system_resolver) -> Target:
    """A configured URL checked and classified; InputError (field notify.urls) if unusable.
    Errors show the URL masked. resolve: how a host name is resolved (tests inject one)."""
    if not url.strip():
        raise InputError(FIELD, url, _("a notification URL must not be empty"))
    if not is_clean(url) or any(c.isspace() for c in url):
        # urllib refuses these only when sending, quoting the whole URL (and its token).
        raise InputError(
            FIELD,
            mask_url(url),
            _("must not contain spaces or control characters (percent-encode them: %20)"),
        )
    try:
        robot = _robot_kind(url)  # urlsplit: ValueError on "http://[::1" and the like
        parts = urlsplit(robot[1] if robot else url)
        host = parts.hostname or ""
        # Resolved only where the host is the server: many apprise URLs hold a token there.
        port = parts.port if robot or parts.scheme.lower() in _HOST_SCHEMES else None
    except ValueError:
        raise InputError(FIELD, mask_url(url), _("not a well-formed URL")) from None
    said = resolved_refusal(
        host, port, resolve if robot or parts.scheme.lower() in _HOST_SCHEMES else None
    )
    if said is not None:
        raise InputError(
            FIELD, mask_url(url), _("not a notification URL: {why}").format(why=visible(said, 200))
        )
    if robot is not None:
        kind, web = robot
        parts = urlsplit(web)
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            raise InputError(
                FIELD,
                mask_url(url),
                _("after {kind}+ must come an http(s):// address").format(kind=kind.value),
            )
        if not url.isascii():
            raise InputError(
                FIELD,
                mask_url(url),
                _("a robot's address must be plain ASCII (percent-encode other characters)"),
            )
        query = parse_qsl(parts.query, keep_blank_values=True)
        secrets = [v for k, v in query if k == "secret"]
        if secrets and kind is TargetKind.WECOM:
            raise InputError(FIELD, mask_url(url), _("WeCom robots take no secret"))
        rest = urlencode([(k, v) for k, v in query if k != "secret"])
        endpoint = urlunsplit((parts.scheme, parts.netloc, parts.path, rest, ""))
        return Target(url, kind, endpoint, secrets[-1] if secrets else "")
    if urlsplit(url).scheme.lower() in ("http", "https"):
        raise InputError(
            FIELD,
            mask_url(url),
            _(
                "a plain web address is not a notification URL: prefix a chat robot's address "
                "with dingtalk+, feishu+ or wecom+, or use apprise's json:// for a JSON POST"
            ),
        )
    if apprise_plugin(url) is None:
        raise InputError(FIELD, mask_url(url), _("not a URL that apprise knows"))
    return Target(url, TargetKind.APPRISE, url)


# apprise schemes whose URL names the server it posts to (others may hold a token there).
_HOST_SCHEMES = {"json", "jsons", "xml", "xmls", "form", "forms"}


def apprise_plugin(url: str) -> Any:
    import apprise

    return apprise.Apprise.instantiate(url, suppress_exceptions=True)


def _looks_secret(segment: str) -> bool:
    return len(segment) >= 12 or (len(segment) >= 8 and any(c.isdigit() for c in segment))


def _masked_query(query: str) -> str:
    """Every value masked, keys kept as written (apprise's +header and -param included)."""
    out = []
    for part in query.split("&"):
        if "=" in part:
            out.append(part.split("=", 1)[0][:60] + "=***")
        elif part:
            out.append("***" if _looks_secret(part) else part[:60])
    return "&".join(out)


def _masked(scheme: str, netloc: str, path: str, query: str, feishu: bool = False) -> str:
    if "@" in netloc:  # user and password alike: either may be the secret
        netloc = "***@" + netloc.rpartition("@")[2]
    segments = path.split("/")
    if feishu and segments and segments[-1]:
        segments[-1] = "***"
    path = "/".join("***" if _looks_secret(s) else s for s in segments)
    return urlunsplit((scheme, netloc, path, _masked_query(query), ""))


def mask_url(url: str) -> str:
    """The URL with its tokens and passwords replaced by ***, to show or log: every query
    value, user and password, the path segments that look like tokens, and what apprise
    itself knows to be secret in its URLs. Never raises."""
    try:
        return _mask_url(url)
    except Exception:  # a URL too broken to take apart shows as its scheme only
        return visible(f"{url.split('://', 1)[0][:20]}://***" if "://" in url else "***", 40)


def _mask_url(url: str) -> str:
    robot = _robot_kind(url)
    if robot is None and "://" in url and not url.lower().startswith(("http://", "https://")):
        scheme = url.split("://", 1)[0]
        try:
            plugin = apprise_plugin(url) if is_clean(url) else None
        except Exception:
            plugin = None
        if plugin is None:
            return visible(f"{scheme}://***", 300)
        # apprise hides the tokens it knows in the address, but shows headers (+name),
        # params (-name) and query values in full: zuka's own masking covers those.
        shown = urlsplit(str(plugin.url(privacy=True)))
        query = urlsplit(url).query
        return visible(_masked(shown.scheme, shown.netloc, shown.path, query), 300)
    prefix = ""
    web = url
    if robot is not None and robot[1] != url:
        prefix = url[: len(url) - len(robot[1])]
        web = robot[1]
    parts = urlsplit(web)
    feishu = robot is not None and robot[0] is TargetKind.FEISHU
    masked = _masked(parts.scheme, parts.netloc, parts.path, parts.query, feishu)
    return visible(prefix + masked, 300)


def _secrets_of(target: Target) -> list[str]:
    """The parts of a target's URL that must never be shown, longest first."""
    found = {target.url, target.endpoint, target.secret}
    for url in (target.url, target.endpoint):
        try:
            parts = urlsplit(url)
        except ValueError:
            continue
        found.update(v for _k, v in parse_qsl(parts.query, keep_blank_values=True))
        found.update(p.partition("=")[2] for p in parts.query.split("&"))
        found.update(s for s in parts.path.split("/") if _looks_secret(s))
        if "@" in parts.netloc:
            found.update(parts.netloc.rpartition("@")[0].split(":"))
    return sorted((s for s in found if len(s) >= 4), key=len, reverse=True)


def scrub(target: Target, text: str) -> str:
    """text (an error message, say) with every secret part of the target's URL masked."""
    for secret in _secrets_of(target):
        text = text.replace(secret, "***")
    return text


# -- one send -----------------------------------------------------------------------------
