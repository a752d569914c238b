"""Where a run's workers live, behind one pool interface: threads in the `ga fanout` process, or Ray actors.

The seams are the protocols below: `Executor` (what a run asks of where its workers live), `Pool` (the
places tasks run, as the map loop, reduce and driver use them) and `EndpointGovernor` (one model endpoint's
rate limits; in orchestrator/records.py, as a `Job` holds one). Both executors satisfy them, checked by
pyright: `local.LocalExecutor`/`LocalPool` (threads of the driver's own process, never importing Ray) and
`pool.RayExecutor`/`RayPool` (Ray actor processes).

Selection (`fanout.executor`, or `executor:` in a tasks file's config): "local", "ray", or "auto" (the
default): Ray when an address is given (--address, fanout.address, GA_RAY_ADDRESS, a parent run's cluster) or
this process is already connected to Ray, the in-process executor otherwise. `fanout.open_executor` makes
the choice (a factory here, in the base, would import both executors and tie this module to them).
"""
from __future__ import annotations

import queue
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Optional, Protocol, TypedDict, TypeVar

if TYPE_CHECKING:
    from configs import Settings
    from configs.settings import FanoutSettings
    from orchestrator.records import EndpointGovernor, Job, Lease, TaskRecord

TicketT = TypeVar("TicketT")  # what `submit` hands back: a concurrent Future (threads) or a Ray ObjectRef
ItemT = TypeVar("ItemT")


class WorkerLost(RuntimeError):
    """The worker running a task died, or was killed by the driver."""


class WorkerError(RuntimeError):
    """The call into the worker raised (a bug in our code, not the task's failure)."""


class ClusterInfo(TypedDict):
    """Where the workers run: the Ray address nested runs attach to (None when local), the driver's node."""

    address: Optional[str]
    node_id: Optional[str]
    started: bool  # this process started the cluster (or has nothing to start: local)


class TaskProgress(TypedDict, total=False):
    """What a worker says of one task it runs (WorkerActor.progress), and the live view shows."""

    task_id: str
    turn: int
    tool: str  # the tool running now, "" while the worker waits for the model
    since: float  # when that began
    tokens: int
    started: float
    attempt: int
    pid: int
    slot: int  # added by the map loop: the slot it runs in


@dataclass(frozen=True)
class MemoryPlacement:
    """How a run's workers reach the memory store: the store itself (a shared filesystem), or through the
    memory service and a node-local replica (orchestrator/memory_service.py)."""

    mode: Literal["store", "service"] = "store"
    service: Optional[str] = None  # the service actor's name
    replica: Optional[str] = None  # the base directory of node-local replicas


@dataclass
class Member:
    """One worker (a Ray actor process, or an in-process actor object); several slots may share it."""

    uid: str
    handle: object  # the executor's own: a WorkerActor (threads) or a Ray actor handle; only its pool reads it
    dead: bool = False
    retiring: bool = False  # tainted: no new tasks; replaced once its slots are idle


@dataclass
class Slot:
    """One place a task can run (a worker, in the live view)."""

    index: int
    member: Member
    busy: Optional[str] = None  # task id

    @property
    def uid(self) -> str:
        return self.member.uid

    @property
    def handle(self) -> object:
        return self.member.handle


class Pool(Protocol[TicketT]):
    """The places a run's tasks run, and the workers behind them."""

    members: list[Member]
    slots: list[Slot]

    def submit(self, slot: Slot, job: Job) -> TicketT:
        """Start one attempt of a task."""
        ...

    def completed(self, timeout: float) -> list[TicketT]:
        """The tickets that finished since the last call, in the order they did (blocks until one does, or the
        timeout). They arrive on a queue as they finish: the caller's work does not grow with what is in flight."""
        ...

    def result(self, future: TicketT) -> TaskRecord:
        """Raises WorkerLost (the worker died or was killed) or WorkerError."""
        ...

    def send(self, member: Member, method: str, *args: object) -> None:
        """A control call whose answer nobody waits for (cancel)."""
        ...

    def progress(self, members: list[Member], timeout: float) -> list[tuple[Member, dict[str, TaskProgress]]]:
        """[(member, {task id: progress})] for those that answered in time."""
        ...

    def kill(self, member: Member) -> None:
        """Stop it for good (a Ray process is killed; a thread is abandoned)."""
        ...

    def replace(self, member: Member) -> None: ...

    def retire(self, member: Member) -> None: ...

    def lease_for_job(self) -> Optional[Lease]:
        """What a job carries so its worker can tell when this driver is gone (None: the driver is this process)."""
        ...

    def close(self) -> None: ...


class Executor(Protocol):
    """Where a run's workers live."""

    @property
    def kind(self) -> str:
        """"local" or "ray"."""
        ...

    @property
    def info(self) -> ClusterInfo: ...

    # Pool[Any]: the ticket type is the executor's own; the map loop only hands tickets back to their pool.
    def pool(self, run_id: str, size: int, fanout_settings: FanoutSettings, run_path: Path) -> Pool[Any]: ...

    def governor(self, key: str, fanout_settings: FanoutSettings) -> EndpointGovernor: ...

    def memory_mode(self, settings: Settings) -> MemoryPlacement: ...


class SlotPool:
    """What both pools share: their members and slots, and how a dead or retiring member's slots pass to a fresh
    one. A pool says how it gets that fresh member (`_successor`)."""

    members: list[Member]
    slots: list[Slot]

    def _successor(self, member: Member) -> Member:
        raise NotImplementedError

    def replace(self, member: Member) -> None:
        """The worker died (or retires): a fresh one takes every slot it had."""
        if member.dead:
            return  # another of its slots already did this
        member.dead = True
        fresh = self._successor(member)
        self.members = [fresh if m is member else m for m in self.members]
        for slot in self.slots:
            if slot.member is member:
                slot.member = fresh

    def retire(self, member: Member) -> None:
        """A tainted worker takes no new task; it is replaced once none of its slots is busy."""
        member.retiring = True
        if not any(s.busy for s in self.slots if s.member is member):
            self.replace(member)


def drain(done: queue.SimpleQueue[ItemT], timeout: float) -> list[ItemT]:
    """What the queue holds: waits up to `timeout` for the first, then takes the rest that are there."""
    try:
        found = [done.get(timeout=timeout)]
    except queue.Empty:
        return []
    while True:
        try:
            found.append(done.get_nowait())
        except queue.Empty:
            return found
