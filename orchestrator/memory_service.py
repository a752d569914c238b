"""Memory on a cluster whose nodes do not share a filesystem: one service actor owns the store.

`MemoryService` runs on the head node (pinned with the head's `node:__internal_head__` resource)
and opens the real `memory_shared.MemoryStore`. A worker on any node uses a `ReplicaStore`: its
snapshots are the service's generations, shipped through Ray's object store once per generation and
node and unpacked into a node-local directory (`<replicas>/<node id>/generations/<n>`); its
transactions are forwarded call by call to the service, so the consolidation gate sees the same
per-change errors and the same atomic commit as with a local store (a commit key included: a task that
runs again, on any node, commits once). Both satisfy `memory_shared.StoreHandle`. Access statistics and
the L4 archive of such a task stay in the node-local directory.

`fanout.memory_service`: null (auto: on when the cluster has more than one node), true or false.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import threading
import uuid
from pathlib import Path
from types import TracebackType
from typing import Callable, Optional

import ray
from ray.actor import ActorHandle

from configs import Settings
from memory_shared import Commit, MemoryStore
from memory_shared.transaction import Transaction
from orchestrator.executor import MemoryPlacement

NAMESPACE = "ga"
PACKS_KEPT = 4  # generations kept packed in the object store


def memory_mode(settings: Settings) -> MemoryPlacement:
    """The store itself with a shared filesystem, else the service's name and the node-local replica base."""
    wanted = settings.fanout.memory_service
    if wanted is None:
        wanted = sum(1 for node in ray.nodes() if node.get("Alive")) > 1
    if not wanted:
        return MemoryPlacement("store")
    service_for(settings)
    return MemoryPlacement("service", service_name(settings.memory_root), str(settings.home_dir / "memory-replicas"))


def service_name(root: Path) -> str:
    return "ga-memory-" + hashlib.sha1(str(root).encode()).hexdigest()[:12]


def service_for(settings: Settings) -> ActorHandle[StoreOwner]:
    root = settings.memory_root
    service = MemoryService.options(name=service_name(root), namespace=NAMESPACE, lifetime="detached",
                                    get_if_exists=True, max_restarts=0,
                                    resources={"node:__internal_head__": 0.001}).remote(
        str(root), settings.memory.l1_max_lines, settings.memory.l1_max_chars)
    assert isinstance(service, ActorHandle)  # ray's types let `.remote()` answer the class itself
    return service


class StoreOwner:
    """The service actor's class (`MemoryService` is it on Ray): it owns the store."""

    def __init__(self, root: str, l1_max_lines: int, l1_max_chars: int):
        self.store = MemoryStore(Path(root), create=True, l1_max_lines=l1_max_lines, l1_max_chars=l1_max_chars)
        self.packs: dict[int, ray.ObjectRef[dict[str, bytes]]] = {}  # generation -> its files, packed
        self.txns: dict[str, Transaction] = {}

    def head(self) -> tuple[int, list[ray.ObjectRef[dict[str, bytes]]]]:
        """The current generation and, wrapped in a list (so it travels as a reference), its packed tree."""
        with self.store.snapshot() as snap:
            generation = snap.generation
            if generation not in self.packs:
                files = {rel: (snap.path / rel).read_bytes() for rel in snap.files()}
                self.packs[generation] = ray.put(files)
                for old in sorted(self.packs)[:-PACKS_KEPT]:
                    del self.packs[old]
        return generation, [self.packs[generation]]

    def limits(self) -> tuple[int, int]:
        """The store's L1 limits (lines, chars)."""
        return self.store.l1_max_lines, self.store.l1_max_chars

    def begin(self, message: str, author: str, base: Optional[int],
              key: Optional[str]) -> tuple[str, int, Optional[int], bool]:
        """A new transaction: its id, its base, and its key's generation if that commit was made already."""
        txn_id = uuid.uuid4().hex
        txn = self.store.transaction(message=message, author=author, base=base, key=key)
        self.txns[txn_id] = txn
        return txn_id, txn.base, txn.generation, txn.already_committed

    def op(self, txn_id: str, name: str, args: tuple[str, ...]) -> object:
        return getattr(self.txns[txn_id], name)(*args)  # ValueError/TypeError reach the caller as themselves

    def finish(self, txn_id: str, commit: bool, message: str) -> tuple[Optional[int], bool]:
        """Commit (or drop) the transaction: (its generation, whether its key's commit was made before)."""
        txn = self.txns.pop(txn_id)
        txn.message = message
        if not commit:
            txn.abort()
            return None, False
        txn.commit()
        return txn.generation, txn.already_committed

    def log(self) -> list[Commit]:
        return self.store.log()

    def node(self) -> str:
        return ray.get_runtime_context().get_node_id()


MemoryService = ray.remote(num_cpus=0)(StoreOwner)


class ReplicaSnapshot:
    def __init__(self, generation: int, path: Path):
        self.generation, self.path = generation, path

    def release(self) -> None:
        pass  # the service keeps what it packed; the node-local copy is immutable

    def derived(self, key: str, make: Callable[[], str]) -> str:
        return make()

    def __enter__(self) -> "ReplicaSnapshot":
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class ReplicaStore:
    """The store handle a worker sees (memory_shared.StoreHandle), backed by the service."""

    def __init__(self, base: Path, service: ActorHandle[StoreOwner]):
        node = ray.get_runtime_context().get_node_id()
        self.root = Path(base) / node[:16]
        self.service = service
        self.l1_max_lines, self.l1_max_chars = (int(n) for n in ray.get(service.limits.remote()))
        self._lock = threading.Lock()

    def snapshot(self) -> ReplicaSnapshot:
        head: tuple[int, list[ray.ObjectRef[dict[str, bytes]]]] = ray.get(self.service.head.remote())
        generation, (ref,) = head
        path = self.root / "generations" / str(generation)
        with self._lock:
            if not path.is_dir():
                files = ray.get(ref)
                tmp = path.with_name(f".{generation}.{os.getpid()}.{uuid.uuid4().hex[:6]}")
                tmp.mkdir(parents=True)
                for rel, data in files.items():
                    target = tmp / rel
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(data)
                try:
                    tmp.rename(path)
                except OSError:  # another worker process of this node unpacked it first
                    shutil.rmtree(tmp, ignore_errors=True)
        return ReplicaSnapshot(generation, path)

    def shared_snapshot(self) -> ReplicaSnapshot:
        return self.snapshot()  # nothing to share: a replica is not pinned

    def transaction(self, message: str, author: str, base: Optional[int] = None,
                    key: Optional[str] = None) -> "RemoteTransaction":
        return RemoteTransaction(self.service, message, author, base, key)

    def log(self) -> list[Commit]:
        return ray.get(self.service.log.remote())


class RemoteTransaction:
    """memory_shared.TransactionHandle: a transaction of the service's store, opened now, call by call."""

    def __init__(self, service: ActorHandle[StoreOwner], message: str, author: str, base: Optional[int],
                 key: Optional[str] = None):
        self.service, self.message, self.author = service, message, author
        self._id, self.base, self.generation, self.already_committed = ray.get(
            service.begin.remote(message, author, base, key))
        self._finished = False

    def __enter__(self) -> "RemoteTransaction":
        return self

    def _op(self, name: str, *args: str) -> object:
        return ray.get(self.service.op.remote(self._id, name, args))

    def read(self, rel: str) -> Optional[str]:
        text = self._op("read", rel)
        return text if isinstance(text, str) else None  # the service's Transaction.read: a str or None

    def write(self, rel: str, text: str) -> None:
        self._op("write", rel, text)

    def patch(self, rel: str, old: str, new: str) -> None:
        self._op("patch", rel, old, new)

    def delete(self, rel: str) -> None:
        self._op("delete", rel)

    def commit(self) -> Optional[int]:
        return self._finish(commit=True)

    def abort(self) -> None:
        self._finish(commit=False)

    def _finish(self, commit: bool) -> Optional[int]:
        if not self._finished:
            self._finished = True
            generation, already = ray.get(self.service.finish.remote(self._id, commit, self.message))
            if commit:
                self.generation, self.already_committed = generation, already
        return self.generation

    def __exit__(self, exc_type: Optional[type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self._finish(commit=exc_type is None)
