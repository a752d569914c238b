"""The Ray executor: connecting to (or starting) a cluster, and a pool of worker actors kept warm on it.

One detached `PoolManager` per cluster (named, namespace "ga") owns the worker actors. A run leases
as many as its concurrency, renews the lease while it runs and gives them back at the end, so the
next run (or a nested run started from a task's code_run) finds processes already started. Leases
that stop being renewed (the driver was killed) are taken back and their actors killed, so nothing
keeps working for a dead run. Idle actors, and the manager itself, exit after `pool_idle_seconds`.
"""
from __future__ import annotations

import functools
import hashlib
import logging
import math
import os
import queue
import socket
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Optional, TypedDict, Union

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # read when ray is imported: local Ray on 127.0.0.1

import ray  # noqa: E402
import ray.exceptions  # noqa: E402  (a submodule: `import ray` alone does not make it an attribute for pyright)
from ray import ObjectRef  # noqa: E402
from ray._private import worker as ray_worker
from ray._private.authentication.authentication_token_setup import (  # noqa: E402
    maybe_enable_token_auth_if_token_available,
)
from ray.actor import ActorHandle  # noqa: E402
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: E402

from orchestrator import reaper  # noqa: E402
from orchestrator.actor import CONTROL_CALLS, WorkerActor, process_namespace  # noqa: E402
from orchestrator.executor import (  # noqa: E402
    ClusterInfo,
    Member,
    MemoryPlacement,
    Slot,
    SlotPool,
    TaskProgress,
    WorkerError,
    WorkerLost,
    drain,
)
from orchestrator.governor_ray import RemoteGovernor, governor_for  # noqa: E402
from orchestrator.memory_service import memory_mode  # noqa: E402
from orchestrator.records import DriverIdentity, Job, Lease, TaskRecord  # noqa: E402

if TYPE_CHECKING:
    from configs import Settings
    from configs.settings import FanoutSettings

NAMESPACE = "ga"
MANAGER_NAME = "ga-pool"
LEASE_TTL = 8.0  # seconds the manager keeps a lease without renewal before killing its actors
RENEW_EVERY = 0.5  # the driver renews its lease with the manager and with each leased actor
ACTOR_LEASE_TTL = 1.5  # an actor cancels a run's tasks when that run's driver has not renewed for this long


class ClusterError(RuntimeError):
    """Cannot start or reach the Ray cluster; str() says what to do."""


RemoteWorkerActor = ray.remote(num_cpus=0)(WorkerActor)
WorkerHandle = ActorHandle[WorkerActor]


class ActorLease(TypedDict):
    """A worker actor the manager lent: to which driver (the lessee), for which run, until when (monotonic)."""

    handle: WorkerHandle
    lessee: str
    run: str
    expires: float


class RayExecutor:
    """Workers as Ray actor processes (a cluster, or a local Ray started on first use): the Executor of
    orchestrator/executor.py."""

    kind = "ray"

    def __init__(self, address: Optional[str], num_cpus: Optional[int]):
        self.info = connect(address, num_cpus)

    def pool(self, run_id: str, size: int, fanout_settings: FanoutSettings, run_path: Path) -> RayPool:
        return RayPool(run_id, size, fanout_settings.pool_idle_seconds, fanout_settings.slots_per_actor)

    def governor(self, key: str, fanout_settings: FanoutSettings) -> RemoteGovernor:
        return governor_for(key, fanout_settings)

    def memory_mode(self, settings: Settings) -> MemoryPlacement:
        return memory_mode(settings)


def connect(address: Optional[str] = None, num_cpus: Optional[int] = None) -> ClusterInfo:
    """Attach to `address` (ip:port, "auto", "ray://...") or start a local Ray on 127.0.0.1; reuse a live connection.

    With no address, a cluster started on this machine with `ray start` is used when there is one.
    """
    _system_messages_to_stderr()
    if ray.is_initialized():
        return cluster_info(started=False)
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # children (raylet, workers) bind loopback too
    # private: its token-auth notice at each start has no public switch; silencing its logger by name touches no API
    logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(logging.ERROR)
    address = address or os.environ.get("GA_RAY_ADDRESS") or None
    init = functools.partial(ray.init, include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False,
                             namespace=NAMESPACE)
    try:
        existing = address if address and address != "local" else (None if address else _running_local_cluster())
        if existing and existing != "auto" and not _reachable(existing):
            if address:
                raise ConnectionError(f"nothing answers at {existing}")
            existing = None  # a stale `ray start` address file: start our own below
        if existing:
            _token_auth_if_available()
            try:
                init(address=existing)
                return cluster_info(started=False, address=existing)
            except ConnectionError:
                if address:
                    raise
                # a stale `ray start` address file: start our own below
        # hidden kwarg (so ray.init says): the env switch to loopback is read at `import ray`, too late for this one
        init(address="local", num_cpus=num_cpus, _node_ip_address="127.0.0.1")
        reaper.ensure()  # the processes of a Ray this driver started go when it dies, even by kill -9
    except (ConnectionError, ValueError, RuntimeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        where = f"the Ray cluster at {address}" if address else "a local Ray"
        raise ClusterError(f"cannot use {where}: {first}; check --address (or fanout.address) "
                           "and that the cluster is running (`ray status`)") from None
    return cluster_info(started=True)


def _token_auth_if_available() -> None:
    """Ray turns token auth on for clusters it starts but, given an explicit address, does not look for the
    token: do what it does for a cluster it finds by itself (the token is ~/.ray/auth_token or RAY_AUTH_TOKEN)."""
    # private: no public entry does this, and setting RAY_AUTH_MODE alone misses Ray's already-cached config
    maybe_enable_token_auth_if_token_available(warn_if_disabled=False)


def _reachable(address: str, timeout: float = 3.0) -> bool:
    """A quick TCP check: Ray itself keeps retrying a dead address for minutes."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def _running_local_cluster() -> Optional[str]:
    """The cluster `ray start` left on this machine (or RAY_ADDRESS), if any: the file `ray start` writes for
    `ray.init(address="auto")`, read here because "auto" without a cluster fails instead of starting one."""
    if os.environ.get("RAY_ADDRESS"):
        return os.environ["RAY_ADDRESS"]
    try:
        return Path("/tmp/ray/ray_current_cluster").read_text().strip() or None
    except OSError:
        return None


def _system_messages_to_stderr() -> None:
    """Ray prints cluster warnings (e.g. "N PYTHON worker processes have been started") on the driver's
    stdout, where they would break `ga fanout --json` for a parent agent: send them to stderr."""
    # private: Ray has no public switch for where these go (log_to_driver=False does not cover them)
    original = ray_worker.print_to_stdstream
    if getattr(original, "_ga_stderr", False):
        return

    def to_stderr(data: dict, ignore_prefix: bool) -> None:
        original({**data, "is_err": True}, ignore_prefix)

    to_stderr._ga_stderr = True  # type: ignore[attr-defined]
    ray_worker.print_to_stdstream = to_stderr


def cluster_info(started: bool, address: Optional[str] = None) -> ClusterInfo:
    """What tasks need to attach nested runs: the GCS address (through Ray Client: the ray:// address)."""
    context = ray.get_runtime_context()
    try:
        gcs = context.gcs_address
    except Exception:  # noqa: BLE001  (Ray Client mode has no GCS address on the driver side)
        gcs = address
    try:
        node = context.get_node_id()
    except Exception:  # noqa: BLE001
        node = None
    return {"address": gcs or address, "node_id": node, "started": started}


class PoolManager:
    """Owns the worker actors of this cluster; hands them out as leases."""

    def __init__(self, idle_seconds: float):
        self.idle_seconds = idle_seconds
        self.idle: list[tuple[str, WorkerHandle, float]] = []  # (uid, handle, idle since)
        self.capacity: dict[str, int] = {}  # uid -> task slots the actor was created with
        self.node_of: dict[str, Optional[str]] = {}  # uid -> node it was placed on
        self.leased: dict[str, ActorLease] = {}  # uid -> its lease
        self.created = 0
        self.last_call = time.monotonic()
        self._lock = threading.Lock()
        threading.Thread(target=self._reaper, daemon=True).start()

    def lease(self, lessee: str, run_id: str, n: int, slots: int = 1,
              ttl: float = LEASE_TTL) -> list[tuple[str, WorkerHandle]]:
        """n actors able to run `slots` tasks each: idle ones first (warm), new ones for the rest."""
        with self._lock:
            self.last_call = time.monotonic()
            out: list[tuple[str, WorkerHandle]] = []
            for item in [i for i in reversed(self.idle) if self.capacity.get(i[0], 1) >= slots][:n]:
                self.idle.remove(item)
                out.append((item[0], item[1]))
            nodes = [node["NodeID"] for node in ray.nodes() if node.get("Alive")] if len(out) < n else []
            while len(out) < n:
                uid = f"w{self.created}-{uuid.uuid4().hex[:6]}"
                self.created += 1
                node = self._emptiest(nodes)
                # round-robin over the alive nodes: SPREAD, and soft affinity, often stack a burst on one node;
                # a node that dies before its actor starts shows up as a dead actor, which is replaced
                strategy = NodeAffinitySchedulingStrategy(node, soft=False) if node else "SPREAD"
                handle = RemoteWorkerActor.options(scheduling_strategy=strategy, max_restarts=0,
                                             max_concurrency=slots + CONTROL_CALLS).remote(uid, slots)
                assert isinstance(handle, ActorHandle)  # ray's types let `.remote()` answer the class itself
                self.capacity[uid] = slots
                self.node_of[uid] = node
                out.append((uid, handle))
            expires = time.monotonic() + ttl
            for uid, handle in out:
                self.leased[uid] = ActorLease(handle=handle, lessee=lessee, run=run_id, expires=expires)
            return out

    def leased_actor(self, uid: str) -> Optional[WorkerHandle]:
        """The handle of a leased actor (steering a running task reaches it through here), or None."""
        with self._lock:
            lease = self.leased.get(uid)
            return lease["handle"] if lease else None

    def _emptiest(self, nodes: list[str]) -> Optional[str]:
        load = {node: sum(1 for n in self.node_of.values() if n == node) for node in nodes}
        return min(nodes, key=lambda node: load[node]) if nodes else None

    def renew(self, lessee: str, ttl: float = LEASE_TTL) -> int:
        with self._lock:
            self.last_call = time.monotonic()
            expires = time.monotonic() + ttl
            mine = [v for v in self.leased.values() if v["lessee"] == lessee]
            for lease in mine:
                lease["expires"] = expires
            return len(mine)

    def release(self, lessee: str, uids: list[str]) -> None:
        with self._lock:
            self.last_call = time.monotonic()
            for uid in uids:
                lease = self.leased.get(uid)
                if lease and lease["lessee"] == lessee:
                    del self.leased[uid]
                    self.idle.append((uid, lease["handle"], time.monotonic()))

    def discard(self, uids: list[str]) -> None:
        """Actors that died or must not be reused: forget them (and make sure they are gone)."""
        with self._lock:
            self.last_call = time.monotonic()
            for uid in uids:
                lease = self.leased.pop(uid, None)
                if lease:
                    self._kill(uid, lease["handle"])
                for item in [i for i in self.idle if i[0] == uid]:
                    self.idle.remove(item)
                    self._kill(uid, item[1])

    def evict_run(self, run_id: str, keep_lessee: str) -> int:
        """Kill actors still leased to an earlier driver of this run (resume after a crash)."""
        with self._lock:
            stale = [uid for uid, v in self.leased.items() if v["run"] == run_id and v["lessee"] != keep_lessee]
            for uid in stale:
                self._kill(uid, self.leased.pop(uid)["handle"])
            return len(stale)

    def stats(self) -> dict[str, Union[int, list[str]]]:
        with self._lock:
            return {"idle": len(self.idle), "leased": len(self.leased), "created": self.created,
                    "lessees": sorted({v["lessee"] for v in self.leased.values()})}

    def _kill(self, uid: str, handle: WorkerHandle) -> None:
        self.capacity.pop(uid, None)
        self.node_of.pop(uid, None)
        _kill(handle)

    def _reaper(self) -> None:
        while True:
            time.sleep(1.0)
            now = time.monotonic()
            with self._lock:
                for uid in [u for u, v in self.leased.items() if v["expires"] < now]:
                    self._kill(uid, self.leased.pop(uid)["handle"])  # its driver is gone: stop its work
                for item in [i for i in self.idle if now - i[2] > self.idle_seconds]:
                    self.idle.remove(item)
                    self._kill(item[0], item[1])
                done = not self.idle and not self.leased and now - self.last_call > self.idle_seconds
            if done:
                ray.kill(ray.get_runtime_context().current_actor)
                return


def _kill(handle: WorkerHandle) -> None:
    try:
        ray.kill(handle, no_restart=True)
    except Exception:  # noqa: BLE001  (already dead)
        pass


RemotePoolManager = ray.remote(num_cpus=0)(PoolManager)


def manager(idle_seconds: float) -> ActorHandle[PoolManager]:
    """This code version's pool manager: actors started from older code are never handed out (they idle out)."""
    handle = RemotePoolManager.options(name=f"{MANAGER_NAME}-{code_version()}", namespace=NAMESPACE,
                                       lifetime="detached", get_if_exists=True, max_restarts=0,
                                       max_concurrency=8).remote(idle_seconds)
    assert isinstance(handle, ActorHandle)  # ray's types let `.remote()` answer the class itself
    return handle


@functools.lru_cache(maxsize=1)
def leased_actor(address: Optional[str], uid: str) -> Optional[WorkerHandle]:
    """The handle of the pool's actor `uid` through the cluster at `address` and the pool manager; None when the
    actor is gone. ClusterError (or Ray's ValueError) when the cluster or its manager cannot be reached."""
    connect(address)
    manager = ray.get_actor(f"{MANAGER_NAME}-{code_version()}", namespace=NAMESPACE)
    return ray.get(manager.leased_actor.remote(uid))


def call(handle: WorkerHandle, method: str, *args: object) -> object:
    """`method(*args)` on an actor's handle, waited for: its answer."""
    return ray.get(getattr(handle, method).remote(*args))


def code_version() -> str:
    """A short hash of the Python sources a worker actor runs (names, sizes, mtimes: cheap)."""
    digest = hashlib.sha1()
    root = Path(__file__).resolve().parents[1]
    for package in ("orchestrator", "worker", "memory_shared", "configs"):
        for path in sorted((root / package).rglob("*.py")):
            stat = path.stat()
            digest.update(f"{path.relative_to(root)}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:10]


@functools.lru_cache(maxsize=1)
def driver_identity() -> DriverIdentity:
    """This process as an actor on the same machine (and pid namespace) can check it directly: faster than a
    lease and never fooled by a driver too busy to renew."""
    return {"pid": os.getpid(), "pid_started": reaper.start_time(os.getpid()), "namespace": process_namespace()}


def slots_for(size: int) -> int:
    """Slots per actor when none are set: as many as keep the pool's processes within the cluster's CPUs. Each
    process costs its start-up (~1.5 s CPU), ~130 MB and Ray's background CPU; its tasks' threads mostly wait on
    the model, so 16 processes of 4 slots spent 17 ms of CPU per request at W=64 on 2 cores, 2 of 32 slots 9 ms."""
    cpus = int(ray.cluster_resources().get("CPU", 1)) or 1
    return math.ceil(size / cpus)


class RayPool(SlotPool):
    """The driver's side of a lease: `size` slots over ceil(size / slots_per_actor) actors, renewed in the
    background; an actor that dies (or must retire) is replaced for all of its slots. The Pool of
    orchestrator/executor.py, its tickets Ray ObjectRefs."""

    def __init__(self, run_id: str, size: int, idle_seconds: float, slots_per_actor: Optional[int] = None):
        self.run_id = run_id
        self.lessee = f"{run_id}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.idle_seconds = idle_seconds
        self.per_actor = max(1, min(slots_per_actor or slots_for(size), size))
        self.manager = manager(idle_seconds)
        try:
            ray.get(self.manager.evict_run.remote(run_id, self.lessee))
        except ray.exceptions.RayActorError:  # the manager was ending itself as we asked: get a new one
            self.manager = manager(idle_seconds)
        members = [Member(uid, handle) for uid, handle in self._lease(math.ceil(size / self.per_actor))]
        self.members = members
        # slot i on actor i % n: a run with fewer tasks than slots still spreads over every process
        self.slots = [Slot(i, members[i % len(members)]) for i in range(size)]
        self._done: queue.SimpleQueue[ObjectRef[TaskRecord]] = queue.SimpleQueue()  # finished, for `completed`
        self._stop = threading.Event()
        self._renewer = threading.Thread(target=self._renew, daemon=True)
        self._renewer.start()

    def _lease(self, n: int) -> list[tuple[str, WorkerHandle]]:
        for _ in range(3):
            try:
                return ray.get(self.manager.lease.remote(self.lessee, self.run_id, n, self.per_actor))
            except ray.exceptions.RayActorError:
                time.sleep(0.2)
                self.manager = manager(self.idle_seconds)
        raise ClusterError("the worker pool manager keeps dying; check the cluster (`ray status`)")

    def _renew(self) -> None:
        while not self._stop.wait(RENEW_EVERY):
            try:
                self.manager.renew.remote(self.lessee)
            except Exception:  # noqa: BLE001  (a dead manager shows up as dead actors in the run loop)
                pass
            for member in list(self.members):
                if not member.dead:
                    try:
                        _remote(member).renew.remote(self.lessee, ACTOR_LEASE_TTL)
                    except Exception:  # noqa: BLE001  (a dead actor shows up in the run loop)
                        pass

    # ---- the Pool protocol (orchestrator/executor.py) ----

    def submit(self, slot: Slot, job: Job) -> ObjectRef[TaskRecord]:
        ref: ObjectRef[TaskRecord] = _remote(slot.member).run_task.remote(job)
        ref.future().add_done_callback(lambda _: self._done.put(ref))  # Ray's callback, once the result is here
        return ref

    def completed(self, timeout: float) -> list[ObjectRef[TaskRecord]]:
        return drain(self._done, timeout)

    def result(self, future: ObjectRef[TaskRecord]) -> TaskRecord:
        try:
            return ray.get(future)
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as exc:
            raise WorkerLost(str(exc)) from None
        except ray.exceptions.RayTaskError as exc:
            raise WorkerError(str(exc)) from None

    def send(self, member: Member, method: str, *args: object) -> None:
        try:
            getattr(_remote(member), method).remote(*args)
        except Exception:  # noqa: BLE001  (the actor is gone already)
            pass

    def kill(self, member: Member) -> None:
        _kill(_remote(member))

    def progress(self, members: list[Member], timeout: float) -> list[tuple[Member, dict[str, TaskProgress]]]:
        polls: dict[ObjectRef[dict[str, TaskProgress]], Member] = {_remote(m).progress.remote(): m for m in members}
        if not polls:
            return []
        ready, _ = ray.wait(list(polls), num_returns=len(polls), timeout=timeout)
        out: list[tuple[Member, dict[str, TaskProgress]]] = []
        for ref in ready:
            try:
                out.append((polls[ref], ray.get(ref)))
            except ray.exceptions.RayError:
                continue
        return out

    def lease_for_job(self) -> Lease:
        """What a job carries so its actor can tell when this driver is gone (see WorkerActor.renew)."""
        return {"lessee": self.lessee, "ttl": ACTOR_LEASE_TTL, **driver_identity()}

    def _successor(self, member: Member) -> Member:
        """The actor died (or retires): the manager discards it, and a fresh one is leased."""
        try:
            ray.get(self.manager.discard.remote([member.uid]))
        except ray.exceptions.RayActorError:
            self.manager = manager(self.idle_seconds)
        (uid, handle), = self._lease(1)
        return Member(uid, handle)

    def close(self) -> None:
        """Give idle actors back for the next run; actors still busy (an abandoned task) are killed."""
        self._stop.set()
        try:
            busy = {s.member.uid for s in self.slots if s.busy} | {m.uid for m in self.members if m.retiring}
            if busy:
                ray.get(self.manager.discard.remote(sorted(busy)), timeout=10)
            idle = [m.uid for m in self.members if m.uid not in busy and not m.dead]
            ray.get(self.manager.release.remote(self.lessee, idle), timeout=10)
        except Exception:  # noqa: BLE001  (the lease then expires on its own)
            pass


def _remote(member: Member) -> WorkerHandle:
    """A member's handle, which a RayPool's members hold."""
    handle = member.handle
    assert isinstance(handle, ActorHandle), f"{member.uid} is not a Ray actor"
    return handle
