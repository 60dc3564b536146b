"""Buckets and bucket prefixes through the S3 API (AWS, and at an endpoint: Aliyun OSS,
Tencent COS, Huawei OBS, MinIO). A bucket loses every object version, every delete marker
and every unfinished multipart upload, then the bucket itself; a prefix loses the same
under the prefix and the bucket stays. Where a store rejects batch deletes (DeleteObjects:
some refuse boto3's checksums), objects go one at a time. Never a force flag, no bucket but
the one named. Verified by reading back: the store's NoSuchBucket (a bare 404 may come from
anything at a wrong endpoint), or nothing left under the prefix.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from leases.models import ResourceKind
from leases.offboard import cloud_ids
from leases.offboard.cloud_access import (
    BotoDriver,
    Reading,
    client_error,
    guarded,
    hopeless,
    poll_gone,
)
from leases.offboard.steps import Outcome, Step
from leases.textsafe import visible

_BATCH = 1000  # DeleteObjects' own limit
_PASSES = 5  # listings that may still find something (writes racing the deletion)
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

    @property
    def shown(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"


@dataclass
class _Tally:
    versions: int = 0
    markers: int = 0
    uploads: int = 0
    one_by_one: str = ""  # why batch deletes were given up, if they were
    failed: list[str] = field(default_factory=list)

    def text(self) -> str:
        out = (
            f"deleted {self.versions} object version(s), {self.markers} delete marker(s);"
            f" aborted {self.uploads} multipart upload(s)"
        )
        if self.one_by_one:
            out += f"; batch delete refused ({self.one_by_one}): deleted one at a time"
        if self.failed:
            out += f"; {len(self.failed)} failed: " + "; ".join(self.failed[:5])
        return out


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
    )


def _pages(
    client: Any, method: str, page_size: int | None, **kwargs: Any
) -> Iterator[dict[str, Any]]:
    config = {"PageSize": page_size} if page_size else {}
    yield from client.get_paginator(method).paginate(**kwargs, PaginationConfig=config)


class S3Driver(BotoDriver):
    name = "s3"
    page_size: int | None = None  # the store's own (1000 on S3); tests make it small

    def _client(self, t: _Target) -> Any:
        return self.account.client("s3", t.endpoint, t.region, t.addressing)

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
            for _ in range(_PASSES):
                # Unfinished uploads first, so none completes into a fresh object behind us.
                self._abort_uploads(client, t, tally)
                left = self._delete_versions(client, t, tally)
                if not left or tally.failed:
                    break
            if tally.failed:
                return Outcome(False, tally.text(), "some objects could not be deleted")
            if left:
                # Each pass found objects again: deletes that said yes and did nothing, or
                # writes racing us. Not done, so that a rerun tries again.
                return Outcome(
                    False,
                    f"{t.shown}: {tally.text()}",
                    f"objects still listed after {_PASSES} passes: the store keeps them or "
                    "something still writes there",
                )
            if t.prefix:
                return Outcome(True, f"{t.shown}: {tally.text()}")
            client.delete_bucket(Bucket=t.bucket)
        except (BotoCoreError, ClientError) as exc:
            code, message, _ = client_error(exc)
            text = f"{t.shown}: {tally.text()}; {code} {message}"
            if code in _GONE_CODES:
                return Outcome(True, text, "already gone")
            return Outcome(False, text, f"refused: {code or 'error'}")
        return Outcome(True, f"{t.shown}: {tally.text()}; bucket deleted")

    def _abort_uploads(self, client: Any, t: _Target, tally: _Tally) -> None:
        for page in _pages(
            client, "list_multipart_uploads", self.page_size, Bucket=t.bucket, Prefix=t.prefix
        ):
            for up in page.get("Uploads", []):
                client.abort_multipart_upload(
                    Bucket=t.bucket, Key=up["Key"], UploadId=up["UploadId"]
                )
                tally.uploads += 1

    def _listed(self, client: Any, t: _Target) -> Iterator[tuple[list[dict[str, str]], bool]]:
        """Batches of {Key, VersionId}, and whether the batch is delete markers. A store
        without ListObjectVersions (NotImplemented) has no versions: its plain listing."""
        from botocore.exceptions import ClientError

        try:
            for page in _pages(
                client, "list_object_versions", self.page_size, Bucket=t.bucket, Prefix=t.prefix
            ):
                for name, markers in (("Versions", False), ("DeleteMarkers", True)):
                    batch = [
                        {"Key": v["Key"], "VersionId": v["VersionId"]} for v in page.get(name, [])
                    ]
                    if batch:
                        yield batch, markers
        except ClientError as exc:
            if client_error(exc)[0] != "NotImplemented":
                raise
            for page in _pages(
                client, "list_objects_v2", self.page_size, Bucket=t.bucket, Prefix=t.prefix
            ):
                batch = [{"Key": o["Key"]} for o in page.get("Contents", [])]
                if batch:
                    yield batch, False

    def _delete_versions(self, client: Any, t: _Target, tally: _Tally) -> bool:
        """One pass over every version and marker; True when it found any."""
        found = False
        for batch, markers in self._listed(client, t):
            found = True
            for start in range(0, len(batch), _BATCH):
                chunk = batch[start : start + _BATCH]
                failed = len(tally.failed)
                self._delete_chunk(client, t, chunk, tally)
                gone = len(chunk) - (len(tally.failed) - failed)
                if markers:
                    tally.markers += gone
                else:
                    tally.versions += gone
        return found

    def _delete_chunk(
        self, client: Any, t: _Target, chunk: list[dict[str, str]], tally: _Tally
    ) -> None:
        from botocore.exceptions import ClientError

        retry = chunk
        if not tally.one_by_one:
            try:
                answer = client.delete_objects(
                    Bucket=t.bucket, Delete={"Objects": chunk, "Quiet": True}
                )
                bad = {(e.get("Key"), e.get("VersionId")) for e in answer.get("Errors", [])}
                retry = [o for o in chunk if (o["Key"], o.get("VersionId")) in bad]
            except ClientError as exc:
                code, message, _ = client_error(exc)
                if code in _NOT_BATCH_TROUBLE:
                    raise
                tally.one_by_one = f"{code or 'error'} {message}".strip()
        for obj in retry:
            try:
                client.delete_object(Bucket=t.bucket, **obj)
            except ClientError as exc:
                code, message, _ = client_error(exc)
                key = visible(obj["Key"], 100)
                tally.failed.append(f"{key!r}@{obj.get('VersionId', '')}: {code} {message}")

    @staticmethod
    def _left_under(client: Any, t: _Target) -> int:
        """Versions, delete markers and unfinished uploads under the prefix (at most one of
        each looked for); a store without ListObjectVersions: its plain listing."""
        from botocore.exceptions import ClientError

        try:
            left = client.list_object_versions(Bucket=t.bucket, Prefix=t.prefix, MaxKeys=1)
            count = len(left.get("Versions", [])) + len(left.get("DeleteMarkers", []))
        except ClientError as exc:
            if client_error(exc)[0] != "NotImplemented":
                raise
            plain = client.list_objects_v2(Bucket=t.bucket, Prefix=t.prefix, MaxKeys=1)
            count = len(plain.get("Contents", []))
        uploads = client.list_multipart_uploads(Bucket=t.bucket, Prefix=t.prefix, MaxUploads=1)
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
                    client.list_objects_v2(Bucket=t.bucket, MaxKeys=1)
                    return Reading(False, f"ListObjectsV2 {t.bucket}: 200", "the bucket is there")
                count = self._left_under(client, t)
            except (BotoCoreError, ClientError) as exc:
                code, message, status = client_error(exc)
                text = f"{t.shown}: {code} {status} {message}".strip()
                if code in _GONE_CODES:
                    return Reading(True, text)
                return Reading(
                    False, text, f"read back failed: {code or status}", final=hopeless(exc)
                )
            text = f"ListObjectVersions/ListMultipartUploads {t.shown}: {count} left"
            return Reading(count == 0, text, "objects are still there under the prefix")

        async def read_async() -> Reading:
            return await asyncio.to_thread(read)

        return await poll_gone(read_async, self.timing, patient=patient)
