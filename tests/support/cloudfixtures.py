"""A moto server for the cloud offboarding tests, the facts a plan is made from, and a
small S3 store of our own that refuses batch deletes as some S3-compatible stores do."""

from __future__ import annotations

import http.client
import re
import threading
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

import boto3
from botocore.config import Config as BotoConfig

from leases.config.sections import Config, OffboardConfig
from leases.core.models import Node, Provider, ProviderKind, Resource, ResourceKind, SshTarget
from leases.offboard.cloud.access import Timing
from leases.offboard.steps import PlanInput

MOTO_ACCOUNT = "123456789012"  # the account moto answers STS GetCallerIdentity with
REGION = "us-east-1"
# credential_ref "env:TESTCLOUD" reads these (dummy keys: moto checks nothing).
ENVIRON = {"TESTCLOUD_ACCESS_KEY_ID": "testing", "TESTCLOUD_SECRET_ACCESS_KEY": "testing"}


def start_moto() -> tuple[Any, str]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    return server, f"http://{host}:{port}"


def reset_moto(endpoint: str) -> None:
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST"))


def client(service: str, endpoint: str) -> Any:
    """The test's own boto3 client, for setting things up and looking afterwards."""
    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=BotoConfig(s3={"addressing_style": "path"}),
    )


class FakeClock:
    """An injected monotonic clock and sleep: a sleep moves the clock, nothing waits."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def timing(clock: FakeClock, timeout_s: float = 60.0) -> Timing:
    return Timing(timeout_s=timeout_s, sleep=clock.sleep, monotonic=clock.monotonic)


def facts(
    resources: Sequence[tuple[ResourceKind, str] | Resource],
    *,
    provider: Provider | None = None,
    endpoint: str = "",
) -> PlanInput:
    """A node whose lease (id 1) holds these resources, at endpoint."""
    made = [
        r
        if isinstance(r, Resource)
        else Resource(lease_id=1, kind=r[0], native_id=r[1], endpoint=endpoint, id=i + 1)
        for i, r in enumerate(resources)
    ]
    return PlanInput(
        node=Node("gpu-1", provider=provider.name if provider else None, ssh=SshTarget("gpu-1")),
        provider=provider,
        lease=None,
        resources=made,
        config=Config(offboard=OffboardConfig(verify_timeout_s=60.0)),
    )


def aws_provider(**kw: str) -> Provider:
    values = {"region": REGION, "account_id": MOTO_ACCOUNT, "credential_ref": "env:TESTCLOUD"}
    values.update(kw)
    return Provider(ProviderKind.CLOUD, "compat-cloud", **values)  # type: ignore[arg-type]


class _Served:
    """A small HTTP server on 127.0.0.1 in a thread, for the fakes below; `with` runs it."""

    server: ThreadingHTTPServer
    thread: threading.Thread

    def _serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@dataclass
class BatchRefusingStore(_Served):
    """An S3-compatible store in front of moto that refuses DeleteObjects (POST ?delete) the
    way stores that reject boto3's CRC32 checksum do, and forwards everything else; with
    no_versions, it has no ListObjectVersions either (501 NotImplemented); with
    ignore_ids, an EC2 Describe* call loses its id filter (a cloud that ignores it); with
    fake_deletes, a batch delete says yes and deletes nothing."""

    upstream: str
    no_versions: bool = False
    ignore_ids: bool = False
    fake_deletes: bool = False  # DeleteObjects answers success and deletes nothing
    refuse_batch: bool = True
    # Enforce ExpectedBucketOwner as S3 does (moto ignores it): 403 AccessDenied when the
    # header names another account than the bucket's owner (read from the moto server
    # running in this process).
    check_owner: bool = False
    # Answer as this account whoever signs (moto's x-moto-account-id): an endpoint that
    # acts for another account than the lab's credentials do.
    as_account: str = ""
    refused: int = 0
    seen: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        store = self
        up = urlsplit(self.upstream)

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                # An EC2/STS call names itself in its form body: Action=DeleteSnapshot.
                action = parse_qs((body or b"").decode(errors="replace")).get("Action", [])
                store.seen.append(" ".join([self.command, self.path, *action]))
                query = urlsplit(self.path).query
                words = query.split("&")
                batch = self.command == "POST" and "delete" in words
                if batch and store.fake_deletes:
                    said = b'<?xml version="1.0" encoding="UTF-8"?><DeleteResult/>'
                    self.send_response(200)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(said)))
                    self.end_headers()
                    self.wfile.write(said)
                    return
                owner = self.headers.get("x-amz-expected-bucket-owner")
                if store.check_owner and owner is not None:
                    from moto.s3.models import s3_backends

                    bucket = urlsplit(self.path).path.strip("/").split("/")[0]
                    owned = s3_backends.bucket_accounts.get(bucket)
                    if owned is not None and owned[1] != owner:
                        store.refused += 1
                        error = (
                            b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied'
                            b"</Code><Message>Access Denied</Message></Error>"
                        )
                        self.send_response(403)
                        self.send_header("Content-Type", "application/xml")
                        self.send_header("Content-Length", str(len(error)))
                        self.end_headers()
                        if self.command != "HEAD":
                            self.wfile.write(error)
                        return
                refuse = store.refuse_batch and batch
                unknown = store.no_versions and self.command == "GET" and "versions" in words
                if refuse or unknown:
                    store.refused += 1
                    error = (
                        b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>InvalidArgument'
                        b"</Code><Message>x-amz-checksum-crc32 is not supported</Message></Error>"
                        if refuse
                        else b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>'
                        b"NotImplemented</Code><Message>not here</Message></Error>"
                    )
                    self.send_response(400 if refuse else 501)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(error)))
                    self.end_headers()
                    self.wfile.write(error)
                    return
                if store.ignore_ids and body and body.startswith(b"Action=Describe"):
                    body = b"&".join(
                        w for w in body.split(b"&") if not re.match(rb"\w+Id\.\d+=", w)
                    )
                conn = http.client.HTTPConnection(up.hostname or "", up.port, timeout=30)
                headers = {
                    k: v
                    for k, v in self.headers.items()
                    if k.lower() not in ("host", "content-length")
                }
                if store.as_account:
                    headers["x-moto-account-id"] = store.as_account
                conn.request(self.command, self.path, body=body, headers=headers)
                answer = conn.getresponse()
                data = answer.read()
                self.send_response(answer.status)
                for k, v in answer.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        self._serve(Handler)


class NotS3(_Served):
    """A web server that is no S3 store (a wrong endpoint, a metadata service): 404 with an
    HTML page to everything."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                page = b"<html><body>Not Found</body></html>"
                self.send_response(404)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(page)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _answer

        self._serve(Handler)


@dataclass
class RecordingProxy(BatchRefusingStore):
    """In front of moto, refusing nothing: every request it forwarded is in `seen`
    ("DELETE /bucket", "POST / DeleteSnapshot"), for a test to count what the cloud saw."""

    refuse_batch: bool = False

    def count(self, prefix: str) -> int:
        return sum(1 for s in self.seen if s.split("?")[0] == prefix)


def versioned_bucket(s3: Any, name: str) -> None:
    """A versioned bucket with 4 object versions, a delete marker and an unfinished
    multipart upload."""
    s3.create_bucket(Bucket=name)
    s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    for i in range(3):
        s3.put_object(Bucket=name, Key="ckpt/model.pt", Body=f"v{i}".encode())
    s3.put_object(Bucket=name, Key="data/train.jsonl", Body=b"x")
    s3.delete_object(Bucket=name, Key="data/train.jsonl")  # a delete marker
    s3.create_multipart_upload(Bucket=name, Key="ckpt/big.pt")  # never finished


def all_versions(s3: Any, bucket: str) -> Iterator[str]:
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
        for v in page.get("Versions", []) + page.get("DeleteMarkers", []):
            yield v["Key"]
