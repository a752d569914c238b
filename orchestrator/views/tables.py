"""The tables of runs and tasks the `ga` commands print, made to fit 80 columns (orchestrator/views/columns.py): the
ids a later command needs are shown whole, the answers give way."""
from __future__ import annotations

from typing import Optional, Union

from rich.text import Text

from orchestrator.views.columns import Column, Rows
from orchestrator.views.progress import status_style
from orchestrator.views.runlist import RunRow
from orchestrator.views.runview import TaskView

ANSWER_CHARS = 160  # of an answer or reason in a task's row, before the width cuts it further


def runs_table(rows: list[RunRow]) -> Rows:
    """`ga runs list`: one row per run (orchestrator.views.runlist.list_runs), newest first."""
    columns = [Column("run", whole=True), Column("status", whole=True),
               *(Column(name, right=True, whole=True) for name in ("done", "failed", "unverified", "tokens", "cost"))]
    def cells(r: RunRow) -> list[Union[str, Text]]:
        if r["status"] == "damaged":  # its records cannot be read: one line, nothing else known
            return [r["run_id"], Text("damaged", style="red"), "-", "-", "-", "-", "-"]
        return [r["run_id"], Text(r["status"], style=status_style(r["status"])),
                f"{r['finished']}/{r['tasks'] if r['tasks'] is not None else '?'}", str(r["failed"]),
                str(r["unverified"]), f"{r['tokens'] or 0:,}", f"${r['cost'] or 0:.4f}"]

    return Rows(columns, [cells(r) for r in rows])


def tasks_table(tasks: list[TaskView], attempts: bool = False, title: Optional[str] = None) -> Rows:
    """One row per task, finished or not (an interrupted task shows the turns and tokens it spent)."""
    columns = [Column("task", whole=True), Column("status", whole=True),
               *(Column(name, right=True, whole=True) for name in (["attempts"] if attempts else []) + ["turns",
                                                                                                      "tokens", "cost"]),
               Column("answer / reason", least=12)]
    rows = []
    for task in tasks:
        text = " ".join((task.answer if task.status == "succeeded" else task.reason or task.answer).split())
        rows.append([task.task_id, Text(task.status, style=status_style(task.status)),
                     *([str(len(task.attempts))] if attempts else []), str(task.turns),
                     f"{task.usage.get('total', 0):,}", f"${task.usage.get('cost', 0) or 0:.4f}",
                     text[:ANSWER_CHARS] + ("…" if len(text) > ANSWER_CHARS else "")])
    return Rows(columns, rows, title=title or "")
