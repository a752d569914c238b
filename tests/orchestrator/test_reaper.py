"""The reaper (orchestrator/reaper.py): a killed driver's process tree goes, started before or after the reaper,
and the reaper's cgroup with it. Real processes; the cgroup checks hold where ga may make a freezer cgroup."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import psutil

from orchestrator import reaper

ROOT = Path(__file__).resolve().parents[2]
DRIVER = """
import subprocess, sys, threading, time
sys.path.insert(0, sys.argv[1])
from orchestrator import reaper
early = subprocess.Popen(["sleep", "600"], start_new_session=True)  # as Ray's daemons: started before the reaper
runs = [threading.Thread(target=reaper.ensure) for _ in range(2)]  # two runs starting at once
for run in runs:
    run.start()
for run in runs:
    run.join()
late = subprocess.Popen(["sh", "-c", "setsid sleep 600 & exec sleep 600"], start_new_session=True)
time.sleep(0.5)
print(early.pid, late.pid, flush=True)
time.sleep(600)
"""


def _freezer(pid: int) -> Optional[Path]:
    """The freezer cgroup folder of `pid` (read here, not with the code under test)."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "freezer" in controllers.split(","):
            return Path("/sys/fs/cgroup/freezer") / path.lstrip("/")
    return None


def _tree(pid: int) -> set[int]:
    return {p.pid for p in psutil.Process(pid).children(recursive=True)}


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_kill_of_a_driver_takes_its_whole_tree_and_its_cgroup(tmp_path: Path) -> None:
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(ROOT)], stdout=subprocess.PIPE, text=True)
    assert driver.stdout is not None
    try:
        early, late = (int(pid) for pid in driver.stdout.readline().split())
        placed = _freezer(driver.pid)
        tree = _tree(driver.pid)
        script = str(Path(reaper.__file__).resolve())
        reapers = [pid for pid in tree if script in Path(f"/proc/{pid}/cmdline").read_text()]
        assert {early, late} <= tree and len(reapers) == 1, tree  # one reaper, however many runs asked at once
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and [pid for pid in tree if _alive(pid)]:
        time.sleep(0.1)
    assert [pid for pid in tree if _alive(pid)] == []
    if placed is not None and placed.name == f"ga-driver-{driver.pid}":  # a freezer cgroup held the tree
        while time.monotonic() < deadline and placed.exists():
            time.sleep(0.1)
        assert not placed.exists(), f"{placed} outlived its driver"
    for pid in tree:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
