"""A private OpenSSH sshd for the integration tier, with a fake nvidia-smi on the user's PATH.

    with Sshd.start_new([client_public_key]) as sshd:
        sshd.port, sshd.host_key, sshd.user
        sshd.set_nvidia_smi_mode("nodriver")   # the next nvidia-smi exits 9
        sshd.kill(); sshd.restart()

It listens on 127.0.0.1 on a free port with its own host key and authorized_keys, logs in
a test user whose shell is /bin/sh (created with useradd when missing: needs root), and
puts a directory holding the fake `nvidia-smi` first on that user's PATH (`SetEnv PATH`).
`sshd_unavailable()` says why these tests cannot run here, or None.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Self

import asyncssh

SSHD = Path("/usr/sbin/sshd")
TEST_USER = "zukatest"

# Two A100 80GB, as `nvidia-smi --query-gpu=...` prints them (values per GPU index).
FAKE_GPUS = {
    "index": ("0", "1"),
    "uuid": (
        "GPU-0f8e2c1a-6b1e-4a8e-9d1c-2b7f00000000",
        "GPU-0f8e2c1a-6b1e-4a8e-9d1c-2b7f00000001",
    ),
    "name": ("NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB"),
    "utilization.gpu": ("87 %", "0 %"),
    "utilization.memory": ("41 %", "0 %"),
    "memory.used": ("61234 MiB", "4 MiB"),
    "memory.total": ("81920 MiB", "81920 MiB"),
    "temperature.gpu": ("64", "31"),
    "power.draw": ("312.45 W", "61.20 W"),
    "power.limit": ("400.00 W", "400.00 W"),
    "clocks.sm": ("1410 MHz", "210 MHz"),
    "pstate": ("P0", "P0"),
    "fan.speed": ("[N/A]", "[N/A]"),
}
HEADER_UNITS = {
    "utilization.gpu": " [%]",
    "utilization.memory": " [%]",
    "memory.used": " [MiB]",
    "memory.total": " [MiB]",
    "power.draw": " [W]",
    "power.limit": " [W]",
    "clocks.sm": " [MHz]",
}
DRIVER_FAILURE = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running."
)


def _fake_nvidia_smi(mode_file: Path) -> str:
    cases = []
    for field, values in FAKE_GPUS.items():
        unit = HEADER_UNITS.get(field, "")
        cases.append(f'    {field}) head="{field}{unit}"; v0="{values[0]}"; v1="{values[1]}" ;;')
    fields = "\n".join(cases)
    return f"""#!/bin/sh
# Fake nvidia-smi for zuka's tests: answers --query-gpu like the real one, refuses the rest.
mode=$(cat '{mode_file}' 2>/dev/null || echo ok)
if [ "$mode" = nodriver ]; then
  echo "{DRIVER_FAILURE}"
  exit 9
fi
# apps:PID lists PID as a compute process of GPU 0 (the processes tests).
case "$mode" in apps:*) case "$*" in *--query-compute-apps=*)
  echo "{FAKE_GPUS["uuid"][0]}, ${{mode#apps:}}, 1024"; exit 0 ;; esac ;; esac
bad() {{
  echo "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help."
  exit 2
}}
query=""; format=""; loop=""
while [ $# -gt 0 ]; do
  case "$1" in
    --query-gpu=*) query=${{1#--query-gpu=}} ;;
    --format=*) format=${{1#--format=}} ;;
    -l|-lms) [ $# -ge 2 ] || bad
             if [ "$1" = -lms ]; then loop="ms$2"; else loop=$2; fi; shift ;;
    --loop=*) loop=${{1#--loop=}} ;;
    --loop-ms=*) loop="ms${{1#--loop-ms=}}" ;;
    -L) echo "GPU 0: {FAKE_GPUS["name"][0]} (UUID: {FAKE_GPUS["uuid"][0]})"
        echo "GPU 1: {FAKE_GPUS["name"][1]} (UUID: {FAKE_GPUS["uuid"][1]})"; exit 0 ;;
    *) bad ;;
  esac
  shift
done
case "${{loop#ms}}" in *[!0-9]*) bad ;; esac
[ -n "$query" ] || bad
case ",$format," in *,csv,*) ;; *) bad ;; esac
noheader=0; nounits=0
case ",$format," in *,noheader,*) noheader=1 ;; esac
case ",$format," in *,nounits,*) nounits=1 ;; esac
value() {{ # field gpu-index -> sets head, out
  case "$1" in
{fields}
    *) echo "Field \\"$1\\" is not a valid field to query."; exit 2 ;;
  esac
  if [ "$2" = 0 ]; then out=$v0; else out=$v1; fi
  if [ $nounits = 1 ]; then out=${{out% %}}; out=${{out% MiB}}; out=${{out% W}}; out=${{out% MHz}}; fi
}}
row() {{ # gpu-index or "head"
  line=""; old_ifs=$IFS; IFS=,
  for f in $query; do
    value "$f" 0
    if [ "$1" = head ]; then out=$head; [ $nounits = 1 ] && out=$f; else value "$f" "$1"; fi
    line="${{line:+$line, }}$out"
  done
  IFS=$old_ifs
  echo "$line"
}}
old_ifs=$IFS; IFS=,
for f in $query; do value "$f" 0; done
IFS=$old_ifs
while :; do
  [ $noheader = 1 ] || row head
  row 0; row 1
  case "$loop" in
    "") exit 0 ;;
    ms*) sleep "$(echo "${{loop#ms}}" | awk '{{print $1/1000}}')" ;;
    *) sleep "$loop" ;;
  esac
done
"""


def sshd_unavailable(user: str = TEST_USER) -> str | None:
    """Why a private sshd cannot run here, or None when it can."""
    if not SSHD.exists():
        return f"{SSHD} not found: install openssh-server (apt-get install -y openssh-server)"
    try:
        pwd.getpwnam(user)
    except KeyError:
        if os.geteuid() != 0 or not shutil.which("useradd"):
            return f"test user {user!r} is missing and cannot be created without root"
    return None


def ensure_user(user: str = TEST_USER) -> None:
    """Create the login user with /bin/sh (root's bash rc makes every command slow)."""
    # One at a time: pytest-xdist workers start sshds at once, and a second useradd (or a
    # usermod while /etc/passwd is locked) fails.
    with open(Path(tempfile.gettempdir()) / "zuka-sshd-user.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            pwd.getpwnam(user)
        except KeyError:
            # '*' rather than useradd's '!': without PAM, sshd refuses a '!'-locked account.
            subprocess.run(
                ["useradd", "--create-home", "--shell", "/bin/sh", "--password", "*", user],
                check=True,
                capture_output=True,
            )
        if os.geteuid() == 0 and _shadow_password(user) != "*":
            subprocess.run(["usermod", "--password", "*", user], check=True, capture_output=True)


def _shadow_password(user: str) -> str | None:
    try:
        lines = Path("/etc/shadow").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        name, _, rest = line.partition(":")
        if name == user:
            return rest.partition(":")[0]
    return None


PORT_TRIES = 5


class PortTaken(RuntimeError):
    """sshd could not bind its port: something else took it first."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:  # bytes: a process's name is any bytes it chose (not UTF-8 nor one line)
            stat = (entry / "stat").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rpartition(b")")[2].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class Sshd:
    """One private sshd. Start with start_new(); stop() removes everything it made."""

    def __init__(
        self,
        workdir: Path,
        authorized: Sequence[asyncssh.SSHKey],
        *,
        user: str = TEST_USER,
        max_sessions: int = 10,
        own_home: bool = False,
        listen: str = "127.0.0.1",
        port: int | None = None,
        netns: str | None = None,
        password_auth: bool = False,
        config_path: Path | None = None,
        extra_config: str = "",
    ) -> None:
        self.workdir = workdir
        self.user = user
        self.max_sessions = max_sessions
        # own_home: a HOME of this sshd's own, owned by the user, holding the authorized_keys
        # the user may rewrite (offboarding revokes its key there).
        self.home: Path | None = workdir / "home" if own_home else None
        # listen/port/netns: an sshd inside a network namespace the test made (started with
        # `ip netns exec NETNS`), on an address of it; config_path: where its config goes
        # (under /etc/netns/NETNS/ssh/ it is the namespace's /etc/ssh/sshd_config, which is
        # what `sshd -T` and `cat` on the node read); password_auth and extra_config make
        # the bad sshd acceptance must fail.
        self.listen = listen
        self.netns = netns
        self.password_auth = password_auth
        self.extra_config = extra_config
        self.port = port if port is not None else free_port()
        self.host_key = asyncssh.generate_private_key("ssh-ed25519")
        self.host_key_path = workdir / "ssh_host_ed25519_key"
        self.config_path = config_path or workdir / "sshd_config"
        self.log_path = workdir / "sshd.log"
        self.mode_file = workdir / "nvidia-smi-mode"
        self._proc: subprocess.Popen[bytes] | None = None

        bindir = workdir / "bin"
        bindir.mkdir()
        smi = bindir / "nvidia-smi"
        smi.write_text(_fake_nvidia_smi(self.mode_file))
        smi.chmod(0o755)
        self.host_key.write_private_key(self.host_key_path)
        self.host_key_path.chmod(0o600)
        self.host_key.write_public_key(self.host_key_path.with_suffix(".pub"))
        self.keys_path = workdir / "authorized_keys"
        if self.home is not None:
            (self.home / ".ssh").mkdir(parents=True)
            self.keys_path = self.home / ".ssh" / "authorized_keys"
        self.keys_path.write_text("".join(k.export_public_key().decode() for k in authorized))
        self.keys_path.chmod(0o644)
        if self.home is not None:
            info = pwd.getpwnam(user)
            for path in (self.home, self.home / ".ssh", self.keys_path):
                os.chown(path, info.pw_uid, info.pw_gid)
        self._write_config()

    def _write_config(self) -> None:
        bindir = self.workdir / "bin"
        self.config_path.write_text(
            f"""Port {self.port}
ListenAddress {self.listen}
HostKey {self.host_key_path}
AuthorizedKeysFile {self.keys_path}
PidFile none
{self.extra_config}PasswordAuthentication {"yes" if self.password_auth else "no"}
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PubkeyAuthentication yes
AllowUsers {self.user}
MaxSessions {self.max_sessions}
MaxStartups 10:30:100
SetEnv PATH={bindir}:/usr/local/bin:/usr/bin:/bin{f" HOME={self.home}" if self.home else ""}
LogLevel VERBOSE
"""
        )

    @classmethod
    def start_new(cls, authorized: Sequence[asyncssh.SSHKey], **kwargs: object) -> Sshd:
        ensure_user(str(kwargs.get("user", TEST_USER)))
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        # Not under pytest's tmp_path: that is 0700 and the test user must read its files.
        workdir = Path(tempfile.mkdtemp(prefix="zuka-sshd-"))
        workdir.chmod(0o755)
        sshd = cls(workdir, authorized, **kwargs)  # type: ignore[arg-type]
        try:
            check = subprocess.run(
                [str(SSHD), "-t", "-f", str(sshd.config_path)], capture_output=True, text=True
            )
            if check.returncode != 0:
                raise RuntimeError(f"sshd -t rejected the config: {check.stderr}")
            for _ in range(PORT_TRIES - 1):
                try:
                    sshd.restart()
                    break
                except PortTaken:
                    # Another process (an xdist worker) took the port between free_port()
                    # and sshd's bind: try another.
                    sshd.port = free_port()
                    sshd._write_config()
            else:
                sshd.restart()
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        return sshd

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def set_nvidia_smi_mode(self, mode: str) -> None:
        """'ok' or 'nodriver' (fails like a node whose driver is not loaded, exit 9)."""
        self.mode_file.write_text(mode)
        self.mode_file.chmod(0o644)

    def restart(self, timeout: float = 10.0) -> None:
        """Start (again) on the same port with the same host key; wait until it listens."""
        if self.running:
            return
        log = self.log_path.open("ab")
        prefix = ["ip", "netns", "exec", self.netns] if self.netns else []
        self._proc = subprocess.Popen(
            [*prefix, str(SSHD), "-D", "-e", "-f", str(self.config_path)],
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                code, self._proc = self._proc.returncode, None
                log = self.log()
                if "Address already in use" in log.rpartition("Server listening")[2]:
                    raise PortTaken(f"port {self.port} is taken: {log}")
                raise RuntimeError(f"sshd exited {code}: {log}")
            try:
                with socket.create_connection((self.listen, self.port), timeout=0.5) as s:
                    if s.recv(4).startswith(b"SSH-"):
                        return
            except OSError:
                time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"sshd did not listen on {self.port} within {timeout} s: {self.log()}")

    def kill(self) -> None:
        """SIGKILL the listener and every connection it forked, like a node that died."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        for pid in [*_descendants(proc.pid), proc.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def stop(self) -> None:
        self.kill()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
