"""Group commit: many threads that each need a file made durable share one flush.

`durable(fd, ...)` returns once everything written to those files before the call is on disk. One writer thread per
process takes every request that arrived while it was flushing the previous batch and makes the whole
batch durable at once: on Linux with one syncfs(2) per file system in the batch (one journal commit for
hundreds of files, where an fsync per file costs a commit each), elsewhere with an fsync per file. A
caller waits for the batch its request is in, so an acknowledged write is as durable as after its own
fsync; a flush that fails raises the same OSError in every caller of that batch.

`soon(fd, ..., within=S)` asks for the same without waiting: the files wait in a batch of their own, which
is flushed S seconds after its first request, when someone waits on it, or earlier for free, along with a
batch that is one syncfs anyway. A writer whose lines are already in the kernel (safe from a kill -9) and
that only needs them on disk before it acts on them uses it, and waits on the returned `Pending` then.
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
        self.urgent = False  # someone waits on a `soon` batch: flush it as soon as the writer is free
        self.due = float("inf")  # monotonic time by which a `soon` batch is flushed anyway


class Pending:
    """Files `soon` will make durable; `wait()` returns once they are (raising the batch's OSError)."""

    def __init__(self, group: "GroupSync", batch: _Batch) -> None:
        self._group, self._batch = group, batch

    def wait(self) -> None:
        self._group.wait(self._batch)

    def done(self) -> bool:
        return self._batch.done.is_set()


class GroupSync:
    """The process's group-commit writer (see `durable` and `soon`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: _Batch = _Batch()  # the batch `durable` callers join: flushed as soon as the writer is free
        self._later: _Batch = _Batch()  # the batch `soon` callers join: flushed when due, waited on, or for free
        self._wake = threading.Condition(self._lock)
        self._thread: Optional[threading.Thread] = None
        self._syncfs = _syncfs()

    def durable(self, *fds: int) -> None:
        if fds:
            self.wait(self._join(fds, None))

    def soon(self, *fds: int, within: float) -> Pending:
        return Pending(self, self._join(fds, time.monotonic() + within))

    def wait(self, batch: _Batch) -> None:
        if not batch.done.is_set() and not batch.urgent:
            with self._lock:
                batch.urgent = True
                self._wake.notify()
        batch.done.wait()
        if batch.error is not None:
            raise OSError(batch.error.errno, f"{batch.error.strerror} (flushing a batch of {len(batch.fds)} files)")

    def _join(self, fds: tuple[int, ...], due: Optional[float]) -> _Batch:
        """Add `fds` to the open `durable` batch (due None) or to the `soon` batch, flushed by `due` at the latest."""
        with self._lock:
            batch = self._open if due is None else self._later
            batch.fds.extend(fds)
            if due is not None:
                batch.due = min(batch.due, due)
            if self._thread is None or not self._thread.is_alive():  # after a fork, the writer is not there
                self._thread = threading.Thread(target=self._write, daemon=True, name="ga-group-sync")
                self._thread.start()
            self._wake.notify()
        return batch

    def _write(self) -> None:
        while True:
            with self._lock:
                while not self._open.fds and not self._later_due():
                    self._wake.wait(self._later.due - time.monotonic() if self._later.fds else None)
                batch, self._open = self._open, _Batch()
                riders = None
                if self._later.fds and (self._later_due() or self._free_ride(batch)):
                    riders, self._later = self._later, _Batch()
            try:
                self._flush(batch.fds + (riders.fds if riders else []))
            except OSError as exc:
                batch.error = exc
                if riders:
                    riders.error = exc
            batch.done.set()
            if riders:
                riders.done.set()

    def _later_due(self) -> bool:
        return bool(self._later.fds) and (self._later.urgent or time.monotonic() >= self._later.due)

    def _free_ride(self, batch: _Batch) -> bool:
        """Whether the `soon` files cost nothing in this batch: it is one syncfs anyway."""
        return self._syncfs is not None and len(set(batch.fds)) + len(set(self._later.fds)) >= SYNCFS_FROM

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
