"""What `ga fanout` prints at the end of a run too large for a row per task: the counts, the tasks that failed
and the costliest ones, and where the full table is. Made from the run's records, streamed: reading the whole
run directory back (orchestrator/views/runview.py) took a minute and a gigabyte for 100,000 tasks."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from orchestrator.views.columns import Paragraph
from orchestrator.views.runview import TaskView
from orchestrator.views.tables import tasks_table

if TYPE_CHECKING:
    from orchestrator.records import Run, TaskRecord

FULL_TABLE_MAX = 100  # a run of more tasks prints this digest instead of its full table
FAILED_ROWS = 20
COSTLIEST_ROWS = 10
UNFINISHED_IDS = 20
GOOD = ("succeeded", "unverified")


def print_run_digest(console: Console, result: Run) -> None:
    """At most ~60 lines, whatever the number of tasks (`result` is an orchestrator.Run): the rows it shows are
    read from the run's records one at a time, no more of them held than it prints."""
    counts = result.summary.tasks
    failed_count = counts.failed + counts.needs_input + counts.limit  # every status but GOOD
    failed = result.first_results(FAILED_ROWS, where=lambda r: r.status not in GOOD) if failed_count else []
    console.print(Paragraph(f"run {result.run_id}: {result.status} · {counts.total:,} tasks · every "
                            f"task: `ga runs show {result.run_id}`"))
    if failed:
        console.print(tasks_table([_view(r) for r in failed], title=f"failed: {failed_count:,}"
                                  + (f" (the first {FAILED_ROWS})" if failed_count > FAILED_ROWS else "")))
    costliest = result.first_results(COSTLIEST_ROWS, key=lambda r: (-r.spent.cost, -r.spent.total))
    if costliest:
        console.print(tasks_table([_view(r) for r in costliest], title=f"costliest {len(costliest)}"))
    if result.unfinished:
        shown = ", ".join(result.unfinished[:UNFINISHED_IDS])
        more = f" and {len(result.unfinished) - UNFINISHED_IDS:,} more" if len(result.unfinished) > UNFINISHED_IDS else ""
        console.print(Paragraph(f"unfinished: {shown}{more}"))


def _view(record: TaskRecord) -> TaskView:
    return TaskView(task_id=record.task_id, status=record.status, reason=record.reason, answer=record.answer,
                    turns=record.turns, usage=record.spent.model_dump())
