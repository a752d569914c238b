"""Group commit: many threads that each need a file made durable share one flush.

`durable(fd, ...)` returns once everything written to those files before the call is on disk. One writer thread per
process takes every request that arrived while it was flushing the previous batch and makes the whole batch
durable at once: an fdatasync(2) of each file in the batch (fsync where there is none), issued together from
FLUSHERS threads. Concurrent fdatasyncs share the file system's journal commits, where the same calls one after
another each wait for a commit of their own (256 files on ext4 here: 26 ms together, 790 ms in turn). Only the
files written are flushed: syncfs(2) of the whole file system made a turn wait for every other process's dirty
pages too (up to 400 ms when something else was writing). A caller waits for the batch its request is in, so an
acknowledged write is as durable as after its own fsync; a flush that fails raises the same OSError in every
caller of that batch.

`soon(fd, ..., within=S)` asks for the same without waiting: the files wait in a batch of their own, which
is flushed S seconds after its first request, when someone waits on it, or earlier along with any batch that
is flushed before (one more call among concurrent ones costs no extra wait). A writer whose lines are already in
the kernel (safe from a kill -9) and that only needs them on disk before it acts on them uses it, and waits on
the returned `Pending` then.

A descriptor passed in must stay open until its request is done (the call returned, or its `Pending` waited on).
"""
from __future__ import annotations

import os
import queue
import threading
import time
from typing import Optional

FLUSHERS = 16  # threads issuing one batch's fdatasyncs together
_datasync = getattr(os, "fdatasync", os.fsync)  # macOS has no fdatasync


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


class _Flush:
    """One batch's files being flushed by the flusher threads: the first error, and a count of those left."""

    def __init__(self, count: int) -> None:
        self.left = count
        self.error: Optional[OSError] = None
        self.lock = threading.Lock()
        self.done = threading.Event()

    def finished(self, error: Optional[OSError]) -> None:
        with self.lock:
            self.error = self.error or error
            self.left -= 1
            if not self.left:
                self.done.set()


class _Flushers:
    """FLUSHERS threads that fdatasync the files they are handed, started on first use (again after a fork)."""

    def __init__(self) -> None:
        self._work: queue.SimpleQueue[tuple[int, _Flush]] = queue.SimpleQueue()
        self._pid: Optional[int] = None

    def flush(self, fds: list[int]) -> None:
        """fdatasync every file of `fds`, together; raises the first OSError once all have returned."""
        if len(fds) == 1:
            _datasync(fds[0])
            return
        if self._pid != os.getpid():  # the threads of the parent are not in a forked child
            self._work = queue.SimpleQueue()
            for index in range(FLUSHERS):
                threading.Thread(target=self._serve, args=(self._work,), daemon=True,
                                 name=f"ga-group-sync-{index}").start()
            self._pid = os.getpid()
        flush = _Flush(len(fds))
        for fd in fds:
            self._work.put((fd, flush))
        flush.done.wait()
        if flush.error is not None:
            raise flush.error

    @staticmethod
    def _serve(work: queue.SimpleQueue[tuple[int, _Flush]]) -> None:
        while True:
            fd, flush = work.get()
            try:
                _datasync(fd)
            except OSError as exc:
                flush.finished(exc)
            else:
                flush.finished(None)


class GroupSync:
    """The process's group-commit writer (see `durable` and `soon`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: _Batch = _Batch()  # the batch `durable` callers join: flushed as soon as the writer is free
        self._later: _Batch = _Batch()  # the batch `soon` callers join: flushed when due, waited on, or along
        self._wake = threading.Condition(self._lock)
        self._thread: Optional[threading.Thread] = None
        self._flushers = _Flushers()

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
                if self._later.fds:  # due, or along for the ride: one more concurrent call
                    riders, self._later = self._later, _Batch()
            try:
                self._flushers.flush(list(dict.fromkeys(batch.fds + (riders.fds if riders else []))))
            except OSError as exc:
                batch.error = exc
                if riders:
                    riders.error = exc
            batch.done.set()
            if riders:
                riders.done.set()

    def _later_due(self) -> bool:
        return bool(self._later.fds) and (self._later.urgent or time.monotonic() >= self._later.due)


_GROUP = GroupSync()


def durable(*fds: int) -> None:
    """Everything written to each of `fds` so far is on disk when this returns (one batch, shared with concurrent
    callers)."""
    _GROUP.durable(*fds)


def soon(*fds: int, within: float) -> Pending:
    """`fds` will be durable at the latest `within` seconds from now, sooner if a batch flushes before; returns at
    once. `Pending.wait()` waits for it (and hurries the batch)."""
    return _GROUP.soon(*fds, within=within)
