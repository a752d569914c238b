"""The one rule for what `ga`'s exit status says; the README's "Exit codes" table is this module in words.

    0    done. Every task succeeded (a successful tool run, or its check, backs its answer), or answered without
         asking for any tool: a question answered. Its status (`unverified`) still shows; nothing was claimed
         that a tool could have backed.
    1    not done. A task failed (its check too), answered with a claim the tools it ran do not back (the last
         one failed, or none of them backs an answer), needs input or hit a limit; a parent whose workers were
         none of them done; a run that paused or spent its budget; a replay that differs from its recording.
    2    bad input: nothing ran (a flag, a file, a model, an endpoint the pre-flight could not reach).
    130  interrupted or stopped by a person (Ctrl-C, SIGTERM, `ga runs stop`): the work can go on, and the command
         that continues it is shown.

The loop labels an answer (worker/agent.py: succeeded, unverified, failed, ...); this rule reads the label with
what the record's files say (orchestrator/views/outcome.py) and never changes it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

from orchestrator.records import ReduceResult, Run, RunStop, TaskRecord
from orchestrator.views.outcome import asked_for_tools, task_workers
from orchestrator.views.runview import REDUCE, history_path
from worker.record import Stop

DONE, NOT_DONE, BAD_INPUT, INTERRUPTED = 0, 1, 2, 130
PERSON_STOPS = (Stop.cancelled, Stop.stopped)


def task_done(record: TaskRecord, workers: Optional[list[TaskRecord]] = None) -> bool:
    """Whether a finished task is done by the rule. `workers`: the records of the fan-outs it started (default:
    those under its task folder); when it started some and none of them is done, neither is it."""
    if record.status not in ("succeeded", "unverified"):
        return False
    workers = task_workers(record.task_dir) if workers is None else workers
    if workers and not any(task_done(worker) for worker in workers):
        return False
    return answer_done(record.status, record.history_path, record.turns)


def answer_done(status: str, history: Optional[str | Path], turns: Optional[int] = None) -> bool:
    """The rule for one answer: succeeded, or unverified with no tool asked for in its last `turns` turns."""
    return status == "succeeded" or (status == "unverified" and not asked_for_tools(history, turns))


def daemon_exit(records: list[dict]) -> int:
    """`ga reflect`'s and `ga schedule`'s exit status: each task they ran done by the rule (a record of
    orchestrator/triggers/worktask.py: status, history, turns; a builtin job: its status)."""
    return DONE if all(answer_done(r["status"], r.get("history"), r.get("turns")) if r.get("history")
                       else r["status"] == "succeeded" for r in records) else NOT_DONE


def task_exit(record: TaskRecord, workers: Optional[list[TaskRecord]] = None) -> int:
    """`ga run`'s exit status for the record of its exchange (`workers`: as in task_done)."""
    if record.stop in PERSON_STOPS:
        return INTERRUPTED
    return DONE if task_done(record, workers) else NOT_DONE


def reduce_done(reduce: ReduceResult, run_dir: Path) -> bool:
    if reduce.status == "succeeded":
        return True
    return reduce.status == "unverified" and not asked_for_tools(history_path(run_dir, REDUCE))


def run_exit(run: Run, done: Callable[[TaskRecord], bool] = task_done, tasks_done: Optional[bool] = None) -> int:
    """`ga fanout`'s exit status: every task and the reduce done by the rule, or why not. `tasks_done`: whether
    every finished record is `done`, when the caller already went through them (the driver's summary does)."""
    stop = run.summary.stop_reason
    if stop == RunStop.interrupted or run.unfinished and stop is None:  # a person stopped a task: it resumes
        return INTERRUPTED
    if stop is not None:  # paused, or the budget is spent
        return NOT_DONE
    counts = run.summary.tasks
    if run.finished < counts.total or counts.failed or counts.needs_input or counts.limit:
        return NOT_DONE  # decided by the counts: no record is read
    if tasks_done is None:
        tasks_done = all(done(record) for record in run.each_result())  # one at a time, none kept
    if not tasks_done:
        return NOT_DONE
    if run.reduce is not None and not reduce_done(run.reduce, run.run_dir):
        return NOT_DONE
    return DONE
