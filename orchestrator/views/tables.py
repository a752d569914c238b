"""The tables of runs and tasks the `ga` commands print, made to fit 80 columns: the ids a later command
needs are shown whole, the other columns give way."""
from __future__ import annotations

from typing import Any, Optional

from rich import box
from rich.table import Table
from rich.text import Text

from orchestrator.views.progress import status_style
from orchestrator.views.runview import TaskView


def whole_id_column(table: Table, header: str, ids: list[str]) -> None:
    """A column that never cuts or wraps the ids a later command needs: the other columns give way."""
    table.add_column(header, no_wrap=True, overflow="ignore", min_width=max(map(len, ids), default=len(header)))


def runs_table(rows: list[dict[str, Any]]) -> Table:
    """`ga runs list`: one row per run (orchestrator.ledger.list_runs), newest first."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, padding=0)
    whole_id_column(table, "run", [r["run_id"] for r in rows])  # every `ga runs` command takes it
    table.add_column("status", overflow="ellipsis", no_wrap=True, min_width=7)
    for column in ("done", "failed", "unverified", "tokens", "cost"):
        table.add_column(column, justify="right", overflow="fold")
    for r in rows:
        table.add_row(r["run_id"], r["status"], f"{r['finished']}/{r['tasks'] if r['tasks'] is not None else '?'}",
                      str(r["failed"]), str(r["unverified"]), f"{r['tokens'] or 0:,}", f"${r['cost'] or 0:.4f}")
    return table


def tasks_table(tasks: list[TaskView], attempts: bool = False, title: Optional[str] = None) -> Table:
    """One row per task, finished or not (an interrupted task shows the turns and tokens it spent)."""
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1, 0, 0))
    whole_id_column(table, "task", [t.task_id for t in tasks])
    table.add_column("status", no_wrap=True, min_width=6, overflow="ellipsis")
    for column in (["attempts"] if attempts else []) + ["turns", "tokens", "cost"]:
        table.add_column(column, justify="right", no_wrap=True)
    table.add_column("answer / reason", min_width=12, overflow="fold")  # the one column that gives way
    for task in tasks:
        text = " ".join((task.answer if task.status == "succeeded" else task.reason or task.answer).split())
        table.add_row(Text(task.task_id), Text(task.status, style=status_style(task.status)),
                      *([str(len(task.attempts))] if attempts else []), str(task.turns),
                      f"{task.usage.get('total', 0):,}", f"${task.usage.get('cost', 0) or 0:.4f}",
                      Text(text[:160] + ("…" if len(text) > 160 else "")))
    return table
