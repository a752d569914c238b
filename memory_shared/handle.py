"""The store handle a worker sees: everything worker/ and skilltree/ use of a memory store, local or remote.

Two kinds implement it: `MemoryStore` (store.py, a store on this filesystem) and
`orchestrator.memory_service.ReplicaStore` (a cluster node without the store's filesystem: snapshots are
node-local replicas, transactions are forwarded to the memory service actor). Code above memory_shared
that is handed a store takes a `StoreHandle`; only the code that opens a store names `MemoryStore`.

A worker's task reads `shared_snapshot()`: HEAD as it starts, held to its end, through one pin per generation
that the tasks of a process share (memory_shared/shared.py); `snapshot()` is a pin of the caller's own.

A transaction with a `key` (e.g. "run/task/attempt") commits at most once: when a commit with that key is
already in the log, it commits nothing, `already_committed` is True and `generation` is the earlier one.
This is the one way ga makes a commit idempotent (the worker's gate and exploration both use it).
"""
from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import Callable, Optional, Protocol


class SnapshotHandle(Protocol):
    """A pinned, read-only generation: its files are under `path` until release()."""

    @property
    def generation(self) -> int: ...

    @property
    def path(self) -> Path: ...

    def release(self) -> None: ...

    def __enter__(self) -> "SnapshotHandle": ...

    def __exit__(self, *exc: object) -> None: ...


class SharedSnapshotHandle(SnapshotHandle, Protocol):
    """A reader's reference to a pinned generation that other readers may share (a task's snapshot)."""

    def derived(self, key: str, make: Callable[[], str]) -> str:
        """A text that depends only on this generation (the prompt's L1), made at most once per shared pin."""
        ...


class TransactionHandle(Protocol):
    """Staged changes on a base generation, committed as one new generation (on a clean `with` exit or
    commit()) or dropped (on an exception or abort())."""

    message: str
    generation: Optional[int]   # the new generation (or the earlier one with the same key) once committed
    already_committed: bool     # a commit with this transaction's key was in the log: nothing committed now

    @property
    def base(self) -> int: ...

    def read(self, rel: str) -> Optional[str]: ...

    def write(self, rel: str, text: str) -> None: ...

    def patch(self, rel: str, old: str, new: str) -> None: ...

    def delete(self, rel: str) -> None: ...

    def commit(self) -> Optional[int]: ...

    def abort(self) -> None: ...

    def __enter__(self) -> "TransactionHandle": ...

    def __exit__(self, exc_type: Optional[type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None: ...


class StoreHandle(Protocol):
    @property
    def root(self) -> Path: ...  # where access statistics and the L4 archive of this worker's tasks go

    @property
    def l1_max_lines(self) -> int: ...

    @property
    def l1_max_chars(self) -> int: ...

    def snapshot(self) -> SnapshotHandle: ...

    def shared_snapshot(self) -> SharedSnapshotHandle: ...  # HEAD, its pin shared with the readers that hold it

    def transaction(self, message: str, author: str, base: Optional[int] = None,
                    key: Optional[str] = None) -> TransactionHandle: ...
