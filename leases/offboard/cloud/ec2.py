"""Images, snapshots and disks through the EC2 API (AWS, and clouds that speak it at an
endpoint), by the ids the ledger holds and nothing else: no listing, no filters, no "every
snapshot we own". Never a force flag: a disk still attached or a snapshot an image still
uses is reported, not forced. Every deletion is read back (describe by id: not found), only
ever in the step's region at its endpoint (checked against what the client resolved); an
error that is not the API's own "not found" (access denied, throttled, no answer) is never
taken for gone."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime
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


@dataclass(frozen=True)
class _Api:
    delete: str  # the client method
    id_arg: str
    describe: str
    ids_arg: str
    listed: str  # the list in describe's answer
    not_found: tuple[str, ...]
    # States that mean gone although describe still lists it for a while.
    gone_states: tuple[str, ...] = ()


_APIS = {
    ResourceKind.IMAGE: _Api(
        "deregister_image",
        "ImageId",
        "describe_images",
        "ImageIds",
        "Images",
        ("InvalidAMIID.NotFound", "InvalidAMIID.Unavailable"),
        ("deregistered",),
    ),
    ResourceKind.SNAPSHOT: _Api(
        "delete_snapshot",
        "SnapshotId",
        "describe_snapshots",
        "SnapshotIds",
        "Snapshots",
        ("InvalidSnapshot.NotFound",),
    ),
    ResourceKind.DISK: _Api(
        "delete_volume",
        "VolumeId",
        "describe_volumes",
        "VolumeIds",
        "Volumes",
        ("InvalidVolume.NotFound",),
        ("deleted",),
    ),
}

# What a person does about a refusal zuka will not force its way past.
_HINTS = {
    "InvalidSnapshot.InUse": N_(
        "an image still uses this snapshot: the image must go first "
        "(record it in the ledger so the plan deletes it)"
    ),
    "VolumeInUse": N_(
        "the disk is attached: release the instance or detach the disk first (zuka never forces)"
    ),
    "IncorrectState": N_("the disk is not available (attached or busy): detach it first"),
    "UnauthorizedOperation": N_("these credentials may not delete it"),
    "AuthFailure": N_("the credentials were refused"),
}


_NOT_THERE = N_("not found there: check the id, region and account")


def _describe(step: Step) -> tuple[ResourceKind, str, str, str]:
    kind = ResourceKind(step.param("kind"))
    if kind not in _APIS:
        raise ValueError(f"ec2 cannot delete a {kind}")
    return (
        kind,
        cloud_ids.native_id(kind, step.param("native_id")),
        cloud_ids.region(step.param("region")),
        cloud_ids.endpoint(step.param("endpoint")),
    )


# What inspect shows of a described image, snapshot or disk, as "fact": "its field".
_FACTS = {
    ResourceKind.IMAGE: {"state": "State", "created": "CreationDate", "owner": "OwnerId",
                         "name": "Name"},
    ResourceKind.SNAPSHOT: {"state": "State", "created": "StartTime", "owner": "OwnerId",
                            "size_gib": "VolumeSize", "volume": "VolumeId"},
    ResourceKind.DISK: {"state": "State", "created": "CreateTime", "size_gib": "Size",
                        "zone": "AvailabilityZone"},
}  # fmt: skip


@dataclass(frozen=True)
class _Described:
    """What describe-by-id answered, as inspect and the read-back both read it."""

    call: str  # the call, for the evidence
    code: str = ""  # the cloud's error code; "" when it answered
    message: str = ""
    error: Exception | None = None
    listed: int = 0  # how many records the answer listed
    found: tuple[dict[str, Any], ...] = ()  # ours among them, by the id field itself
    api_not_found: tuple[str, ...] = ()  # the API's own "no such id" codes

    @property
    def not_found(self) -> bool:
        return bool(self.code) and self.code in self.api_not_found


def _described(client: Any, api: _Api, native: str) -> _Described:
    """Describe one id (in a thread: boto3 blocks). Ours only: a cloud that ignored the id
    filter lists others, so a record counts only if its own id field is ours."""
    from botocore.exceptions import BotoCoreError, ClientError

    call = f"{api.describe}({api.ids_arg}=[{native}])"
    try:
        answer = getattr(client, api.describe)(**{api.ids_arg: [native]})
    except (BotoCoreError, ClientError) as exc:
        code, message, _ = client_error(exc)
        return _Described(call, code or "error", message, exc, api_not_found=api.not_found)
    listed = answer.get(api.listed, [])
    found = tuple(r for r in listed if r.get(api.id_arg) == native)
    return _Described(call, listed=len(listed), found=found, api_not_found=api.not_found)


def _fact(value: object) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    return visible(value, 200)


class Ec2Driver(BotoDriver):
    name = "ec2"

    def _client(self, step: Step) -> tuple[Any, _Api, str]:
        kind, native, region, endpoint = _describe(step)
        client = self.account.client("ec2", endpoint, region)
        check_place(client, region=region, endpoint=endpoint)
        return client, _APIS[kind], native

    async def inspect(self, step: Step) -> Sighting:
        """Describe by id, in the step's region at its endpoint: there (with its size, state,
        creation time and owner), not found (a typo, another region or account: the runner
        will not take that for gone), or could not tell."""
        try:
            client, api, native = self._client(step)
            kind = ResourceKind(step.param("kind"))
            want = cloud_ids.account(step.param("account_id"))
        except (CloudError, ValueError) as exc:
            return Sighting(None, "", N_("not looked at: {why}").format(why=visible(exc, 300)))

        def look() -> Sighting:
            facts = {**where(client), "account": want or N_("(not recorded)")}
            said = _described(client, api, native)
            if said.code:
                text = f"{said.call}: {said.code} {said.message}"
                if said.not_found:
                    return Sighting(False, text, _NOT_THERE, facts)
                return Sighting(
                    None, text, N_("could not look: {why}").format(why=said.code), facts
                )
            found = said.found
            text = f"{said.call}: {len(found)} found among {said.listed} listed"
            if not found:
                if said.listed:
                    return Sighting(None, text, N_("the answer lists others, not ours"), facts)
                return Sighting(False, text, _NOT_THERE, facts)
            item = found[0]
            facts.update(
                {name: _fact(item[key]) for name, key in _FACTS[kind].items() if key in item}
            )
            owner = facts.get("owner", "")
            if want and owner and owner != want:
                return Sighting(
                    None,
                    text,
                    N_("owned by account {owner}, not the provider's {want}").format(
                        owner=owner, want=want
                    ),
                    facts,
                )
            state = facts.get("state", "")
            if state and state in api.gone_states:
                going = N_("listed as {state}: already going").format(state=state)
                return Sighting(False, text, going, facts)
            if not state:
                return Sighting(True, text, N_("there (state not said)"), facts)
            return Sighting(True, text, N_("there ({state})").format(state=state), facts)

        return await asyncio.to_thread(look)

    async def run(self, step: Step) -> Outcome:
        return await guarded(self._run(step))

    async def _run(self, step: Step) -> Outcome:
        client, api, native = self._client(step)

        def act() -> Outcome:
            from botocore.exceptions import BotoCoreError, ClientError

            call = f"{api.delete}({api.id_arg}={native})"
            try:
                getattr(client, api.delete)(**{api.id_arg: native})
            except (BotoCoreError, ClientError) as exc:
                code, message, _status = client_error(exc)
                if code in api.not_found:
                    return Outcome(True, f"{call}: {code} {message}", N_("already gone"))
                return Outcome(
                    False,
                    f"{call}: {code} {message}",
                    _HINTS.get(code) or N_("refused: {why}").format(why=code),
                )
            return Outcome(True, f"{call}: accepted")

        return await asyncio.to_thread(act)

    async def verify(self, step: Step, *, patient: bool = True) -> Outcome:
        return await guarded(self._verify(step, patient))

    async def _verify(self, step: Step, patient: bool) -> Outcome:
        client, api, native = self._client(step)

        def read() -> Reading:
            said = _described(client, api, native)
            if said.code:
                text = f"{said.call}: {said.code} {said.message}"
                if said.not_found:
                    return Reading(True, text)
                final = said.error is not None and hopeless(said.error)
                said_now = N_("read back failed: {why}").format(why=said.code)
                return Reading(False, text, said_now, final=final)
            # Ours only, and ours may be on a page it did not show: no proof either way.
            found = said.found
            states = sorted({str(r.get("State", "")) for r in found})
            text = f"{said.call}: {len(found)} found" + (f" ({', '.join(states)})" if found else "")
            if said.listed and not found:
                text += f" among {said.listed} listed"
                return Reading(
                    False, text, N_("the answer lists others, not ours: filter ignored?")
                )
            if all(s in api.gone_states for s in states):
                return Reading(True, text)
            return Reading(
                False, text, N_("still there ({states})").format(states=", ".join(states))
            )

        async def read_async() -> Reading:
            return await asyncio.to_thread(read)

        return await poll_gone(read_async, self.timing, patient=patient)
