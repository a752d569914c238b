"""A watchdog for the local Ray a driver started, and for the in-process executor's code_run scripts: when the
driver dies (even kill -9), its processes go too.

Ray ties gcs_server and raylet to the driver (PR_SET_PDEATHSIG), but the raylet's children outlive it:
the dashboard and runtime-env agents notice the raylet's death, then try to report it to the dead GCS
and hang in its reconnect timeout (60 s) before exiting; worker processes take a second or two, and
the process groups their `code_run` scripts run in are not Ray's to clean up. This process, started
in its own session right after `ray.init`, keeps a list of the driver's descendants (refreshed every
REFRESH seconds) and SIGKILLs them all once the driver is gone, then exits.

Linux only (it reads /proc); elsewhere nothing is started.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

POLL = 0.1  # seconds between checks of the driver
REFRESH = 0.3  # seconds between scans for its descendants
SWEEPS = 5  # kill passes after its death (children forked during the first pass are caught by the next)


def start(driver_pid: Optional[int] = None) -> Optional[subprocess.Popen]:
    """Start the reaper for `driver_pid` (default: this process); None where /proc is not available."""
    driver_pid = driver_pid or os.getpid()
    started = start_time(driver_pid)
    if started is None:
        return None
    # run as a plain script: it needs only the standard library, not the package's imports (0.6 s, ~40 MB)
    return subprocess.Popen([sys.executable, "-I", str(Path(__file__).resolve()), str(driver_pid), str(started)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, close_fds=True)


_THIS_PROCESS: list[Optional[subprocess.Popen]] = []  # kept referenced: the reaper outlives this process on purpose


def ensure() -> None:
    """This process's reaper, started the first time an executor asks (one is enough for every run in it)."""
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


def descendants(roots: list[int], me: int) -> dict[int, int]:
    """pid -> start time of every live process below `roots` (this reaper excluded), from one scan of /proc."""
    children: dict[int, list[tuple[int, int]]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        stat = _stat(int(entry.name))
        if stat is not None:
            children.setdefault(stat[0], []).append((int(entry.name), stat[2]))
    found: dict[int, int] = {}
    stack = list(roots)
    while stack:
        for pid, started in children.get(stack.pop(), []):
            if pid != me and pid not in found:
                found[pid] = started
                stack.append(pid)
    return found


def watch(driver_pid: int, driver_started: int) -> None:
    me = os.getpid()
    known: dict[int, int] = {}
    last_scan = 0.0
    while alive(driver_pid, driver_started):
        if time.monotonic() - last_scan >= REFRESH:
            last_scan = time.monotonic()
            known = {pid: started for pid, started in known.items() if alive(pid, started)}
            known.update(descendants([driver_pid], me))
        time.sleep(POLL)
    for _ in range(SWEEPS):
        known.update(descendants(list(known), me))  # a child of a known process may be newer than the last scan
        for pid, started in known.items():
            if alive(pid, started):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        time.sleep(POLL)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C at the terminal is for the driver, not for us
    watch(int(argv[0]), int(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
