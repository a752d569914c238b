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
from typing import IO, Iterator, Optional

from rich.console import Console
from rich.text import Text

from memory_shared.jsontypes import JSONObject
from orchestrator.ledger import RunDir, read_jsonl, spec_task_ids
from orchestrator.records import TaskRecord
from orchestrator.views.columns import INDENT, Column, Paragraph, fit, join
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
    """The plan's task ids in order, its spec.jsonl read a line at a time. A damaged spec: none."""
    try:
        return list(spec_task_ids(run.spec_path))
    except (OSError, ValueError, KeyError, TypeError):
        return []


def run_status(run: RunDir, summary: JSONObject) -> str:
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


def ledger_tail(path: Path, count: int = LEDGER_TAIL) -> list[JSONObject]:
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
    planned id), drawn as orchestrator/views/columns.py draws a table: the answer gives way, cut to the width; when
    the ids and numbers alone do not fit, each id has a line of its own."""

    COLUMNS = (Column("status", whole=True), Column("attempts", right=True, whole=True),
               Column("turns", right=True, whole=True), Column("tokens", right=True, whole=True),
               Column("cost", right=True, whole=True), Column("answer / reason", least=ANSWER_MIN))
    NATURAL = (11, 8, 5, 10, 9)  # widths of the columns before the answer

    def __init__(self, console: Console, id_width: int) -> None:
        self.console = console
        width = console.width
        self.columns = [Column("task", whole=True), *self.COLUMNS]
        natural = [max(id_width, len("task")), *self.NATURAL, width]
        self.gap, fitted = fit(self.columns, natural, width)
        self.own_line = fitted is None  # the id on a line of its own, the rest under it
        if fitted is None:
            self.gap, fitted = fit(self.COLUMNS, natural[1:], width - INDENT)
        self.fitted = fitted or [*self.NATURAL, ANSWER_MIN]
        self.pending = Text()
        self.count = 0
        if self.own_line:
            console.print(Text("task", style="bold"), soft_wrap=True)
        shown = self.COLUMNS if self.own_line else self.columns
        indent = " " * INDENT if self.own_line else ""
        console.print(Text(indent) + join([Text(c.header, style="bold") for c in shown], shown, self.fitted, self.gap),
                      soft_wrap=True)
        console.print(Text(indent + "─" * (sum(self.fitted) + self.gap * (len(self.fitted) - 1)), style="dim"),
                      soft_wrap=True)

    def row(self, task: TaskView, attempts: int) -> None:
        text = " ".join((task.answer if task.status == "succeeded" else task.reason or task.answer).split())
        cells = [Text(task.status, style=status_style(task.status)), Text(str(attempts)), Text(str(task.turns)),
                 Text(f"{task.usage.get('total', 0) or 0:,}"), Text(f"${task.usage.get('cost', 0) or 0:.4f}"),
                 Text(text[:self.fitted[-1] + 1])]
        if self.own_line:
            self.pending.append(task.task_id + "\n")
            self.pending.append_text(Text(" " * INDENT) + join(cells, self.COLUMNS, self.fitted, self.gap))
        else:
            self.pending.append_text(join([Text(task.task_id), *cells], self.columns, self.fitted, self.gap))
        self.pending.append("\n")
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
    console.print(Paragraph(f"run {run.run_id}: {status}\ndirectory: {run.path}"))
    if summary:
        usage = summary["usage"]
        console.print(Paragraph(f"{status_counts(summary['tasks'])} · {usage['total']:,} tokens · "
                                f"${usage['cost']:.4f} · {summary.get('seconds') or 0:.1f}s"))
        if summary.get("stop_note"):
            console.print(Paragraph(summary["stop_note"], "yellow"))
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
        console.print(Paragraph(f"{status_counts(counts)} · {spent['total']:,} tokens · ${spent['cost']:.4f}"))
