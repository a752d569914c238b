"""The records a run passes between its parts and writes to disk (docs/design.md §2, §5).

`Job` goes from the driver to an actor; an actor answers with a `TaskRecord` (worker/record.py: the record
its Worker returned, with the actor's part added), which is also a line of `results.jsonl` and the `record`
of a `reduce_result` ledger event; `LedgerEvent` is a line of
`ledger.jsonl`; `RunSummary` is `summary.json`; `ReduceResult` is `reduce/result.json`. A `Job` also carries the
driver's `Lease` and its endpoint's governor (`EndpointGovernor`, whose `GovernorSnapshot`s summary.json holds).
`Usage` is the worker's (worker.types): one usage record for every part. The JSON Schemas in `schemas/` are
generated from these models (`write_schemas`); a test checks they are current.

Reading is lenient (unknown keys are kept, missing ones take their defaults), so run directories
written by earlier versions stay readable.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Literal, Optional, Protocol, TypeVar, Union, cast

from pydantic import BaseModel, ConfigDict, Field, SkipValidation, with_config
from pydantic_core import to_jsonable_python
from typing_extensions import NotRequired, TypedDict

from configs import Settings
from memory_shared.jsontypes import JSONObject
from worker.context.cut import cut_head_tail
from worker.modelconfig import ModelConfig
from worker.record import ActorInfo, Kind, NestedUsage, TaskRecord
from worker.types import Record, Status
from worker.usage import Usage

if TYPE_CHECKING:
    from _typeshed import SupportsRichComparison

__all__ = ["ActorInfo", "DriverIdentity", "EndpointGovernor", "GovernorSnapshot", "Job", "Lease", "LedgerEvent",
           "MemoryKept", "NestedUsage", "ReduceResult", "Run", "RunStop", "RunSummary", "TaskCounts", "TaskRecord",
           "Usage", "WorkerTotals", "SCHEMAS", "schema_of", "write_schemas"]

# ---- what a Job carries besides records: the driver's lease, its endpoint's governor ----
# (here, not in executor.py, which names them: this module's models hold them, and executor.py names this module's
# under TYPE_CHECKING; typing_extensions' TypedDict, as pydantic validates a Lease and asks for it on Python < 3.12)


class DriverIdentity(TypedDict):
    """The driver's process, which a worker in the same pid namespace checks directly (orchestrator/reaper.py); with
    `lessee` and `ttl`, a job's lease (Pool.lease_for_job)."""

    pid: int
    pid_started: Optional[int]  # its start time: tells it from a later process of the same pid
    namespace: str  # the machine's boot and pid namespace ("" when unknown)


class Lease(DriverIdentity):
    """What a job carries so its worker can tell when its driver is gone (WorkerActor.renew)."""

    lessee: str  # the driver's name with the actor manager
    ttl: float  # seconds without renewal after which the worker takes the driver for gone


# an endpoint governor's state and counts, as reported; int before float: pydantic keeps a count an int
GovernorSnapshot = dict[str, Union[str, int, float, bool, None]]


class EndpointGovernor(Protocol):
    """One model endpoint's rate limits and circuit (orchestrator/governor.py): in this process, or a Ray actor."""

    @property
    def instance(self) -> str:
        """Tells a re-created governor (same name) from the one before."""
        ...

    def acquire(self, client: str, tokens: int = 0) -> float: ...

    def done(self, client: str, tokens: int = 0, estimate: int = 0) -> None: ...

    def rate_limited(self, client: str, retry_after: float) -> None: ...

    def watch(self, version: int, timeout: float) -> tuple[int, bool]: ...

    def snapshot(self) -> GovernorSnapshot: ...


RunStatus = Literal["succeeded", "unverified", "failed", "interrupted", "paused", "budget_spent"]


class RunStop(Kind):
    """Why a run stopped before every task ran: a ledger event of that name, summary.json's stop_reason."""

    budget = "budget"  # the run's budget is spent: no new task starts
    paused = "paused"  # the model endpoint keeps refusing: resume later
    interrupted = "interrupted"  # Ctrl-C, SIGTERM, `ga runs stop`, or the code_run that asked for it ended


class WorkerTotals(Usage):
    """One worker slot's share of a run."""

    tasks: int = 0


class LedgerEvent(Record):
    """A line of ledger.jsonl. Besides these, an event carries its own fields (workers, note, pid, ...)."""

    time: float
    event: str  # queued, started, running, retried, requeued, a final status, reduce_result, run_finished, ...
    task_id: Optional[str] = None
    attempt: Optional[int] = None
    reason: Optional[str] = None
    step: Optional[Literal["reduce"]] = None
    key: Optional[str] = None  # reduce_result: the step's id and input digest
    record: Optional[TaskRecord] = None  # reduce_result: the step's whole record


class ReduceResult(Record):
    """reduce/result.json; the same without the answer in summary.json."""

    status: Status
    reason: str = ""
    answer: Optional[str] = None
    path: Optional[str] = None
    levels: int = 0
    usage: Usage = Field(default_factory=Usage)
    memory_generation: Optional[int] = None
    reused: list[str] = Field(default_factory=list)


class TaskCounts(Record):
    total: int = 0
    succeeded: int = 0
    unverified: int = 0
    failed: int = 0
    needs_input: int = 0
    limit: int = 0
    unfinished: int = 0


class BudgetLimits(Record):
    tokens: Optional[int] = None
    cost: Optional[float] = None


@with_config(ConfigDict(extra="allow"))  # as a Record: what a later ga adds is kept
class MemoryKept(TypedDict):
    """What a task's memory commit kept or lost, counted (its TaskRecord.memory has the paths and reasons)."""

    committed: int
    proposed: int
    refused: int
    proposal: NotRequired[str]  # the proposal that holds what waits for review


def _absent(value: object) -> bool:
    return value is None


class RunSummary(Record):
    """summary.json: how a run ended, its counts, its usage in total, per task and per worker slot."""

    run_id: str
    name: str = ""
    status: RunStatus
    exit_code: int
    started: Optional[float] = None
    finished: Optional[float] = None
    seconds: float = 0.0
    depth: int = 0
    parent_task: Optional[str] = None
    address: Optional[str] = None
    workers: int = 0
    tasks: TaskCounts = Field(default_factory=TaskCounts)
    usage: Usage = Field(default_factory=Usage)
    per_task: dict[str, Optional[Usage]] = Field(default_factory=dict)
    per_worker: dict[str, WorkerTotals] = Field(default_factory=dict)
    nested_runs: int = 0
    stop_reason: Optional[str] = None  # a RunStop
    stop_note: str = ""
    budget: BudgetLimits = Field(default_factory=BudgetLimits)
    reduce: Optional[ReduceResult] = None
    governors: list[GovernorSnapshot] = Field(default_factory=list)  # each endpoint governor's snapshot
    memory: str = "store"
    memory_kept: dict[str, MemoryKept] = Field(default_factory=dict)  # per task whose memory commit kept or lost any
    # a replay's or a fork's (orchestrator/replay.py): what it replayed or forked; a fan-out's summary has none of them
    replay_of: Optional[str] = Field(default=None, exclude_if=_absent)  # the run or history.jsonl replayed
    identical: Optional[bool] = Field(default=None, exclude_if=_absent)  # a replay's: it did what the recording did
    forked_from: Optional[str] = Field(default=None, exclude_if=_absent)  # RUN/TASK@TURN
    forks: Optional[dict[str, str]] = Field(default=None, exclude_if=_absent)  # --from-last-good: id -> RUN/TASK@TURN
    fork_model: Optional[str] = Field(default=None, exclude_if=_absent)  # the live model(s) a fork went on with

    def text(self) -> str:
        return self.model_dump_json() + "\n"  # one line: 100,000 tasks in per_task


class Fallback(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True, protected_namespaces=())

    model_name: Optional[str]
    endpoint: ModelConfig
    # the endpoint's governor, if it has one: in this process or a Ray actor's handle (a protocol: not checked)
    governor: SkipValidation[Optional[EndpointGovernor]] = None


class Job(Fallback):
    """What an actor needs to run one attempt of a task (built by Driver.job; it crosses Ray, never disk)."""

    task_id: str
    attempt: int
    prompt: str
    inputs: list[str] = Field(default_factory=list)
    input_links: bool = False  # True: a top-level task's, named by the user: a symlink is followed (inputfiles.py)
    commit_key: Optional[str] = None  # run/step/attempt: a memory commit made twice is made once
    task_dir: str
    settings: Settings  # the run's, with the task's limits and sandbox over them
    timeout: Optional[float] = None
    fallbacks: list[Fallback] = Field(default_factory=list)
    tools: Optional[list[str]] = None
    check: Optional[dict[str, object]] = None  # a TaskCheck's fields (Task.check)
    memory: str = "store"  # store, service or none
    memory_service: Optional[str] = None
    memory_replica: Optional[str] = None
    secrets: dict[str, str] = Field(default_factory=dict, repr=False)
    return_files: bool = False  # no shared filesystem: send history and answer back with the record
    input_files: dict[str, bytes] = Field(default_factory=dict, repr=False)
    env: dict[str, str] = Field(default_factory=dict, repr=False)
    lease: Optional[Lease] = None  # the driver's lease (Pool.lease_for_job), added as it is sent
    budget_tokens: Optional[int] = None  # what the run's budget leaves this task as it starts (None: no budget)
    budget_cost: Optional[float] = None


COMPACT_CHARS = 6000  # --json answers together stay well inside a code_run output cap
COMPACT_ROWS = 100  # results --json lists; a larger run lists those that did not succeed
ANSWER_NOTE = "see the answer file"  # a cut answer is whole in tasks/<id>/answer.md


class ReadsLikeJson(BaseModel):
    """The records of what `fanout()` returns also read like the JSON they are written as (`r["answer"]`,
    `r.get("usage")`, `"question" in r`; a nested record comes as its JSON object): scripts written against
    them (a parent agent's code_run) index them so. Only these do: every other record is read by attribute."""

    def __getitem__(self, key: str) -> object:
        try:
            return to_jsonable_python(getattr(self, key))
        except AttributeError:
            raise KeyError(key) from None

    def get(self, key: str, default: object = None) -> object:
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and getattr(self, key, None) is not None


class TaskResult(ReadsLikeJson, TaskRecord):
    """A task's record as `fanout()` returns it."""


class RunResultSummary(ReadsLikeJson, RunSummary):
    """The run's summary as `fanout()` returns it."""


class ReduceOutcome(ReadsLikeJson, ReduceResult):
    """The reduce step's result as `fanout()` returns it."""


Public = TypeVar("Public", bound=ReadsLikeJson)


def _reads_like_json(record: BaseModel, public: type[Public]) -> Public:
    """The record itself, its class narrowed to the public one (which adds only the JSON reading): no copy, no
    validation again, so a run of 100,000 tasks returns at once."""
    object.__setattr__(record, "__class__", public)
    return cast(Public, record)


class ResultSource(Protocol):
    """Where a Run's records are read from when asked for (orchestrator.ledger.StoredResults: its directory)."""

    def __len__(self) -> int: ...

    def each(self) -> Iterator[TaskRecord]: ...

    def all(self) -> list[TaskRecord]: ...

    def first(self, limit: int, where: Optional[Callable[[TaskRecord], bool]] = None,
              key: Optional[Callable[[TaskRecord], SupportsRichComparison]] = None) -> list[TaskRecord]: ...


class Run:
    """What `fanout()` returns. Its records also read like their JSON (`run.results[0]["answer"]`).

    `results` is a list, given or read from the run directory the first time it is asked for (`ResultSource`):
    a run of 10,000 tasks no longer holds every record to return them. The exit status, --json and the digest
    read them one at a time (`each_result`, `first_results`)."""

    def __init__(self, run_id: str, run_dir: Path, status: str, exit_code: int,
                 results: Union[list[TaskRecord], ResultSource], summary: RunSummary,
                 reduce: Optional[ReduceResult] = None, unfinished: Optional[list[str]] = None):
        self.run_id, self.run_dir, self.status, self.exit_code = run_id, run_dir, status, exit_code
        self._source: Optional[ResultSource] = None if isinstance(results, list) else results
        self._results: Optional[list[TaskRecord]] = (
            [_reads_like_json(r, TaskResult) for r in results] if isinstance(results, list) else None)
        self.summary: RunSummary = _reads_like_json(summary, RunResultSummary)
        self.reduce: Optional[ReduceResult] = _reads_like_json(reduce, ReduceOutcome) if reduce is not None else None
        self.unfinished: list[str] = unfinished if unfinished is not None else []

    def __repr__(self) -> str:
        return (f"Run(run_id={self.run_id!r}, status={self.status!r}, exit_code={self.exit_code}, "
                f"results={self.finished} record(s), unfinished={len(self.unfinished)})")

    @property
    def results(self) -> list[TaskRecord]:
        """Every finished task's record in the order of the plan (read from the run directory once, then kept)."""
        if self._results is None:
            assert self._source is not None
            self._results = self._source.all()
        return self._results

    @results.setter
    def results(self, records: list[TaskRecord]) -> None:
        self._source, self._results = None, [_reads_like_json(r, TaskResult) for r in records]

    @property
    def finished(self) -> int:
        """How many tasks have a record (without reading them)."""
        return len(self._results) if self._results is not None else len(self._source or [])

    def each_result(self) -> Iterator[TaskRecord]:
        """The records one at a time; read from the run directory (in the order they finished) unless already held."""
        if self._results is not None or self._source is None:
            return iter(self.results)
        return self._source.each()

    def first_results(self, limit: int, where: Optional[Callable[[TaskRecord], bool]] = None,
                      key: Optional[Callable[[TaskRecord], SupportsRichComparison]] = None) -> list[TaskRecord]:
        """The first `limit` records `where` accepts, ordered by `key` then by the plan, holding no more of them."""
        if self._results is not None or self._source is None:
            kept = [r for r in self.results if where is None or where(r)]
            return (sorted(kept, key=key) if key else kept)[:limit]
        return self._source.first(limit, where, key)

    def compact(self, limit: int = COMPACT_CHARS) -> dict[str, object]:
        """What --json prints: small enough for a parent agent to read whole. Past COMPACT_ROWS results, only
        the first COMPACT_ROWS that did not succeed are listed; `results_file` has every one."""
        count = self.finished
        if count <= COMPACT_ROWS:
            shown = self.results
        elif self.summary.tasks.succeeded == count:  # nothing to list: no record need be read
            shown = []
        else:
            shown = self.first_results(COMPACT_ROWS, where=lambda r: r.status != "succeeded")
        per_answer = max(200, limit // max(1, len(shown) + (1 if self.reduce else 0)))
        rows = [{"id": r.task_id, "status": r.status, "answer": cut_head_tail(r.answer, per_answer, ANSWER_NOTE),
                 **({"reason": r.reason} if r.reason and r.status != "succeeded" else {})}
                for r in shown]
        data: dict[str, object] = {
            "run_id": self.run_id, "run_dir": str(self.run_dir), "status": self.status, "exit_code": self.exit_code,
            "tasks": self.summary.tasks.model_dump(), "usage": self.summary.usage.model_dump(),
            "seconds": self.summary.seconds, "results": rows,
            "full_answers": str(self.run_dir / "tasks" / "<id>" / "answer.md")}
        if len(shown) < count:
            data.update(results_file=str(self.run_dir / "results.jsonl"),
                        results_note=f"{count:,} results: only those that did not succeed are listed "
                                     f"(the first {COMPACT_ROWS}); results_file has every one, a JSON object a line")
        if self.summary.stop_note:
            data["note"] = self.summary.stop_note
        if self.reduce:
            data["reduce"] = {"status": self.reduce.status,
                              "answer": cut_head_tail(self.reduce.answer or "", limit, ANSWER_NOTE),
                              "path": self.reduce.path}
        return data

    def public(self) -> dict[str, object]:
        """Everything a nested run's caller gets back through the gateway (`from_public` rebuilds it)."""
        return {"run_id": self.run_id, "run_dir": str(self.run_dir), "status": self.status, "exit_code": self.exit_code,
                "results": [r.model_dump(mode="json") for r in self.results],
                "summary": self.summary.model_dump(mode="json"),
                "reduce": self.reduce.model_dump(mode="json") if self.reduce else None, "unfinished": self.unfinished}

    @classmethod
    def from_public(cls, data: JSONObject) -> "Run":
        """The gateway's reply to a nested run's caller: JSON from outside, each part validated."""
        return cls(data["run_id"], Path(data["run_dir"]), data["status"], data["exit_code"],
                   [TaskRecord.model_validate(r) for r in data["results"]], RunSummary.model_validate(data["summary"]),
                   ReduceResult.model_validate(data["reduce"]) if data.get("reduce") else None, data["unfinished"])


# ---- the shipped schemas ----

SCHEMAS: dict[str, type[BaseModel]] = {
    "task_record": TaskRecord,  # results.jsonl lines
    "ledger_event": LedgerEvent,  # ledger.jsonl lines
    "run_summary": RunSummary,  # summary.json
    "reduce_result": ReduceResult,  # reduce/result.json
}
SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schemas"


def schema_of(model: type[BaseModel]) -> dict[str, object]:
    """The JSON Schema of what is written (serialization mode: `total` of a usage is there)."""
    return model.model_json_schema(mode="serialization")


def write_schemas(folder: Path = SCHEMA_DIR) -> list[Path]:
    """Regenerate schemas/*.json from the models (`python schemas/regenerate.py`)."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, model in SCHEMAS.items():
        path = folder / f"{name}.schema.json"
        path.write_text(json.dumps(schema_of(model), indent=2, sort_keys=True) + "\n", encoding="utf-8")
        written.append(path)
    return written

