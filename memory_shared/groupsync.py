"""Group commit: many threads that each need a file made durable share one flush.

`durable(fd, ...)` returns once everything written to those files before the call is on disk. One writer thread per
process takes every request that arrived while it was flushing the previous batch and makes the whole
batch durable at once: on Linux with one syncfs(2) per file system in the batch (one journal commit for
hundreds of files, where an fsync per file costs a commit each), elsewhere with an fsync per file. A
caller waits for the batch its request is in, so an acknowledged write is as durable as after its own
fsync; a flush that fails raises the same OSError in every caller of that batch.

`soon(fd, ..., within=S)` asks for the same without waiting: the files join the open batch, which is flushed
when someone waits on it or, at the latest, S seconds later. A writer whose lines are already in the kernel
(safe from a kill -9) and that only needs them on disk before it acts on them uses it, and waits on the
returned `Pending` then: its flushes ride along the other callers' batches instead of adding their own.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
import time
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
        self.urgent = False  # someone waits on it: flush as soon as the writer is free
        self.due = float("inf")  # monotonic time by which a batch of `soon` requests is flushed anyway


class Pending:
    """Files `soon` will make durable; `wait()` returns once they are (raising the batch's OSError)."""

    def __init__(self, group: "GroupSync", batch: _Batch) -> None:
        self._group, self._batch = group, batch

    def wait(self) -> None:
        self._group.wait(self._batch)

    def done(self) -> bool:
        return self._batch.done.is_set()


class GroupSync:
    """The process's group-commit writer (see `durable`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: _Batch = _Batch()  # the batch new requests join
        self._wake = threading.Condition(self._lock)
        self._thread: Optional[threading.Thread] = None
        self._syncfs = _syncfs()

    def durable(self, *fds: int) -> None:
        if fds:
            self.wait(self._join(fds, None))

    def soon(self, *fds: int, within: float) -> Pending:
        return Pending(self, self._join(fds, within))

    def wait(self, batch: _Batch) -> None:
        if not batch.done.is_set():
            with self._lock:
                if not batch.urgent:
                    batch.urgent = True
                    self._wake.notify()
        batch.done.wait()
        if batch.error is not None:
            raise OSError(batch.error.errno, f"{batch.error.strerror} (flushing a batch of {len(batch.fds)} files)")

    def _join(self, fds: tuple[int, ...], within: Optional[float]) -> _Batch:
        with self._lock:
            batch = self._open
            batch.fds.extend(fds)
            if within is None:
                batch.urgent = True
            else:
                batch.due = min(batch.due, time.monotonic() + within)
            if self._thread is None or not self._thread.is_alive():  # after a fork, the writer is not there
                self._thread = threading.Thread(target=self._write, daemon=True, name="ga-group-sync")
                self._thread.start()
            self._wake.notify()
        return batch

    def _write(self) -> None:
        while True:
            with self._lock:
                while not self._open.urgent:
                    left = self._open.due - time.monotonic()
                    if self._open.fds and left <= 0:
                        break
                    self._wake.wait(left if self._open.fds else None)
                batch, self._open = self._open, _Batch()
            try:
                self._flush(batch.fds)
            except OSError as exc:
                batch.error = exc
            batch.done.set()

    def _flush(self, fds: list[int]) -> None:
        fds = list(dict.fromkeys(fds))  # a file asked for twice in one batch is flushed once
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


def soon(*fds: int, within: float) -> Pending:
    """`fds` will be durable at the latest `within` seconds from now, sooner if a batch flushes before; returns at
    once. `Pending.wait()` waits for it (and hurries the batch)."""
    return _GROUP.soon(*fds, within=within)
