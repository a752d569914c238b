"""Resource limits of one code_run: rlimits through `prlimit`, a cgroup for the whole sandbox where one can be
made (processes and memory), and the one line that says which limit a dead script hit.

rlimits are inherited by bubblewrap and everything it starts, but each holds one process: RLIMIT_DATA let four
processes hold 400 MiB each under a 512 MiB `sandbox.limits.memory`, and RLIMIT_NPROC does not hold for root
(the kernel never applies it to uid 0, and a user namespace does not change the uid that is counted). So
where ga may create cgroups (root, or a delegated cgroup v2 subtree) each sandbox also gets its own: a pids
cgroup (`pids.max`) and a memory cgroup (`memory.max`, or v1's `memory.limit_in_bytes`, swap included), one
folder in the unified (v2) hierarchy or one per v1 hierarchy. Past the memory limit the kernel kills inside
the sandbox (its tmpfs /tmp is charged too); `pids.events` and the OOM kill count tell afterwards which limit
it was. Where no memory cgroup can be made, ga says so once, and memory stays a per-process limit.
"""
from __future__ import annotations

import functools
import itertools
import os
import re
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import structlog

if TYPE_CHECKING:
    from configs.settings import SandboxLimits

log = structlog.get_logger("worker.sandbox")
GIB = 1 << 30
MIB = 1 << 20
CGROUP_ROOT = Path("/sys/fs/cgroup")
_names = itertools.count(1)
# Joins each cgroup named before `--`, then runs the rest: no fork of the sandbox can happen before it is inside.
JOIN = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'
# The file that sets each controller's limit, per hierarchy version: (v2, v1)
LIMIT_FILES = {"pids": ("pids.max", "pids.max"), "memory": ("memory.max", "memory.limit_in_bytes")}
PROBE_VALUES = {"pids": "8", "memory": str(1 << 30)}


@dataclass(frozen=True)
class Limits:
    memory: int
    processes: int
    file_size: int
    cpu_seconds: int
    tmp_size: int
    disk: Optional[int] = None  # what the workdir may hold (worker/sandbox_disk.py); None: sized when it starts

    @classmethod
    def of(cls, settings: SandboxLimits) -> "Limits":
        """The limits settings' `sandbox.limits` (a SandboxLimits) ask for, None values sized to this machine."""
        limits = settings.resolved()
        assert limits.memory is not None and limits.tmp_size is not None  # resolved() sizes both
        return cls(memory=int(limits.memory), processes=limits.processes, file_size=int(limits.file_size),
                   cpu_seconds=limits.cpu_seconds, tmp_size=int(limits.tmp_size),
                   disk=int(limits.disk) if limits.disk else None)


def confine(limits: Limits, sandboxed: bool) -> tuple[list[str], Optional["SandboxCgroup"]]:
    """(argv prefix that runs a command under `limits`, its cgroup or None). Sandboxed scripts get a cgroup (pids,
    and memory) where ga may make one, else RLIMIT_NPROC. FileNotFoundError: no `prlimit` here (fail closed)."""
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        raise FileNotFoundError("code_run refused: `prlimit` (util-linux) not found to set the sandbox's limits; "
                                "install util-linux")
    cgroup = SandboxCgroup.make(limits) if sandboxed else None
    counted = cgroup is not None and "pids" in cgroup.folders
    nproc = [] if counted or os.getuid() == 0 else [f"--nproc={limits.processes + _my_tasks()}"]
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


class SandboxCgroup:
    """The cgroup folders of one sandbox, one per controller ga could place (the same folder for both in v2);
    `prefix()` moves the command into them before it starts."""

    def __init__(self, folders: dict[str, Path]):
        self.folders = folders

    @classmethod
    def make(cls, limits: Limits) -> Optional["SandboxCgroup"]:
        wanted = {"pids": str(limits.processes), "memory": str(limits.memory)}
        name = f"ga-{os.getpid()}-{next(_names)}"
        folders: dict[str, Path] = {}
        try:
            for controller, value in wanted.items():
                base = cgroup_base(controller)
                if base is None:
                    continue
                folder = base / name
                if folder not in folders.values():
                    folder.mkdir()
                folders[controller] = folder
                _set_limit(folder, controller, value)
        except OSError as exc:
            log.warning("sandbox_cgroup_failed", error=str(exc)[:160])
            cls(folders).remove()
            return None
        return cls(folders) if folders else None

    def prefix(self) -> list[str]:
        procs = sorted({str(folder / "cgroup.procs") for folder in self.folders.values()})
        return ["/bin/sh", "-c", JOIN, "sh", *procs, "--"]

    def refused_forks(self) -> int:
        folder = self.folders.get("pids")
        return _count_in(folder / "pids.events", "max") if folder else 0

    def oom_kills(self) -> int:
        folder = self.folders.get("memory")
        if folder is None:
            return 0
        return max(_count_in(folder / "memory.events", "oom_kill"), _count_in(folder / "memory.oom_control", "oom_kill"))

    def remove(self, tries: int = 1) -> bool:
        """Remove the cgroup once it is empty (the kernel empties it a moment after the last process ends)."""
        return all([self.remove_path(folder, tries) for folder in set(self.folders.values())])

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


def _set_limit(folder: Path, controller: str, value: str) -> None:
    v2 = (folder / "cgroup.controllers").exists()
    (folder / LIMIT_FILES[controller][0 if v2 else 1]).write_text(value)
    if controller == "memory":  # swap may not stretch it: v2 none at all, v1 memory + swap = the limit
        swap = folder / ("memory.swap.max" if v2 else "memory.memsw.limit_in_bytes")
        if swap.exists():
            swap.write_text("0" if v2 else value)


def _count_in(path: Path, key: str) -> int:
    try:
        text = path.read_text()
    except OSError:
        return 0
    match = re.search(rf"^{key} (\d+)", text, re.MULTILINE)
    return int(match.group(1)) if match else 0


def cgroup_base(controller: str) -> Optional[Path]:
    """A cgroup folder under which ga may create `controller`'s cgroups (probed once), or None, said once."""
    with _PROBING:  # a fan-out's first code_runs start at once: one probe, not a race on its folder's name
        return _probed_base(controller)


_PROBING = threading.Lock()


@functools.lru_cache(maxsize=2)
def _probed_base(controller: str) -> Optional[Path]:
    for base in _candidates(controller):
        probe = base / f"ga-{os.getpid()}-probe-{controller}"
        SandboxCgroup.remove_path(probe)  # left by a killed process whose pid this one has now
        try:
            probe.mkdir()
        except OSError:
            continue
        try:
            _set_limit(probe, controller, PROBE_VALUES[controller])  # the controller is there and ours to set
            _sweep(base)
            return base
        except OSError:
            continue
        finally:
            SandboxCgroup.remove_path(probe)
    if controller == "pids" and os.getuid() == 0:  # RLIMIT_NPROC does not hold for root
        log.warning("process_limit_unenforced", note="running as root without a writable pids cgroup: "
                    "sandbox.limits.processes cannot be enforced here")
    if controller == "memory":
        log.warning("memory_limit_per_process", note="no memory cgroup can be made here: sandbox.limits.memory "
                    "holds each process of a sandbox (RLIMIT_DATA), not the whole sandbox")
    return None


def _sweep(base: Path) -> None:
    """Remove empty cgroups a ga process that is gone left behind (killed before its task's end)."""
    for folder in base.glob("ga-*-*"):
        pid = folder.name.split("-")[1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            SandboxCgroup.remove_path(folder)


def _candidates(controller: str) -> list[Path]:
    """Our own cgroup in the v1 hierarchy of `controller` and in the unified (v2) one, where they are mounted."""
    found = []
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        _, controllers, path = line.split(":", 2)
        relative = path.lstrip("/")
        if controller in controllers.split(","):
            found.append(CGROUP_ROOT / controller / relative)
        elif controllers == "":
            found += [CGROUP_ROOT / relative, CGROUP_ROOT / "unified" / relative]
    return [p for p in found if p.is_dir()]


SIGXCPU, SIGXFSZ = 24, 25
# What a script's output says when an allocation, a fork or a write in /tmp was refused.
MEMORY = re.compile(r"MemoryError|Cannot allocate memory|out of memory", re.IGNORECASE)
FORK = re.compile(r"\bfork: |BlockingIOError: \[Errno 11\]|can't start new thread|Resource temporarily unavailable")
NO_SPACE = re.compile(r"No space left on device|Errno 28")


def verdict(code: int, output: str, limits: Limits, refused_forks: int = 0, oom_kills: int = 0) -> Optional[str]:
    """One line naming the limit a failed script most likely hit, or None."""
    if code == 0:
        return None
    signal = -code if code < 0 else code - 128  # killed directly, or reported by bubblewrap / a shell
    if oom_kills:
        return (f"killed: memory limit of the whole sandbox ({human_size(limits.memory)}; sandbox.limits.memory): "
                f"{oom_kills} process(es) killed")
    if signal == SIGXCPU:
        return f"killed: CPU time limit ({limits.cpu_seconds} s a process; sandbox.limits.cpu_seconds)"
    if signal == SIGXFSZ:
        return f"killed: file size limit ({human_size(limits.file_size)}; sandbox.limits.file_size)"
    if refused_forks or FORK.search(output):
        return f"process limit reached ({limits.processes}; sandbox.limits.processes): a fork was refused"
    if MEMORY.search(output):
        return f"memory limit reached ({human_size(limits.memory)} a process; sandbox.limits.memory)"
    if NO_SPACE.search(output):
        return (f"no space left: /tmp is limited to {human_size(limits.tmp_size)} (sandbox.limits.tmp_size), "
                "or the disk is full")
    return None


def human_size(n: int) -> str:
    for unit, factor in (("GiB", GIB), ("MiB", MIB)):
        if n >= factor:
            return f"{n / factor:.3g} {unit}"
    return f"{n} bytes"
