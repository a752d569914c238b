"""`ga replay`: run a recorded run's tasks again from their histories, into a new run directory.

Every task runs as it did in the fan-out (same task settings, tools, check, inputs copied from where
the spec says, code_run sandboxed), but its model is a `worker.model.playback.ReplayModel`: the recorded
replies come back, no model is called, and each request ga builds now is compared with the recorded
one. The first difference stops that task and is reported (task, turn, field; a changed tool output
as task, turn, tool); `keep_going` lists them all. A fork (`from_turn`) replays one task's turns before
`from_turn` and asks a live model from there on; its run records `forked_from: RUN/TASK@TURN` and its
ledger and summary count only the live turns.

A run records the settings that shape its requests (`request_settings.json`, written when it starts);
a run made before that is replayed with this ga's settings and `worker.second_chance` 0 (those runs
had no second chance), and the report says so.
"""
from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, TypedDict

import structlog

from configs import Settings
from orchestrator.actor import WorkerActor
from orchestrator.driver import Driver, Nesting, run_status
from orchestrator.fanout import (
    REQUEST_SETTINGS,
    FanoutError,
    SpecInput,
    build_plan,
    open_run,
    write_request_settings,
)
from orchestrator.ledger import RunDir, new_run_id, read_jsonl
from orchestrator.local import LocalExecutor
from orchestrator.preflight import probe
from orchestrator.records import Job, RunSummary, TaskCounts, TaskRecord, Usage
from orchestrator.spec import Plan, PlannedTask
from worker.model import LLMClient, Model
from worker.model.playback import Divergence, Normaliser, RecordedTurn, ReplayModel, recorded_turns
from worker.modelconfig import ModelConfig, ModelConfigError, resolve_model

TASK_DIR, RUN_DIR, WORKDIR = "<task dir>", "<run dir>", "WORKDIR"  # WORKDIR: how tests/real_model/ wrote theirs
NO_SECOND_CHANCE = {"second_chance": 0}
NO_MODEL = "replay-calls-no-model"  # GA_MODEL inside a replayed task's code_run


class ReplayError(ValueError):
    """The run cannot be replayed as asked; str() is one line saying why and what to do."""


@dataclass
class Recorded:
    """One task as it was recorded: its plan entry, its turns, and what its paths must be read as."""

    task: PlannedTask
    turns: list[RecordedTurn]
    paths: dict[str, str]  # recorded path -> token (see Normaliser)
    status: Optional[str] = None
    commit_key: Optional[str] = None  # its memory commit was made then: the replay must not make it again
    attempt: int = 1  # of the task in the run it is written to
    live_from: int = 0  # a fork: the first turn asked of the live model (0: none, a replay)
    spent_before: Usage = field(default_factory=Usage)  # a retry in its run: what its earlier attempts spent


@dataclass
class TaskReplay:
    task_id: str
    status: str
    recorded_status: Optional[str]
    turns: int
    recorded_turns: int
    divergences: list[Divergence] = field(default_factory=list)
    live_usage: Usage = field(default_factory=Usage)
    replayed_usage: Usage = field(default_factory=Usage)
    spent: Usage = field(default_factory=Usage)  # what the task cost in its run: a retry's earlier attempts too


@dataclass
class ReplayRun:
    run_id: str
    run_dir: Path
    source: str
    tasks: list[TaskReplay]
    notes: list[str]
    forked_from: Optional[str] = None
    run_exit_code: Optional[int] = None  # a fork's: its run's, as a fan-out's (a replay's: 0 only when identical)

    @property
    def identical(self) -> bool:
        return not any(t.divergences for t in self.tasks)

    @property
    def exit_code(self) -> int:
        return self.run_exit_code if self.run_exit_code is not None else 0 if self.identical else 1


class Origin(TypedDict, total=False):
    """What a replay or a fork came from: in its spec, its run_started line and its summary (RunSummary's fields)."""

    replay_of: str
    identical: bool  # added once the replay ran
    forked_from: str
    forks: dict[str, str]
    fork_model: str


def replay(ref: str, task_ids: Optional[list[str]] = None, *, settings: Settings, runs_dir: Path,
           out: Optional[Path] = None, keep_going: bool = False, from_turn: Optional[int] = None,
           model: Optional[str] = None, workers: int = 4, tool_mode: Optional[str] = None,
           inputs: Optional[list[Path]] = None, preflight: bool = True) -> ReplayRun:
    """Replay a run (an id or directory) or one history.jsonl (e.g. tests/real_model/), see the module doc."""
    path = Path(ref)
    if path.is_file():
        source, plan, recorded, stored = _from_history(path, inputs or [])
    else:
        source, plan, recorded, stored = _from_run(ref, Path(runs_dir), task_ids)
    notes: list[str] = []
    settings = _recorded_settings(settings, stored, notes)
    if plan.reduce:
        notes.append("the reduce step is not replayed")
    fork = None
    if from_turn is not None:
        fork = _fork_point(source, recorded, from_turn)
        recorded[0].live_from, recorded[0].commit_key = from_turn, None  # its own work: its own memory commit
    models = _recorded_models(plan, stored, settings, tool_mode)
    live = _live_models(plan, settings, model, stored) if fork else {}
    if live and preflight:
        _endpoints_answer(live)
    origin: Origin = {"forked_from": fork, "fork_model": _live_name(live)} if fork else {"replay_of": source}
    run = RunDir.create(Path(out) if out else Path(runs_dir), new_run_id(("fork-" if fork else "replay-") + plan.name),
                        {**plan.to_dict(), **origin})
    try:
        write_request_settings(run.path, settings, models)
        return _execute(run, plan, recorded, settings, models, live, notes, source=source, keep_going=keep_going,
                        workers=workers, origin=origin)
    finally:
        run.close()


def fork_failed(spec: SpecInput, ref: str, *, settings: Settings, runs_dir: Path, model: Optional[str] = None,
                workers: int = 4, preflight: bool = True) -> ReplayRun:
    """`ga fanout --resume RUN --retry-failed --from-last-good`: every task of RUN that did not succeed runs again
    in RUN, forked from the turn after its last good tool run (`last_good_turn`): the turns before come from its
    history, only the rest is asked of the model and counted."""
    try:
        plan = build_plan(spec)
        old = RunDir.existing(runs_dir, ref)
    except (FanoutError, FileNotFoundError) as exc:
        raise ReplayError(str(exc)) from None
    earlier = {task_id: r for task_id, r in old.results().items()
               if r.status != "succeeded" and old.history(task_id).is_file()}
    if not earlier:
        raise ReplayError(f"run {old.run_id} has no finished task that did not succeed: nothing to fork")
    _, _, recorded, stored = _from_run(ref, runs_dir, list(earlier), every=True)
    notes: list[str] = []
    settings = _recorded_settings(settings, stored, notes)
    for item in recorded:
        item.live_from = last_good_turn(old.history(item.task.id))
        item.attempt, item.commit_key = earlier[item.task.id].attempt + 1, None
        item.spent_before = earlier[item.task.id].spent  # paid for already: the retry adds to it
    live = _live_models(plan, settings, model, stored)
    if preflight:
        _endpoints_answer(live)
    try:
        run, todo, spent = open_run(plan, Path(runs_dir), ref, True)  # the tasks file unchanged, the run not running
    except FanoutError as exc:
        raise ReplayError(str(exc)) from None
    try:
        left = [t.id for t in todo if t.id not in {r.task.id for r in recorded}]
        if left:
            notes.append(f"not forked (never finished, or no history): {', '.join(left)}; resume without "
                         "--from-last-good to run them")
        models = _recorded_models(plan, stored, settings, None)
        origin: Origin = {"forks": {r.task.id: f"{run.run_id}/{r.task.id}@{r.live_from}" for r in recorded},
                          "fork_model": _live_name(live)}
        return _execute(run, plan, recorded, settings, models, live, notes, source=run.run_id, keep_going=False,
                        workers=workers, origin=origin, spent=spent)
    finally:
        run.close()


# ---- what was recorded ------------------------------------------------------------------------


def _from_run(ref: str, runs_dir: Path, task_ids: Optional[list[str]],
              every: bool = False) -> tuple[str, Plan, list[Recorded], Optional[dict]]:
    """The run's plan (only the tasks replayed, unless `every`), its recorded tasks and request settings."""
    try:
        old = RunDir.existing(runs_dir, ref)
    except FileNotFoundError as exc:
        raise ReplayError(str(exc)) from None
    try:
        plan = Plan.from_dict(old.spec())
    except (TypeError, KeyError, ValueError) as exc:
        raise ReplayError(f"{old.spec_path}: written by a ga whose spec this one cannot read "
                          f"({type(exc).__name__}: {exc}); that run cannot be replayed") from None
    known = {t.id: t for t in plan.tasks}
    unknown = [t for t in task_ids or [] if t not in known]
    if unknown:
        raise ReplayError(f"run {old.run_id} has no task {', '.join(unknown)}; its tasks: {', '.join(known)}")
    results = old.results()
    recorded = []
    for task_id in task_ids or list(known):
        history = old.history(task_id)
        if not history.is_file():
            if task_ids:
                raise ReplayError(f"task {task_id} of run {old.run_id} has no history ({history}); it never ran")
            continue
        try:
            turns = recorded_turns(history)
        except ValueError as exc:
            raise ReplayError(str(exc)) from None
        result = results.get(task_id)
        attempt = result.attempt if result else 1
        recorded.append(Recorded(known[task_id], turns, {str(old.task_dir(task_id)): TASK_DIR, str(old.path): RUN_DIR},
                                 result.status if result else None, f"{old.run_id}/{task_id}/{attempt}"))
    if not recorded:
        raise ReplayError(f"run {old.run_id} has no task with a history to replay")
    for item in recorded:
        missing = [p for p in item.task.inputs if not Path(p).is_file()]
        if missing:
            raise ReplayError(f"input {missing[0]} of task {item.task.id} is gone; put it back (its content as it was "
                              "makes the tools' output the same) to replay")
    stored = _read_json(old.path / REQUEST_SETTINGS)
    if not every:
        plan.tasks = [r.task for r in recorded]
    return old.run_id, plan, recorded, stored


def _from_history(path: Path, inputs: list[Path]) -> tuple[str, Plan, list[Recorded], Optional[dict]]:
    """One history.jsonl on its own (no run directory): its task is the first user message."""
    try:
        turns = recorded_turns(path)
    except ValueError as exc:
        raise ReplayError(str(exc)) from None
    first = next((m for m in (turns[0].request if turns else []) if m.get("role") == "user"), None)
    if first is None or not isinstance(first.get("content"), str):
        raise ReplayError(f"{path}: its first request has no user message; there is no task to replay")
    name = path.name.removesuffix(".jsonl").removesuffix(".history") or "task"
    task = PlannedTask(id=name[:60], prompt=first["content"], inputs=[str(Path(p).resolve()) for p in inputs],
                       model=None, max_turns=None, timeout=None, tools=None)
    return str(path), Plan(name=name[:24], source=None, tasks=[task]), [Recorded(task, turns, {})], None


def _recorded_settings(settings: Settings, stored: Optional[dict], notes: list[str]) -> Settings:
    if stored is None:
        notes.append("recorded by a ga that did not keep its request settings: replayed with this ga's settings "
                     "and worker.second_chance 0")
        return settings.model_copy(update={"worker": settings.worker.model_copy(update=NO_SECOND_CHANCE)})
    try:
        worker = type(settings.worker).model_validate({**settings.worker.model_dump(), **stored.get("worker", {})})
        context = type(settings.context).model_validate({**settings.context.model_dump(), **stored.get("context", {})})
    except ValueError as exc:
        raise ReplayError(f"{REQUEST_SETTINGS}: this ga cannot read the recorded settings ({exc}); "
                          "the run cannot be replayed") from None
    return settings.model_copy(update={"worker": worker, "context": context})


def _fork_point(source: str, recorded: list[Recorded], from_turn: int) -> str:
    if len(recorded) != 1:
        raise ReplayError(f"--from forks one task: name it (ga replay RUN TASK --from {from_turn})")
    turns = len(recorded[0].turns)
    if not 1 <= from_turn <= turns:
        raise ReplayError(f"--from {from_turn}: task {recorded[0].task.id} has turns 1 to {turns}")
    return f"{source}/{recorded[0].task.id}@{from_turn}"


def _recorded_models(plan: Plan, stored: Optional[dict], settings: Settings,
                     tool_mode: Optional[str]) -> dict[Optional[str], ModelConfig]:
    """Every task's model as recorded (its config as the run kept it; else as configured now; else a stand-in:
    a replay calls no model, the config only sizes the context)."""
    configs: dict[Optional[str], ModelConfig] = {}
    for name in {t.model for t in plan.tasks}:
        data = (stored or {}).get("models", {}).get(str(name))
        if data is not None:
            config = ModelConfig.model_validate(data)
        else:
            try:
                config = resolve_model(name, settings)
            except ModelConfigError:
                config = ModelConfig(name=str(name or "recorded"), base_url="http://127.0.0.1:9/replay", model="recorded")
        configs[name] = config.model_copy(update={"fallbacks": [], **({"tool_mode": tool_mode} if tool_mode else {})})
    return configs


def _live_models(plan: Plan, settings: Settings, name: Optional[str],
                 stored: Optional[dict] = None) -> dict[Optional[str], ModelConfig]:
    """A fork's live model for each recorded model: `name`, or the recorded model itself as configured now (a task
    that ran on the run's default model: the default it recorded, not today's)."""
    recorded_default = ((stored or {}).get("worker") or {}).get("model")
    try:
        return {task_model: resolve_model(name or task_model or recorded_default, settings).model_copy(
                    update={"fallbacks": []}) for task_model in {t.model for t in plan.tasks}}
    except ModelConfigError as exc:
        raise ReplayError(str(exc)) from None


def _endpoints_answer(live: dict[Optional[str], ModelConfig]) -> None:
    """The live models' endpoints answer (GET /models), or one line says which does not and nothing starts: a fork
    of a nested run whose parent's model is gone would otherwise retry it turn after turn."""
    for config in {c.base_url: c for c in live.values()}.values():
        try:
            reason = probe(config.base_url)
        except ValueError as exc:
            reason = f"not a URL: {exc}"
        if reason:
            raise ReplayError(f"model {config.name}: endpoint {config.base_url} does not answer ({reason}); start it, "
                              "or pass --model NAME for the live turns, or --no-preflight (nothing was started)")


def _live_name(live: dict[Optional[str], ModelConfig]) -> str:
    return ", ".join(sorted({config.name for config in live.values()}))


def _read_json(path: Path) -> Optional[dict]:
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    except ValueError as exc:
        raise ReplayError(f"{path}: not JSON ({exc}); the run cannot be replayed") from None


# ---- running ----------------------------------------------------------------------------------


class ReplayActor(WorkerActor):
    """The fan-out's actor with a recording in place of each task's model client."""

    def __init__(self, slots: int):
        super().__init__("replay", slots, in_process=True)
        self.models: dict[str, ReplayModel] = {}
        self.live_jobs: dict[str, Job] = {}

    def task_model(self, job: Job, client_id: str) -> Model:
        model = self.models[job.task_id]
        if job.task_id in self.live_jobs:
            model.live = live = super().task_model(self.live_jobs[job.task_id], client_id)
            if isinstance(live, LLMClient):  # text mode re-sends the tool schemas every N requests: count the
                live.requests = model.live_from - 1  # replayed ones, as the recording did
        return model


def _execute(run: RunDir, plan: Plan, recorded: list[Recorded], settings: Settings, models: dict[Optional[str], ModelConfig],
             live: dict[Optional[str], ModelConfig], notes: list[str], *, source: str, keep_going: bool, workers: int,
             origin: Origin, spent: Optional[Usage] = None) -> ReplayRun:
    """Run the recorded tasks into `run` (a new run directory, or the resumed one: `spent` is what its results
    kept had cost), then its summary over every task of `plan`."""
    started = time.time()
    executor = LocalExecutor()  # its tasks' info lines stay off the terminal, as in a fan-out
    driver = Driver(plan, run, settings, {**models}, Nesting(), settings.fanout.max_depth, executor,
                    workers=workers, display="quiet")
    actor = ReplayActor(max(1, workers))
    run.ledger("run_resumed" if spent is not None else "run_started", tasks=len(plan.tasks), todo=len(recorded),
               workers=workers, executor="replay", **origin)
    lock = threading.Lock()

    def one(item: Recorded) -> TaskReplay:
        job = driver.job(item.task, item.attempt)
        if item.commit_key:
            job = job.model_copy(update={"commit_key": item.commit_key})
        if not item.live_from:  # a fan-out nested in its code_run would call a model: it finds none and says so
            job = job.model_copy(update={"env": {**job.env, "GA_MODEL": NO_MODEL}})
        config = models[item.task.model]
        paths = {**item.paths, job.task_dir: TASK_DIR, str(run.path): RUN_DIR}
        if not item.paths:  # a bare history: its workdir was written as WORKDIR
            paths[str(Path(job.task_dir) / "workdir")] = WORKDIR
        model = ReplayModel(item.turns, task_id=item.task.id, tool_mode=config.tool_mode, normalise=Normaliser(paths),
                            config=config, keep_going=keep_going, live_from=item.live_from)
        actor.models[item.task.id] = model
        if item.live_from:
            endpoint = live[item.task.model]
            actor.live_jobs[item.task.id] = job.model_copy(update={"endpoint": endpoint, "model_name": endpoint.name})
        with lock:
            run.ledger("started", item.task.id, attempt=item.attempt,
                       **({"forked_from_turn": item.live_from} if item.live_from else {}))
        with structlog.contextvars.bound_contextvars(task=item.task.id):  # as a fan-out's task: off stderr
            record = actor.run_task(job)
        found = list(model.divergences)
        if not item.live_from and not found:
            found += _after_the_run(item, Path(job.task_dir) / "history.jsonl", record, paths)
        record.usage = model.live_usage  # the recorded turns were paid for when they were recorded
        if item.spent_before.total or item.spent_before.cost:  # a retry in its run: what it spent before stays
            record.usage = model.live_usage + item.spent_before
        if item.live_from:
            note = f"forked at turn {item.live_from}"
            record.reason = f"{record.reason}; {note}" if record.reason else note
        with lock:
            run.add_result(record)
            for divergence in found:
                run.ledger("replay_divergence", item.task.id, turn=divergence.turn, kind=divergence.kind,
                           where=divergence.where)
        return TaskReplay(item.task.id, record.status, item.status, record.turns, len(item.turns), found,
                          model.live_usage, model.replayed_usage, record.spent)

    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="ga-replay-") as pool:
        outcomes = list(pool.map(one, recorded))
    results = [r for r in run.results().values() if r.task_id in {t.id for t in plan.tasks}]
    counts = {s: sum(1 for r in results if r.status == s) for s in ("succeeded", "unverified", "failed", "needs_input", "limit")}
    status, code = run_status(counts, len(plan.tasks), None)
    outcome = ReplayRun(run.run_id, run.path, source, outcomes, notes, origin.get("forked_from"))
    if "replay_of" in origin:
        code = outcome.exit_code
        origin = {**origin, "identical": outcome.identical}
    else:
        outcome.run_exit_code = code
    previous = run.summary() if spent is not None else None
    summary = RunSummary(run_id=run.run_id, name=plan.name, status=status, exit_code=code,
                         started=previous.started if previous else started, finished=time.time(),
                         seconds=round(time.time() - started, 3), workers=workers,
                         tasks=TaskCounts(total=len(plan.tasks), **counts, unfinished=len(plan.tasks) - len(results)),
                         usage=sum((t.live_usage + r.spent_before for t, r in zip(outcomes, recorded)), spent or Usage()),
                         per_task={r.task_id: r.spent for r in results}, **origin)
    run.write_summary(summary)
    run.ledger("run_finished", status=status, exit_code=code)
    return outcome


def _after_the_run(item: Recorded, history: Path, record: TaskRecord,
                   paths: dict[str, str]) -> list[Divergence]:
    """What the requests could not show: the last turn's tool output, and a task that ended elsewhere."""
    normalise = Normaliser(paths)
    now = list(read_jsonl(history))
    for turn, (old, new) in enumerate(zip(item.turns, now, strict=False), 1):
        before = normalise([{"role": "tool", **r} for r in old.tool_results])
        after = normalise([{"role": "tool", **r} for r in new.get("tool_results") or []])
        if before != after:
            pair = next(((b, a) for b, a in zip(before, after, strict=False) if b != a), ({}, {}))
            return [Divergence(item.task.id, turn, "tool", str(pair[0].get("name") or "a tool"),
                               pair[0].get("output"), pair[1].get("output"))]
    if len(now) != len(item.turns):
        return [Divergence(item.task.id, len(now), "end", f"the replay ended after turn {len(now)} "
                           f"({record.status}); the recording went on to turn {len(item.turns)}")]
    if item.status and record.status != item.status:
        return [Divergence(item.task.id, len(now), "end", f"the task ended {record.status}, recorded {item.status}")]
    return []


def last_good_turn(history: Path) -> int:
    """Where to fork a failed task (`--from-last-good`): the turn after the last one whose tool runs all
    succeeded (1 when none did: the whole task runs again), never past the recording's last turn."""
    turns = recorded_turns(history)
    good = [t.turn for t in turns if t.tool_results and all(r.get("ok") for r in t.tool_results)]
    return min(good[-1] + 1, len(turns)) if good else 1
