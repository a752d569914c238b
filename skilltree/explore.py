"""One exploration cycle: plan -> fan out -> collect reports -> consolidate (`ga explore --once`).

1. Plan on the memory HEAD (skilltree.planner): K candidates proposed, judged, scored (§6; ranked
   with the demand term under planner.rule: demand, skilltree.demand), a batch
   covering 4+ categories selected. Usage comes from the memory access statistics.
2. Fan the batch out (orchestrator.fanout): one task per selected candidate, each in its own
   temporary workdir (the fan-out's tasks/<id>/workdir), told by prompts/explore_task.md to
   research, prototype, verify and write report.md. Workers cannot write memory (memory.commit off).
3. Collect and verify each report (skilltree.verify), then consolidate each task in its own atomic
   commit (skilltree.consolidate). A cycle that files no skill (every task failed or stayed
   unverified; a task filed as a skill before counts) ends `no-skill-filed`, not `consolidated`.

Run directory (one fan-out run directory, docs/design.md §5, with two more files):
    plan.json      every candidate with its scores, the selected batch (skilltree.plan)
    explore.json   the cycle: model, the tasks (plan values per task id), spec, planner usage, the
                   fan-out's status and usage, each task's consolidation outcome, totals
The run directory is created (with spec.jsonl, plan.json, explore.json) before any worker starts, and
the fan-out then runs as a resume of it; so a crashed cycle is finished with `resume_cycle`, and
`consolidate_run` may be re-run on any run: it never files a task twice.

Tokens and cost of a cycle: the planner's model calls plus the fan-out run's accounting.
"""
from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Optional

import structlog

from configs import Settings
from memory_shared import AccessLog, MemoryStore, StoreHandle
from memory_shared.fsutil import atomic_write_text
from memory_shared.jsontypes import JSONObject
from orchestrator.fanout import FanoutError, build_plan, fanout
from orchestrator.ledger import RunDir, new_run_id
from orchestrator.records import TaskRecord, Usage
from skilltree.consolidate import Consolidated, TaskPlan, consolidate_task
from skilltree.daemon import CycleRecord
from skilltree.plan import ExplorationPlan, write_plan
from skilltree.planner import PROMPTS, plan_exploration
from skilltree.reports import REPORTS_DIR, ExplorationReport, load_reports
from skilltree.tree import load, slugify, utc
from skilltree.usage import recent_usage, usage
from skilltree.verify import collect
from worker.model import LLMClient
from worker.modelconfig import SHIPPED_FILE, ModelConfigError, resolve_model
from worker.runlog import run_log

if TYPE_CHECKING:
    from worker.model import ChatMessage, Model, Reply, ToolSchema
    from worker.modelconfig import ModelConfig

log = structlog.get_logger("skilltree.explore")
CYCLE_FILE = "explore.json"
EXPLORE_TOOLS = ["file_read", "file_write", "file_patch", "code_run", "web_scan", "web_execute_js",
                 "update_working_checkpoint"]  # no ask_user (nobody is there), no memory writes
NO_SKILL = "no-skill-filed"  # a cycle whose tasks all failed or stayed unverified: `ga explore` exits 1
TASK_TIMEOUT = 1800.0  # seconds per exploration task when fanout.timeout is not set


class ExploreError(ValueError):
    """A user-caused problem (model, run id, budget); str() is one line."""


@dataclass
class CycleResult:
    run_id: str
    run_dir: Path
    status: str                       # consolidated, no-skill-filed, nothing-planned, over-budget, stopped, ran
    plan: Optional[ExplorationPlan] = None
    tasks: list[TaskPlan] = field(default_factory=list)
    outcomes: list[Consolidated] = field(default_factory=list)
    # calls, tokens, cost; and status, usage: as explore.json holds them (an older ga's too)
    planner: JSONObject = field(default_factory=dict)
    fanout: JSONObject = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        return int(self.planner.get("tokens", 0)) + int((self.fanout.get("usage") or {}).get("total", 0))

    @property
    def cost(self) -> float:
        return float(self.planner.get("cost", 0.0)) + float((self.fanout.get("usage") or {}).get("cost", 0.0))

    def counts(self) -> dict[str, int]:
        counted: dict[str, int] = {}
        for item in self.outcomes:
            counted[item.outcome] = counted.get(item.outcome, 0) + 1
        return counted

    def record(self) -> CycleRecord:
        """What the daemon logs and adds to the day's spend."""
        return {"run_id": self.run_id, "run_dir": str(self.run_dir), "status": self.status, "tokens": self.tokens,
                "cost": round(self.cost, 6), "outcomes": self.counts()}


class CountingModel:
    """A worker.model.Model that adds up the usage of every call (the planner's share of the spend)."""

    def __init__(self, model: Model):
        self.model = model
        self.calls = 0
        self.used = Usage()

    @property
    def config(self) -> Optional[ModelConfig]:
        return self.model.config

    def chat(self, messages: list[ChatMessage], tools: list[ToolSchema]) -> Reply:
        reply = self.model.chat(messages, tools)
        self.calls += 1
        self.used += reply.usage
        return reply

    def usage(self) -> dict[str, float]:
        return {"calls": self.calls, "tokens": self.used.total, "cost": round(self.used.cost, 6)}


def open_store(settings: Settings) -> MemoryStore:
    return MemoryStore(settings.memory_root, create=True, l1_max_lines=settings.memory.l1_max_lines,
                       l1_max_chars=settings.memory.l1_max_chars)


def model_for_tasks(name: Optional[str]) -> Optional[str]:
    """`scripted:FILE` with FILE made absolute (the fan-out reads a dict spec's paths from the cwd)."""
    if not name or not name.startswith("scripted:"):
        return name
    path = Path(name[len("scripted:"):]).expanduser()
    if not path.is_absolute():
        shipped = SHIPPED_FILE.parent.parent / path
        path = path.resolve() if path.is_file() or not shipped.is_file() else shipped
    return f"scripted:{path}"


def planner_model(name: Optional[str], settings: Settings) -> CountingModel:

    try:
        return CountingModel(LLMClient(resolve_model(name, settings)))
    except ModelConfigError as exc:
        raise ExploreError(str(exc)) from None


def task_prompt(task: TaskPlan) -> str:
    hint = f"{slugify(task.target_skill).replace('-', '_')}.py"
    return Template((PROMPTS / "explore_task.md").read_text(encoding="utf-8")).substitute(
        title=task.title, category=task.category, skill=task.target_skill, description=task.description,
        script_hint=hint)


def tasks_of(plan: ExplorationPlan) -> list[TaskPlan]:
    tasks = []
    for n, item in enumerate(plan.selected, 1):
        target = item.target_skill_id or slugify(item.candidate.target_skill)
        tasks.append(TaskPlan(task_id=f"{n}-{slugify(target)}"[:80], title=item.candidate.title, category=item.category,
                              target_skill=target, description=item.candidate.description, predicted=item.score,
                              vector=item.vector))
    return tasks


def explore_spec(tasks: list[TaskPlan], model: Optional[str], settings: Settings,
                 budget_cost: Optional[float]) -> dict[str, object]:
    spec: dict[str, object] = {
        "version": 1, "name": "explore",
        "defaults": {"tools": EXPLORE_TOOLS, "timeout": settings.fanout.timeout or TASK_TIMEOUT,
                     **({"model": model} if model else {})},
        "tasks": [{"id": t.task_id, "prompt": task_prompt(t)} for t in tasks],
        "memory": {"commit": False},
        "concurrency": max(1, min(len(tasks), settings.fanout.concurrency)),
    }
    if budget_cost is not None:
        spec["budget"] = {"cost": budget_cost}
    return spec


def _write_record(run_dir: Path, record: JSONObject) -> None:
    atomic_write_text(run_dir / CYCLE_FILE, json.dumps(record, indent=2, default=str) + "\n")


def read_record(run_dir: Path) -> JSONObject:
    """A cycle's explore.json, as written (by this ga or an older one), unchecked."""
    path = Path(run_dir) / CYCLE_FILE
    if not path.is_file():
        raise ExploreError(f"{run_dir}: no {CYCLE_FILE}; this is not an exploration run (see `ga runs list`)")
    return json.loads(path.read_text(encoding="utf-8"))


def find_run(runs_dir: Path, run: str) -> Path:
    """An exploration run directory by id (in runs_dir) or by path."""
    path = Path(run) if Path(run).is_dir() else Path(runs_dir) / run
    if not (path / CYCLE_FILE).is_file():
        raise ExploreError(f"no exploration run '{run}' in {runs_dir}; pass a run id from `ga runs list` or its directory")
    return path.resolve()


def run_cycle(settings: Settings, *, model_name: Optional[str] = None, now: Optional[datetime] = None,
              runs_dir: Optional[Path] = None, candidates: Optional[int] = None, batch_size: Optional[int] = None,
              budget_cost: Optional[float] = None, stop: Optional[threading.Event] = None,
              display: Optional[str] = "quiet", address: Optional[str] = None, consolidate: bool = True) -> CycleResult:
    """Plan, fan out, collect, consolidate (module doc). `budget_cost` caps the cycle's spend (USD):
    the fan-out gets what the planner left of it. `stop` set before the fan-out leaves a resumable run;
    consolidate=False stops after the fan-out (file the results later with `consolidate_run`)."""
    pinned, now = now, utc(now or datetime.now(timezone.utc))  # a pinned clock also dates the consolidation
    runs_dir = Path(runs_dir or settings.fanout.runs_dir).resolve()
    name = model_for_tasks(model_name or settings.worker.model)
    model = planner_model(name, settings)
    store = open_store(settings)
    with store.snapshot() as snap:
        tree = load(snap.path)
        recent = load_reports(snap.path / REPORTS_DIR, limit=10)
        generation = snap.generation
    access = AccessLog(settings.memory_root)
    used = usage(tree, access)
    in_window, trend = recent_usage(tree, access, now, settings.planner)
    plan = plan_exploration(model, tree, used, now=now, candidates=candidates or settings.explore.candidates,
                            batch_size=batch_size or settings.explore.batch_size, reports=recent,
                            generation=generation, planner_settings=settings.planner, recent=in_window, trend=trend)
    run_id = new_run_id("explore")
    run_dir = runs_dir / run_id
    tasks = tasks_of(plan)
    planner_name = model.config.name if model.config is not None else ""
    record: JSONObject = {"run_id": run_id, "created": now.isoformat(), "model": name or planner_name,
                              "generation": generation, "tasks": [t.to_dict() for t in tasks],
                              "planner": model.usage(), "fanout": {}, "outcomes": {}, "status": "planned"}
    result = CycleResult(run_id, run_dir, "planned", plan, tasks, planner=model.usage())
    remaining = None if budget_cost is None else budget_cost - model.used.cost
    if not tasks or (remaining is not None and remaining <= 0):
        result.status = "nothing-planned" if not tasks else "over-budget"
        run_dir.mkdir(parents=True)
        write_plan(run_dir, plan)
        _write_record(run_dir, {**record, "status": result.status})
        log.warning("explore.no_fanout", run=run_id, status=result.status)
        return result
    spec = explore_spec(tasks, record["model"], settings, remaining)
    try:
        RunDir.create(runs_dir, run_id, build_plan(spec).to_dict()).close()
    except FanoutError as exc:
        raise ExploreError(str(exc)) from None
    write_plan(run_dir, plan)
    _write_record(run_dir, {**record, "spec": spec})
    with run_log(run_dir):
        log.info("explore.planned", run=run_id, tasks=len(tasks), categories=plan.categories_covered)
    if stop is not None and stop.is_set():
        result.status = "stopped"
        return result
    return resume_cycle(settings, run_dir, now=pinned, display=display, address=address, consolidate=consolidate)


def resume_cycle(settings: Settings, run: Path | str, *, now: Optional[datetime] = None,
                 display: Optional[str] = "quiet", address: Optional[str] = None, consolidate: bool = True) -> CycleResult:
    """Run the fan-out of an exploration run (its unfinished tasks only), then consolidate it."""
    run_dir = find_run(Path(settings.fanout.runs_dir), str(run))
    record = read_record(run_dir)
    if "spec" not in record:
        raise ExploreError(f"{run_dir}: the cycle stopped before its fan-out was planned ({record.get('status')}); "
                           "start a new cycle")
    try:
        outcome = fanout(build_plan(record["spec"]), resume=run_dir.name, out=run_dir.parent, settings=settings,
                         display=display, address=address)
    except FanoutError as exc:
        raise ExploreError(str(exc)) from None
    record["fanout"] = {"status": outcome.status, "exit_code": outcome.exit_code,
                        "usage": outcome.summary.usage.to_dict(), "stop_reason": outcome.summary.stop_reason}
    record["status"] = "ran"
    _write_record(run_dir, record)
    if not consolidate:
        return CycleResult(record["run_id"], run_dir, "ran", tasks=[TaskPlan.from_dict(t) for t in record["tasks"]],
                           planner=record.get("planner", {}), fanout=record["fanout"])
    return consolidate_run(settings, run_dir, now=now)


def consolidate_run(settings: Settings, run: Path | str, *, now: Optional[datetime] = None,
                    timeout: Optional[float] = None) -> CycleResult:
    """Collect, verify and file every finished task of an exploration run; safe to repeat. Scripts
    are re-run with `timeout` seconds each (default explore.verify_timeout)."""
    timeout = timeout or settings.explore.verify_timeout
    now = utc(now or datetime.now(timezone.utc))
    run_dir = find_run(Path(settings.fanout.runs_dir), str(run))
    record = read_record(run_dir)
    tasks = [TaskPlan.from_dict(item) for item in record.get("tasks", [])]
    results = RunDir(run_dir).results()
    if not record.get("fanout"):  # the cycle died during its fan-out: account what finished
        spent = sum((finished.spent for finished in results.values()), Usage())
        record["fanout"] = {"status": "interrupted", "usage": spent.to_dict()}
    store = open_store(settings)
    result = CycleResult(record["run_id"], run_dir, "consolidated", tasks=tasks, planner=record.get("planner", {}),
                         fanout=record["fanout"])
    with run_log(run_dir):  # beside the fan-out's lines
        for task in tasks:
            done = _consolidate_one(store, record, run_dir, task, results.get(task.task_id), now, timeout)
            result.outcomes.append(done)
            earlier = record["outcomes"].get(task.task_id)
            if done.outcome != "already" or not earlier or earlier.get("outcome") in (None, "unfinished"):
                record["outcomes"][task.task_id] = {**asdict(done), "time": now.isoformat()}
            _write_record(run_dir, record)
            log.info("explore.task", run=record["run_id"], task=task.task_id, outcome=done.outcome,
                     skill=done.skill_id, generation=done.generation, problems=done.problems[:3])
    if not any(o.skill_id for o in result.outcomes):  # every candidate failed or stayed unverified
        result.status = NO_SKILL
        log.warning("explore.no_skill_filed", run=record["run_id"], outcomes=result.counts())
    record.update(status=result.status, totals={"tokens": result.tokens, "cost": round(result.cost, 6),
                                                "outcomes": result.counts()})
    _write_record(run_dir, record)
    return result


def _consolidate_one(store: StoreHandle, record: JSONObject, run_dir: Path, task: TaskPlan, finished: Optional[TaskRecord],
                     now: datetime, timeout: float) -> Consolidated:
    if finished is None:
        return Consolidated(task.task_id, "unfinished",
                            problems=[f"the task did not finish; run `ga explore --resume {record['run_id']}`"])
    planned = ExplorationReport(title=task.title, category=task.category, skill=task.target_skill)
    collected = collect(task.task_id, run_dir / "tasks" / task.task_id / "workdir", finished.status,
                        _path(finished.history_path), reason=finished.reason, timeout=timeout, planned=planned)
    return consolidate_task(store, record["run_id"], task, collected, tokens=finished.spent.total, now=now,
                            model=str(record.get("model") or ""))


def _path(value: Optional[str]) -> Optional[Path]:
    return Path(value) if value else None

