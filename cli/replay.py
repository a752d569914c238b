"""`ga replay`: a recorded run's tasks run again from their histories without a model call, or one task forked
onto a live model; and the fork of a run's failed tasks that `ga fanout --resume --retry-failed --from-last-good`
asks for.

It loads orchestrator.replay (and with it the agent loop) at the top: cli/root.py imports this module only when
`ga replay` runs or shows its help, cli/work.py when a fan-out forks.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.text import Text

from cli.kit import console, emit_json, fail, say, settings
from configs import Settings
from orchestrator import replay as replays
from orchestrator.replay import ReplayError, ReplayRun, fork_failed
from orchestrator.spec import Plan
from orchestrator.views.progress import status_style
from orchestrator.views.replaydiff import difference_diff
from worker.modelconfig import ModelConfigError

commands = typer.Typer()


@commands.command()
def replay(
    ctx: typer.Context,
    run: str = typer.Argument(..., help="A run id or run directory (or one history.jsonl)"),
    tasks: Optional[list[str]] = typer.Argument(None, help="Only these tasks (default: every task with a history)"),
    keep_going: bool = typer.Option(False, "--keep-going", help="Past a difference, go on feeding the recorded "
                                    "replies and list every difference"),
    from_turn: Optional[int] = typer.Option(None, "--from", min=1, help="Fork TASK: turns before this one come from "
                                            "the recording, the rest run live"),
    model: Optional[str] = typer.Option(None, "--model", help="With --from: the live model (default: the recorded one)"),
    out: Optional[Path] = typer.Option(None, "--out", help="Directory for the new run directory (default: fanout.runs_dir)"),
    workers: int = typer.Option(4, "--workers", "-w", min=1, help="Tasks replayed at once"),
    tool_mode: Optional[str] = typer.Option(None, "--tool-mode", help="native or text: a history file's tool mode "
                                            "(a run keeps its own)"),
    inputs: Optional[list[Path]] = typer.Option(None, "--input", help="A history file's input, copied into its workdir"),
    as_json: bool = typer.Option(False, "--json", help="Print the outcome as JSON"),
    no_preflight: bool = typer.Option(False, "--no-preflight", help="With --from: skip the GET /models probe of the "
                                      "live model's endpoint"),
) -> None:
    """Run RUN's tasks again from their histories with zero model calls; exit 0 when every request and tool
    output is as recorded. With --from TURN, fork one task onto a live model from that turn."""
    current = settings(ctx)
    if model and from_turn is None:
        fail("--model needs --from TURN: a replay calls no model")
    if tool_mode not in (None, "native", "text"):
        fail(f"--tool-mode {tool_mode}: use native or text")
    try:
        outcome = replays.replay(run, tasks or None, settings=current, runs_dir=Path(current.fanout.runs_dir), out=out,
                                 keep_going=keep_going, from_turn=from_turn, model=model, workers=workers,
                                 tool_mode=tool_mode, inputs=inputs, preflight=not no_preflight)
    except (ReplayError, ModelConfigError) as exc:
        fail(str(exc))
    if as_json:
        emit_json({"run_id": outcome.run_id, "run_dir": str(outcome.run_dir), "source": outcome.source,
                   "identical": outcome.identical, "forked_from": outcome.forked_from, "notes": outcome.notes,
                   "exit_code": outcome.exit_code,
                   "tasks": [{"id": t.task_id, "status": t.status, "recorded_status": t.recorded_status,
                              "turns": t.turns, "recorded_turns": t.recorded_turns, "live_tokens": t.live_usage.total,
                              "differences": [d.line() for d in t.divergences],
                              "diffs": ["\n".join(difference_diff(d)) for d in t.divergences]}
                             for t in outcome.tasks]})
        raise typer.Exit(outcome.exit_code)
    raise typer.Exit(print_outcome(outcome))


def fork_failed_tasks(plan: Plan, run: str, current: Settings, out: Optional[Path], workers: Optional[int],
                      model: Optional[str], preflight: bool = True) -> int:
    """`ga fanout --resume RUN --retry-failed --from-last-good`: fork RUN's failed tasks in RUN (the live turns on
    `model`, else each task's own); the exit code."""
    try:
        outcome = fork_failed(plan, run, settings=current, runs_dir=Path(out or current.fanout.runs_dir),
                              model=model, workers=workers or current.fanout.concurrency, preflight=preflight)
    except ReplayError as exc:
        fail(str(exc))
    return print_outcome(outcome)


def print_outcome(outcome: ReplayRun) -> int:
    for note in outcome.notes:
        console.print(f"note: {escape(note)}", highlight=False)
    forked = outcome.forked_from or outcome.run_exit_code is not None
    for task in outcome.tasks:
        style = status_style(task.status)
        mark = "identical" if not task.divergences else f"{len(task.divergences)} difference(s)"
        if forked:
            mark = f"{task.live_usage.total:,} live tokens"
            if task.spent.total > task.live_usage.total:
                mark += f" · {task.spent.total:,} in all, its earlier attempt's included"
        console.print(f"{escape(task.task_id)}: [{style}]{task.status}[/] after {task.turns} turn(s) · {mark}",
                      highlight=False)
        for divergence in task.divergences:
            say(f"  {divergence.line()}")
            for line in difference_diff(divergence):
                style = "red" if line.startswith("-") else "green" if line.startswith("+") else "dim"
                console.print(Text(f"    {line}", style=style), overflow="ellipsis", no_wrap=True)
    verdict = (f"forked from {outcome.forked_from}" if outcome.forked_from else "forked the failed tasks" if forked else
               "replayed identically" if outcome.identical else "the replay differs from the recording")
    say(f"{verdict} · run directory: {outcome.run_dir}")
    return outcome.exit_code
