"""The words a person reads for an offboarding's phases and step states (the values
themselves, "verified", "shred", stay as they are in JSON and the ledger)."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from leases.core.i18n import pgettext
from leases.money.amounts import money, price
from leases.money.words import billing_word, deposit_word


def phase_word(phase: str) -> str:
    """A phase's name ("shred"), as a table shows it."""
    words = {
        "preflight": pgettext("offboarding phase", "preflight"),
        "processes": pgettext("offboarding phase", "processes"),
        "facts": pgettext("offboarding phase", "facts"),
        "shred": pgettext("offboarding phase", "shred"),
        "clear": pgettext("offboarding phase", "clear"),
        "images": pgettext("offboarding phase", "images"),
        "snapshots": pgettext("offboarding phase", "snapshots"),
        "disks": pgettext("offboarding phase", "disks"),
        "buckets": pgettext("offboarding phase", "buckets"),
        "revoke": pgettext("offboarding phase", "revoke"),
        "prove": pgettext("offboarding phase", "prove"),
        "manual": pgettext("offboarding phase", "manual"),
        "release": pgettext("offboarding phase", "release"),
    }
    return words.get(phase, phase)


def driver_word(driver: str) -> str:
    """How a step is carried out (its driver, "ssh"), in words, as the dashboard's step
    detail says it; a driver not here reads as its value."""
    words = {
        "ssh": pgettext("offboarding driver", "on the node over SSH"),
        "s3": pgettext("offboarding driver", "through the S3 API"),
        "ec2": pgettext("offboarding driver", "through the EC2 API"),
        "cmd": pgettext("offboarding driver", "by the cloud's command-line tool"),
        "ledger": pgettext("offboarding driver", "in the ledger"),
        "manual": pgettext("offboarding driver", "by hand"),
        "preflight": pgettext("offboarding driver", "checked before any change"),
    }
    return words.get(driver, driver)


def state_word(state: str) -> str:
    """A step's state ("verified"), as a table or a report shows it."""
    words = {
        "pending": pgettext("offboarding state", "pending"),
        "started": pgettext("offboarding state", "started"),
        "done": pgettext("offboarding state", "done"),
        "verified": pgettext("offboarding state", "verified"),
        "failed": pgettext("offboarding state", "failed"),
        "skipped": pgettext("offboarding state", "skipped"),
        "consent": pgettext("offboarding state", "consent"),
        "consented": pgettext("offboarding state", "consented"),
        "absent": pgettext("offboarding state", "absent"),
    }
    return words.get(state, state)


def event_word(event: str) -> str:
    """An evidence entry's event ("verify"), as the report heads it."""
    words = {
        "plan": pgettext("offboarding event", "plan"),
        "look": pgettext("offboarding event", "look"),
        "seen": pgettext("offboarding event", "seen"),
        "start": pgettext("offboarding event", "start"),
        "run": pgettext("offboarding event", "run"),
        "verify": pgettext("offboarding event", "verify"),
        "consent": pgettext("offboarding event", "consent"),
        "skip": pgettext("offboarding event", "skip"),
        "absent": pgettext("offboarding event", "absent"),
        "fail": pgettext("offboarding event", "fail"),
        "finish": pgettext("offboarding event", "finish"),
        "recheck": pgettext("offboarding event", "recheck"),
        "inspect": pgettext("offboarding event", "inspect"),
    }
    return words.get(event, event)


def fact_word(fact: str) -> str:
    """A fact's name ("size_gib"), as an inspection or the report shows it."""
    words = {
        "host": pgettext("offboarding fact", "host"),
        "path": pgettext("offboarding fact", "path"),
        "files": pgettext("offboarding fact", "files"),
        "bytes": pgettext("offboarding fact", "bytes"),
        "newest": pgettext("offboarding fact", "newest"),
        "kept": pgettext("offboarding fact", "kept"),
        "fstype": pgettext("offboarding fact", "fstype"),
        "mount": pgettext("offboarding fact", "mount"),
        "kind": pgettext("offboarding fact", "kind"),
        "mounts_inside": pgettext("offboarding fact", "mounts inside"),
        "partial": pgettext("offboarding fact", "partial"),
        "fingerprint": pgettext("offboarding fact", "fingerprint"),
        "in": pgettext("offboarding fact", "in"),
        "keys_files": pgettext("offboarding fact", "keys files"),
        "gpu_processes": pgettext("offboarding fact", "gpu processes"),
        "home_fs": pgettext("offboarding fact", "home fs"),
        "outlives_instance": pgettext("offboarding fact", "outlives instance"),
        "source": pgettext("offboarding fact", "source"),
        "options": pgettext("offboarding fact", "options"),
        "rotational": pgettext("offboarding fact", "rotational"),
        "model": pgettext("offboarding fact", "model"),
        "caveats": pgettext("offboarding fact", "caveats"),
        "region": pgettext("offboarding fact", "region"),
        "endpoint": pgettext("offboarding fact", "endpoint"),
        "account": pgettext("offboarding fact", "account"),
        "state": pgettext("offboarding fact", "state"),
        "created": pgettext("offboarding fact", "created"),
        "owner": pgettext("offboarding fact", "owner"),
        "name": pgettext("offboarding fact", "name"),
        "size_gib": pgettext("offboarding fact", "size gib"),
        "volume": pgettext("offboarding fact", "volume"),
        "zone": pgettext("offboarding fact", "zone"),
        "prefix": pgettext("offboarding fact", "prefix"),
        "bucket": pgettext("offboarding fact", "bucket"),
        "unfinished_uploads": pgettext("offboarding fact", "unfinished uploads"),
        "bucket_region": pgettext("offboarding fact", "bucket region"),
        "versions": pgettext("offboarding fact", "versions"),
        "delete_markers": pgettext("offboarding fact", "delete markers"),
        "lease_id": pgettext("offboarding fact", "lease id"),
        "billing": pgettext("offboarding fact", "billing"),
        "start": pgettext("offboarding fact", "start"),
        "end": pgettext("offboarding fact", "end"),
        "open": pgettext("offboarding fact", "open"),
        "auto_renew": pgettext("offboarding fact", "auto renew"),
        "deposit": pgettext("offboarding fact", "deposit"),
        "deposit_refund": pgettext("offboarding fact", "deposit refund"),
        "days_left": pgettext("offboarding fact", "days left"),
        "lease": pgettext("offboarding fact", "lease"),
        "account_id": pgettext("offboarding fact", "account id"),
        "arn": pgettext("offboarding fact", "arn"),
    }
    return words.get(fact, fact)


def _amount(text: str) -> Decimal | None:
    try:
        x = Decimal(text)
    except (InvalidOperation, ValueError):
        return None
    return x if x.is_finite() else None


def fact_value(fact: str, value: str) -> str:
    """A stored fact's value as an inspection or the report shows it: the preflight's lease
    facts are stored as English words and raw amounts ("monthly 50000 CNY", "36000 CNY",
    "pending": the stored evidence keeps them so), shown with the display word and the
    amount as money is written ("包月 ¥50,000.00"). Any other value as it is."""
    if fact == "deposit_refund":
        return deposit_word(value)
    words = value.split(" ")
    if fact == "billing" and len(words) == 3 and (x := _amount(words[1])) is not None:
        return f"{billing_word(words[0])} {price(x, words[2])}"
    if fact == "deposit" and len(words) == 2 and (x := _amount(words[0])) is not None:
        return money(x, words[1])
    return value
