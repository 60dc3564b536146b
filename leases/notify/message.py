"""A notification message, and how it is rendered: its title and body as sent (controls
made visible, lengths bounded), and per channel: the JSON a chat robot is posted (signed when
its URL has a secret), the title and body apprise is given. Node text reaches the messages,
so on every channel the characters that make a chat mention are defused (_DEFUSE).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from leases.core import valuewords
from leases.core.i18n import _
from leases.core.severity import Severity
from leases.core.textsafe import visible
from leases.notify.url import Target, TargetKind

TITLE_CHARS = 200
BODY_CHARS = 4000


# The most UTF-8 bytes of text each robot takes (WeCom refuses text over 2048 bytes).
_TEXT_BYTES = {
    TargetKind.DINGTALK: 8000,
    TargetKind.FEISHU: 8000,
    TargetKind.WECOM: 2048,
    TargetKind.APPRISE: 8000,
}


@dataclass(frozen=True)
class Message:
    title: str
    body: str
    severity: Severity = Severity.WARNING
    # Messages with the same key are not resent within the dedupe window ("" = the title).
    key: str = ""

    @property
    def dedupe_key(self) -> str:
        return self.key or self.title


def _cut_bytes(text: str, limit: int) -> str:
    data = text.encode()
    if len(data) <= limit:
        return text
    return data[: limit - 3].decode(errors="ignore") + "…"


def severity_word(severity: str) -> str:
    """A severity's word in the language in use ("critical": "严重")."""
    return valuewords.word(severity, "leases.core.severity.Severity")


def render(message: Message) -> tuple[str, str]:
    """Title and body as sent, in the language in use (the sending process's): controls
    made visible, lengths bounded. "zuka" is in the title so that a DingTalk robot's
    keyword check can ask for it."""
    severity = severity_word(message.severity.value)
    title = _("[zuka] {severity}: {title}").format(
        severity=severity, title=visible(message.title, TITLE_CHARS)
    )
    return title, visible(message.body, BODY_CHARS, keep_newlines=True)


# Text from a node or the ledger (a node's name or note, a GPU process name, an SSH error)
# reaches these messages, and chat platforms turn some text into a mention of everyone:
# Feishu `<at user_id="all">`, Slack `<!channel>` `<@U123>`, Discord and Mattermost
# `@everyone` `@here` `@channel`, DingTalk and WeCom `@all`, Matrix `@room`, an HTML
# entity (&lt;at ...&gt;) decoded on the way. So, for every target, the characters that
# make one (@ < > &) are swapped for their full-width forms, which read the same (a
# visible change, not an invisible character) and mean nothing to the platform. zuka never
# sets a payload's "at", isAtAll or mentioned_list, and its config names no one to mention.
_DEFUSE = str.maketrans({"@": "\uff20", "<": "\uff1c", ">": "\uff1e", "&": "\uff06"})


def _defused(text: str) -> str:
    return text.translate(_DEFUSE)


def robot_request(target: Target, message: Message, now_s: float) -> tuple[str, dict[str, Any]]:
    """The URL and JSON a chat robot is sent (signed when the target has a secret)."""
    title, body = render(message)
    text = _cut_bytes(_defused(f"{title}\n{body}"), _TEXT_BYTES[target.kind])
    url = target.endpoint
    payload: dict[str, Any]
    if target.kind is TargetKind.FEISHU:
        payload = {"msg_type": "text", "content": {"text": text}}
        if target.secret:
            # Feishu signs with the key "timestamp\nsecret" over an empty message.
            ts = str(int(now_s))
            key = f"{ts}\n{target.secret}".encode()
            sign = base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()
            payload = {"timestamp": ts, "sign": sign, **payload}
    else:
        payload = {"msgtype": "text", "text": {"content": text}}
        if target.kind is TargetKind.DINGTALK and target.secret:
            ts = str(int(now_s * 1000))
            mac = hmac.new(
                target.secret.encode(), f"{ts}\n{target.secret}".encode(), hashlib.sha256
            )
            sign = base64.b64encode(mac.digest()).decode()
            parts = urlsplit(url)
            query = urlencode([*parse_qsl(parts.query), ("timestamp", ts), ("sign", sign)])
            url = urlunsplit((parts.scheme, parts.netloc, parts.path, query, ""))
    return url, payload


def apprise_text(message: Message) -> tuple[str, str]:
    """The title and body apprise is given: mentions defused, the body bounded."""
    title, body = (_defused(text) for text in render(message))
    return title, _cut_bytes(body, _TEXT_BYTES[TargetKind.APPRISE])
