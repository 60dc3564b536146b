"""A cloud's own command-line tool, run from a template: one argv list per action (delete)
and per read-back (verify), never a shell. A value goes in only where the template has a
placeholder ({id}, {region}, {profile}), inside one argument, after the cloud_ids check, so
that no id can become a second argument or an option.

Templates are TOML (leases/data/cloud/*.toml ships aliyun, tccli and hcloud); a file of the
same shape in a `cloud/` folder beside the user's config adds a cloud or replaces one:

    name = "aliyun"                 # the template's name, stored in each step
    program = "aliyun"              # looked up on PATH (absolute entries), or /usr/bin/...
    providers = ["aliyun", "阿里云"]  # a provider whose name starts with one of these uses it
    region_args = ["--region", "{region}"]     # added to every call when a region is known
    profile_args = ["--profile", "{profile}"]  # added when credential_ref names a profile
    s3_endpoint = "https://oss-{region}.aliyuncs.com"  # buckets: the S3-compatible endpoint
    s3_addressing = "virtual"
    [env]   # credential_ref env:PREFIX: the variables the CLI reads its keys from
    access_key = "ALIBABA_CLOUD_ACCESS_KEY_ID"
    secret_key = "ALIBABA_CLOUD_ACCESS_KEY_SECRET"
    [whoami]                        # who the credentials act as (JSON on stdout)
    argv = ["sts", "GetCallerIdentity"]
    account = "AccountId"           # a dotted path into the JSON; digits index lists
    arn = "Arn"
    [snapshot]                      # also [image] and [disk]
    delete = ["ecs", "DeleteSnapshot", "--SnapshotId", "{id}"]
    verify = ["ecs", "DescribeSnapshots", "--RegionId", "{region}", "--SnapshotIds", '["{id}"]']
    listed = "Snapshots.Snapshot"   # verify's list: gone when empty; without it, exit 0 = there
    not_found = ["InvalidSnapshotId.NotFound"]  # an error saying it does not exist = gone
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import shutil
import stat
import tomllib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from leases.core import cloudids as cloud_ids
from leases.core.errors import InputError
from leases.core.i18n import N_, _
from leases.core.models import ResourceKind
from leases.core.textsafe import visible
from leases.offboard.cloud.access import (
    CloudError,
    Credentials,
    Reading,
    Timing,
    guarded,
    poll_gone,
)
from leases.offboard.steps import Identity, Outcome, Sighting, Step

_OUTPUT_MAX = 64 * 1024  # what one call's output may add to the evidence
_PLACEHOLDER_RE = re.compile(r"\{([^{}]*)\}")
_NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
# A template's program: a bare name looked up on PATH (aliyun, tccli, hcloud), or an absolute
# path under a directory only root writes on a normal system. Never a relative path (it
# would run whatever the working directory holds) nor shell words: the argv is run as is.
_PROGRAM_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}")
_PROGRAM_PART_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}")
TRUSTED_DIRS = ("/usr/bin/", "/usr/local/bin/", "/bin/", "/usr/sbin/", "/usr/local/sbin/", "/opt/")
_TEMPLATE_MAX = 64 * 1024  # a template is a page of TOML
_TEMPLATES_MAX = 100  # user templates read from one folder
KINDS = (ResourceKind.IMAGE, ResourceKind.SNAPSHOT, ResourceKind.DISK)


@dataclass(frozen=True)
class Action:
    delete: tuple[str, ...]
    verify: tuple[str, ...]
    listed: str = ""
    not_found: tuple[str, ...] = ()


@dataclass(frozen=True)
class Template:
    name: str
    program: str
    providers: tuple[str, ...]
    actions: Mapping[ResourceKind, Action]
    whoami: tuple[str, ...]
    whoami_account: str
    whoami_arn: str = ""
    region_args: tuple[str, ...] = ()
    profile_args: tuple[str, ...] = ()
    env_access_key: str = ""
    env_secret_key: str = ""
    env_session_token: str = ""
    s3_endpoint: str = ""
    s3_addressing: str = ""
    source: str = ""

    def serves(self, provider_name: str) -> bool:
        name = provider_name.strip().lower()
        return any(name.startswith(p) for p in self.providers)

    def argv(
        self, words: Sequence[str], *, native: str, region: str, creds: Credentials
    ) -> list[str]:
        """The call's argv: program, words, then region and profile options."""
        out = [self.program, *(_fill(w, id=native, region=region) for w in words)]
        if region:
            out += [_fill(w, region=region) for w in self.region_args]
        if creds.profile:
            out += [_fill(w, profile=creds.profile) for w in self.profile_args]
        return out


def _fill(word: str, **values: str) -> str:
    """Placeholders replaced by values checked before; one word stays one word."""

    def sub(m: re.Match[str]) -> str:
        if m.group(1) not in values:
            raise ValueError(f"placeholder {m.group(0)} has no value here")
        return values[m.group(1)]

    return _PLACEHOLDER_RE.sub(sub, word)


def _words(source: str, key: str, value: object, allowed: set[str]) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(w, str) for w in value):
        raise InputError(f"{source}: {key}", value, _("a list of strings (the argv words)"))
    for word in value:
        for name in _PLACEHOLDER_RE.findall(word):
            if name not in allowed:
                raise InputError(
                    f"{source}: {key}",
                    word,
                    _("placeholders here: {names}").format(names=", ".join(sorted(allowed))),
                )
        if re.search(r"[\x00-\x1f\x7f]", word):
            raise InputError(f"{source}: {key}", visible(word), _("control characters"))
    return tuple(value)


# An option asking a cloud to force its way (--Force, --force=true, --ForceDelete).
_FORCE_RE = re.compile(r"-{1,2}[A-Za-z_-]*force", re.IGNORECASE)


def _delete_words(source: str, key: str, value: object) -> tuple[str, ...]:
    """A delete call: names the ledger's id ({id}) and never forces (issue 10: no force
    flag; an image in use or a disk attached is reported, not forced)."""
    words = _words(source, key, value, {"id", "region"})
    if not any("{id}" in w for w in words):
        raise InputError(
            f"{source}: {key}", visible(" ".join(words)), _("a delete call must name the {id}")
        )
    forced = [w for w in words if _FORCE_RE.match(w)]
    if forced:
        raise InputError(
            f"{source}: {key}", visible(forced[0]), _("zuka never passes a force flag to a cloud")
        )
    return words


def _text(source: str, doc: Mapping[str, Any], key: str, default: str | None = None) -> str:
    value = doc.get(key, default)
    if not isinstance(value, str):
        raise InputError(f"{source}: {key}", value, _("a string is needed"))
    return value


def _program(source: str, program: str) -> str:
    """A bare program name, or an absolute, normalised path under TRUSTED_DIRS."""
    if _PROGRAM_NAME_RE.fullmatch(program):
        return program
    parts = program.split("/")
    if (
        program.startswith(TRUSTED_DIRS)
        and all(_PROGRAM_PART_RE.fullmatch(part) for part in parts[1:])
        and os.path.normpath(program) == program
    ):
        return program
    raise InputError(
        f"{source}: program",
        visible(program, 120),
        _(
            "a program name found on PATH (aliyun, tccli, hcloud) or an absolute path under"
            " {dirs}; no relative path, no shell words"
        ).format(dirs=", ".join(TRUSTED_DIRS)),
    )


def template_from(doc: Mapping[str, Any], source: str) -> Template:
    """A template read from TOML, every field checked; InputError names the one that is not."""
    name = _text(source, doc, "name")
    if not _NAME_RE.fullmatch(name):
        raise InputError(f"{source}: name", name, _("lower-case letters, digits, '-' and '_'"))
    program = _program(source, _text(source, doc, "program"))
    providers = doc.get("providers", [name])
    if not isinstance(providers, list) or not all(isinstance(p, str) and p for p in providers):
        raise InputError(f"{source}: providers", providers, _("a list of provider names"))
    whoami = doc.get("whoami")
    if not isinstance(whoami, dict):
        raise InputError(f"{source}: whoami", whoami, _("a [whoami] table is needed"))
    actions: dict[ResourceKind, Action] = {}
    for kind in KINDS:
        table = doc.get(str(kind))
        if table is None:
            continue
        if not isinstance(table, dict):
            raise InputError(f"{source}: {kind}", table, _("a table"))
        not_found = table.get("not_found", [])
        if not isinstance(not_found, list) or not all(isinstance(c, str) and c for c in not_found):
            raise InputError(f"{source}: {kind}.not_found", not_found, _("a list of error codes"))
        actions[kind] = Action(
            delete=_delete_words(source, f"{kind}.delete", table.get("delete")),
            verify=_words(source, f"{kind}.verify", table.get("verify"), {"id", "region"}),
            listed=_text(source, table, "listed", ""),
            not_found=tuple(not_found),
        )
    env = doc.get("env", {})
    if not isinstance(env, dict):
        raise InputError(f"{source}: env", env, _("a table"))
    addressing = _text(source, doc, "s3_addressing", "")
    if addressing not in ("", "path", "virtual"):
        raise InputError(f"{source}: s3_addressing", addressing, _("path or virtual"))
    return Template(
        name=name,
        program=program,
        providers=tuple(p.strip().lower() for p in providers),
        actions=actions,
        whoami=_words(source, "whoami.argv", whoami.get("argv"), set()),
        whoami_account=_text(source, whoami, "account"),
        whoami_arn=_text(source, whoami, "arn", ""),
        region_args=_words(source, "region_args", doc.get("region_args", []), {"region"}),
        profile_args=_words(source, "profile_args", doc.get("profile_args", []), {"profile"}),
        env_access_key=_text(source, env, "access_key", ""),
        env_secret_key=_text(source, env, "secret_key", ""),
        env_session_token=_text(source, env, "session_token", ""),
        s3_endpoint=_text(source, doc, "s3_endpoint", ""),
        s3_addressing=addressing,
        source=source,
    )


def load_templates(extra_dir: Path | None = None) -> dict[str, Template]:
    """The packaged templates, then any in extra_dir (same name: the user's wins)."""
    found: dict[str, Template] = {}
    packaged = resources.files("leases") / "data" / "cloud"
    for item in sorted(packaged.iterdir(), key=lambda i: i.name):
        if item.name.endswith(".toml"):
            t = _parsed(item.read_text("utf-8"), f"leases/data/cloud/{item.name}")
            found[t.name] = t
    if extra_dir is not None and extra_dir.is_dir():
        paths = sorted(extra_dir.glob("*.toml"))
        if len(paths) > _TEMPLATES_MAX:
            raise InputError(
                str(extra_dir),
                len(paths),
                _("more than {count} templates: not read").format(count=_TEMPLATES_MAX),
            )
        for path in paths:
            t = _parsed(_read_template(path), str(path))
            found[t.name] = t
    return found


def _read_template(path: Path) -> str:
    """A user's template file: a regular file, read without following a link and without
    waiting on a FIFO or device (O_NONBLOCK, then fstat), at most _TEMPLATE_MAX bytes."""
    shown = visible(str(path), 300)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise InputError(
            shown, "", _("cannot open the template: {error}").format(error=exc.strerror)
        ) from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(shown, "", _("is not a regular file (a FIFO, device or folder)"))
        if info.st_size > _TEMPLATE_MAX:
            raise InputError(
                shown,
                info.st_size,
                _("a template is at most {count} bytes").format(count=_TEMPLATE_MAX),
            )
        data = os.read(fd, _TEMPLATE_MAX + 1)
    except OSError as exc:
        raise InputError(
            shown, "", _("cannot read the template: {error}").format(error=exc.strerror)
        ) from exc
    finally:
        os.close(fd)
    if len(data) > _TEMPLATE_MAX:
        raise InputError(
            shown, len(data), _("a template is at most {count} bytes").format(count=_TEMPLATE_MAX)
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            shown, "", _("not UTF-8 text (byte {offset})").format(offset=exc.start)
        ) from exc


def _parsed(text: str, source: str) -> Template:
    """A template from TOML text; every way it can fail (bad TOML, nesting deep enough to
    exhaust the recursion limit, a value of the wrong shape) is an InputError naming the
    file, never a traceback."""
    shown = visible(source, 300)
    try:
        return template_from(tomllib.loads(text), source)
    except InputError:
        raise
    except RecursionError:
        raise InputError(shown, "", _("nested too deeply to be a template")) from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(
            shown, "", _("not valid TOML: {error}").format(error=visible(exc, 200))
        ) from None
    except (TypeError, ValueError, AttributeError, KeyError) as exc:
        raise InputError(
            shown, "", _("not a template: {error}").format(error=visible(exc, 200))
        ) from None


def json_at(doc: Any, path: str) -> Any:
    """The value at a dotted path ("Snapshots.Snapshot", "domains.0.id"), or None."""
    for part in path.split("."):
        if isinstance(doc, dict):
            doc = doc.get(part)
        elif isinstance(doc, list) and part.isdigit() and int(part) < len(doc):
            doc = doc[int(part)]
        else:
            return None
    return doc


@dataclass(frozen=True)
class CommandResult:
    exit_status: int
    stdout: str
    stderr: str

    def text(self) -> str:
        return f"exit {self.exit_status}\n{self.stdout}\n{self.stderr}".rstrip()


CommandRunner = Callable[[Sequence[str], Mapping[str, str], float], Awaitable[CommandResult]]


async def run_command(
    argv: Sequence[str], env: Mapping[str, str], timeout_s: float
) -> CommandResult:
    """argv run directly (no shell), stdin closed, output cut to _OUTPUT_MAX each."""
    program = shutil.which(argv[0], path=_absolute_path(env.get("PATH", os.defpath)))
    if program is None:
        raise CloudError(
            N_("{program}: not found on PATH; install it or give its path in a template").format(
                program=argv[0]
            )
        )
    proc = await asyncio.create_subprocess_exec(
        program,
        *argv[1:],
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(env),
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout_s)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return CommandResult(124, "", f"no answer in {timeout_s:.0f} s: killed")
    cut = _OUTPUT_MAX
    return CommandResult(
        proc.returncode if proc.returncode is not None else -1,
        out[:cut].decode("utf-8", "replace"),
        err[:cut].decode("utf-8", "replace"),
    )


def _absolute_path(path: str) -> str:
    """PATH without its relative entries ("", ".", "bin"): a bare program name must not
    find a file of the working directory."""
    return os.pathsep.join(d for d in path.split(os.pathsep) if os.path.isabs(d))


def _cmd_target(step: Step) -> tuple[ResourceKind, str, str]:
    kind = ResourceKind(step.param("kind"))
    return (
        kind,
        cloud_ids.native_id(kind, step.param("native_id")),
        cloud_ids.region(step.param("region")),
    )


class CmdDriver:
    name = "cmd"

    def __init__(
        self,
        templates: Mapping[str, Template],
        creds: Credentials,
        *,
        region: str,
        timing: Timing,
        environ: Mapping[str, str] | None = None,
        runner: CommandRunner = run_command,
        call_timeout_s: float = 120.0,
        whoami_template: str = "",
    ) -> None:
        self.templates = templates
        self.creds = creds
        self.region = region
        self.timing = timing
        self.environ = os.environ if environ is None else environ
        self.runner = runner
        self.call_timeout_s = call_timeout_s
        self.whoami_template = whoami_template

    def _template(self, name: str) -> Template:
        if name not in self.templates:
            raise CloudError(
                N_("no cloud CLI template named '{name}'").format(name=visible(name, 40))
            )
        return self.templates[name]

    def _env(self, t: Template) -> dict[str, str]:
        env = dict(self.environ)
        if self.creds.env_prefix:
            if not (t.env_access_key and t.env_secret_key):
                raise CloudError(
                    N_(
                        "{template} takes its keys from a profile: give credential_ref a profile"
                        " name"
                    ).format(template=t.name)
                )
            key, secret, token = self.creds.from_env(self.environ)
            env[t.env_access_key], env[t.env_secret_key] = key, secret
            if token and t.env_session_token:
                env[t.env_session_token] = token
        return env

    async def _call(self, t: Template, argv: list[str]) -> CommandResult:
        return await self.runner(argv, self._env(t), self.call_timeout_s)

    def _argv(self, step: Step, verify: bool) -> tuple[Template, Action, list[str]]:
        t = self._template(step.param("template"))
        kind, native, region = _cmd_target(step)
        if kind not in t.actions:
            raise CloudError(
                N_("the {template} template has no [{kind}] table").format(
                    template=t.name, kind=kind
                )
            )
        action = t.actions[kind]
        words = action.verify if verify else action.delete
        return t, action, t.argv(words, native=native, region=region, creds=self.creds)

    async def identity(self, endpoint: str = "", region: str = "") -> Identity:
        """The template's whoami in that region (a CLI has no endpoint of ours: its own).
        The region reported is the one the call was made in: the CLI's answer has none."""
        t = self._template(self.whoami_template)
        region = cloud_ids.region(region) or self.region
        argv = t.argv(t.whoami, native="", region=region, creds=self.creds)
        result = await self._call(t, argv)
        if result.exit_status != 0:
            raise CloudError(f"{shlex.join(argv)}: {visible(result.text(), 300)}")
        try:
            doc = json.loads(result.stdout)
        except json.JSONDecodeError as exc:
            raise CloudError(
                N_("{command}: the answer is not JSON").format(command=shlex.join(argv))
            ) from exc
        account = json_at(doc, t.whoami_account)
        if not isinstance(account, str | int) or account == "":
            raise CloudError(
                N_("{command}: no {field} in the answer").format(
                    command=shlex.join(argv), field=t.whoami_account
                )
            )
        arn = json_at(doc, t.whoami_arn) if t.whoami_arn else ""
        return Identity(visible(account, 64), region, visible(arn or "", 300))

    async def inspect(self, step: Step) -> Sighting:
        """The template's read-back call, read as a sighting: listed (with what the cloud
        says of it), not found, or could not tell (another error, no answer, not JSON)."""
        try:
            t, action, argv = self._argv(step, verify=True)
            native = _cmd_target(step)[1]
            result = await self._call(t, argv)
        except (CloudError, ValueError) as exc:
            return Sighting(None, "", N_("not looked at: {why}").format(why=visible(exc, 300)))
        text = f"{shlex.join(argv)}\n{result.text()}"
        facts = {"region": step.param("region"), "cli": t.program, "template": t.name}
        if result.exit_status != 0:
            if _says_not_found(result, action):
                return Sighting(False, text, N_("not found: check the id and region"), facts)
            said = N_("could not look: exit {status}").format(status=result.exit_status)
            return Sighting(None, text, said, facts)
        if not action.listed:
            return Sighting(True, text, N_("the read-back call found it"), facts)
        try:
            listed = json_at(json.loads(result.stdout), action.listed)
        except json.JSONDecodeError:
            return Sighting(None, text, N_("the answer is not JSON"), facts)
        if listed == []:
            return Sighting(False, text, N_("not listed: check the id and region"), facts)
        if not isinstance(listed, list):
            said = N_("no list at {path} in the answer").format(path=action.listed)
            return Sighting(None, text, said, facts)
        ours = [i for i in listed if isinstance(i, dict) and native in json.dumps(i)]
        if not ours:
            return Sighting(None, text, N_("the answer lists others, not ours"), facts)
        facts.update(_item_facts(ours[0]))
        if "state" not in facts:
            return Sighting(True, text, N_("listed (state not said)"), facts)
        return Sighting(True, text, N_("listed ({state})").format(state=facts["state"]), facts)

    async def run(self, step: Step) -> Outcome:
        return await guarded(self._run(step))

    async def _run(self, step: Step) -> Outcome:
        t, action, argv = self._argv(step, verify=False)
        result = await self._call(t, argv)
        text = f"{shlex.join(argv)}\n{result.text()}"
        if result.exit_status == 0:
            # Some clouds answer success to an id they do not know: verify proves it.
            return Outcome(True, text, N_("accepted; the read-back proves it"))
        if _says_not_found(result, action):
            return Outcome(True, text, N_("already gone"))
        said = N_("{program} exited {status}").format(program=t.program, status=result.exit_status)
        return Outcome(False, text, said)

    async def verify(self, step: Step, *, patient: bool = True) -> Outcome:
        return await guarded(self._verify(step, patient))

    async def _verify(self, step: Step, patient: bool) -> Outcome:
        t, action, argv = self._argv(step, verify=True)
        native = _cmd_target(step)[1]

        async def read() -> Reading:
            result = await self._call(t, argv)
            text = f"{shlex.join(argv)}\n{result.text()}"
            if result.exit_status != 0:
                if _says_not_found(result, action):
                    return Reading(True, text)
                said = N_("read back failed: exit {status}").format(status=result.exit_status)
                return Reading(False, text, said)
            if not action.listed:
                return Reading(False, text, N_("the read-back found it"))
            try:
                listed = json_at(json.loads(result.stdout), action.listed)
            except json.JSONDecodeError:
                return Reading(False, text, N_("the read-back answer is not JSON"))
            if listed == []:
                return Reading(True, text)
            if not isinstance(listed, list):
                said = N_("no list at {path} in the answer").format(path=action.listed)
                return Reading(False, text, said)
            ours = native in json.dumps(listed)
            return Reading(
                False,
                text,
                N_("still listed") if ours else N_("the answer lists others (filter ignored?)"),
            )

        return await poll_gone(read, self.timing, patient=patient)


def _says_not_found(result: CommandResult, action: Action) -> bool:
    both = result.stdout + result.stderr
    return any(code in both for code in action.not_found)


# What a person checks, as the clouds' Describe answers name it (Aliyun, Tencent, Huawei).
_ITEM_FACTS = {
    "state": ("Status", "SnapshotState", "DiskState", "ImageState", "status"),
    "size_gib": ("Size", "SourceDiskSize", "DiskSize", "size", "min_disk"),
    "created": ("CreationTime", "CreatedTime", "CreateTime", "created_at"),
    "owner": ("OwnerId", "ImageOwnerAlias", "owner"),
}


def _item_facts(item: Mapping[str, Any]) -> dict[str, str]:
    out = {}
    for fact, keys in _ITEM_FACTS.items():
        for key in keys:
            if isinstance(item.get(key), str | int | float):
                out[fact] = visible(item[key], 100)
                break
    return out
