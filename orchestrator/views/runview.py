"""What one run did, read back from its directory: each task attempt on its worker slot (the
timeline), usage per task and per model, failures grouped by reason, and each task's conversation
rebuilt from its history.jsonl. `ga runs show RUN TASK` and `ga runs report` both read through this
module. It works on a run still in progress: attempts without an end are `running`."""
from __future__ import annotations

import json
import re
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from memory_shared.jsontypes import JSONObject
from orchestrator.ledger import RunDir, driver_holds, read_jsonl
from orchestrator.views.runlist import RunRow, list_runs
from worker.history import replay

REDUCE = "reduce"
UsageFigures = dict[str, float]  # a Usage as its JSON: prompt, completion, cached, total tokens, cost


@dataclass
class Attempt:
    task_id: str
    attempt: int
    slot: Optional[int]  # the worker slot it ran on (a row of the timeline)
    start: float
    end: Optional[float]  # None while it runs
    status: str  # a final status, or how the attempt ended before a retry (retried, requeued, paused), or running
    reason: str = ""
    killed: bool = False  # the driver killed it after its timeout


@dataclass
class ToolStep:
    name: str
    arguments: str
    output: str
    ok: bool


@dataclass
class Turn:
    turn: int
    time: float
    text: str
    calls: list[ToolStep]
    usage: UsageFigures
    seconds: float  # the model's latency for this turn


@dataclass
class TaskView:
    task_id: str
    status: str
    model: str = ""
    reason: str = ""
    answer: str = ""
    turns: int = 0
    usage: UsageFigures = field(default_factory=dict)
    seconds: float = 0.0
    attempts: list[Attempt] = field(default_factory=list)
    usage_by_model: dict[str, UsageFigures] = field(default_factory=dict)  # when it failed over to fallbacks


@dataclass
class RunView:
    run_id: str
    path: Path
    name: str
    status: str
    started: float
    finished: Optional[float]
    tasks: list[TaskView]
    summary: JSONObject  # summary.json as read back ({} while the run has none)
    marks: list[JSONObject]  # run-level ledger events worth seeing on the timeline (pauses, stops)

    def task(self, task_id: str) -> TaskView:
        for task in self.tasks:
            if task.task_id == task_id:
                return task
        known = ", ".join(t.task_id for t in self.tasks[:8]) + (" …" if len(self.tasks) > 8 else "")
        raise KeyError(f"run {self.run_id} has no task '{task_id}'; its tasks: {known}")

    def history_path(self, task_id: str) -> Path:
        return history_path(self.path, task_id)

    def conversation(self, task_id: str) -> list[list[Turn]]:
        return every_attempt(self.path, task_id)

    def usage_by_model(self) -> dict[str, dict[str, float]]:
        totals: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for task in self.tasks:
            for model, usage in (task.usage_by_model or {task.model or "?": task.usage}).items():
                for key in ("prompt", "completion", "cached", "cost"):
                    totals[model][key] += usage.get(key, 0) or 0
        return {model: dict(values) for model, values in totals.items()}

    def failures_by_reason(self) -> dict[str, list[str]]:
        """Tasks that did not succeed, grouped by their reason with numbers and ids generalized."""
        groups: dict[str, list[str]] = defaultdict(list)
        for task in self.tasks:
            if task.status not in ("succeeded", "running", "queued", "not started"):
                groups[reason_kind(task.reason or task.status)].append(task.task_id)
        return dict(sorted(groups.items(), key=lambda item: -len(item[1])))


def readable_spec(run: RunDir) -> JSONObject:
    """The run's spec for a viewer: a damaged or missing one shows as empty (the ledger and results still tell)."""
    try:
        return run.spec()
    except (OSError, ValueError):
        return {}


def load_run_view(runs_dir: Path, run_id: str, now: Optional[float] = None) -> RunView:
    run = RunDir.existing(runs_dir, run_id)
    now = time.time() if now is None else now
    spec = readable_spec(run)
    default = default_model(run.path)  # a task that names no model ran on the one its run recorded
    models = {t["id"]: str(t.get("model") or default) for t in spec.get("tasks") or []}
    models[REDUCE] = str((spec.get("reduce") or {}).get("model") or next(iter(models.values()), default))
    records = [event.model_dump(exclude_none=True) for event in run.ledger_records()]
    results: dict[str, JSONObject] = {task_id: r.model_dump() for task_id, r in run.results().items()}
    reduce_result = _reduce_result(run.path)
    if reduce_result:
        turns = sum(len(attempt) for attempt in conversation(run.path / REDUCE / REDUCE / "history.jsonl")[-1:])
        results[REDUCE] = {"task_id": REDUCE, "turns": turns, **reduce_result}
    attempts = read_attempts(records)
    order = [t["id"] for t in spec.get("tasks") or []] + ([REDUCE] if REDUCE in attempts or reduce_result else [])
    tasks = [task_view(task_id, results.get(task_id), attempts.get(task_id, []), models.get(task_id, ""),
                       [] if task_id in results else every_attempt(run.path, task_id)) for task_id in order]
    recorded = run.summary()
    summary = recorded.model_dump() if recorded else {}
    started = summary.get("started") or next((r["time"] for r in records), run.path.stat().st_mtime)
    finished = summary.get("finished") or next((r["time"] for r in records if r["event"] == "run_finished"), None)
    status = summary.get("status") or ("running" if driver_holds(run.path) else "stopped")
    for task in tasks:  # a run that ended without finishing them: open attempts end then, or now
        for attempt in task.attempts:
            if attempt.end is None and status != "running":
                attempt.end, attempt.status = finished or now, "stopped"
        if task.status in ("running", "queued") and status != "running":
            task.status = task.attempts[-1].status if task.attempts else "not started"
            task.seconds = _seconds(task.attempts)
    marks = [r for r in records if "task_id" not in r and r["event"] not in ("run_started", "run_resumed")]
    return RunView(run.run_id, run.path, spec.get("name", ""), status, started, finished, tasks, summary, marks)


def default_model(run_path: Path) -> str:
    """The model a run's tasks ran on when they name none: worker.model as its request_settings.json recorded it
    (orchestrator/fanout.py writes it as the run starts); "" when it has none."""
    try:
        recorded = json.loads((run_path / "request_settings.json").read_text(encoding="utf-8"))
        return str((recorded.get("worker") or {}).get("model") or "")
    except (OSError, ValueError, AttributeError):
        return ""


def history_path(run_path: Path, task_id: str) -> Path:
    return run_path / REDUCE / REDUCE / "history.jsonl" if task_id == REDUCE else RunDir(run_path).history(task_id)


def every_attempt(run_path: Path, task_id: str) -> list[list[Turn]]:
    """A task's turns, attempt by attempt: a retry moves the earlier attempt's directory aside (.ID.attempt-N); a
    packed history (RunDir.pack) beside a folder is the attempt before them all."""
    folder = run_path / REDUCE / REDUCE if task_id == REDUCE else run_path / "tasks" / task_id
    earlier = sorted(folder.parent.glob(f".{folder.name}.attempt-*/history.jsonl"),
                     key=lambda p: int(p.parent.name.rpartition("-")[2]))
    packed = RunDir(run_path).packed_history(task_id)
    if task_id != REDUCE and folder.is_dir() and packed.is_file():
        earlier.insert(0, packed)
    return [attempt for path in [*earlier, history_path(run_path, task_id)] for attempt in conversation(path)]


def view_counts(view: RunView) -> dict[str, int]:
    """status_counts' input for a run without a summary (in progress, or its driver killed)."""
    statuses = [t.status for t in view.tasks if t.task_id != REDUCE]
    finished = ("succeeded", "unverified", "failed", "needs_input", "limit")
    return {"total": len(statuses), "succeeded": statuses.count("succeeded"), "unverified": statuses.count("unverified"),
            "unfinished": sum(1 for s in statuses if s not in finished)}


def task_usage_total(tasks: list[TaskView]) -> UsageFigures:
    """Tokens and cost of `tasks` summed, for a run without a summary."""
    return {key: sum(t.usage.get(key, 0) or 0 for t in tasks) for key in ("total", "cost")}


def runs_of_session(runs_dir: Path, session_id: str) -> list[RunRow]:
    """The fan-outs a `ga run`/`ga chat` session started (their run_started line names it), newest first."""
    rows = []
    for row in list_runs(runs_dir):
        first = next(read_jsonl(Path(row["path"]) / "ledger.jsonl"), {})
        if first.get("session") == session_id:
            if row["status"] == "running?":
                row["status"] = "running" if driver_holds(Path(row["path"])) else "stopped"
            rows.append(row)
    return rows


def read_attempts(records: list[JSONObject]) -> dict[str, list[Attempt]]:
    """Each task's attempts from the ledger: a `started` line opens one, the task's next line that is not a
    passing note (running, timeout_kill, …) closes it with that line's event as status: the attempt the line
    names, else the latest one open."""
    attempts: dict[str, list[Attempt]] = defaultdict(list)
    open_attempts: dict[str, dict[int, Attempt]] = defaultdict(dict)
    for record in records:
        task_id, event = record.get("task_id"), record["event"]
        if task_id is None or event in ("queued", "running", "skipped"):
            continue
        number = record.get("attempt")
        if event == "started":
            attempt = Attempt(task_id, int(number or 1), record.get("worker"), record["time"], None, "running")
            open_attempts[task_id][attempt.attempt] = attempt
            attempts[task_id].append(attempt)
            continue
        running = open_attempts[task_id]
        key = number if number in running else (max(running) if running else None)
        if key is None:
            continue
        if event == "timeout_kill":
            running[key].killed = True
            continue
        current = running.pop(key)
        current.end, current.status, current.reason = record["time"], event, record.get("reason") or ""
    return dict(attempts)

def conversation(history_path: Path) -> list[list[Turn]]:
    """The task's turns from history.jsonl, split into attempts (a new attempt starts at turn 1)."""
    attempts: list[list[Turn]] = []
    for record in read_jsonl(history_path):
        if "received" not in record:
            continue
        received = record["received"] or {}
        results = {r.get("id"): r for r in record.get("tool_results") or []}
        calls = []
        for call in received.get("tool_calls") or []:
            function = call.get("function") or {}
            result = results.get(call.get("id"), {})
            calls.append(ToolStep(function.get("name", "?"), str(function.get("arguments", "")),
                                  str(result.get("output", "")), bool(result.get("ok", False))))
        turn = Turn(int(record.get("turn", 0)), float(record.get("time", 0)), _text(received.get("content")),
                    calls, record.get("usage") or {}, float(record.get("latency") or 0))
        if not attempts or turn.turn <= attempts[-1][-1].turn:
            attempts.append([])
        attempts[-1].append(turn)
    return attempts


def first_user_message(history_path: Path) -> str:
    for record in read_jsonl(history_path):
        for message in record.get("sent") or []:
            if message.get("role") == "user":
                return _text(message.get("content"))
    return ""


def replayed_requests(history_path: Path) -> list[list[JSONObject]]:
    """Every request the worker sent, rebuilt exactly (`ga runs show RUN TASK --json`)."""
    return replay(history_path) if history_path.is_file() else []


def reason_kind(reason: str) -> str:
    """A reason with its particulars generalized, so that like failures group together."""
    text = " ".join(reason.split())[:160]
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", text)
    return re.sub(r"\d+(\.\d+)?", "N", text) or "(no reason given)"


def task_view(task_id: str, result: Optional[JSONObject], attempts: list[Attempt], model: str,
              turns: list[list[Turn]]) -> TaskView:
    if result is None:  # not finished (running, interrupted, stopped): what its history holds so far
        status = attempts[-1].status if attempts else "queued"
        return TaskView(task_id, status, model, attempts[-1].reason if attempts else "", turns=len(turns[-1]) if turns else 0,
                        usage=spent_in(turns), seconds=_seconds(attempts), attempts=attempts)
    usage = result.get("usage_with_nested") or result.get("usage") or {}
    seconds = result.get("seconds") or _seconds(attempts)
    return TaskView(task_id, result.get("status", "?"), model, result.get("reason") or "", result.get("answer") or "",
                    int(result.get("turns") or 0), usage, float(seconds), attempts, result.get("usage_by_model") or {})


def spent_in(attempts: list[list[Turn]]) -> UsageFigures:
    """The usage of every turn recorded (a stopped task's spending, which results.jsonl does not hold)."""
    usage: UsageFigures = {"prompt": 0, "completion": 0, "cached": 0, "cost": 0.0, "total": 0}
    for turn in (turn for attempt in attempts for turn in attempt):
        for key in usage:
            usage[key] += turn.usage.get(key) or 0
    return usage


def _seconds(attempts: list[Attempt]) -> float:
    return sum(a.end - a.start for a in attempts if a.end is not None)


def _reduce_result(path: Path) -> Optional[JSONObject]:
    result = path / REDUCE / "result.json"
    try:
        return json.loads(result.read_text(encoding="utf-8")) if result.is_file() else None
    except (OSError, ValueError):
        return None


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""
