"""What every cloud driver shares: how credentials are found from a provider's
credential_ref, and reading a deletion back until it shows, for clouds that delete later.

credential_ref (the ledger holds a reference, never a secret):
- "" : the SDK's or CLI's own default (boto3: AWS_* variables, ~/.aws; aliyun/tccli/hcloud:
  their default profile);
- "env:PREFIX" : the environment variables PREFIX_ACCESS_KEY_ID, PREFIX_SECRET_ACCESS_KEY
  and, if set, PREFIX_SESSION_TOKEN (handed to a CLI under the names its template gives);
- anything else: a named profile (boto3's profile_name, `aliyun --profile`, `tccli
  --profile`, `hcloud --cli-profile`).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from leases.core import cloudids as cloud_ids
from leases.core.errors import InputError
from leases.core.i18n import N_, _
from leases.core.textsafe import visible
from leases.offboard.steps import Identity, Outcome

if TYPE_CHECKING:
    import boto3

Sleep = Callable[[float], Awaitable[None]]
Monotonic = Callable[[], float]

_ENV_RE = re.compile(r"[A-Z_][A-Z0-9_]{0,63}")
_PROFILE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,79}")


class CloudError(Exception):
    """A cloud driver could not even ask (no credentials, CLI missing, no identity API).
    The message names what to fix; it never holds a secret."""


@dataclass(frozen=True)
class Credentials:
    profile: str = ""
    env_prefix: str = ""

    def env_names(self) -> tuple[str, str, str]:
        p = self.env_prefix
        return f"{p}_ACCESS_KEY_ID", f"{p}_SECRET_ACCESS_KEY", f"{p}_SESSION_TOKEN"

    def from_env(self, environ: Mapping[str, str]) -> tuple[str, str, str]:
        """(key id, secret, token or "") from the environment, or CloudError naming the
        variables (never their values)."""
        key_name, secret_name, token_name = self.env_names()
        key, secret = environ.get(key_name, ""), environ.get(secret_name, "")
        if not key or not secret:
            raise CloudError(
                N_("credential_ref env:{prefix}: set {key} and {secret}").format(
                    prefix=self.env_prefix, key=key_name, secret=secret_name
                )
            )
        return key, secret, environ.get(token_name, "")


def credentials(ref: str) -> Credentials:
    if not ref:
        return Credentials()
    if ref.startswith("env:"):
        prefix = ref[4:]
        if not _ENV_RE.fullmatch(prefix):
            raise InputError(
                "credential_ref",
                visible(ref, 80),
                _("env:PREFIX takes an upper-case variable prefix"),
            )
        return Credentials(env_prefix=prefix)
    if not _PROFILE_RE.fullmatch(ref):
        raise InputError(
            "credential_ref",
            visible(ref, 80),
            _("a profile name is letters, digits, '.', '_', '@' and '-' (or env:PREFIX)"),
        )
    return Credentials(profile=ref)


def boto_session(creds: Credentials, environ: Mapping[str, str]) -> boto3.Session:
    import boto3  # boto3 costs ~0.3 s to import: only offboarding pays it
    from botocore.exceptions import ProfileNotFound

    if creds.env_prefix:
        key, secret, token = creds.from_env(environ)
        return boto3.Session(
            aws_access_key_id=key, aws_secret_access_key=secret, aws_session_token=token or None
        )
    try:
        return boto3.Session(profile_name=creds.profile or None)
    except ProfileNotFound as exc:
        raise CloudError(
            N_("credential_ref {profile}: no such AWS profile").format(profile=creds.profile)
        ) from exc


@dataclass(frozen=True)
class Reading:
    """One read-back: gone (not found / 404), or still there, or an answer waiting cannot
    change (access denied): final."""

    gone: bool
    output: str
    detail: str = ""
    final: bool = False


@dataclass(frozen=True)
class Timing:
    """How long to keep reading back a deletion a cloud finishes later; injected so tests
    need not wait."""

    timeout_s: float = 300.0
    sleep: Sleep = asyncio.sleep
    monotonic: Monotonic = time.monotonic
    first_s: float = 1.0
    max_s: float = 15.0


async def poll_gone(
    read: Callable[[], Awaitable[Reading]], timing: Timing, *, patient: bool = True
) -> Outcome:
    """Read back until gone or timing.timeout_s passed: the first read at once, then with
    growing pauses. done only on a read that says gone. Not patient: one read (a recheck,
    or the read before acting again on a step a killed run started)."""
    start = timing.monotonic()
    pause = timing.first_s
    reads = 0
    while True:
        reading = await read()
        reads += 1
        if reading.gone:
            return Outcome(
                True, reading.output, N_("gone (read back {count} time(s))").format(count=reads)
            )
        waited = timing.monotonic() - start
        if reading.final or not patient or waited + pause > timing.timeout_s:
            detail = reading.detail or N_("still there")
            if not reading.final and patient:
                detail = N_("{said} after {seconds} s of reading back; retry later").format(
                    said=detail, seconds=f"{waited:.0f}"
                )
            return Outcome(False, reading.output, detail)
        await timing.sleep(pause)
        pause = min(pause * 2, timing.max_s)


def client_error(exc: Exception) -> tuple[str, str, int]:
    """(code, message, HTTP status) of a botocore ClientError; ("", str, 0) otherwise."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return "", visible(exc, 300), 0
    err = response.get("Error") or {}
    status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode") or 0
    return (
        visible(err.get("Code", ""), 100),
        visible(err.get("Message", ""), 300),
        int(status),
    )


_HOPELESS_CODES = frozenset(
    {"AccessDenied", "UnauthorizedOperation", "AuthFailure", "InvalidAccessKeyId"}
    | {"SignatureDoesNotMatch", "InvalidClientTokenId", "ExpiredToken"}
)


def hopeless(exc: Exception) -> bool:
    """An answer reading back again will not change: no or refused credentials. (403 on a
    bucket we deleted may also be someone else's bucket of that name now.)"""
    code, _message, status = client_error(exc)
    no_keys = type(exc).__name__ in ("NoCredentialsError", "PartialCredentialsError")
    return no_keys or code in _HOPELESS_CODES or status in (401, 403)


def called_region(client: Any) -> str:
    """The region a boto3 client actually calls: the one its endpoint's host names (a public
    cloud's endpoint, as the SDK resolved it or as given), else the region it signs for."""
    return cloud_ids.endpoint_region(client.meta.endpoint_url or "") or str(
        client.meta.region_name or ""
    )


def where(client: Any) -> dict[str, str]:
    """Where a client looks, for the evidence and a Sighting's facts."""
    return {"region": called_region(client), "endpoint": str(client.meta.endpoint_url or "")}


def check_place(client: Any, *, region: str, endpoint: str) -> None:
    """CloudError unless the client calls the place the step names: the endpoint given (not
    one the environment or a profile slipped in) and the resource's recorded region."""
    called = str(client.meta.endpoint_url or "")
    if endpoint and not cloud_ids.same_endpoint(called, endpoint):
        raise CloudError(
            N_("the client calls {called}, not the step's {endpoint}").format(
                called=visible(called, 200), endpoint=endpoint
            )
        )
    actual = called_region(client)
    if region and actual != region:
        raise CloudError(
            N_(
                "the client calls region {actual} (as the SDK resolves it from"
                " {called}), but the resource is recorded in {region}: refused"
            ).format(actual=visible(actual, 64), called=visible(called, 200), region=region)
        )


class BotoAccount:
    """One provider's credentials and region: boto3 clients made once per (service,
    endpoint, region), and who they act as at each (STS GetCallerIdentity).

    A client's endpoint is the step's, or the SDK's built-in one for its region: never one
    from AWS_ENDPOINT_URL* or a profile's endpoint_url (ignored), so that what preflight
    proves and where deletions go is what the plan says."""

    def __init__(
        self,
        creds: Credentials,
        *,
        region: str,
        environ: Mapping[str, str],
    ) -> None:
        self.creds = creds
        self.region = region
        self.environ = environ
        self._session: boto3.Session | None = None
        self._clients: dict[tuple[str, str, str, str], Any] = {}

    def client(self, service: str, endpoint: str, region: str, addressing: str = "") -> Any:
        key = (service, endpoint, region, addressing)
        if key not in self._clients:
            from botocore.config import Config as BotoConfig

            if self._session is None:
                self._session = boto_session(self.creds, self.environ)
            options: dict[str, Any] = {
                "retries": {"max_attempts": 3, "mode": "standard"},
                "connect_timeout": 10,
                "read_timeout": 60,
                "ignore_configured_endpoint_urls": True,
            }
            if addressing:
                options["s3"] = {"addressing_style": addressing}
            if endpoint:
                # S3-compatible stores (OSS, COS, OBS, MinIO) reject boto3's newer default
                # checksums on some requests; send one only where the API requires it.
                options["request_checksum_calculation"] = "when_required"
                options["response_checksum_validation"] = "when_required"
            self._clients[key] = self._session.client(
                service,
                endpoint_url=endpoint or None,
                region_name=region or self.region or None,
                config=BotoConfig(**options),
            )
        return self._clients[key]

    async def identity(self, endpoint: str = "", region: str = "") -> Identity:
        """STS GetCallerIdentity at that endpoint and region: the place's own answer. The
        region is the one the STS client calls, checked against the one asked for."""

        def ask() -> Identity:
            from botocore.exceptions import BotoCoreError, ClientError

            sts = self.client(
                "sts", cloud_ids.endpoint(endpoint), cloud_ids.region(region) or self.region
            )
            check_place(sts, region=region, endpoint=endpoint)
            try:
                who = sts.get_caller_identity()
            except (BotoCoreError, ClientError) as exc:
                code, message, _status = client_error(exc)
                raise CloudError(
                    N_("STS GetCallerIdentity failed: {code} {message}")
                    .format(code=code or "error", message=message)
                    .strip()
                ) from exc
            return Identity(
                account_id=visible(who.get("Account", ""), 64),
                region=called_region(sts),
                arn=visible(who.get("Arn", ""), 300),
                endpoint=str(sts.meta.endpoint_url or ""),
            )

        return await asyncio.to_thread(ask)


async def guarded(work: Awaitable[Outcome]) -> Outcome:
    """A step a driver could not even try (a refused value in a stored plan, no
    credentials, the CLI missing) is that step's failure, said plainly, not a crash."""
    try:
        return await work
    except (CloudError, ValueError) as exc:  # InputError is a ValueError
        return Outcome(False, "", N_("not tried: {why}").format(why=visible(exc, 300)))


class BotoDriver:
    """What the boto3 drivers (S3, EC2) share: the account they act as, their read-back
    timing, and who they are at each place: the account's STS identity there, or with a CLI
    template the template's whoami in that region (OSS, COS and OBS have no STS)."""

    def __init__(
        self,
        account: BotoAccount,
        timing: Timing,
        identity_from: Callable[[str, str], Awaitable[Identity]] | None = None,
    ) -> None:
        self.account = account
        self.timing = timing
        self._identity_from = identity_from

    async def identity(self, endpoint: str = "", region: str = "") -> Identity:
        if self._identity_from is not None:
            return await self._identity_from(endpoint, region)
        return await self.account.identity(endpoint, region)
