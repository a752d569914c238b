"""Group commit: many threads that each need a file made durable share one flush.

`durable(fd, ...)` returns once everything written to those files before the call is on disk. One writer thread per
process takes every request that arrived while it was flushing the previous batch and makes the whole
batch durable at once: on Linux with one syncfs(2) per file system in the batch (one journal commit for
hundreds of files, where an fsync per file costs a commit each), elsewhere with an fsync per file. A
caller waits for the batch its request is in, so an acknowledged write is as durable as after its own
fsync; a flush that fails raises the same OSError in every caller of that batch.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from typing import Callable, Optional

SYNCFS_FROM = 4  # files in a batch from which one syncfs beats an fsync each


def _syncfs() -> Optional[Callable[[int], None]]:
    """syncfs(2) from libc, or None where there is none (the batch then fsyncs each file)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        call = libc.syncfs
    except (OSError, AttributeError):
        return None
    call.argtypes = [ctypes.c_int]

    def syncfs(fd: int) -> None:
        if call(fd) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, os.strerror(errno))

    return syncfs


class _Batch:
    def __init__(self) -> None:
        self.fds: list[int] = []
        self.done = threading.Event()
        self.error: Optional[OSError] = None


class GroupSync:
    """The process's group-commit writer (see `durable`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: _Batch = _Batch()  # the batch new requests join
        self._wake = threading.Condition(self._lock)
        self._thread: Optional[threading.Thread] = None
        self._syncfs = _syncfs()

    def durable(self, *fds: int) -> None:
        with self._lock:
            batch = self._open
            batch.fds.extend(fds)
            if self._thread is None or not self._thread.is_alive():  # after a fork, the writer is not there
                self._thread = threading.Thread(target=self._write, daemon=True, name="ga-group-sync")
                self._thread.start()
            self._wake.notify()
        batch.done.wait()
        if batch.error is not None:
            raise OSError(batch.error.errno, f"{batch.error.strerror} (flushing a batch of {len(batch.fds)} files)")

    def _write(self) -> None:
        while True:
            with self._lock:
                while not self._open.fds:
                    self._wake.wait()
                batch, self._open = self._open, _Batch()
            try:
                self._flush(batch.fds)
            except OSError as exc:
                batch.error = exc
            batch.done.set()

    def _flush(self, fds: list[int]) -> None:
        if self._syncfs is None or len(fds) < SYNCFS_FROM:
            for fd in fds:
                os.fsync(fd)
            return
        devices: dict[int, int] = {}
        for fd in fds:
            devices.setdefault(os.fstat(fd).st_dev, fd)
        for fd in devices.values():
            self._syncfs(fd)


_GROUP = GroupSync()


def durable(*fds: int) -> None:
    """Everything written to each of `fds` so far is on disk when this returns (one batch, shared with concurrent
    callers)."""
    _GROUP.durable(*fds)
