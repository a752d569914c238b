"""`ga runs ...`: list, show, report and tail fan-out runs; tell or stop a running task."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.text import Text

from cli.kit import console, emit_json, err_console, fail, say, settings
from orchestrator.ledger import RunDir
from orchestrator.steer import SteerError, stop, tell
from orchestrator.views import runstream
from orchestrator.views.conversation import print_conversation
from orchestrator.views.report import write_report
from orchestrator.views.runlist import resolve_run, resume_command, scan
from orchestrator.views.runview import (
    load_run_view,
    replayed_requests,
)
from orchestrator.views.tables import runs_table
from orchestrator.views.tail import print_events

runs_app = typer.Typer(no_args_is_help=True, help="Fan-out runs: list, show, report, tail; tell or stop a running task.")


RUN_HELP = "Run id (see `ga runs list`; a unique prefix will do), `last`, or run directory"


def _runs_dir(ctx: typer.Context, out: Optional[Path]) -> Path:
    return out or Path(settings(ctx).fanout.runs_dir)


def _run(runs_dir: Path, run_id: str) -> RunDir:
    """The run named on the command line (an id, a prefix, `last` or a directory), or one line and exit 2."""
    try:
        return RunDir.existing(runs_dir, resolve_run(runs_dir, run_id))
    except FileNotFoundError as exc:
        fail(str(exc))


@runs_app.command("list")
def runs_list(
    ctx: typer.Context,
    out: Optional[Path] = typer.Option(None, "--out", help="Runs directory (default: fanout.runs_dir)"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON"),
) -> None:
    """Runs under the runs directory, newest first; a run whose records cannot be read is one line, `damaged`, and
    a warning on stderr says which file and why."""
    rows, damaged = scan(_runs_dir(ctx, out))
    for run in damaged:
        say(Text.assemble(("warning:", "yellow"), f" {run.line()}"), to=err_console)
    if as_json:
        emit_json(rows)
        return
    if not rows and not damaged:
        console.print(f"no runs in {_runs_dir(ctx, out)}", highlight=False)
        return
    every = sorted([*rows, *(run.row() for run in damaged)], key=lambda r: r["started"] or 0, reverse=True)
    console.print(runs_table(every))


@runs_app.command("show")
def runs_show(
    ctx: typer.Context,
    run_id: str = typer.Argument(..., help=RUN_HELP),
    task_id: Optional[str] = typer.Argument(None, help="A task id (or `reduce`): show its conversation turn by turn"),
    out: Optional[Path] = typer.Option(None, "--out", help="Runs directory (default: fanout.runs_dir)"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (with TASK: the requests as the model received them)"),
) -> None:
    """A run's summary, its results and the ledger's latest events; with TASK, that task's conversation."""
    run = _run(_runs_dir(ctx, out), run_id)
    if task_id is not None:
        _show_task(run, task_id, as_json)
        return
    if as_json:
        runstream.write_json(run, sys.stdout)
    else:
        runstream.print_table(console, run)


def _show_task(run: RunDir, task_id: str, as_json: bool) -> None:
    try:
        view = load_run_view(run.path.parent, str(run.path))
        view.task(task_id)
    except (FileNotFoundError, KeyError) as exc:
        fail(str(exc).strip("'\""))
    if as_json:
        emit_json(replayed_requests(view.history_path(task_id)))
    else:
        print_conversation(console, view, task_id)


@runs_app.command("report")
def runs_report(
    ctx: typer.Context,
    run_id: str = typer.Argument(..., help=RUN_HELP),
    out: Optional[Path] = typer.Option(None, "--out", help="Directory for report.html and report.md (default: the run's)"),
    runs_dir: Optional[Path] = typer.Option(None, "--runs-dir", help="Runs directory (default: fanout.runs_dir)"),
) -> None:
    """One self-contained HTML page (timeline, tokens and cost, failures, every conversation) and report.md."""
    run = _run(_runs_dir(ctx, runs_dir), run_id)
    view = load_run_view(run.path.parent, str(run.path))
    try:
        paths = write_report(view, out or view.path)
    except OSError as exc:
        fail(f"cannot write the report to {out or view.path}: {exc.strerror or exc}; choose another --out")
    console.print(f"report: {paths[0]}\n        {paths[1]}", highlight=False)


@runs_app.command("tell")
def runs_tell(
    ctx: typer.Context,
    run_id: str = typer.Argument(..., help=RUN_HELP),
    task_id: str = typer.Argument(..., help="The running task"),
    message: str = typer.Argument(..., help="What the task should know: added to its next request"),
    out: Optional[Path] = typer.Option(None, "--out", help="Runs directory (default: fanout.runs_dir)"),
) -> None:
    """Tell a running task something it missed (recorded in its history and the run's ledger)."""
    run = _run(_runs_dir(ctx, out), run_id)
    try:
        tell(str(run.path), task_id, message, out)
    except SteerError as exc:
        fail(str(exc))
    console.print(f"told {task_id}: its next request carries the note", highlight=False)


@runs_app.command("stop")
def runs_stop(
    ctx: typer.Context,
    run_id: str = typer.Argument(..., help=RUN_HELP),
    task_id: Optional[str] = typer.Argument(None, help="One running task (default: the whole run)"),
    out: Optional[Path] = typer.Option(None, "--out", help="Runs directory (default: fanout.runs_dir)"),
) -> None:
    """Stop one running task (it ends `stopped`, its processes killed; `ga fanout --resume` runs it again), or the
    whole run as Ctrl-C would."""
    run = _run(_runs_dir(ctx, out), run_id)
    try:
        stop(str(run.path), task_id, out)
    except SteerError as exc:
        fail(str(exc))
    resume = resume_command(run.path, Path(settings(ctx).fanout.runs_dir))
    if task_id:
        say(f"stopping {task_id}: the run goes on without it · when it ends, `{resume}` runs it again")
    else:
        say(f"stopping run {run.run_id}: its running tasks end within seconds · `{resume}` continues it")


@runs_app.command("tail")
def runs_tail(
    ctx: typer.Context,
    run_id: str = typer.Argument(..., help=RUN_HELP),
    out: Optional[Path] = typer.Option(None, "--out", help="Runs directory (default: fanout.runs_dir)"),
    lines: int = typer.Option(20, "-n", help="How many of the latest events to show first"),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing events as they come until the run ends"),
) -> None:
    """The run's events, one line each: time, task, event and what matters (attempt, worker, reason, ...).
    With -f, follows a running run until it ends."""
    run = _run(_runs_dir(ctx, out), run_id)
    print_events(console, run, lines, follow)
