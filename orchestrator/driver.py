"""One run from start to summary: governors, the leased pool, the map, the reduce, accounting."""
from __future__ import annotations

import os
import threading
import time
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import structlog

from configs import Settings
from memory_shared import fsutil
from orchestrator.executor import Executor, MemoryPlacement
from orchestrator.exitcodes import run_exit, task_done
from orchestrator.governor import endpoint_key
from orchestrator.inputfiles import read_input
from orchestrator.ledger import RunDir, StoredResults
from orchestrator.maploop import MapLoop, MapOutcome
from orchestrator.records import (
    BudgetLimits,
    EndpointGovernor,
    Fallback,
    Job,
    MemoryKept,
    ReduceResult,
    Run,
    RunStatus,
    RunStop,
    RunSummary,
    TaskCounts,
    TaskRecord,
    Usage,
)
from orchestrator.reduce import Reducer
from orchestrator.spec import MEMORY_WRITE_TOOL, Plan, PlannedTask
from orchestrator.views.progress import Display, choose_mode
from orchestrator.views.runlist import resume_command
from worker import telemetry
from worker.modelconfig import ModelConfig, nested_model_env
from worker.tools import REGISTRY

log = structlog.get_logger("ga.fanout")
FINAL_STATUSES = ("succeeded", "unverified", "failed", "needs_input", "limit")
STOPPED: dict[RunStop, tuple[RunStatus, int]] = {  # run status, exit code
    RunStop.interrupted: ("interrupted", 130), RunStop.paused: ("paused", 1), RunStop.budget: ("budget_spent", 1)}


class Driver:
    def __init__(self, plan: Plan, run: RunDir, settings: Settings, models: dict[Optional[str], ModelConfig],
                 nest: Nesting, max_depth: int, executor: Executor, *, workers: int, display: Optional[str],
                 cancel: Optional[threading.Event] = None):
        self.plan, self.run, self.settings, self.models, self.nest = plan, run, settings, models, nest
        self.max_depth, self.executor, self.workers = max_depth, executor, max(1, workers)
        self.cluster = executor.info
        self._settings_by_limits: dict[tuple, Settings] = {}  # (max_turns, max_tokens, max_cost) -> a task's settings
        self.cancel = cancel  # a threading.Event: set when a nested run must stop (its code_run ended)
        self.display_mode = choose_mode(display)
        self.retries = plan.retries if plan.retries is not None else settings.fanout.retries
        self.governors: dict[str, EndpointGovernor] = {}  # model name -> the endpoint's governor (governor.py)
        self.memory = MemoryPlacement()

    # ---- the run ----

    def execute(self, todo: list[PlannedTask], spent: Usage, resumed: bool) -> Run:
        """The run, as the trace's `run` span (telemetry.otlp_endpoint); a nested run joins its parent's."""
        with telemetry.span(self.settings, f"run {self.plan.name}", attributes={
                "ga.run.id": self.run.run_id, "ga.run.tasks": len(todo), "ga.run.depth": self.nest.depth,
                "ga.run.parent_task": self.nest.parent_task}) as current:
            run = self._execute(todo, spent, resumed)
            usage = run.summary.usage
            telemetry.annotate(current, {"ga.run.status": run.status, "gen_ai.usage.input_tokens": usage.prompt,
                                         "gen_ai.usage.output_tokens": usage.completion},
                               error="" if run.status == "succeeded" else run.status)
        telemetry.flush()
        return run

    def _execute(self, todo: list[PlannedTask], spent: Usage, resumed: bool) -> Run:
        started = time.time()
        plan, run = self.plan, self.run
        run.ledger("run_resumed" if resumed else "run_started", tasks=len(plan.tasks), todo=len(todo),
                   workers=self.workers, address=self.cluster["address"], executor=self.executor.kind,
                   depth=self.nest.depth,
                   parent_task=self.nest.parent_task, session=self.nest.session or os.environ.get("GA_SESSION"))
        self._start_governors()
        self._choose_memory()
        tally = self._tally()  # what earlier runs of this directory finished; the map loop adds its own
        display = Display(self.display_mode, plan.name, len(plan.tasks))
        pool = self.executor.pool(run.run_id, min(self.workers, max(1, len(todo))), self.settings.fanout, run.path)
        reduce_result = None
        try:
            loop = MapLoop(
                pool, run, self.job, retries=self.retries, timeout_of=self.timeout_of,
                budget_tokens=plan.budget_tokens, budget_cost=plan.budget_cost, spent=spent, display=display,
                cancel=self.cancel, carve=self.nest.subtree, announce=True, record=lambda r: self._record(r, tally),
                done_before=tally.finished, failed_before=tally.finished - tally.counts["succeeded"])
            outcome = loop.run_all(todo)
            if plan.reduce and outcome.stop is None:
                display.update(note="reduce")
                reduce_result = Reducer(self, pool, display).run(self._ordered_results())
                outcome.usage += reduce_result.usage
        finally:
            display.close()
            pool.close()
        tally.in_order([t.id for t in plan.tasks])
        summary = self._summary(outcome, tally, reduce_result, started, resumed)
        results = StoredResults(run.path, tally.finished)  # read when asked for: the records are not held
        judged = Run(run.run_id, run.path, summary.status, summary.exit_code, results, summary, reduce_result,
                     outcome.unfinished)
        # the one rule, as `ga fanout` exits
        summary = summary.model_copy(update={"exit_code": run_exit(judged, tasks_done=tally.all_done)})
        run.write_summary(summary)
        run.ledger("run_finished", status=summary.status, exit_code=summary.exit_code)
        run.event("run_finished", status=summary.status, seconds=summary.seconds)
        run.close()
        return Run(run.run_id, run.path, summary.status, summary.exit_code, results, summary, reduce_result,
                   outcome.unfinished)

    def _ordered_results(self) -> list[TaskRecord]:
        """Every finished task's record in the plan's order (the reduce reads them all)."""
        found = self.run.results()
        return [found[t.id] for t in self.plan.tasks if t.id in found]

    def _tally(self) -> Tally:
        """What the summary says of the tasks finished before this run started (an earlier run of this directory),
        read from results.jsonl a record at a time, none kept; the map loop's own are added as written (`_record`)."""
        tally = Tally()
        planned = {t.id for t in self.plan.tasks}
        for record in self.run.each_result():
            if record.task_id in planned:
                tally.add(record)
        return tally

    def _record(self, record: TaskRecord, tally: Tally) -> bool:
        """A task the map loop finished: its record written, exactly once (False if already there), and counted."""
        if not self.run.add_result(record):
            return False
        tally.add(record)
        return True

    def _start_governors(self) -> None:
        for name, config in self.models.items():
            key = endpoint_key(config.base_url, config.model)
            self.governors[str(name)] = self.executor.governor(key, self.settings.fanout)

    def _choose_memory(self) -> None:
        self.memory = self.executor.memory_mode(self.settings)

    # ---- jobs ----

    def timeout_of(self, task: PlannedTask) -> Optional[float]:
        return task.timeout or self.settings.fanout.timeout

    def job(self, task: PlannedTask, attempt: int, base: Optional[Path] = None, step: Optional[str] = None) -> Job:
        """What an actor needs to run one attempt of a task; `step` names a reduce step in its memory commit key."""
        config = self.models[task.model]
        shipped = self.memory.mode == "service"  # no shared filesystem: inputs and outputs travel with the job
        secrets = {config.api_key_env: os.environ[config.api_key_env]} if config.api_key_env and os.environ.get(
            config.api_key_env) else {}
        return Job(
            task_id=task.id, attempt=attempt, prompt=task.prompt, inputs=task.inputs, input_links=not self.nest.depth,
            commit_key=f"{self.run.run_id}/{step or task.id}/{attempt}",
            task_dir=str((base or self.run.path / "tasks") / task.id), settings=self._task_settings(task),
            model_name=task.model, endpoint=config, governor=self.governors.get(str(task.model)),
            timeout=self.timeout_of(task),
            fallbacks=[Fallback(model_name=name, endpoint=self.models[name], governor=self.governors.get(name))
                       for name in config.fallbacks],
            tools=self.tools_for(task), check=task.check, memory=self.memory.mode,
            memory_service=self.memory.service, memory_replica=self.memory.replica, secrets=secrets,
            return_files=shipped, input_files=self._input_files(task) if shipped else {},
            env={**self.nest.child_env(self.cluster["address"], self.run.path, task.id, self.max_depth,
                                       self.settings.home_dir), **nested_model_env(task.model, config),
                 **telemetry.child_env()},
        )

    def _input_files(self, task: PlannedTask) -> dict[str, bytes]:
        """The task's inputs, sent with its job (no shared disk), read as the actor would copy them."""
        with closing(fsutil.Folder("/")) as root:
            return {path: read_input(root, path, follow_link=not self.nest.depth) for path in task.inputs}

    def _task_settings(self, task: PlannedTask) -> Settings:
        """The run's settings with the task's limits, and its tasks file's sandbox block over the config's. Tasks
        with the same limits and no sandbox block share one copy (nothing downstream changes a job's settings)."""
        key = (task.max_turns, task.max_tokens, task.max_cost)
        if not task.sandbox and key in self._settings_by_limits:
            return self._settings_by_limits[key]
        settings = self.settings.model_copy(deep=True)
        worker = settings.worker
        if task.max_turns:
            worker.max_turns = task.max_turns
        if task.max_tokens:
            worker.max_tokens = task.max_tokens
        if task.max_cost:
            worker.max_cost = task.max_cost
        if task.sandbox:  # its writable paths are added to the config's
            extra = task.sandbox.get("writable", [])
            settings.sandbox = settings.sandbox.model_validate({
                **settings.sandbox.model_dump(), **task.sandbox, "writable": [*settings.sandbox.writable, *extra]})
        else:
            self._settings_by_limits[key] = settings
        return settings

    def tools_for(self, task: PlannedTask) -> Optional[list[str]]:
        names = [n for n in (task.tools if task.tools is not None else list(REGISTRY)) if n in REGISTRY]
        if not self.plan.memory_commit:
            names = [n for n in names if n != MEMORY_WRITE_TOOL]
        return names if (task.tools is not None or not self.plan.memory_commit) else None

    # ---- the summary ----

    def _summary(self, outcome: MapOutcome, tally: Tally, reduce_result: Optional[ReduceResult],
                 started: float, resumed: bool) -> RunSummary:
        counts = tally.counts
        total = len(self.plan.tasks)
        unfinished = total - tally.finished
        status, code = STOPPED[outcome.stop] if outcome.stop else run_status(counts, total, reduce_result)
        note = ""
        resume = resume_command(self.run.path, Path(self.settings.fanout.runs_dir))
        if outcome.stop == RunStop.budget:
            note = (f"budget spent ({_budget_text(self.plan, outcome.usage)}): {unfinished} task(s) not started; "
                    "raise the budget in the tasks file and resume with "
                    f"`{resume_command(self.run.path, Path(self.settings.fanout.runs_dir), 'FILE')}`")
        elif outcome.stop == RunStop.paused:
            note = f"the model endpoint kept refusing requests: run paused; resume later with `{resume}`"
        elif outcome.stop == RunStop.interrupted:
            note = f"interrupted: {unfinished} task(s) unfinished; resume with `{resume}`"
        elif unfinished:  # a person stopped tasks (`ga runs stop RUN TASK`): the run goes on when resumed
            status, code = STOPPED[RunStop.interrupted]
            note = f"{unfinished} task(s) stopped, left to resume: `{resume}`"
        governors = []
        for governor in {id(g): g for g in self.governors.values()}.values():
            try:
                governors.append(governor.snapshot())
            except Exception:  # noqa: BLE001  (reporting only)
                pass
        previous = self.run.summary()
        return RunSummary(
            run_id=self.run.run_id, name=self.plan.name, status=status, exit_code=code,
            started=previous.started if resumed and previous else started, finished=time.time(),
            seconds=round(time.time() - started, 3), depth=self.nest.depth, parent_task=self.nest.parent_task,
            address=self.cluster["address"], workers=self.workers,
            tasks=TaskCounts(total=total, **counts, unfinished=unfinished),
            usage=outcome.usage, per_task=tally.per_task, per_worker=outcome.per_worker, nested_runs=tally.nested_runs,
            stop_reason=outcome.stop, stop_note=note,
            budget=BudgetLimits(tokens=self.plan.budget_tokens, cost=self.plan.budget_cost),
            reduce=reduce_result.model_copy(update={"answer": None}) if reduce_result else None,
            governors=governors, memory=self.memory.mode,
            memory_kept=tally.memory_kept,
        )


@dataclass
class Tally:
    """The finished tasks as the summary counts them, added a record at a time (the records themselves are not
    kept: 10,000 of them were 31 MB at the end of a run)."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FINAL_STATUSES, 0))
    finished: int = 0
    per_task: dict[str, Optional[Usage]] = field(default_factory=dict)
    nested_runs: int = 0
    memory_kept: dict[str, MemoryKept] = field(default_factory=dict)
    all_done: bool = True  # every record done by the exit rule (orchestrator/exitcodes.py), so it need not read them

    def add(self, record: TaskRecord) -> None:
        self.finished += 1
        self.all_done = self.all_done and task_done(record)
        if record.status in self.counts:
            self.counts[record.status] += 1
        self.per_task[record.task_id] = record.spent
        self.nested_runs += record.nested_usage.runs if record.nested_usage else 0
        if record.memory:
            memory = record.memory
            kept: MemoryKept = {"committed": len(memory.get("committed") or []),
                                "proposed": len(memory.get("proposed") or []),
                                "refused": len(memory.get("refused") or [])}
            if memory.get("proposal"):
                kept["proposal"] = memory["proposal"]
            self.memory_kept[record.task_id] = kept

    def in_order(self, task_ids: list[str]) -> None:
        """The per-task maps in the plan's order, as summary.json always listed them (not the order they finished)."""
        self.per_task = {i: self.per_task[i] for i in task_ids if i in self.per_task}
        self.memory_kept = {i: self.memory_kept[i] for i in task_ids if i in self.memory_kept}


def run_status(counts: dict[str, int], total: int, reduce_result: Optional[ReduceResult]) -> tuple[RunStatus, int]:
    """A finished run: "succeeded" (exit 0) only when every task and the reduce succeeded; "unverified"
    (exit 1) when nothing failed but some answers are not backed by a successful tool run or check;
    otherwise "failed" (exit 1). Unattended callers fail closed on anything but 0."""
    reduce_status = reduce_result.status if reduce_result else "succeeded"
    if counts.get("succeeded", 0) == total and reduce_status == "succeeded":
        return "succeeded", 0
    if counts.get("succeeded", 0) + counts.get("unverified", 0) == total and reduce_status in ("succeeded", "unverified"):
        return "unverified", 1
    return "failed", 1


def _budget_text(plan: Plan, usage: Usage) -> str:
    parts = []
    if plan.budget_tokens:
        parts.append(f"{usage.total:,} of {plan.budget_tokens:,} tokens")
    if plan.budget_cost:
        parts.append(f"${usage.cost:.4f} of ${plan.budget_cost:.4f}")
    return ", ".join(parts)


# ---- Where a fan-out stands: top level (depth 0), or inside a task of a parent run (a nested run asked for by
# that task's code_run), and what a task's worker keeps for the nested runs it may ask for.

@dataclass
class Nesting:
    """Where this fan-out stands: top level (depth 0) or inside a task of a parent run."""

    depth: int = 0
    address: Optional[str] = None
    parent_run_dir: Optional[Path] = None
    parent_task: Optional[str] = None
    max_depth: Optional[int] = None
    session: Optional[str] = None  # the `ga run`/`ga chat` session whose task asked for this run
    subtree: bool = False  # asked for by a task (serve_nested): its budget is what the task held for it, carved

    @classmethod
    def from_env(cls, env: dict[str, str]) -> "Nesting":
        """Where a run asked for by a task stands, from that task's environment (Driver.job sets it)."""
        depth = int(env.get("GA_DEPTH") or 0)
        if not depth:
            return cls(session=env.get("GA_SESSION") or None)
        return cls(depth, env.get("GA_RAY_ADDRESS") or None,
                   Path(env["GA_RUN_DIR"]) if env.get("GA_RUN_DIR") else None, env.get("GA_PARENT_TASK") or None,
                   int(env["GA_MAX_DEPTH"]) if env.get("GA_MAX_DEPTH") else None)

    def limit(self, own: int) -> int:
        return own if self.max_depth is None else min(own, self.max_depth)

    def runs_dir(self) -> Optional[Path]:
        if self.parent_run_dir and self.parent_task:
            return self.parent_run_dir / "tasks" / self.parent_task / "runs"
        return None

    def child_env(self, address: Optional[str], run_dir: Path, task_id: str, max_depth: int,
                  home: Path) -> dict[str, str]:
        """What a task's worker keeps for the nested runs it may ask for (never given to its scripts' sandbox)."""
        cluster = {"GA_RAY_ADDRESS": address, "RAY_ADDRESS": address} if address else {}
        return {"GA_RUN_DIR": str(run_dir), "GA_PARENT_TASK": task_id, "GA_DEPTH": str(self.depth + 1),
                "GA_MAX_DEPTH": str(max_depth), "GA_HOME": str(home), **cluster}
