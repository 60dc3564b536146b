"""Buckets and bucket prefixes through the S3 API (AWS, and at an endpoint: Aliyun OSS,
Tencent COS, Huawei OBS, MinIO). A bucket loses every object version, every delete marker
and every unfinished multipart upload, then the bucket itself; a prefix loses the same
under the prefix and the bucket stays. Where a store rejects batch deletes (DeleteObjects:
some refuse boto3's checksums), objects go one at a time. Never a force flag, no bucket but
the one named. Verified by reading back: the store's NoSuchBucket (a bare 404 may come from
anything at a wrong endpoint), or nothing left under the prefix.

Every call names the bucket's owner (ExpectedBucketOwner: the provider's account id) where
the plan gives one: a bucket of that name in another account the credentials can reach is
refused by the store (403), never emptied, and never read back as gone. Every call goes to
the step's endpoint and region only (checked against what the client resolved).

Emptying lists the first page (up to 1,000 entries, DeleteObjects' own limit), deletes it,
and lists again from the start, until nothing is listed: no listing marker that a deletion
could invalidate, progress counted page by page. It stops, not done, when a listing shows
entries it already deleted (a store that says yes and keeps them: the count does not fall),
or when pass after pass finds entries newer than the run's start (by the store's own clock):
something still writes there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any

from leases.core import cloudids as cloud_ids
from leases.core.i18n import N_
from leases.core.models import ResourceKind
from leases.core.textsafe import visible
from leases.offboard.cloud.access import (
    BotoDriver,
    CloudError,
    Reading,
    check_place,
    client_error,
    guarded,
    hopeless,
    poll_gone,
    where,
)
from leases.offboard.steps import Outcome, Sighting, Step

_BATCH = 1000  # DeleteObjects' own limit
_PASSES = 5  # listings that may find entries newer than the run's start (writes racing us)
_INSPECT_MAX = 100_000  # entries counted by inspect before it says "at least"
_SECOND = timedelta(seconds=1)
_GONE_CODES = ("NoSuchBucket",)
# A batch refusal these codes do not explain is taken for a store without (working)
# DeleteObjects: the same objects then go one at a time.
_NOT_BATCH_TROUBLE = ("AccessDenied", "NoSuchBucket", "InvalidAccessKeyId", "SignatureDoesNotMatch")


@dataclass(frozen=True)
class _Target:
    bucket: str
    prefix: str  # "" for the whole bucket
    region: str
    endpoint: str
    addressing: str
    owner: str  # ExpectedBucketOwner, or "" where the store does not take it

    @property
    def shown(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    def kw(self, **more: Any) -> dict[str, Any]:
        """Bucket, ExpectedBucketOwner where known, and more: every call's arguments."""
        out: dict[str, Any] = {"Bucket": self.bucket, **more}
        if self.owner:
            out["ExpectedBucketOwner"] = self.owner
        return out


@dataclass
class _Tally:
    versions: int = 0
    markers: int = 0
    uploads: int = 0
    pages: int = 0
    one_by_one: str = ""  # why batch deletes were given up, if they were
    failed: list[str] = field(default_factory=list)

    def text(self) -> str:
        out = (
            f"deleted {self.versions} object version(s), {self.markers} delete marker(s);"
            f" aborted {self.uploads} multipart upload(s); {self.pages} page(s) listed and deleted"
        )
        if self.one_by_one:
            out += f"; batch delete refused ({self.one_by_one}): deleted one at a time"
        if self.failed:
            out += f"; {len(self.failed)} failed: " + "; ".join(self.failed[:5])
        return out


@dataclass(frozen=True)
class _Entry:
    key: str
    version: str | None  # None: a store without versions (its plain listing)
    marker: bool
    modified: datetime | None
    size: int

    def ident(self) -> dict[str, str]:
        return {"Key": self.key} if self.version is None else {
            "Key": self.key, "VersionId": self.version
        }  # fmt: skip


def _target(step: Step) -> _Target:
    kind = ResourceKind(step.param("kind"))
    native = cloud_ids.native_id(kind, step.param("native_id"))
    if kind is ResourceKind.BUCKET:
        bucket, prefix = native, ""
    elif kind is ResourceKind.BUCKET_PREFIX:
        bucket, prefix = cloud_ids.bucket_prefix(native)
    else:
        raise ValueError(f"s3 cannot delete a {kind}")
    addressing = step.param("addressing")
    if addressing not in ("", "path", "virtual"):
        raise ValueError(f"addressing {addressing!r}: path or virtual")
    return _Target(
        bucket,
        prefix,
        cloud_ids.region(step.param("region")),
        cloud_ids.endpoint(step.param("endpoint")),
        addressing,
        cloud_ids.account(step.param("bucket_owner")),
    )


def _pages(client: Any, method: str, page_size: int | None, **kwargs: Any) -> Iterator[Any]:
    config = {"PageSize": page_size} if page_size else {}
    yield from client.get_paginator(method).paginate(**kwargs, PaginationConfig=config)


def _store_time(answer: dict[str, Any]) -> datetime | None:
    """The store's clock, from its Date header: compared with its own LastModified, so that
    this machine's clock does not matter."""
    date = ((answer.get("ResponseMetadata") or {}).get("HTTPHeaders") or {}).get("date")
    try:
        return _aware(parsedate_to_datetime(str(date))) if date else None
    except (TypeError, ValueError):
        return None


def _aware(when: Any) -> datetime | None:
    """A listed time as an aware datetime (a store that leaves out the zone means UTC)."""
    if not isinstance(when, datetime):
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _entries(answer: dict[str, Any], versions: bool) -> list[_Entry]:
    if not versions:
        return [
            _Entry(o["Key"], None, False, _aware(o.get("LastModified")), int(o.get("Size") or 0))
            for o in answer.get("Contents", [])
        ]
    return [
        _Entry(
            v["Key"], v["VersionId"], False, _aware(v.get("LastModified")), int(v.get("Size") or 0)
        )
        for v in answer.get("Versions", [])
    ] + [
        _Entry(m["Key"], m["VersionId"], True, _aware(m.get("LastModified")), 0)
        for m in answer.get("DeleteMarkers", [])
    ]


class S3Driver(BotoDriver):
    name = "s3"
    page_size: int | None = None  # the store's own (1000 on S3); tests make it small

    def _client(self, t: _Target) -> Any:
        client = self.account.client("s3", t.endpoint, t.region, t.addressing)
        check_place(client, region=t.region, endpoint=t.endpoint)
        return client

    def _first_page(self, client: Any, t: _Target) -> tuple[list[_Entry], datetime | None]:
        """The first page of what is under the prefix, from the start: versions and delete
        markers, or a store without ListObjectVersions (NotImplemented): its plain listing."""
        from botocore.exceptions import ClientError

        size = min(self.page_size or _BATCH, _BATCH)
        try:
            answer = client.list_object_versions(**t.kw(Prefix=t.prefix, MaxKeys=size))
            return _entries(answer, True), _store_time(answer)
        except ClientError as exc:
            if client_error(exc)[0] != "NotImplemented":
                raise
        answer = client.list_objects_v2(**t.kw(Prefix=t.prefix, MaxKeys=size))
        return _entries(answer, False), _store_time(answer)

    # -- inspect -------------------------------------------------------------------------

    async def inspect(self, step: Step) -> Sighting:
        try:
            t = _target(step)
            client = self._client(t)
        except (CloudError, ValueError) as exc:
            return Sighting(None, "", N_("not looked at: {why}").format(why=visible(exc, 300)))
        return await asyncio.to_thread(self._look, client, t)

    def _look(self, client: Any, t: _Target) -> Sighting:
        from botocore.exceptions import BotoCoreError, ClientError

        facts = {
            **where(client),
            "account": t.owner or N_("(proven by the identity check only)"),
            "bucket": t.bucket,
        }
        if t.prefix:
            facts["prefix"] = t.prefix
        counts = {"versions": 0, "delete_markers": 0, "bytes": 0}
        newest: datetime | None = None
        try:
            try:
                pages = _pages(
                    client, "list_object_versions", self.page_size, **t.kw(Prefix=t.prefix)
                )
                listed = (e for page in pages for e in _entries(page, True))
                seen = self._count(listed, counts)
            except ClientError as exc:
                if client_error(exc)[0] != "NotImplemented":
                    raise
                pages = _pages(client, "list_objects_v2", self.page_size, **t.kw(Prefix=t.prefix))
                listed = (e for page in pages for e in _entries(page, False))
                seen = self._count(listed, counts)
            newest = seen
            uploads = client.list_multipart_uploads(**t.kw(Prefix=t.prefix, MaxUploads=1000))
            facts["unfinished_uploads"] = str(len(uploads.get("Uploads", [])))
            if not t.prefix:
                facts.update(self._bucket_facts(client, t))
        except (BotoCoreError, ClientError) as exc:
            code, message, status = client_error(exc)
            text = f"{t.shown}: {code} {status} {message}".strip()
            if code in _GONE_CODES:
                return Sighting(
                    False,
                    text,
                    N_("no such bucket there: check the name, endpoint and region"),
                    facts,
                )
            said = N_("could not look: {why}").format(why=code or status or "error")
            return Sighting(None, text, said, facts)
        total = counts["versions"] + counts["delete_markers"]
        capped = "at least " if total >= _INSPECT_MAX else ""
        facts.update({k: f"{capped}{v}" for k, v in counts.items()})
        if newest is not None:
            facts["newest"] = newest.isoformat()
        text = (
            f"{t.shown}: {capped}{counts['versions']} object version(s),"
            f" {counts['delete_markers']} delete marker(s), {capped}{counts['bytes']} bytes,"
            f" {facts['unfinished_uploads']} unfinished upload(s)"
        )
        if t.prefix and total == 0 and facts["unfinished_uploads"] == "0":
            return Sighting(False, text, N_("nothing under the prefix: check the name"), facts)
        detail = (
            N_("the bucket is there") if not t.prefix else N_("objects are there under the prefix")
        )
        if facts.get("bucket_region") and t.region and facts["bucket_region"] != t.region:
            detail = N_("{said}, in region {region} (recorded: {recorded})").format(
                said=detail, region=facts["bucket_region"], recorded=t.region
            )
        return Sighting(True, text, detail, facts)

    @staticmethod
    def _count(listed: Iterator[_Entry], counts: dict[str, int]) -> datetime | None:
        newest: datetime | None = None
        for e in listed:
            counts["delete_markers" if e.marker else "versions"] += 1
            counts["bytes"] += e.size
            if e.modified is not None and (newest is None or e.modified > newest):
                newest = e.modified
            if counts["versions"] + counts["delete_markers"] >= _INSPECT_MAX:
                break
        return newest

    @staticmethod
    def _bucket_facts(client: Any, t: _Target) -> dict[str, str]:
        """The bucket's own region and creation time, where the store says them (best
        effort: a store without these calls still has the bucket)."""
        from botocore.exceptions import BotoCoreError, ClientError

        out: dict[str, str] = {}
        try:
            located = client.get_bucket_location(**t.kw())
            out["bucket_region"] = visible(located.get("LocationConstraint") or "us-east-1", 64)
        except (BotoCoreError, ClientError):
            pass
        try:
            mine = client.list_buckets(Prefix=t.bucket).get("Buckets", [])
            made = [b.get("CreationDate") for b in mine if b.get("Name") == t.bucket]
            if made and made[0] is not None:
                out["created"] = made[0].isoformat()
        except (BotoCoreError, ClientError):
            pass
        return out

    # -- run -----------------------------------------------------------------------------

    async def run(self, step: Step) -> Outcome:
        return await guarded(self._run(step))

    async def _run(self, step: Step) -> Outcome:
        t = _target(step)
        client = self._client(t)
        return await asyncio.to_thread(self._empty_and_delete, client, t)

    def _empty_and_delete(self, client: Any, t: _Target) -> Outcome:
        from botocore.exceptions import BotoCoreError, ClientError

        tally = _Tally()
        try:
            why_not = self._empty(client, t, tally)
            if why_not:
                return Outcome(False, f"{t.shown}: {tally.text()}", why_not)
            if t.prefix:
                return Outcome(True, f"{t.shown}: {tally.text()}")
            client.delete_bucket(**t.kw())
        except (BotoCoreError, ClientError) as exc:
            code, message, _status = client_error(exc)
            text = f"{t.shown}: {tally.text()}; {code} {message}"
            if code in _GONE_CODES:
                return Outcome(True, text, N_("already gone"))
            return Outcome(False, text, N_("refused: {why}").format(why=code or "error"))
        return Outcome(True, f"{t.shown}: {tally.text()}; bucket deleted")

    def _empty(self, client: Any, t: _Target, tally: _Tally) -> str:
        """Delete page after page from the start until nothing is listed; "" when empty,
        else why it stopped."""
        start: datetime | None = None
        previous: set[tuple[str, str | None]] = set()
        racing = 0
        while True:
            # Unfinished uploads first, so none completes into a fresh object behind us.
            self._abort_uploads(client, t, tally)
            page, now = self._first_page(client, t)
            start = start or now
            if not page:
                return ""
            # The store's Date has whole seconds: only a later second is surely after it.
            newer = [e for e in page if start and e.modified and e.modified >= start + _SECOND]
            idents = {(e.key, e.version) for e in page}
            kept = idents - {(e.key, e.version) for e in newer}
            if kept & previous:
                return N_(
                    "the store still lists {count} object(s) it said it"
                    " deleted: it keeps them (not done, so that a rerun tries again)"
                ).format(count=len(kept & previous))
            if newer:
                racing += 1
                if racing >= _PASSES:
                    return N_(
                        "something still writes there: {listings} listings found objects newer"
                        " than the run's start ({count} in the last); stop the writer"
                        " and run again"
                    ).format(listings=racing, count=len(newer))
            before = len(tally.failed)
            for at in range(0, len(page), _BATCH):
                self._delete_chunk(client, t, page[at : at + _BATCH], tally)
            if len(tally.failed) > before:
                return N_("some objects could not be deleted")
            tally.pages += 1
            previous = idents

    def _abort_uploads(self, client: Any, t: _Target, tally: _Tally) -> None:
        for page in _pages(
            client, "list_multipart_uploads", self.page_size, **t.kw(Prefix=t.prefix)
        ):
            for up in page.get("Uploads", []):
                client.abort_multipart_upload(**t.kw(Key=up["Key"], UploadId=up["UploadId"]))
                tally.uploads += 1

    def _delete_chunk(self, client: Any, t: _Target, chunk: list[_Entry], tally: _Tally) -> None:
        from botocore.exceptions import ClientError

        retry = chunk
        if not tally.one_by_one:
            try:
                answer = client.delete_objects(
                    **t.kw(Delete={"Objects": [e.ident() for e in chunk], "Quiet": True})
                )
                bad = {(e.get("Key"), e.get("VersionId")) for e in answer.get("Errors", [])}
                retry = [e for e in chunk if (e.key, e.version) in bad]
            except ClientError as exc:
                code, message, _ = client_error(exc)
                if code in _NOT_BATCH_TROUBLE:
                    raise
                tally.one_by_one = f"{code or 'error'} {message}".strip()
        failed = set()
        for e in retry:
            try:
                client.delete_object(**t.kw(**e.ident()))
            except ClientError as exc:
                code, message, _ = client_error(exc)
                failed.add((e.key, e.version))
                tally.failed.append(f"{visible(e.key, 100)!r}@{e.version or ''}: {code} {message}")
        for e in chunk:
            if (e.key, e.version) not in failed:
                if e.marker:
                    tally.markers += 1
                else:
                    tally.versions += 1

    # -- verify --------------------------------------------------------------------------

    @staticmethod
    def _left_under(client: Any, t: _Target) -> int:
        """Versions, delete markers and unfinished uploads under the prefix (at most one of
        each looked for); a store without ListObjectVersions: its plain listing."""
        from botocore.exceptions import ClientError

        try:
            left = client.list_object_versions(**t.kw(Prefix=t.prefix, MaxKeys=1))
            count = len(left.get("Versions", [])) + len(left.get("DeleteMarkers", []))
        except ClientError as exc:
            if client_error(exc)[0] != "NotImplemented":
                raise
            plain = client.list_objects_v2(**t.kw(Prefix=t.prefix, MaxKeys=1))
            count = len(plain.get("Contents", []))
        uploads = client.list_multipart_uploads(**t.kw(Prefix=t.prefix, MaxUploads=1))
        return count + len(uploads.get("Uploads", []))

    async def verify(self, step: Step, *, patient: bool = True) -> Outcome:
        return await guarded(self._verify(step, patient))

    async def _verify(self, step: Step, patient: bool) -> Outcome:
        t = _target(step)
        client = self._client(t)

        def read() -> Reading:
            from botocore.exceptions import BotoCoreError, ClientError

            try:
                if not t.prefix:
                    # A GET, not HeadBucket: a HEAD's 404 has no body, and any web server
                    # that is not this store (a wrong endpoint) answers 404 too. Only the
                    # store's own NoSuchBucket says the bucket is gone.
                    client.list_objects_v2(**t.kw(MaxKeys=1))
                    return Reading(
                        False, f"ListObjectsV2 {t.bucket}: 200", N_("the bucket is there")
                    )
                count = self._left_under(client, t)
            except (BotoCoreError, ClientError) as exc:
                # Anything but the store's NoSuchBucket (access denied, another owner, an
                # error page, no answer) is not gone: nothing was seen.
                code, message, status = client_error(exc)
                text = f"{t.shown}: {code} {status} {message}".strip()
                if code in _GONE_CODES:
                    return Reading(True, text)
                return Reading(
                    False,
                    text,
                    N_("read back failed: {why}").format(why=code or status),
                    final=hopeless(exc),
                )
            text = f"ListObjectVersions/ListMultipartUploads {t.shown}: {count} left"
            return Reading(count == 0, text, N_("objects are still there under the prefix"))

        async def read_async() -> Reading:
            return await asyncio.to_thread(read)

        return await poll_gone(read_async, self.timing, patient=patient)
