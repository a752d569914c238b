"""Group commit: many threads that each need a file made durable share the file system's commits.

`durable(fd, ...)` returns once everything written to those files before the call is on disk: an fdatasync(2) of
each (fsync where there is none), made by the calling thread itself, with the GIL released. Concurrent fdatasyncs
from many threads share the journal's commits (the file system groups them), so a run's workers pay about one
commit per batch of turns, not one each; and only the files written are flushed: syncfs(2) of the whole file
system made a turn wait for every other process's dirty pages too (up to 400 ms when something else was writing).
Handing the flush to a writer thread instead cost more than the flush (bench figures in the commit that made
this: 64 threads, a turn each 20 ms: 124 us of CPU and 4 context switches per durable write here, 238 us and 12
through a writer and its flusher threads). A flush that fails raises OSError naming how many files it had.

`soon(fd, ..., within=S)` asks for the same without waiting: the files wait in a batch, which one thread flushes
S seconds after its first request, or the first caller that waits on it flushes itself. A writer whose lines are
already in the kernel (safe from a kill -9) and that only needs them on disk before it acts on them uses it, and
waits on the returned `Pending` then.

A descriptor passed in must stay open until its request is done (the call returned, or its `Pending` waited on).
"""
from __future__ import annotations

import os
import threading
import time
from typing import Optional

_datasync = getattr(os, "fdatasync", os.fsync)  # macOS has no fdatasync


class _Batch:
    def __init__(self) -> None:
        self.fds: list[int] = []
        self.done = threading.Event()
        self.error: Optional[OSError] = None
        self.due = float("inf")  # monotonic time by which the batch is flushed anyway


class Pending:
    """Files `soon` will make durable; `wait()` returns once they are (raising the batch's OSError)."""

    def __init__(self, group: "GroupSync", batch: _Batch) -> None:
        self._group, self._batch = group, batch

    def wait(self) -> None:
        self._group.wait(self._batch)

    def done(self) -> bool:
        return self._batch.done.is_set()


def flush(fds: list[int]) -> None:
    """fdatasync each file of `fds` (once each); every one is tried, then the first OSError is raised, naming how
    many files there were."""
    fds = list(dict.fromkeys(fds))
    error: Optional[OSError] = None
    for fd in fds:
        try:
            _datasync(fd)
        except OSError as exc:
            error = error or exc
    if error is not None:
        raise OSError(error.errno, f"{error.strerror} (flushing a batch of {len(fds)} files)")


class GroupSync:
    """The process's deferred batch (`soon`) and the thread that flushes it when due; `durable` needs neither."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._later = _Batch()  # the batch `soon` callers join
        self._wake = threading.Condition(self._lock)
        self._thread: Optional[threading.Thread] = None

    def durable(self, *fds: int) -> None:
        if fds:
            flush(list(fds))

    def soon(self, *fds: int, within: float) -> Pending:
        with self._lock:
            batch = self._later
            batch.fds.extend(fds)
            batch.due = min(batch.due, time.monotonic() + within)
            if self._thread is None or not self._thread.is_alive():  # after a fork, the thread is not there
                self._thread = threading.Thread(target=self._write, daemon=True, name="ga-group-sync")
                self._thread.start()
            self._wake.notify()
        return Pending(self, batch)

    def wait(self, batch: _Batch) -> None:
        with self._lock:
            mine = batch is self._later and not batch.done.is_set()  # not taken yet: this caller flushes it
            if mine:
                self._later = _Batch()
        if mine:
            self._flush(batch)
        batch.done.wait()
        if batch.error is not None:
            raise OSError(batch.error.errno, batch.error.strerror)

    def _write(self) -> None:
        while True:
            with self._lock:
                while not self._later.fds or time.monotonic() < self._later.due:
                    self._wake.wait(self._later.due - time.monotonic() if self._later.fds else None)
                batch, self._later = self._later, _Batch()
            self._flush(batch)

    @staticmethod
    def _flush(batch: _Batch) -> None:
        try:
            flush(batch.fds)
        except OSError as exc:
            batch.error = exc
        batch.done.set()


_GROUP = GroupSync()


def durable(*fds: int) -> None:
    """Everything written to each of `fds` so far is on disk when this returns (flushed by this thread, its commits
    shared with the threads flushing at the same time)."""
    _GROUP.durable(*fds)


def soon(*fds: int, within: float) -> Pending:
    """`fds` will be durable at the latest `within` seconds from now; returns at once. `Pending.wait()` waits for
    it (flushing the batch itself when nobody has yet)."""
    return _GROUP.soon(*fds, within=within)
