"""Resource limits of one code_run: rlimits through `prlimit`, a pids cgroup where one can be made, and the
one line that says which limit a dead script hit.

rlimits are inherited by bubblewrap and everything it starts. RLIMIT_NPROC alone does not hold for root (the
kernel never applies it to uid 0, and a user namespace does not change the uid that is counted), so where
ga may create cgroups (root, or a delegated cgroup v2 subtree) each sandbox also gets its own pids cgroup;
its `pids.events` tells afterwards whether a fork was refused.
"""
from __future__ import annotations

import functools
import itertools
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import structlog

log = structlog.get_logger("worker.sandbox")
GIB = 1 << 30
MIB = 1 << 20
CGROUP_ROOT = Path("/sys/fs/cgroup")
_names = itertools.count(1)
# Joins the cgroup then runs the rest: no fork of the sandbox can happen before it is inside.
JOIN = 'echo $$ > "$1" && shift && exec "$@"'


@dataclass(frozen=True)
class Limits:
    memory: int
    processes: int
    file_size: int
    cpu_seconds: int
    tmp_size: int

    @classmethod
    def of(cls, settings: Any) -> "Limits":
        """The limits settings' `sandbox.limits` (a SandboxLimits) ask for, None values sized to this machine."""
        limits = settings.resolved()
        return cls(memory=int(limits.memory), processes=limits.processes, file_size=int(limits.file_size),
                   cpu_seconds=limits.cpu_seconds, tmp_size=int(limits.tmp_size))


def confine(limits: Limits, sandboxed: bool) -> tuple[list[str], Optional["PidsCgroup"]]:
    """(argv prefix that runs a command under `limits`, its pids cgroup or None). Sandboxed scripts get a pids
    cgroup where ga may make one, else RLIMIT_NPROC. FileNotFoundError: no `prlimit` here (fail closed)."""
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        raise FileNotFoundError("code_run refused: `prlimit` (util-linux) not found to set the sandbox's limits; "
                                "install util-linux")
    cgroup = new_pids_cgroup(limits.processes) if sandboxed else None
    nproc = [] if cgroup is not None or os.getuid() == 0 else [f"--nproc={limits.processes + _my_tasks()}"]
    cpu = f"{limits.cpu_seconds}:{limits.cpu_seconds + 5}"  # SIGXCPU at the limit, SIGKILL 5 s later
    rlimits = [prlimit, f"--data={limits.memory}", f"--fsize={limits.file_size}", f"--cpu={cpu}", *nproc, "--"]
    return [*(cgroup.prefix() if cgroup else []), *rlimits], cgroup


def _my_tasks() -> int:
    """Threads of all this user's processes: RLIMIT_NPROC counts them all, not just the sandbox's, so the
    sandbox's share is what runs now plus the limit."""
    uid, count = os.getuid(), 0
    for entry in os.scandir("/proc"):
        try:
            if entry.name.isdigit() and entry.stat().st_uid == uid:
                count += int(Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()[17])
        except (OSError, ValueError, IndexError):
            continue
    return count


class PidsCgroup:
    """A pids cgroup of its own for one sandbox; `prefix()` moves the command into it before it starts."""

    def __init__(self, base: Path, limit: int) -> None:
        self.path = base / f"ga-{os.getpid()}-{next(_names)}"
        self.path.mkdir()
        try:
            (self.path / "pids.max").write_text(str(limit))
        except OSError:
            self.remove()
            raise

    def prefix(self) -> list[str]:
        return ["/bin/sh", "-c", JOIN, "sh", str(self.path / "cgroup.procs")]

    def refused_forks(self) -> int:
        try:
            text = (self.path / "pids.events").read_text()
        except OSError:
            return 0
        match = re.search(r"^max (\d+)", text, re.MULTILINE)
        return int(match.group(1)) if match else 0

    def remove(self, tries: int = 1) -> bool:
        """Remove the cgroup once it is empty (the kernel empties it a moment after the last process ends)."""
        return self.remove_path(self.path, tries)

    @staticmethod
    def remove_path(path: Path, tries: int = 1) -> bool:
        for attempt in range(tries):
            try:
                path.rmdir()
                return True
            except FileNotFoundError:
                return True
            except OSError:
                time.sleep(0.02 * attempt)
        return False


def new_pids_cgroup(limit: int) -> Optional[PidsCgroup]:
    base = pids_cgroup_base()
    if base is None:
        return None
    try:
        return PidsCgroup(base, limit)
    except OSError as exc:
        log.warning("pids_cgroup_failed", error=str(exc)[:160])
        return None


@functools.lru_cache(maxsize=1)
def pids_cgroup_base() -> Optional[Path]:
    """A cgroup directory under which ga may create pids cgroups (probed once), or None."""
    for base in _candidates():
        try:
            probe = PidsCgroup(base, 8)
        except OSError:
            continue
        probe.remove()
        _sweep(base)
        return base
    if os.getuid() == 0:  # RLIMIT_NPROC does not hold for root: say once that processes are unbounded
        log.warning("process_limit_unenforced", note="running as root without a writable pids cgroup: "
                    "sandbox.limits.processes cannot be enforced here")
    return None


def _sweep(base: Path) -> None:
    """Remove empty pids cgroups a ga process that is gone left behind (killed before its task's end)."""
    for folder in base.glob("ga-*-*"):
        pid = folder.name.split("-")[1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            PidsCgroup.remove_path(folder)


def _candidates() -> list[Path]:
    """Our own cgroup in the v1 pids hierarchy and in the unified (v2) one, where they are mounted."""
    found = []
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        _, controllers, path = line.split(":", 2)
        relative = path.lstrip("/")
        if "pids" in controllers.split(","):
            found.append(CGROUP_ROOT / "pids" / relative)
        elif controllers == "":
            found += [CGROUP_ROOT / relative, CGROUP_ROOT / "unified" / relative]
    return [p for p in found if p.is_dir()]


SIGXCPU, SIGXFSZ = 24, 25
# What a script's output says when an allocation, a fork or a write in /tmp was refused.
MEMORY = re.compile(r"MemoryError|Cannot allocate memory|out of memory", re.IGNORECASE)
FORK = re.compile(r"\bfork: |BlockingIOError: \[Errno 11\]|can't start new thread|Resource temporarily unavailable")
NO_SPACE = re.compile(r"No space left on device|Errno 28")


def verdict(code: int, output: str, limits: Limits, refused_forks: int = 0) -> Optional[str]:
    """One line naming the limit a failed script most likely hit, or None."""
    if code == 0:
        return None
    signal = -code if code < 0 else code - 128  # killed directly, or reported by bubblewrap / a shell
    if signal == SIGXCPU:
        return f"killed: CPU time limit ({limits.cpu_seconds} s a process; sandbox.limits.cpu_seconds)"
    if signal == SIGXFSZ:
        return f"killed: file size limit ({_size(limits.file_size)}; sandbox.limits.file_size)"
    if refused_forks or FORK.search(output):
        return f"process limit reached ({limits.processes}; sandbox.limits.processes): a fork was refused"
    if MEMORY.search(output):
        return f"memory limit reached ({_size(limits.memory)} a process; sandbox.limits.memory)"
    if NO_SPACE.search(output):
        return (f"no space left: /tmp is limited to {_size(limits.tmp_size)} (sandbox.limits.tmp_size), "
                "or the disk is full")
    return None


def _size(n: int) -> str:
    for unit, factor in (("GiB", GIB), ("MiB", MIB)):
        if n >= factor:
            return f"{n / factor:.3g} {unit}"
    return f"{n} bytes"
