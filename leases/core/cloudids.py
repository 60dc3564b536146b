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
from urllib.parse import SplitResult, urlsplit

from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.models import ResourceKind
from leases.core.textsafe import visible

# Snapshot, image and disk ids: snap-0a1b (AWS), s-bp1ahz3n (Aliyun), img-8l0wnz (Tencent),
# a UUID (Huawei). A letter or digit first, so no id can read as an option.
_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
# S3's own bucket naming rules (OSS, COS with its -appid suffix, OBS and MinIO keep them).
_BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_REGION_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
_ACCOUNT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_PREFIX_BAD_RE = re.compile(r"[\x00-\x1f\x7f\\]")

# Instance metadata services: never an object store, and what they answer proves nothing.
_METADATA_HOSTS = frozenset(
    {"metadata.google.internal", "metadata.tencentyun.com", "100.100.100.200"}
)
# A region as the public clouds' own host names carry it: AWS (ec2.eu-west-1.amazonaws.com,
# s3-us-west-2.amazonaws.com, bucket.s3.eu-west-1.amazonaws.com.cn), Aliyun OSS
# (oss-cn-hangzhou[-internal].aliyuncs.com), Tencent COS (cos.ap-guangzhou.myqcloud.com),
# Huawei OBS (obs.cn-north-4.myhuaweicloud.com). Other hosts (MinIO, a lab's store) name none.
_HOST_REGION_RES = (
    re.compile(
        r"(?:^|\.)(?:[a-z0-9-]+[.-])?((?:[a-z]{2}|cn)-(?:gov-|iso-|isob-)?[a-z]+-\d+)"
        r"\.amazonaws\.com(?:\.cn)?$"
    ),
    re.compile(r"(?:^|\.)oss-([a-z]+-[a-z0-9-]+?)(?:-internal)?\.aliyuncs\.com$"),
    re.compile(r"(?:^|\.)cos\.([a-z]+-[a-z0-9-]+)\.myqcloud\.com$"),
    re.compile(r"(?:^|\.)obs\.([a-z]+-[a-z0-9-]+)\.myhuaweicloud\.com$"),
)
# AWS's global endpoints (s3.amazonaws.com, sts.amazonaws.com) are in us-east-1.
_AWS_GLOBAL_RE = re.compile(r"(?:^|\.)(?:s3|sts|ec2)\.amazonaws\.com$")

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
        raise InputError("kind", str(kind), _("not a cloud resource zuka deletes"))
    if not _ID_RE.fullmatch(value):
        raise InputError(
            "native_id",
            _shown(value),
            _(
                "a {kind} id is letters, digits, '.', '_' and '-', starting with a letter or digit"
            ).format(kind=kind),
        )
    return value


def bucket(value: str) -> str:
    if not _BUCKET_RE.fullmatch(value) or ".." in value:
        raise InputError(
            "native_id",
            _shown(value),
            _("a bucket name is 3 to 63 lower-case letters, digits, '.' and '-'"),
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
            _("a bucket prefix is BUCKET/PREFIX/; to delete the whole bucket use kind bucket"),
        )
    if not prefix.endswith("/") or prefix.startswith("/") or "//" in prefix:
        raise InputError(
            "native_id",
            _shown(value),
            _("the prefix must end with '/' and have no empty parts (runs/exp1/, not runs/exp1)"),
        )
    if _PREFIX_BAD_RE.search(prefix) or len(prefix) > 512:
        raise InputError(
            "native_id", _shown(value), _("the prefix has control characters or is too long")
        )
    return name, prefix


# An EC2 instance id: i- and 8 or 17 lower-case hex digits (AWS, and the EC2-compatible
# APIs that copy it).
_EC2_INSTANCE_RE = re.compile(r"i-(?:[0-9a-f]{8}|[0-9a-f]{17})")


def instance_id(value: str) -> str:
    """A node's cloud instance id, or "": an id of any cloud (letters, digits, '.', '_', '-',
    a letter or digit first), so that it can never be an option or a second word."""
    if value and not _ID_RE.fullmatch(value):
        raise InputError(
            "instance_id",
            _shown(value),
            _(
                "an instance id is letters, digits, '.', '_' and '-', starting with a letter or"
                " digit"
            ),
        )
    return value


def ec2_instance_id(value: str) -> str:
    """An instance id as the EC2 API writes one: i- and 8 or 17 hex digits."""
    if not _EC2_INSTANCE_RE.fullmatch(value):
        raise InputError(
            "instance_id", _shown(value), _("an EC2 instance id is i- and 17 hex digits (or 8)")
        )
    return value


def account(value: str) -> str:
    """An account id as a step carries it (AWS: 12 digits; others: their own ids), or ""."""
    if value and not _ACCOUNT_RE.fullmatch(value):
        raise InputError(
            "account_id", _shown(value), _("an account id is letters, digits, '.', '_' and '-'")
        )
    return value


def region(value: str) -> str:
    """A region name, or "" for the provider's or SDK's default."""
    if value and not _REGION_RE.fullmatch(value):
        raise InputError(
            "region", _shown(value), _("a region is lower-case letters, digits and '-'")
        )
    return value


def endpoint(value: str) -> str:
    """The one entry for an endpoint: an https URL with a host and nothing else (no user,
    password, path, query or fragment), not an instance metadata service; plain http only to
    a loopback address (127.0.0.0/8 or ::1: a local MinIO, the tests), since over http the
    lab's signed requests, session token and every answer travel in clear and anyone on the
    path can answer for a store. Or "" for the provider's default."""
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
            _("an endpoint is https://HOST[:PORT] with no user, password, path or query"),
        )
    host = parts.hostname.lower()
    if not host.isascii():
        raise InputError("endpoint", _shown(value), _("the host name must be plain ASCII"))
    if host in _METADATA_HOSTS or _link_local(host):
        raise InputError(
            "endpoint", _shown(value), _("is an instance metadata service, not an object store")
        )
    if parts.scheme == "http" and not _loopback(host):
        raise InputError(
            "endpoint",
            _shown(value),
            _("takes https: plain http only to a loopback address (127.0.0.1, ::1)"),
        )
    return value


def _loopback(host: str) -> bool:
    """A loopback address written as one (127.x.y.z, ::1); never a name, which a resolver or
    /etc/hosts could point anywhere."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def endpoint_region(url: str) -> str:
    """The region a public cloud's endpoint URL names in its host, or "" when it names none
    (a lab's own store, a loopback address)."""
    host = (urlsplit(url).hostname or "").lower()
    for pattern in _HOST_REGION_RES:
        found = pattern.search(host)
        if found:
            return found.group(1)
    return "us-east-1" if _AWS_GLOBAL_RE.search(host) else ""


def same_endpoint(a: str, b: str) -> bool:
    """Two endpoint URLs name the same place: scheme, host and port alike (a trailing '/',
    the default port, the host's case and its trailing dot aside)."""
    pa, pb = urlsplit(a), urlsplit(b)
    default = {"https": 443, "http": 80}

    def port(p: SplitResult) -> int | None:
        return p.port or default.get(p.scheme)

    return (
        pa.scheme == pb.scheme
        and (pa.hostname or "").lower().rstrip(".") == (pb.hostname or "").lower().rstrip(".")
        and port(pa) == port(pb)
    )


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
