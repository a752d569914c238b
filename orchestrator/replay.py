"""`ga replay`: run a recorded run's tasks again from their histories, into a new run directory.

Every task runs as it did in the fan-out (same task settings, tools, check, inputs copied from where
the spec says, code_run sandboxed), but its model is a `worker.replaymodel.ReplayModel`: the recorded
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
from typing import Any, Optional

import yaml

from configs import Settings
from memory_shared.fsutil import atomic_write_text
from orchestrator.actor import WorkerActor
from orchestrator.ledger import RunDir, new_run_id, read_jsonl
from orchestrator.local import LocalExecutor
from orchestrator.records import Job, RunSummary, TaskCounts, TaskRecord, Usage
from orchestrator.spec import Plan, PlannedTask
from worker.replaymodel import Divergence, Normaliser, RecordedTurn, ReplayModel, recorded_turns

REQUEST_SETTINGS = "request_settings.json"
FORMAT = 1
TASK_DIR, RUN_DIR, WORKDIR = "<task dir>", "<run dir>", "WORKDIR"  # WORKDIR: how tests/real_model/ wrote theirs
NO_SECOND_CHANCE = {"second_chance": 0}


class ReplayError(ValueError):
    """The run cannot be replayed as asked; str() is one line saying why and what to do."""


def write_request_settings(run_path: Path, settings: Settings, models: dict[Optional[str], Any]) -> None:
    """What shapes a run's requests besides its spec: the worker and context settings and each model's
    config (the context window sizes the context; key *names* only, never a key)."""
    data = {"format": FORMAT, "worker": settings.worker.model_dump(mode="json"),
            "context": settings.context.model_dump(mode="json"),
            "models": {str(name): config.model_dump(mode="json") for name, config in models.items()}}
    atomic_write_text(Path(run_path) / REQUEST_SETTINGS, json.dumps(data, indent=1) + "\n")


@dataclass
class Recorded:
    """One task as it was recorded: its plan entry, its turns, and what its paths must be read as."""

    task: PlannedTask
    turns: list[RecordedTurn]
    paths: dict[str, str]  # recorded path -> token (see Normaliser)
    status: Optional[str] = None
    commit_key: Optional[str] = None  # its memory commit was made then: the replay must not make it again


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


@dataclass
class ReplayRun:
    run_id: str
    run_dir: Path
    source: str
    tasks: list[TaskReplay]
    notes: list[str]
    forked_from: Optional[str] = None

    @property
    def identical(self) -> bool:
        return not any(t.divergences for t in self.tasks)

    @property
    def exit_code(self) -> int:
        if self.forked_from:
            return 0 if all(t.status == "succeeded" for t in self.tasks) else 1
        return 0 if self.identical else 1


def replay(ref: str, task_ids: Optional[list[str]] = None, *, settings: Settings, runs_dir: Path,
           out: Optional[Path] = None, keep_going: bool = False, from_turn: Optional[int] = None,
           model: Optional[str] = None, workers: int = 4, tool_mode: Optional[str] = None,
           inputs: Optional[list[Path]] = None) -> ReplayRun:
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
    models, live = _models(plan, stored, settings, model, tool_mode, fork is not None)
    runs_root = Path(out) if out else Path(runs_dir)
    spec = {**plan.to_dict(), **({"forked_from": fork, "fork_model": model or plan.tasks[0].model} if fork
                                 else {"replay_of": source})}
    run_id = new_run_id(("fork-" if fork else "replay-") + plan.name)
    run = RunDir.create(runs_root, run_id, spec)
    try:
        write_request_settings(run.path, settings, {name: config for name, config in models.items()})
        return _execute(run, plan, recorded, settings, models, live, notes, source=source, fork=fork,
                        from_turn=from_turn or 0, keep_going=keep_going, workers=workers)
    finally:
        run.close()


# ---- what was recorded ------------------------------------------------------------------------


def _from_run(ref: str, runs_dir: Path, task_ids: Optional[list[str]]) -> tuple[str, Plan, list[Recorded], Optional[dict]]:
    try:
        old = RunDir.existing(runs_dir, ref)
    except FileNotFoundError as exc:
        raise ReplayError(str(exc)) from None
    try:
        plan = Plan.from_dict(old.spec())
    except (TypeError, KeyError, ValueError, yaml.YAMLError) as exc:
        raise ReplayError(f"{old.path / 'spec.yaml'}: written by a ga whose spec this one cannot read "
                          f"({type(exc).__name__}: {exc}); that run cannot be replayed") from None
    known = {t.id: t for t in plan.tasks}
    unknown = [t for t in task_ids or [] if t not in known]
    if unknown:
        raise ReplayError(f"run {old.run_id} has no task {', '.join(unknown)}; its tasks: {', '.join(known)}")
    results = old.results()
    recorded = []
    for task_id in task_ids or list(known):
        history = old.task_dir(task_id) / "history.jsonl"
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


def _models(plan: Plan, stored: Optional[dict], settings: Settings, live_name: Optional[str], tool_mode: Optional[str],
            forking: bool) -> tuple[dict[Optional[str], Any], Any]:
    """The recorded model of every task (its config as recorded when the run kept it) and, for a fork, the
    live model's config."""
    from worker.models import ModelConfig, ModelConfigError, resolve_model

    configs: dict[Optional[str], Any] = {}
    for name in {t.model for t in plan.tasks}:
        data = (stored or {}).get("models", {}).get(str(name))
        if data is not None:
            config = ModelConfig.model_validate(data)
        else:
            try:
                config = resolve_model(name, settings)
            except ModelConfigError:  # not needed to replay: only its window sizes the context (unknown here)
                config = ModelConfig(name=str(name or "recorded"), base_url="http://127.0.0.1:9/replay", model="recorded")
        updates: dict[str, Any] = {"fallbacks": []}
        if tool_mode:
            updates["tool_mode"] = tool_mode
        configs[name] = config.model_copy(update=updates)
    live = None
    if forking:
        name = live_name or plan.tasks[0].model
        try:
            live = resolve_model(name, settings).model_copy(update={"fallbacks": []})
        except ModelConfigError as exc:
            raise ReplayError(str(exc)) from None
    return configs, live


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

    def task_model(self, job: Job, client_id: str) -> Any:
        model = self.models[job.task_id]
        if job.task_id in self.live_jobs:
            model.live = super().task_model(self.live_jobs[job.task_id], client_id)
            if isinstance(getattr(model.live, "requests", None), int):  # text mode re-sends the tool schemas every
                model.live.requests = model.live_from - 1  # N requests: count the replayed ones, as the recording did
        return model


def _execute(run: RunDir, plan: Plan, recorded: list[Recorded], settings: Settings, models: dict[Optional[str], Any],
             live: Any, notes: list[str], *, source: str, fork: Optional[str], from_turn: int, keep_going: bool,
             workers: int) -> ReplayRun:
    from orchestrator.driver import Driver, run_status
    from orchestrator.fanout import Nesting

    started = time.time()
    executor = LocalExecutor()  # its workers' info lines stay off the terminal, as in a fan-out
    driver = Driver(plan, run, settings, models, Nesting(), settings.fanout.max_depth, executor,
                    workers=workers, display="quiet")
    actor = ReplayActor(max(1, workers))
    run.ledger("run_started", tasks=len(recorded), todo=len(recorded), workers=workers, executor="replay",
               **({"forked_from": fork} if fork else {"replay_of": source}))
    lock = threading.Lock()

    def one(item: Recorded) -> TaskReplay:
        job = driver.job(item.task, 1)
        if item.commit_key:
            job = job.model_copy(update={"commit_key": item.commit_key})
        config = models[item.task.model]
        paths = {**item.paths, job.task_dir: TASK_DIR, str(run.path): RUN_DIR}
        if not item.paths:  # a bare history: its workdir was written as WORKDIR
            paths[str(Path(job.task_dir) / "workdir")] = WORKDIR
        model = ReplayModel(item.turns, task_id=item.task.id, tool_mode=config.tool_mode, normalise=Normaliser(paths),
                            config=config, keep_going=keep_going, live_from=from_turn if fork else 0)
        actor.models[item.task.id] = model
        if fork:
            actor.live_jobs[item.task.id] = job.model_copy(update={"endpoint": live, "model_name": live.name})
        with lock:
            run.ledger("started", item.task.id, attempt=1)
        record = actor.run_task(job)
        found = list(model.divergences)
        if not fork and not found:
            found += _after_the_run(item, Path(job.task_dir) / "history.jsonl", record, paths)
        record.usage = model.live_usage  # the recorded turns were paid for when they were recorded
        if fork:
            record.reason = f"{record.reason}; forked from {fork}" if record.reason else f"forked from {fork}"
        with lock:
            run.add_result(record)
            for divergence in found:
                run.ledger("replay_divergence", item.task.id, turn=divergence.turn, kind=divergence.kind,
                           where=divergence.where)
        return TaskReplay(item.task.id, record.status, item.status, record.turns, len(item.turns), found,
                          model.live_usage, model.replayed_usage)

    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="ga-replay-") as pool:
        outcomes = list(pool.map(one, recorded))
    results = list(run.results().values())
    counts = {s: sum(1 for r in results if r.status == s) for s in ("succeeded", "unverified", "failed", "needs_input", "limit")}
    status, code = run_status(counts, len(results), None)
    usage = sum((t.live_usage for t in outcomes), Usage())
    outcome = ReplayRun(run.run_id, run.path, source, outcomes, notes, fork)
    if not fork:
        code = outcome.exit_code
    extra = {"forked_from": fork, "fork_model": live.name} if fork else {"replay_of": source,
                                                                          "identical": outcome.identical}
    summary = RunSummary(run_id=run.run_id, name=plan.name, status=status, exit_code=code, started=started,
                         finished=time.time(), seconds=round(time.time() - started, 3), workers=workers,
                         tasks=TaskCounts(total=len(recorded), **counts), usage=usage,
                         per_task={r.task_id: r.usage for r in results}, **extra)
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
            changed = next((b.get("name") or "a tool" for b, a in zip(before, after, strict=False) if b != a), "a tool")
            return [Divergence(item.task.id, turn, "tool", str(changed))]
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
