"""`ga fanout`: every task of a tasks file on a pool of workers, then its reduce step; a user job
(orchestrator.triggers.activity) that `ga explore --when-idle` waits for.

The agent loop and Ray are imported by the fan-out itself when it starts (orchestrator/fanout.py), so `ga fanout
--help` and `--dry-run` do without them.
"""
from __future__ import annotations

import time
from contextlib import nullcontext
from pathlib import Path
from typing import Optional

import typer

from cli.kit import console, emit_json, err_console, fail, fail_lines, say, settings
from orchestrator import FanoutError, Run
from orchestrator import dry_run as plan_only
from orchestrator import fanout as run_fanout
from orchestrator.exitcodes import INTERRUPTED
from orchestrator.fanout import DryRun, nested_here, plan_for
from orchestrator.ledger import RunDir
from orchestrator.triggers.activity import user_job
from orchestrator.views.columns import Column, Rows
from orchestrator.views.digest import FULL_TABLE_MAX, print_run_digest
from orchestrator.views.progress import status_counts
from orchestrator.views.runlist import list_runs, resume_command
from orchestrator.views.runview import REDUCE, load_run_view
from orchestrator.views.tables import tasks_table
from worker.modelconfig import model_override

commands = typer.Typer()
PLAN_ROWS = 50  # a dry run's table shows this many tasks


@commands.command()
def fanout(
    ctx: typer.Context,
    file: Optional[Path] = typer.Argument(None, metavar="FILE", help="Tasks file (see configs/examples/quickstart.yaml); with --resume, "
                                          "the run's own plan when not given"),
    model: Optional[str] = typer.Option(None, help="Run every task and the reduce on this model (a name from "
                                        "configs/models.yaml or scripted:FILE); GA_MODEL too, the flag first"),
    workers: Optional[int] = typer.Option(None, "--workers", "-w", min=1, help="Workers at once (default: the file's concurrency)"),
    resume: Optional[str] = typer.Option(None, "--resume", help="Run id (or run directory) to resume: only unfinished tasks run"),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="With --resume: run failed tasks again too"),
    from_last_good: bool = typer.Option(False, "--from-last-good", help="With --resume --retry-failed: fork each failed "
                                        "task from the turn after its last good tool run (`ga replay`)"),
    address: Optional[str] = typer.Option(None, "--address", help="run on Ray: auto (a `ray start` cluster), local (a private Ray), "
                                           "HOST:PORT or ray://HOST:PORT; without it, workers are threads of this process"),
    out: Optional[Path] = typer.Option(None, "--out", help="Directory for run directories (default: fanout.runs_dir)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the expanded plan with a cost upper bound; start nothing"),
    as_json: bool = typer.Option(False, "--json", help="Print a compact JSON result (for a parent agent's code_run)"),
    no_preflight: bool = typer.Option(False, "--no-preflight", help="Skip the GET /models probe of each endpoint"),
    executor: Optional[str] = typer.Option(None, "--executor", help="local (threads of this process), ray, or auto "
                                            "(the default: ray when an address is given); fanout.executor"),
) -> None:
    """Run every task of FILE on a pool of workers (in this process, or on Ray), then its reduce step.

    The model: --model, else GA_MODEL, else the tasks file's, else worker.model (configs)."""
    current = settings(ctx, **{"fanout.executor": executor})
    began = time.time()
    if retry_failed and not resume:
        fail("--retry-failed needs --resume RUN_ID (the run whose failed tasks should run again)")
    if from_last_good and not (resume and retry_failed):
        fail("--from-last-good needs --resume RUN_ID --retry-failed (it forks that run's failed tasks)")
    runs_dir = out or Path(current.fanout.runs_dir)
    try:
        if from_last_good:  # the run's own models for the recorded turns; --model is the live one
            from cli.replay import fork_failed_tasks  # here: the agent loop, +91 modules on `ga fanout --help`

            raise typer.Exit(fork_failed_tasks(plan_for(file, resume, runs_dir, None), str(resume), current, out,
                                               workers, model_override(model), preflight=not no_preflight))
        plan = plan_for(file, resume, runs_dir, model)
        if dry_run:
            expanded = plan_only(plan, current)
            # indented, json's pure-Python encoder took 4 s for 100,000 tasks: a large plan is printed on one line
            emit_json(expanded, indent=2 if len(expanded["tasks"]) <= PLAN_ROWS else None) if as_json \
                else print_plan(expanded)
            return
        # A nested fan-out (from a task's sandboxed code_run, GA_HOME read-only) is part of its parent's job.
        nested = nested_here()
        with nullcontext() if nested else user_job(current.home_dir, "fanout"):  # explore --when-idle waits
            # nested: the parent runs it from the tasks file as the task wrote it (orchestrator.fanout)
            result = run_fanout(file if nested and file else plan, workers=workers, resume=resume, retry_failed=retry_failed, address=address,
                                out=out, settings=current, display="quiet" if as_json else None,
                                preflight=not no_preflight)
    except FanoutError as exc:
        fail_lines(str(exc))
    except KeyboardInterrupt:
        left = _run_left(runs_dir, resume, began)
        if left:  # interrupted again while it stopped: the run is there, its unfinished tasks left to resume
            say(f"interrupted: run {left.name} stopped · resume it with "
                f"`{resume_command(left, Path(current.fanout.runs_dir))}`", "yellow", err_console)
        else:
            say("interrupted before the run started; nothing ran", "yellow", err_console)
        raise typer.Exit(INTERRUPTED) from None
    code = result.exit_code  # the one rule (orchestrator/exitcodes.py), applied by the run as it ended
    if as_json:
        emit_json({**result.compact(), "exit_code": code})
    else:
        print_run(result)
    raise typer.Exit(code)


def _run_left(runs_dir: Path, resume: Optional[str], began: float) -> Optional[Path]:
    """The run an interrupted `ga fanout` leaves: the one it resumed, or one it started; None if none started."""
    if resume:
        try:
            return RunDir.existing(runs_dir, resume).path
        except FileNotFoundError:
            return None
    started = [run for run in list_runs(runs_dir) if run["started"] >= began]
    return Path(started[0]["path"]) if started else None


def print_plan(plan: DryRun) -> None:
    """The plan's table, its first PLAN_ROWS tasks (and the reduce) when it has more; `--json` lists them all."""
    columns = [Column("id", whole=True), Column("model", least=12), Column("turns", right=True, whole=True),
               Column("timeout", right=True, whole=True), Column("inputs", least=8),
               Column("max cost", right=True, whole=True), Column("prompt", least=12)]
    rows = plan["tasks"]
    hidden = max(0, len(rows) - PLAN_ROWS - (1 if plan["reduce"] else 0))
    if hidden:
        rows = rows[:PLAN_ROWS] + ([rows[-1]] if plan["reduce"] else [])
    cells = []
    for row in rows:
        model = str(row["model"])
        model = f"scripted:{Path(model[9:]).name}" if model.startswith("scripted:") else model
        cells.append([row["id"], model, str(row["max_turns"]), f"{row['timeout']:g}" if row["timeout"] else "-",
                      ", ".join(row["inputs"]) or "-", "?" if row["max_cost"] is None else f"${row['max_cost']:.4f}",
                      row["prompt"]])
    title = f"{plan['name']}: {len(plan['tasks'])} task(s) · {plan['concurrency']} at once · {plan['retries']} retries"
    console.print(Rows(columns, cells, title=title))
    if hidden:
        say(f"… and {hidden:,} more task(s); `ga fanout FILE --dry-run --json` lists every one")
    total = plan["total_max_cost"]
    budget = plan["budget"]
    say(f"upper bound on cost: {'?' if total is None else f'${total:.4f}'}"
        + (f" · budget: {budget['tokens'] or '-'} tokens, ${budget['cost'] or '-'}" if any(budget.values()) else "")
        + (f" · then reduce → reduce/{plan['reduce']['output']}" if plan["reduce"] else ""))


def print_run(result: Run) -> None:
    """The final table: every task, those the run did not finish with the turns and tokens they spent; a run of
    more than FULL_TABLE_MAX tasks prints a summary instead (orchestrator/views/digest.py)."""
    summary = result.summary
    if summary.tasks.total > FULL_TABLE_MAX:
        print_run_digest(console, result)
    else:
        view = load_run_view(result.run_dir.parent, str(result.run_dir))
        console.print(tasks_table([t for t in view.tasks if t.task_id != REDUCE],
                                  title=f"run {result.run_id}: {result.status}"))
    usage = summary.usage
    say(f"{status_counts(summary.tasks.model_dump())} · {usage.total:,} tokens ({usage.cached:,} cached) · "
        f"${usage.cost:.4f} · {summary.seconds:.1f}s")
    if summary.stop_note:
        say(summary.stop_note, "yellow")
    if result.reduce:
        say(f"reduce ({result.reduce.status}) → {result.reduce.path}")
        console.print(result.reduce.answer or result.reduce.reason, highlight=False, markup=False, soft_wrap=True)
    say(f"run directory: {result.run_dir}")  # a path longer than the line keeps a line of its own, whole
