"""A transcript of zuka as a person sees it, to hold a restructuring to "behaviour unchanged".

Every command's `--help`, then a scripted session (providers, nodes, leases of every
billing type, renewals, stops, resources, reports in three formats, cost, plans, alerts,
the audit log, export, mistakes people make) over a fresh ledger, each command with its
exit status, stdout and stderr. The clock is pinned with Debian's `faketime` (frozen, so
audit times and hashes repeat), and HOME, the user and the terminal width are fixed, so
two runs of the same code write the same bytes.

Run: python scripts/transcript.py [-o FILE]   (needs `faketime`; apt-get install faketime)
Compare: python scripts/transcript.py -o after.txt && diff -u scripts/transcript.before.txt
after.txt. transcript.before.txt was recorded as root before issue 19's restructuring (the
audit log's actor is the Unix user that runs it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

NOW = "2026-11-20 04:00:00"  # UTC: 12:00 in Shanghai, the ledger's default zone
ZUKA = [sys.executable, "-m", "tui.cli.main"]

# The session: (words, as typed after `zuka`); {L} is the ledger, {D} the work folder.
SESSION: list[str] = [
    "provider add AutoDL --kind platform",
    "provider add Aliyun --kind cloud --region cn-hangzhou --account-id 1234567890123456"
    " --credential-ref env:ALIYUN",
    "provider add NJIDC --kind colo",
    "node add a100-1 --ssh 'ssh -p 2201 root@10.0.0.1' --provider AutoDL --gpus 8 --gpu-model A100",
    "node add h800-1 --ssh root@10.0.0.2 --provider Aliyun --gpus 8 --gpu-model H800",
    "node add colo-1 --ssh root@10.0.0.3 --provider NJIDC --gpus 8 --gpu-model 'RTX 4090'",
    "node add burst-1 --ssh root@10.0.0.4 --provider Aliyun --gpus 2 --gpu-model A10",
    "lease add a100-1 --billing card_hour --price 1.98 --cards 8 --start 2026-11-01",
    "lease add h800-1 --billing monthly --price 60000 --start 2026-10-25 --end 2026-11-25"
    " --auto-renew",
    "lease add colo-1 --billing contract --price 36000 --start 2026-06-01 --end 2027-06-01"
    " --deposit 72000 --deposit-paid-on 2026-06-01",
    "lease add burst-1 --billing hourly --price 4.8 --start 2026-11-10T09:00"
    " --stopped-billing none",
    "lease stop burst-1 --at 2026-11-12T00:00",
    "lease resume burst-1 --at 2026-11-14T00:00",
    "resource add h800-1 --kind disk --id d-bp1 --price 300 --created 2026-10-25",
    "resource add a100-1 --kind scratch_path --id /root/autodl-tmp",
    "lease renew h800-1 --until 2026-12-25 --price 58000",
    "lease list",
    "lease list --json",
    "node list",
    "node list --json",
    "node show h800-1",
    "cost",
    "cost --json",
    "report --month 2026-11",
    "report --month 2026-11 --format csv",
    "report --month 2026-11 --json",
    "report --month 2026-11 --by user",
    "report --month 2026-10",
    "plan hybrid --days 30 --monthly 6500 --hourly 4.8",
    "plan buy --card-price 80000 --life-years 4 --power-w 700 --kwh 0.8 --hosting 6000",
    "alerts --json",
    "alerts check",
    "log",
    "log h800-1 --json",
    "audit verify",
    "export --format json",
    "export --format csv",
    "undo",
    "undo",
    # Mistakes people make: each refused, saying what was wrong.
    "lease add burst-1 --billing hourly --price 1,98 --start 2026-11-01",
    "lease add burst-1 --billing hourly --price ¥5 --start 2026-11-01",
    "lease add ghost --billing hourly --price 5 --start 2026-11-01",
    "lease add burst-1 --billing hourly --price 5 --start 2026-11-31",
    "node add a100-1 --ssh root@10.0.0.9",
    "report --month 2026-13",
    "report --month 2026-11 --ledger {D}/typo.db",
    "lease renew h800-1 --until 2027-01-25 --currency USD",
    "offboard burst-1",
    "config check",
]


def _commands(
    parser: argparse.ArgumentParser, words: tuple[str, ...] = ()
) -> list[tuple[str, ...]]:
    """Every command path of the parser tree, parents first."""
    out = [words]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += _commands(sub, (*words, name))
    return out


def _env(home: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "PYTHONPATH")}
    return {
        **keep,
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CONFIG_HOME": str(home / "config"),
        "USER": "transcript",
        "LOGNAME": "transcript",
        "COLUMNS": "100",
        "TZ": "UTC",
        "NO_COLOR": "1",
    }


def _run(words: list[str], env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run(
        ["faketime", "-f", NOW, *ZUKA, *words], capture_output=True, text=True, env=env, cwd=cwd,
        timeout=120,
    )  # fmt: skip
    return (
        f"$ zuka {' '.join(words)}\n[exit {done.returncode}]\n{done.stdout}"
        + (f"[stderr]\n{done.stderr}" if done.stderr else "")
        + "\n"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", type=Path, help="write here (default: stdout)")
    args = ap.parse_args()
    if shutil.which("faketime") is None:
        print("transcript: needs faketime (apt-get install faketime)", file=sys.stderr)
        return 2
    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root))
    from tui.cli.main import build_parser

    parts: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        env = _env(work / "home")
        env["PYTHONPATH"] = str(root)
        for words in _commands(build_parser()):
            parts.append(_run([*words, "--help"], env, work).replace(str(work), "{D}"))
        ledger = work / "lab.db"
        import shlex

        for line in SESSION:
            words = shlex.split(line.replace("{D}", str(work)))
            if "--ledger" not in words:
                words += ["--ledger", str(ledger)]
            parts.append(_run(words, env, work).replace(str(work), "{D}"))
    text = "".join(parts)
    if args.output:
        args.output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
