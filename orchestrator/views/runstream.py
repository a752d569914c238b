"""`ga runs show RUN` of a run of any size, as a stream: each row is printed as results.jsonl is read, so the first
rows come at once and memory holds the tasks' ids, not their records (a run of 100,000 tasks read whole took
minutes and a gigabyte).

The table lists the finished tasks in the order they finished (the attempts column is the attempt each finished
on), then the tasks not finished, in the plan's order, with what their ledger lines and histories say (runview's
rules), then the reduce. `--json` is one JSON object: the run, its summary, "results" one line each, and the
ledger's last lines (read from the end of the file).
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import IO, Any, Iterator, Optional

import yaml
from rich.console import Console
from rich.text import Text

from orchestrator.ledger import RunDir, read_jsonl
from orchestrator.records import TaskRecord
from orchestrator.views.progress import status_counts, status_style
from orchestrator.views.runview import REDUCE, TaskView, driver_holds, every_attempt, read_attempts, task_view

LEDGER_TAIL = 20
ROWS_PER_PRINT = 500  # rows handed to the console at a time
ANSWER_MIN = 12  # the answer column never narrower than this


def finished(run_path: Path) -> Iterator[TaskRecord]:
    """results.jsonl's records, each task once (the first line that names it)."""
    seen: set[str] = set()
    for line in read_jsonl(run_path / "results.jsonl"):
        record = TaskRecord.model_validate(line)
        if record.task_id not in seen:
            seen.add(record.task_id)
            yield record


def planned_ids(run: RunDir) -> list[str]:
    """The plan's task ids in order; spec.yaml's JSON form is read a line at a time. A damaged spec: none."""
    path = run.path / "spec.yaml"
    try:
        with path.open(encoding="utf-8") as handle:
            if handle.read(1) != "{":  # by an older ga: YAML, small
                handle.seek(0)
                data = yaml.safe_load(handle)
                return [str(t["id"]) for t in (data or {}).get("tasks") or [] if isinstance(t, dict) and "id" in t]
            ids, inside = [], False
            for line in handle:
                if line.startswith('"tasks": ['):
                    inside = not line.rstrip().endswith("]")
                elif inside and line.startswith("  {"):
                    ids.append(str(json.loads(line.rstrip().rstrip(","))["id"]))
                elif inside:
                    inside = False
            return ids
    except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError):
        return []


def run_status(run: RunDir, summary: dict[str, Any]) -> str:
    return summary.get("status") or ("running" if driver_holds(run.path) else "stopped")


def unfinished(run: RunDir, done: set[str], planned: list[str], status: str,
               now: Optional[float] = None) -> Iterator[TaskView]:
    """The tasks not in `done` (and the reduce, when it started and is not in `done`), with what their ledger lines
    and histories say; of the ledger, only their lines are kept while it is read."""
    now = time.time() if now is None else now
    todo = [task_id for task_id in planned if task_id not in done]
    wanted = set(todo) | {REDUCE}
    finished_at, kept = None, []
    for line in read_jsonl(run.path / "ledger.jsonl"):
        if line.get("task_id") in wanted:
            kept.append(line)
        elif line.get("event") == "run_finished":
            finished_at = line.get("time")
    attempts = read_attempts(kept)
    if REDUCE in attempts and REDUCE not in done:
        todo.append(REDUCE)
    for task_id in todo:
        task = task_view(task_id, None, attempts.get(task_id, []), "", every_attempt(run.path, task_id))
        for attempt in task.attempts:  # a run that ended without finishing it: open attempts end then, or now
            if attempt.end is None and status != "running":
                attempt.end, attempt.status = finished_at or now, "stopped"
        if task.status in ("running", "queued") and status != "running":
            task.status = task.attempts[-1].status if task.attempts else "not started"
        yield task


def reduce_row(run: RunDir) -> Optional[TaskView]:
    """The reduce's row when it finished (reduce/result.json)."""
    try:
        result = json.loads((run.path / REDUCE / "result.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    turns = every_attempt(run.path, REDUCE)
    return task_view(REDUCE, {"task_id": REDUCE, "turns": len(turns[-1]) if turns else 0, **result}, [], "", [])


def ledger_tail(path: Path, count: int = LEDGER_TAIL) -> list[dict[str, Any]]:
    """The last `count` whole lines of a JSON-lines file, read from its end."""
    try:
        with path.open("rb") as handle:
            end = handle.seek(0, os.SEEK_END)
            data, start = b"", end
            while start > 0 and data.count(b"\n") <= count:
                start = max(0, start - 65536)
                handle.seek(start)
                data = handle.read(end - start)
    except OSError:
        return []
    lines = data.split(b"\n")
    if start > 0:
        lines = lines[1:]  # cut in the middle
    found = []
    for raw in lines[:-1]:  # the last piece has no newline: empty, or a torn line being written
        try:
            found.append(json.loads(raw))
        except ValueError:
            continue
    return found[-count:]


def write_json(run: RunDir, out: IO[str]) -> None:
    """`ga runs show RUN --json`, written as it is read."""
    summary = run.summary()
    out.write("{\n" + f'"run_id": {json.dumps(run.run_id)},\n"path": {json.dumps(str(run.path))},\n'
              f'"summary": {json.dumps(summary.model_dump(mode="json") if summary else None)},\n"results": [')
    for number, record in enumerate(finished(run.path)):
        out.write(("," if number else "") + "\n  " + json.dumps(record.line(), ensure_ascii=False))
    out.write(f'\n],\n"ledger_tail": {json.dumps(ledger_tail(run.path / "ledger.jsonl"), ensure_ascii=False)}\n}}\n')


class RowPrinter:
    """The tasks table, a row a line, its columns fixed before the first row (the id column as wide as the longest
    planned id) and the answer cut to the console's width."""

    COLUMNS = (("status", 11, "<"), ("attempts", 8, ">"), ("turns", 5, ">"), ("tokens", 10, ">"), ("cost", 9, ">"))

    def __init__(self, console: Console, id_width: int) -> None:
        self.console, self.id_width = console, max(id_width, len("task"))
        used = self.id_width + sum(width + 1 for _, width, _ in self.COLUMNS) + 1
        self.answer_width = max(ANSWER_MIN, console.width - used)
        self.pending = Text()
        self.count = 0
        head = f"{'task':<{self.id_width}} " + " ".join(f"{n:{a}{w}}" for n, w, a in self.COLUMNS) + " answer / reason"
        console.print(Text(head, style="bold"), soft_wrap=True)
        console.print(Text("─" * min(console.width, used + self.answer_width)), soft_wrap=True)

    def row(self, task: TaskView, attempts: int) -> None:
        text = " ".join((task.answer if task.status == "succeeded" else task.reason or task.answer).split())
        if len(text) > self.answer_width:
            text = text[:self.answer_width - 1] + "…"
        cells = (str(attempts), str(task.turns), f"{task.usage.get('total', 0) or 0:,}",
                 f"${task.usage.get('cost', 0) or 0:.4f}")
        self.pending.append(f"{task.task_id:<{self.id_width}} ")
        self.pending.append(f"{task.status:<11}", style=status_style(task.status))
        self.pending.append(" " + " ".join(f"{cell:>{width}}" for cell, (_, width, _) in zip(cells, self.COLUMNS[1:]))
                            + f" {text}\n")
        self.count += 1
        if self.count % ROWS_PER_PRINT == 0:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            self.pending.rstrip()
            self.console.print(self.pending, soft_wrap=True, highlight=False)
            self.pending = Text()


def print_table(console: Console, run: RunDir) -> None:
    """`ga runs show RUN`: the run, then its tasks a row at a time, then the counts when there is no summary yet."""
    recorded = run.summary()
    summary = recorded.model_dump(mode="json") if recorded else {}
    status = run_status(run, summary)
    console.print(f"run {run.run_id}: {status}\ndirectory: {run.path}", highlight=False, soft_wrap=True)
    if summary:
        usage = summary["usage"]
        console.print(f"{status_counts(summary['tasks'])} · {usage['total']:,} tokens · ${usage['cost']:.4f} · "
                      f"{summary.get('seconds') or 0:.1f}s", highlight=False, soft_wrap=True)
        if summary.get("stop_note"):
            console.print(f"[yellow]{summary['stop_note']}[/yellow]", highlight=False, soft_wrap=True)
    planned = planned_ids(run)
    rows = RowPrinter(console, max(map(len, planned), default=len(REDUCE)))
    counts = {"total": 0, "succeeded": 0, "unverified": 0, "unfinished": 0}
    spent = {"total": 0, "cost": 0.0}

    def show(task: TaskView, attempts: int, finished: bool) -> None:
        rows.row(task, attempts)
        if task.task_id != REDUCE:  # results.jsonl says what finished, whatever the ledger says
            counts["total"] += 1
            key = task.status if finished else "unfinished"
            counts[key] = counts.get(key, 0) + 1
        for key in spent:
            spent[key] += task.usage.get(key) or 0

    done: set[str] = set()
    for record in finished(run.path):
        done.add(record.task_id)
        show(task_view(record.task_id, record.model_dump(), [], "", []), record.attempt or 1, True)
    reduce = reduce_row(run)
    for task in unfinished(run, done | ({REDUCE} if reduce else set()), planned, status):
        show(task, len(task.attempts), False)
    if reduce is not None:
        show(reduce, 1, True)
    rows.flush()
    if not summary:
        console.print(f"{status_counts(counts)} · {spent['total']:,} tokens · ${spent['cost']:.4f}", highlight=False,
                      soft_wrap=True)
