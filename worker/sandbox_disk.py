"""`sandbox.limits.disk`: what a task's working directory may hold while a code_run runs; past it the script is
killed and its result names the limit.

Why a watcher: the mechanisms that bound a folder's size each fail one of the places ga runs. RLIMIT_FSIZE
(sandbox.limits.file_size) bounds one file, not their sum. A size-limited tmpfs or overlay would hold the
workdir in memory, or need copying back. A loop-mounted image, a project quota (XFS, ext4 prjquota) or an
overlay's upper layer on a sized filesystem need root, or a filesystem prepared for it. Counting works for
an unprivileged ga and for root, on any filesystem: a thread outside the sandbox watches the workdir while
the script runs and kills the sandbox's process group once the workdir holds more than the limit.

Counting a tree is a walk (blocks allocated, each inode once, this filesystem only, no link followed): too
slow to repeat every few milliseconds for a large workdir. So the thread polls the filesystem's free space
(statvfs, one system call) every POLL seconds and walks only when the filesystem grew by more than the
headroom left at the last walk (a growth elsewhere on the same disk triggers a walk too, never a kill), and
every BACKSTOP seconds in any case (a filesystem whose free space does not move, a network one). Between two
polls a script can write what the disk takes in POLL seconds: the overshoot. A workdir that held more than
the limit already when the script started may hold what it held, no more.
"""
from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path
from typing import Callable, Optional

import structlog

from configs.logs import in_context
from worker.sandbox_limits import human_size

log = structlog.get_logger("worker.sandbox")
POLL = 0.05  # seconds between two looks at the filesystem's free space
BACKSTOP = 5.0  # seconds between two walks whatever the free space does
WALK_SHARE = 10  # a walk at most every WALK_SHARE times the last walk's own time (a large tree is walked less)
DEFAULT = 4 << 30  # `disk: null`: 4 GiB, or half the free space with what the workdir holds if that is less


def limit_for(configured: Optional[int], root: Path, held: int) -> int:
    """What a workdir holding `held` bytes may hold while a code_run runs: the configured size, or DEFAULT bounded
    by what it holds plus half the free space (a workdir on a small disk cannot fill it); never less than `held`."""
    if configured:
        return max(configured, held)
    try:
        info = os.statvfs(root)
        free = info.f_bavail * info.f_frsize
    except OSError:
        free = DEFAULT * 2
    return max(min(DEFAULT, held + free // 2), held)


class DiskWatch:
    """Watches `root` from a daemon thread until `stop()`; calls `kill` once, past the limit."""

    def __init__(self, root: Path, configured: Optional[int], kill: Callable[[], object]):
        self.root, self.configured, self.kill = root, configured, kill
        self.limit = 0  # set by the thread's first walk
        self.held = 0  # bytes the workdir held at the last walk
        self.killed = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=in_context(self._watch), daemon=True, name="ga-disk-watch")
        self._thread.start()

    def stop(self) -> Optional[str]:
        """End the watch; one line naming the limit when the script was killed for it, else None."""
        self._done.set()
        self._thread.join(timeout=5)
        if not self.killed:
            return None
        return (f"killed: disk limit of the working directory ({human_size(self.limit)}; sandbox.limits.disk): it "
                f"held {human_size(self.held)}")

    def _watch(self) -> None:
        try:
            device = os.stat(self.root).st_dev
            base = self._used()
            walked = time.monotonic()
            self.held = tree_size(self.root, device)
            walk_seconds = time.monotonic() - walked
            self.limit = limit_for(self.configured, self.root, self.held)
            while not self._done.wait(POLL):
                now = time.monotonic()
                if now - walked < max(walk_seconds * WALK_SHARE, POLL):
                    continue
                if self.held + self._used() - base <= self.limit and now - walked < BACKSTOP:
                    continue
                base, walked = self._used(), time.monotonic()
                self.held = tree_size(self.root, device)
                walk_seconds = time.monotonic() - walked
                if self.held > self.limit:
                    self.killed = True
                    self.kill()
                    return
        except OSError as exc:  # the workdir went away under the script: nothing left to count
            log.info("disk_watch_ended", root=str(self.root), error=str(exc)[:160])

    def _used(self) -> int:
        info = os.statvfs(self.root)
        return (info.f_blocks - info.f_bfree) * info.f_frsize


def tree_size(root: Path, device: int) -> int:
    """Bytes allocated under `root` on `device`: each inode once, no link followed, other filesystems skipped."""
    seen: set[int] = set()
    total = 0
    pending = [str(root)]
    while pending:
        folder = pending.pop()
        try:
            entries = os.scandir(folder)
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if info.st_dev != device or info.st_ino in seen:
                    continue
                seen.add(info.st_ino)
                total += info.st_blocks * 512
                if stat.S_ISDIR(info.st_mode):
                    pending.append(entry.path)
    return total

