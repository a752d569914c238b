"""One Chromium per node, shared by the workers on it over CDP.

Workers on a node are separate processes, so the browser is coordinated through files under
`$GA_HOME/browser/` (every change made while holding an flock on `lock`):

    state.json      pid, DevTools endpoint and launch id of the running browser
    leases/<pid>-<id>   one per worker using it; leases of dead processes are ignored and removed
    profile-*/      the browser's fresh user-data-dir, removed when it stops
    chromium.log    the browser's stderr

The browser starts with the first lease, stops when the last live lease is released, and is
relaunched by whoever first notices it died (a new launch id tells the others their tabs are gone).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ContextManager, Optional

from memory_shared.fsutil import atomic_write_text, flocked
from worker.web.chromium import launch_args

START_TIMEOUT = 30.0
LOG_LIMIT = 1 << 20
_CHILDREN: dict[int, subprocess.Popen] = {}  # browsers this process launched, reaped when they exit


class BrowserStartError(RuntimeError):
    """The browser binary did not come up; str() is one line with its last words and the log path."""


@dataclass(frozen=True)
class BrowserInfo:
    pid: int
    ws: str  # the DevTools websocket endpoint, on 127.0.0.1
    launch_id: str
    profile: str
    binary: str


class NodeBrowser:
    def __init__(self, root: Path, binary: Path, headless: bool = True):
        self.root, self.binary, self.headless = Path(root), Path(binary), headless
        self.leases = self.root / "leases"

    # ---- public
    def acquire(self) -> tuple[BrowserInfo, Path]:
        """Start (or join) the node's browser and hold a lease on it; returns the browser and the lease file."""
        with self._locked():
            info = self._running() or self._launch()
            lease = self.leases / f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
            lease.write_text(json.dumps({"pid": os.getpid(), "launch_id": info.launch_id}))
            return info, lease

    def ensure(self) -> BrowserInfo:
        """The running browser, relaunched if it died (by this or another process)."""
        with self._locked():
            return self._running() or self._launch()

    def current(self) -> Optional[BrowserInfo]:
        """The browser the state file names, if it is alive (no lock: a hint for fast checks)."""
        info = self._read_state()
        return info if info and is_alive(info) else None

    def release(self, lease: Path) -> bool:
        """Drop a lease; stop the browser when no live lease is left. True if it was stopped."""
        with self._locked():
            lease.unlink(missing_ok=True)
            if self._live_leases():
                return False
            info = self._read_state()
            if info:
                stop(info)
            (self.root / "state.json").unlink(missing_ok=True)
            return info is not None

    # ---- internals
    def _locked(self) -> ContextManager[None]:
        self.leases.mkdir(parents=True, exist_ok=True)
        return flocked(self.root / "lock")

    def _live_leases(self) -> list[Path]:
        live = []
        for lease in self.leases.iterdir():
            try:
                pid = int(lease.name.split("-", 1)[0])
            except ValueError:
                continue
            if pid_alive(pid):
                live.append(lease)
            else:
                lease.unlink(missing_ok=True)  # its worker died without releasing
        return live

    def _read_state(self) -> Optional[BrowserInfo]:
        try:
            return BrowserInfo(**json.loads((self.root / "state.json").read_text()))
        except (OSError, ValueError, TypeError):
            return None

    def _running(self) -> Optional[BrowserInfo]:
        info = self._read_state()
        if info and is_alive(info):
            return info
        if info:  # dead: clear what is left of it (stray child processes, its profile)
            stop(info)
        return None

    def _launch(self) -> BrowserInfo:
        profile = Path(tempfile.mkdtemp(prefix="profile-", dir=self.root))
        log_path = self.root / "chromium.log"
        if log_path.exists() and log_path.stat().st_size > LOG_LIMIT:
            log_path.replace(log_path.with_suffix(".log.1"))
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(launch_args(self.binary, profile, self.headless), stdin=subprocess.DEVNULL,
                                    stdout=log, stderr=log, start_new_session=True, close_fds=True)
        _CHILDREN[proc.pid] = proc
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + START_TIMEOUT
        while not _port_file_ready(port_file):
            if proc.poll() is not None or time.monotonic() > deadline:
                _kill_group(proc.pid)
                shutil.rmtree(profile, ignore_errors=True)
                why = f"exited with code {proc.returncode}" if proc.returncode is not None else f"gave no DevTools port in {START_TIMEOUT:.0f}s"
                raise BrowserStartError(f"{self.binary} {why}: {_last_line(log_path)} (full log: {log_path})")
            time.sleep(0.02)
        port, path = port_file.read_text().split("\n")[:2]
        info = BrowserInfo(proc.pid, f"ws://127.0.0.1:{int(port)}{path}", uuid.uuid4().hex[:12], str(profile), str(self.binary))
        atomic_write_text(self.root / "state.json", json.dumps(asdict(info)))
        return info


def pid_alive(pid: int) -> bool:
    child = _CHILDREN.get(pid)
    if child is not None and child.poll() is not None:  # reap our own dead child so it is not a zombie
        _CHILDREN.pop(pid, None)
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True
    return stat.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")


class ExternalBrowser:
    """The person's own browser, started with --remote-debugging-port (web.cdp_url): joined, never launched,
    relaunched or stopped; the same interface as NodeBrowser."""

    def __init__(self, url: str):
        self.root = Path(url)  # a key for the connection cache, never a directory
        self.info = BrowserInfo(pid=0, ws=url, launch_id=f"external:{url}", profile="", binary="")

    def acquire(self) -> tuple[BrowserInfo, Path]:
        return self.info, self.root

    def ensure(self) -> BrowserInfo:
        return self.info

    def current(self) -> Optional[BrowserInfo]:
        return self.info

    def release(self, lease: Path) -> bool:
        return False


def is_alive(info: BrowserInfo) -> bool:
    """The browser process is running, and it is ours (its command line names our profile)."""
    if not pid_alive(info.pid):
        return False
    try:
        return info.profile in Path(f"/proc/{info.pid}/cmdline").read_text()
    except OSError:
        return True  # no /proc (not Linux): trust the pid


def stop(info: BrowserInfo, grace: float = 3.0) -> None:
    """Stop the browser's whole process group and remove its profile."""
    if is_alive(info):
        _kill_group(info.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while pid_alive(info.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
    if _group_is_browser(info):
        _kill_group(info.pid, signal.SIGKILL)  # also renderers left behind by a crashed browser
    child = _CHILDREN.pop(info.pid, None)
    if child is not None:
        child.wait(timeout=5)
    shutil.rmtree(info.profile, ignore_errors=True)


def process_tree_pids(pid: int) -> list[int]:
    """The browser's processes: its process group (it is a session leader, so children stay in it)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
            except OSError:
                continue
            if int(fields[2]) == pid and fields[0] not in ("Z", "X"):
                pids.append(int(entry.name))
    return pids


def _group_is_browser(info: BrowserInfo) -> bool:
    """Guard against a reused process-group id: some member must be a Chromium process."""
    for pid in process_tree_pids(info.pid):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_text(errors="replace").lower()
        except OSError:
            continue
        if info.profile.lower() in cmdline or "chrom" in cmdline:
            return True
    return False


def _kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _port_file_ready(path: Path) -> bool:
    try:
        return path.read_text().count("\n") >= 1
    except OSError:
        return False


def _last_line(log_path: Path) -> str:
    try:
        lines = [ln for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no output"
    return lines[-1][:300] if lines else "no output"
