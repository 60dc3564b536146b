"""The one entry for every value a cloud step passes to a provider: ids, bucket names,
prefixes, regions, endpoints. Allow-lists, so that a value from the ledger (which may have
been imported or edited by hand) never becomes an option, a second argument, a shell word or
a different URL. The planner checks them, and each driver checks them again before acting,
since a stored plan is read back from a file someone could write.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from urllib.parse import urlsplit

from leases.errors import InputError
from leases.models import ResourceKind
from leases.textsafe import visible

# Snapshot, image and disk ids: snap-0a1b (AWS), s-bp1ahz3n (Aliyun), img-8l0wnz (Tencent),
# a UUID (Huawei). A letter or digit first, so no id can read as an option.
_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
# S3's own bucket naming rules (OSS, COS with its -appid suffix, OBS and MinIO keep them).
_BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_REGION_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
_PREFIX_BAD_RE = re.compile(r"[\x00-\x1f\x7f\\]")

# Instance metadata services: never an object store, and what they answer proves nothing.
_METADATA_HOSTS = frozenset(
    {"metadata.google.internal", "metadata.tencentyun.com", "100.100.100.200"}
)
# Public clouds' own API domains: all speak TLS, so plain HTTP there is a mistake that sends
# the session token and every answer in clear.
_TLS_DOMAINS = (
    "amazonaws.com",
    "amazonaws.com.cn",
    "aliyuncs.com",
    "myqcloud.com",
    "tencentcloudapi.com",
    "myhuaweicloud.com",
)

CLOUD_KINDS = (
    ResourceKind.IMAGE,
    ResourceKind.SNAPSHOT,
    ResourceKind.DISK,
    ResourceKind.BUCKET,
    ResourceKind.BUCKET_PREFIX,
)


def _shown(value: str) -> str:
    return visible(value, 120)


def native_id(kind: ResourceKind, value: str) -> str:
    """An image, snapshot or disk id, a bucket name, or "bucket/prefix/" for a bucket prefix."""
    if kind is ResourceKind.BUCKET:
        return bucket(value)
    if kind is ResourceKind.BUCKET_PREFIX:
        name, prefix = bucket_prefix(value)
        return f"{name}/{prefix}"
    if kind not in CLOUD_KINDS:
        raise InputError("kind", str(kind), "not a cloud resource zuka deletes")
    if not _ID_RE.fullmatch(value):
        raise InputError(
            "native_id",
            _shown(value),
            f"a {kind} id is letters, digits, '.', '_' and '-', starting with a letter or digit",
        )
    return value


def bucket(value: str) -> str:
    if not _BUCKET_RE.fullmatch(value) or ".." in value:
        raise InputError(
            "native_id",
            _shown(value),
            "a bucket name is 3 to 63 lower-case letters, digits, '.' and '-'",
        )
    return value


def bucket_prefix(value: str) -> tuple[str, str]:
    """ "bucket/prefix/" -> (bucket, prefix). The prefix must end with '/': "runs/exp1" would
    also match "runs/exp10/", which is not ours."""
    name, sep, prefix = value.partition("/")
    bucket(name)
    if not sep or not prefix:
        raise InputError(
            "native_id",
            _shown(value),
            "a bucket prefix is BUCKET/PREFIX/; to delete the whole bucket use kind bucket",
        )
    if not prefix.endswith("/") or prefix.startswith("/") or "//" in prefix:
        raise InputError(
            "native_id",
            _shown(value),
            "the prefix must end with '/' and have no empty parts (runs/exp1/, not runs/exp1)",
        )
    if _PREFIX_BAD_RE.search(prefix) or len(prefix) > 512:
        raise InputError(
            "native_id", _shown(value), "the prefix has control characters or is too long"
        )
    return name, prefix


def region(value: str) -> str:
    """A region name, or "" for the provider's or SDK's default."""
    if value and not _REGION_RE.fullmatch(value):
        raise InputError("region", _shown(value), "a region is lower-case letters, digits and '-'")
    return value


def endpoint(value: str) -> str:
    """An http(s) URL with a host and nothing else (no user, password, query or fragment),
    not an instance metadata service, https for a public cloud's own domain; or "" for the
    SDK's default."""
    if not value:
        return value
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        parts, port = None, None
    if (
        parts is None
        or parts.scheme not in ("https", "http")
        or not parts.hostname
        or parts.username is not None
        or parts.password is not None
        or parts.query
        or parts.fragment
        or parts.path not in ("", "/")
        or re.search(r"[\s\x00-\x1f\x7f]", value)
        or (port is not None and not 0 < port < 65536)
    ):
        raise InputError(
            "endpoint",
            _shown(value),
            "an endpoint is http(s)://HOST[:PORT] with no user, password, path or query",
        )
    host = parts.hostname.lower()
    if not host.isascii():
        raise InputError("endpoint", _shown(value), "the host name must be plain ASCII")
    if host in _METADATA_HOSTS or _link_local(host):
        raise InputError(
            "endpoint", _shown(value), "is an instance metadata service, not an object store"
        )
    if parts.scheme == "http" and any(host == d or host.endswith("." + d) for d in _TLS_DOMAINS):
        raise InputError(
            "endpoint", _shown(value), "a public cloud's endpoint takes https, not plain http"
        )
    return value


def _link_local(host: str) -> bool:
    """A link-local address, also written as the resolver reads it (2852039166,
    0xa9fea9fe, 169.254.43518 are all 169.254.169.254)."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        try:
            address = ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return False
    return address.is_link_local or str(address) == "fd00:ec2::254"
