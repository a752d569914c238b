"""A watchdog for the local Ray a driver started, and for the in-process executor's code_run scripts: when the
driver dies (even kill -9), its processes go too.

Ray ties gcs_server and raylet to the driver (PR_SET_PDEATHSIG), but the raylet's children outlive it:
the dashboard and runtime-env agents notice the raylet's death, then try to report it to the dead GCS
and hang in its reconnect timeout (60 s) before exiting; worker processes take a second or two, and
the process groups their `code_run` scripts run in are not Ray's to clean up. This process, started
in its own session right after `ray.init`, waits for the driver's exit on a pidfd (no polling) and then
SIGKILLs the driver's process tree:
- by its cgroup where ga may make one (v1's freezer hierarchy, which code_run's pids and memory cgroups leave
  alone): the driver and what it started so far are moved into `ga-driver-<pid>` at the start, every later
  child is born there, and at the driver's death everything listed in it is killed. Nothing is scanned while
  the driver lives.
- otherwise by psutil's process tree, refreshed every REFRESH seconds while the driver lives (the tree's
  orphans are re-parented to init at its death, so it must be known before).
The driver waits for the reaper's first line (READY) so that nothing it starts later is missed.

Linux only (it reads /proc); elsewhere nothing is started.
"""
from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Optional

import psutil

REFRESH = 0.3  # seconds between walks of the driver's tree (the fallback without a cgroup)
SWEEPS = 5  # kill passes after its death (children forked during the first pass are caught by the next)
SWEEP_PAUSE = 0.1
READY_WAIT = 10.0  # seconds the driver waits for the reaper to have placed it
FREEZER = Path("/sys/fs/cgroup/freezer")
READY = "ready"


def start(driver_pid: Optional[int] = None) -> Optional[subprocess.Popen]:
    """Start the reaper for `driver_pid` (default: this process), once it has placed the driver's tree; None where
    /proc is not available."""
    driver_pid = driver_pid or os.getpid()
    started = start_time(driver_pid)
    if started is None:
        return None
    # run as a plain script: it needs only the standard library and psutil, not the package's imports (0.6 s, ~40 MB)
    proc = subprocess.Popen([sys.executable, "-I", str(Path(__file__).resolve()), str(driver_pid), str(started)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            start_new_session=True, close_fds=True, text=True)
    assert proc.stdout is not None
    if select.select([proc.stdout], [], [], READY_WAIT)[0]:
        proc.stdout.readline()  # READY, or "" if it died: either way it is past the placement
    proc.stdout.close()  # its later writes (none) must not block it
    return proc


_THIS_PROCESS: list[Optional[subprocess.Popen]] = []  # kept referenced: the reaper outlives this process on purpose
_STARTING = threading.Lock()  # two runs starting at once in one process start one reaper


def ensure() -> None:
    """This process's reaper, started the first time an executor asks (one is enough for every run in it)."""
    with _STARTING:
        if not _THIS_PROCESS:
            _THIS_PROCESS.append(start())


def start_time(pid: int) -> Optional[int]:
    """The process's start time in clock ticks since boot (tells a pid apart from a later reuse of it)."""
    stat = _stat(pid)
    return stat[2] if stat else None


def _stat(pid: int) -> Optional[tuple[int, str, int]]:
    """(parent pid, state, start time) of a process, or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()  # the command name may hold spaces and parentheses
    return int(fields[1]), fields[0], int(fields[19])


def alive(pid: int, started: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[2] == started and stat[1] != "Z"


class DriverCgroup:
    """The driver's own freezer cgroup: its tree, kept by the kernel."""

    def __init__(self, folder: Path):
        self.folder = folder

    @classmethod
    def make(cls, driver: psutil.Process) -> Optional[DriverCgroup]:
        base = _freezer_cgroup(driver.pid)
        if base is None:
            return None
        _sweep(base)
        name = f"ga-driver-{driver.pid}"
        folder = base if base.name == name else base / name  # placed there already (a second reaper of it)
        try:
            folder.mkdir(exist_ok=True)
            for _ in range(2):  # a child forked while the first pass moved its parent is moved by the second
                for process in [driver, *driver.children(recursive=True)]:
                    if not _is_reaper(process):  # this one, a child of the driver, stays out (and any other)
                        (folder / "cgroup.procs").write_text(str(process.pid))
        except psutil.NoSuchProcess:
            return cls(folder)  # the driver is gone already: its cgroup holds what it had
        except OSError:
            _remove(folder)
            return None
        return cls(folder)

    def members(self) -> set[int]:
        """Every process in the cgroup and below it (a nested run's driver has its own, inside this one)."""
        found: set[int] = set()
        for procs in self.folder.rglob("cgroup.procs"):
            try:
                found.update(int(pid) for pid in procs.read_text().split())
            except OSError:
                continue
        return found

    def kill(self) -> None:
        for _ in range(SWEEPS):
            pids = self.members()
            if not pids:
                break
            for pid in pids:
                _kill(pid)
            time.sleep(SWEEP_PAUSE)
        folders = sorted((procs.parent for procs in self.folder.rglob("cgroup.procs")), key=lambda f: -len(f.parts))
        for _ in range(SWEEPS * 5):  # the kernel empties a cgroup a moment after its last process ends
            if all([_remove(folder) for folder in folders]):
                break
            time.sleep(SWEEP_PAUSE)


def _is_reaper(process: psutil.Process) -> bool:
    if process.pid == os.getpid():
        return True
    try:
        return str(Path(__file__).resolve()) in process.cmdline()
    except psutil.Error:
        return False


def _freezer_cgroup(pid: int) -> Optional[Path]:
    """The freezer cgroup `pid` is in, where it is mounted (v1) and ours to write."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "freezer" in controllers.split(","):
            folder = FREEZER / path.lstrip("/")
            return folder if os.access(folder, os.W_OK) else None
    return None


def _sweep(base: Path) -> None:
    """Remove the empty cgroups of reapers that were killed before their driver (the deepest first)."""
    for folder in sorted(base.rglob("ga-driver-*"), key=lambda f: -len(f.parts)):
        _remove(folder)


def _remove(folder: Path) -> bool:
    try:
        folder.rmdir()
        return True
    except FileNotFoundError:
        return True
    except OSError:  # not empty yet
        return False


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


class DriverTree:
    """The fallback: the driver's tree as psutil sees it, refreshed while the driver lives."""

    def __init__(self, driver: psutil.Process):
        self.driver = driver
        self.known: dict[int, psutil.Process] = {}
        self.refresh()

    def refresh(self, roots: Optional[list[psutil.Process]] = None) -> None:
        self.known = {pid: p for pid, p in self.known.items() if p.is_running()}
        for root in roots or [self.driver]:
            try:
                self.known.update((p.pid, p) for p in root.children(recursive=True) if p.pid != os.getpid())
            except psutil.Error:
                continue

    def kill(self) -> None:
        for _ in range(SWEEPS):
            self.refresh(list(self.known.values()))  # a child of a known process may be newer than the last walk
            for process in self.known.values():
                try:
                    process.kill()  # psutil checks the pid was not reused since
                except psutil.Error:
                    pass
            time.sleep(SWEEP_PAUSE)


def wait_for_exit(driver_pid: int, driver_started: int, tree: Optional[DriverTree]) -> None:
    """Block until the driver exits: on its pidfd, waking every REFRESH seconds only to walk the fallback's tree."""
    try:
        fd: Optional[int] = os.pidfd_open(driver_pid)
    except (AttributeError, OSError):  # before Linux 5.3 or Python 3.9: look at it every SWEEP_PAUSE seconds
        fd = None
    if not alive(driver_pid, driver_started):  # checked after the open: the pidfd is of this very process
        return
    period = REFRESH if tree is not None else (None if fd is not None else SWEEP_PAUSE)
    while True:
        if fd is not None:
            if select.select([fd], [], [], period)[0]:
                return
        else:
            time.sleep(period or SWEEP_PAUSE)
            if not alive(driver_pid, driver_started):
                return
        if tree is not None:
            tree.refresh()


def watch(driver_pid: int, driver_started: int) -> None:
    try:
        driver = psutil.Process(driver_pid)
    except psutil.Error:
        driver = None
    group = DriverCgroup.make(driver) if driver is not None and alive(driver_pid, driver_started) else None
    tree = DriverTree(driver) if driver is not None and group is None else None
    try:
        print(READY, flush=True)
        sys.stdout = open(os.devnull, "w")  # nothing more to say, and the driver has closed its end
    except OSError:  # the driver stopped waiting for it (or is gone)
        pass
    wait_for_exit(driver_pid, driver_started, tree)
    if group is not None:
        group.kill()
    elif tree is not None:
        tree.kill()


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C at the terminal is for the driver, not for us
    watch(int(argv[0]), int(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
