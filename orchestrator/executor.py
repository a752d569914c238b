"""Where a run's workers live, behind one pool interface: threads in the `ga fanout` process, or Ray actors.

Selection (`fanout.executor`, or `executor:` in a tasks file's config): "local" runs every worker as a
thread of the driver's own process (orchestrator/local.py); "ray" uses Ray (orchestrator/pool.py);
"auto" (the default) uses Ray when an address is given (--address, fanout.address, GA_RAY_ADDRESS, a
parent run's cluster) or this process is already connected to Ray, and the in-process executor otherwise.
The in-process executor never imports Ray. The choice is made by `fanout.open_executor` (a factory here, in
the base, would import both executors and tie this module to them in a circle).

The pool interface the map loop, reduce and driver use (both `local.LocalPool` and `pool.Pool` have it):
  slots, members                     the places tasks run and the workers behind them
  submit(slot, job) -> future        start one attempt of a task
  wait(futures, timeout) -> [ready]  the finished ones (blocks until one is, or the timeout)
  result(future) -> record           raises WorkerLost (the worker died or was killed) or WorkerError
  send(member, method, *args)        a control call whose answer nobody waits for (cancel)
  progress(members, timeout)         [(member, {task id: progress})] for those that answered in time
  kill(member)                       stop it for good (a Ray process is killed; a thread is abandoned)
  replace(member), retire(member)    a fresh worker takes its slots (shared: SlotPool below)
  lease_for_job(), close()
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Protocol

EXECUTORS = ("auto", "local", "ray")


class WorkerLost(RuntimeError):
    """The worker running a task died, or was killed by the driver."""


class WorkerError(RuntimeError):
    """The call into the worker raised (a bug in our code, not the task's failure)."""


@dataclass
class Member:
    """One worker (a Ray actor process, or an in-process actor object); several slots may share it."""

    uid: str
    handle: Any
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
    def handle(self) -> Any:
        return self.member.handle


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


class Executor(Protocol):
    kind: str  # "local" or "ray"
    info: dict[str, Any]  # address (None when local), node_id, started

    def pool(self, run_id: str, size: int, fanout_settings: Any, run_path: Path) -> Any: ...

    def governor(self, key: str, fanout_settings: Any) -> Any: ...

    def memory_mode(self, settings: Any) -> dict[str, Optional[str]]: ...
