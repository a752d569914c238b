"""The record of one task: what `Worker.run` returns, and what a run keeps of it (a line of results.jsonl,
schemas/task_record.schema.json). The worker fills what it knows (status, answer, turns, usage, ...); whoever
ran it adds its own part (a fan-out's actor: attempt, times, how it was stopped, where it ran).
"""
from __future__ import annotations

from enum import Enum
from typing import Optional

from pydantic import Field

from memory_shared.jsontypes import JSONObject
from worker.types import Record, Status
from worker.usage import Usage


class Kind(str, Enum):
    """A closed set of outcomes, written to disk as its plain value ("paused"), equal to it, shown as it."""

    def __str__(self) -> str:
        return self.value


class Stop(Kind):
    """A task that did not finish: how it was stopped (the driver requeues it, leaves it for --resume, or ends it)."""

    timeout = "timeout"  # it ran past its timeout
    lease_lost = "lease_lost"  # the actor took its driver for dead
    cancelled = "cancelled"  # the run was interrupted (or a person stopped `ga chat`'s turn)
    stopped = "stopped"  # a person stopped it (`ga runs stop`): unfinished, resumable
    paused = "paused"  # its endpoint's circuit is open: the run pauses
    rate_limited = "rate_limited"  # the endpoint still refused it (HTTP 429) after the client's retries


class Failure(Kind):
    """Why a failed attempt may be tried again."""

    setup = "setup"  # the worker could not be set up in the actor's process
    crash = "crash"  # the worker raised
    check = "check"  # the task's check did not pass


class NestedUsage(Usage):
    """The usage of the fan-outs a task started from its code_run, and how many there were."""

    runs: int = 0


class ActorInfo(Record):
    uid: str
    pid: Optional[int] = None
    node_id: Optional[str] = None
    tainted: bool = False


class TaskRecord(Record):
    """One finished attempt of a task (or of a reduce step), as the actor returns it and results.jsonl keeps it."""

    task_id: str
    status: Status
    attempt: int = 0
    answer: str = ""
    turns: int = 0
    reason: str = ""
    usage: Usage = Field(default_factory=Usage)
    started: Optional[float] = None
    finished: Optional[float] = None
    seconds: Optional[float] = None
    question: Optional[str] = None
    memory_generation: Optional[int] = None
    memory: Optional[JSONObject] = None  # what its memory commit kept: committed, proposed, refused (memory_shared.gate)
    check: Optional[JSONObject] = None  # the task-level check: {"passed": bool, "detail": str}
    error: Optional[Failure] = None  # why the driver may retry it
    stop: Optional[Stop] = None  # it did not finish: how it was stopped (the driver requeues or leaves it)
    steering: Optional[list[JSONObject]] = None  # notes a person or the parent agent sent it
    failovers: Optional[list[JSONObject]] = None  # model switches: {from, to, at, reason}
    usage_by_model: Optional[dict[str, Usage]] = None
    nested_usage: Optional[NestedUsage] = None
    usage_with_nested: Optional[Usage] = None  # set by the driver: usage + nested_usage
    history_path: Optional[str] = None
    task_dir: Optional[str] = None
    actor: Optional[ActorInfo] = None
    files: Optional[dict[str, str]] = Field(default=None, exclude=True)  # sent back when the driver cannot see the node's disk

    @property
    def spent(self) -> Usage:
        """What the task cost, the fan-outs it started included."""
        return self.usage_with_nested or self.usage

    def line(self) -> dict[str, object]:
        """The JSON object written to disk."""
        return self.model_dump(mode="json", exclude_none=True)

    def run_json(self) -> dict[str, object]:
        """What `ga run --json` prints: the worker's own fields, in their order, None included."""
        data = self.model_dump(mode="json", include=set(WORKER_FIELDS))
        return {name: data[name] for name in WORKER_FIELDS}


WORKER_FIELDS = ("task_id", "status", "answer", "turns", "usage", "history_path", "reason", "question",
                 "memory_generation", "check")
