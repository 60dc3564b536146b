"""Recognising secrets pasted where a reference belongs, so they are refused at input.

The ledger holds references (a key path, a profile or environment variable name), never a
secret: whatever enters it is frozen into the append-only audit log and every export. A
refusal never repeats what it refused: the InputError carries HIDDEN as its value.
"""

from __future__ import annotations

import math
import re
from collections import Counter

from leases.core.errors import HIDDEN, InputError
from leases.core.i18n import _

__all__ = ["HIDDEN"]

# PEM blocks, OpenSSH's own key format (also its base64 body without the armour), PuTTY keys.
_KEY_TEXT_RE = re.compile(
    r"-----\s*BEGIN [A-Z0-9 ]*(PRIVATE KEY|KEY BLOCK)|PRIVATE KEY-----|b3BlbnNzaC1rZXktdjE"
    r"|PuTTY-User-Key-File-",
    re.IGNORECASE,
)
# Cloud access key ids, even glued to other text: Aliyun (LTAI), AWS (AKIA, ASIA), Tencent
# (AKID); GitHub (classic and fine-grained), GitLab, Slack, OpenAI-style tokens; a Slack
# webhook (its path is the secret); a URL with a password in it; a bearer token.
_TOKEN_RE = re.compile(
    r"(LTAI[A-Za-z0-9]{8,}|A[KS]IA[A-Z0-9]{12,}|AKID[A-Za-z0-9]{10,}"
    r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{20,}"
    r"|xox[abpre]-[A-Za-z0-9-]{10,}|sk-[A-Za-z0-9_-]{20,})"
    r"|(?i:hooks\.slack\.com/(services|workflows|triggers)/\S+)"
    r"|(?i:\b[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@)"
    r"|(?i:\bbearer\s+\S{16,})"
)
# A "password: xxx" said in so many words.
_PASSWORD_RE = re.compile(
    r"(password|passwd|pwd|passphrase|secret|密码|口令)\s*[:：=]\s*\S", re.IGNORECASE
)
_WORD_RE = re.compile(r"[A-Za-z0-9+/=_-]{28,}")
# An OpenSSH key fingerprint is a hash of a public key, not a secret: what the ledger keeps
# for an ssh_key resource (offboarding revokes the key by it). Random-looking, so exempt
# from the random-string rule when it is the whole value.
_FINGERPRINT_RE = re.compile(r"SHA256:[A-Za-z0-9+/]{43}")


def looks_like_key_text(value: str) -> bool:
    return _KEY_TEXT_RE.search(value) is not None


def _entropy(word: str) -> float:
    counts = Counter(word)
    return -sum(c / len(word) * math.log2(c / len(word)) for c in counts.values())


def _high_entropy(word: str) -> bool:
    """A long random-looking word: upper, lower case and digits, spread evenly.

    Environment variable names (ALIYUN_ACCESS_KEY_ID), ids in lower case (s-bp1ahz3n9f0q)
    and UUIDs have no mix of cases, so they pass.
    """
    mixed = (
        any(c.isupper() for c in word)
        and any(c.islower() for c in word)
        and any(c.isdigit() for c in word)
    )
    return mixed and _entropy(word) >= 4.0


def token_kind(value: str) -> str | None:
    """What kind of secret value looks like, or None."""
    if looks_like_key_text(value):
        return _("private key text")
    if _TOKEN_RE.search(value):
        return _("an access key or token")
    if _PASSWORD_RE.search(value):
        return _("a password")
    if _FINGERPRINT_RE.fullmatch(value):
        return None
    if any(_high_entropy(w) for w in _WORD_RE.findall(value)):
        return _("a long random string (a key or token?)")
    return None


def refuse_key_text(field: str, value: str) -> None:
    """Private key text has no place in any field of the ledger."""
    if looks_like_key_text(value):
        raise InputError(
            field, HIDDEN, _("looks like private key text: give the path of the key file instead")
        )


def refuse_secret(field: str, value: str) -> None:
    """For free text and references: refuse key text, tokens, passwords and random strings."""
    kind = token_kind(value)
    if kind is not None:
        raise InputError(
            field,
            HIDDEN,
            _(
                "looks like {kind}: zuka never stores secrets; give a reference "
                "(a profile or environment variable name, a key path)"
            ).format(kind=kind),
        )
