#!/usr/bin/env python3
"""A stand-in for the aliyun, tccli and hcloud command-line tools (installed under those
names by the tests): it appends its argv and the credential variables it saw to
$STANDIN_LOG, and answers from $STANDIN_STATE, a JSON file {"ids": [...], "account": "...",
"lazy": false, "later": 0}. Like Aliyun, a delete of an unknown id answers success; "lazy"
makes every delete answer success and do nothing (a cloud that never deletes); "later": N
makes a deleted id go only on the Nth read-back (Huawei answers 202 and deletes later)."""

import json
import os
import re
import sys

program = os.path.basename(sys.argv[0])
args = sys.argv[1:]
state_path = os.environ["STANDIN_STATE"]
with open(state_path) as f:
    state = json.load(f)
with open(os.environ["STANDIN_LOG"], "a") as f:
    seen_env = {k: v for k, v in os.environ.items() if k.startswith(("ALIBABA_", "TENCENTCLOUD_"))}
    f.write(json.dumps({"program": program, "argv": args, "env": seen_env}) + "\n")

tokens = {t for a in args for t in re.findall(r"[A-Za-z0-9_.-]+", a)}
named = [i for i in state["ids"] if i in tokens]
call = next(
    (a for a in args if re.fullmatch(r"[A-Z][A-Za-z]+", a) and a not in ("IAM", "IMS", "EVS")), ""
)

LISTS = {
    "aliyun": {
        "DescribeImages": "Images.Image",
        "DescribeSnapshots": "Snapshots.Snapshot",
        "DescribeDisks": "Disks.Disk",
    },
    "tccli": {
        "DescribeImages": "ImageSet",
        "DescribeSnapshots": "SnapshotSet",
        "DescribeDisks": "DiskSet",
    },
}


def wrap(path, items):
    doc = items
    for part in reversed(path.split(".")):
        doc = {part: doc}
    return doc


if call in ("GetCallerIdentity", "KeystoneListAuthDomains"):
    if program == "hcloud":
        print(json.dumps({"domains": [{"id": state["account"], "name": "lab"}]}))
    else:
        print(
            json.dumps(
                {"AccountId": state["account"], "Arn": f"acs:ram::{state['account']}:user/lab"}
            )
        )
    sys.exit(0)
if call.startswith(("Delete", "Terminate", "GlanceDelete")):
    if state.get("later"):
        state.setdefault("pending", {}).update(dict.fromkeys(named, state["later"]))
    elif not state.get("lazy"):
        state["ids"] = [i for i in state["ids"] if i not in named]
    with open(state_path, "w") as f:
        json.dump(state, f)
    print(json.dumps({"RequestId": "standin"}))
    sys.exit(0)

for i in [i for i in named if i in state.get("pending", {})]:
    state["pending"][i] -= 1
    if state["pending"][i] == 0:
        state["ids"].remove(i)
        named.remove(i)
with open(state_path, "w") as f:
    json.dump(state, f)

if call.startswith("Describe"):
    path = LISTS[program][call]
    print(json.dumps(wrap(path, [{"Id": i} for i in named])))
elif call.startswith(("Show", "GlanceShow")):
    if named:
        print(json.dumps({"id": named[0], "status": "available"}))
    else:
        print('{"itemNotFound": {"message": "not found", "code": 404}}', file=sys.stderr)
        sys.exit(1)
else:
    print(f"standin: unknown call {args}", file=sys.stderr)
    sys.exit(2)
