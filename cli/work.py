"""`ga fanout`, `ga run` and `ga chat`: the commands that put workers to work for a person.

Each is a user job (orchestrator.triggers.activity) that `ga explore --when-idle` waits for. Modules that
load the agent loop (worker.agent: the tools, playwright) are imported inside the command that runs it,
so that `ga --help` does not pay for them; Ray is imported by the fan-out itself when it starts.
"""
from __future__ import annotations

import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table

from cli.kit import console, emit_json, err_console, fail, fail_lines, must_be_dir, settings
from cli.worker import ask_person, preflight_run, text_stream, turn_printer
from orchestrator import FanoutError, Run
from orchestrator import dry_run as plan_only
from orchestrator import fanout as run_fanout
from orchestrator.fanout import nested_here, plan_for
from orchestrator.triggers.activity import user_job
from orchestrator.views.digest import FULL_TABLE_MAX, print_run_digest
from orchestrator.views.progress import status_counts, status_style
from orchestrator.views.runview import REDUCE, load_run_view, runs_of_session
from orchestrator.views.tables import tasks_table
from worker.models import ModelConfigError, model_override

commands = typer.Typer()
PLAN_ROWS = 50  # a dry run's table shows this many tasks


@commands.command()
def run(
    ctx: typer.Context,
    task: str = typer.Argument(..., help="What the agent should do"),
    model: Optional[str] = typer.Option(None, help="A name from configs/models.yaml or scripted:FILE"),
    max_turns: Optional[int] = typer.Option(None, help="Stop after this many turns"),
    workdir: Optional[Path] = typer.Option(None, help="The worker's directory (default: current directory)"),
    continue_session: Optional[str] = typer.Option(None, "--continue", help="A session id (see `ga sessions list`), "
                                                   "a prefix of it, or `last`: TASK is a follow-up in that conversation"),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON"),
    no_preflight: bool = typer.Option(False, "--no-preflight", help="Skip the GET /models probe of the endpoint"),
) -> None:
    """Run one worker on TASK and show each turn live (every run is a session that can go on).

    stdout: the answer (or the JSON result); on a terminal the model's text streams there as it comes. stderr: each
    turn and the outcome when it is a terminal; piped, only a line when the task did not succeed."""
    from worker.conversations import SessionError
    from worker.oneshot import run_one  # the agent loop: see the module's docstring

    current = settings(ctx, **{"worker.model": model, "worker.max_turns": max_turns})
    must_be_dir("--workdir", workdir)
    model = model_override(model)
    if not no_preflight:
        preflight_run(model, continue_session, current)
    interactive = sys.stdin.isatty() and not as_json
    stream = text_stream() if sys.stdout.isatty() and not as_json else None
    show_turns = sys.stderr.isatty() and not as_json
    try:
        with user_job(current.home_dir, "run"):  # `ga explore --when-idle` never starts while this runs
            result = run_one(task, current, model_name=model, workdir=workdir, interactive=interactive, ask=ask_person,
                             on_turn=turn_printer(stream) if show_turns else None, continue_session=continue_session,
                             on_text=stream)
    except (ModelConfigError, SessionError) as exc:
        fail(str(exc))
    if as_json:
        emit_json(result.run_json())
    else:
        streamed = stream is not None and stream.close()
        if not (streamed and result.status in ("succeeded", "unverified")):  # a streamed answer is on the screen already
            console.print(result.answer, markup=False, highlight=False, soft_wrap=True)
        if show_turns or result.status != "succeeded":
            style = status_style(result.status)
            err_console.print(f"[{style}]{result.status}[/] after {result.turns} turns, {result.usage.total:,} tokens"
                              + (f" ({escape(result.reason)})" if result.reason else "")
                              + f" · session {result.task_id}", highlight=False, soft_wrap=True)
    raise typer.Exit(0 if result.status == "succeeded" else 1)  # unverified too: fail closed


@commands.command()
def chat(
    ctx: typer.Context,
    resume: Optional[str] = typer.Option(None, "--resume", help="Continue a session: its id (or a prefix of it), "
                                         "or `last` (the latest with a completed turn)"),
    model: Optional[str] = typer.Option(None, help="A name from configs/models.yaml or scripted:FILE"),
) -> None:
    """A conversation with the parent agent: follow-ups, /runs, /cost, /model, /resume, /quit; Ctrl-C stops a turn."""
    from worker.chat import Chat  # the agent loop: see the module's docstring
    from worker.conversations import SessionError, find

    current = settings(ctx, **{"worker.model": model})
    try:
        session = find(current, resume, answered=True) if resume else None
    except SessionError as exc:
        fail(str(exc))
    stream = text_stream()
    Chat(current, console, session, model_override(model), show_turn=turn_printer(stream), stream=stream,
         list_runs=lambda session_id: runs_of_session(Path(current.fanout.runs_dir), session_id)).loop()


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
    if retry_failed and not resume:
        fail("--retry-failed needs --resume RUN_ID (the run whose failed tasks should run again)")
    if from_last_good and not (resume and retry_failed):
        fail("--from-last-good needs --resume RUN_ID --retry-failed (it forks that run's failed tasks)")
    try:
        runs_dir = out or Path(current.fanout.runs_dir)
        if from_last_good:  # the run's own models for the recorded turns; --model is the live one
            from cli.replay import fork_failed_tasks

            raise typer.Exit(fork_failed_tasks(plan_for(file, resume, runs_dir, None), str(resume), current, out,
                                               workers, model_override(model)))
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
        err_console.print("interrupted before the run started; nothing ran")
        raise typer.Exit(130) from None
    if as_json:
        emit_json(result.compact())
    else:
        print_run(result)
    raise typer.Exit(result.exit_code)


def print_plan(plan: dict) -> None:
    """The plan's table, its first PLAN_ROWS tasks (and the reduce) when it has more; `--json` lists them all."""
    table = Table(title=f"{plan['name']}: {len(plan['tasks'])} task(s), {plan['concurrency']} at once, "
                        f"{plan['retries']} retries", title_justify="left")
    for column in ("id", "model", "turns", "timeout", "inputs", "max cost", "prompt"):
        table.add_column(column, overflow="fold")
    rows = plan["tasks"]
    hidden = max(0, len(rows) - PLAN_ROWS - (1 if plan["reduce"] else 0))
    if hidden:
        rows = rows[:PLAN_ROWS] + ([rows[-1]] if plan["reduce"] else [])
    for row in rows:
        cost = "?" if row["max_cost"] is None else f"${row['max_cost']:.4f}"
        prompt = row["prompt"].replace("\n", " ")
        model = str(row["model"])
        model = f"scripted:{Path(model[9:]).name}" if model.startswith("scripted:") else model
        table.add_row(row["id"], model, str(row["max_turns"]), str(row["timeout"] or "-"),
                      ", ".join(row["inputs"]) or "-", cost, prompt[:70] + ("…" if len(prompt) > 70 else ""))
    console.print(table)
    if hidden:
        console.print(f"… and {hidden:,} more task(s); `ga fanout FILE --dry-run --json` lists every one",
                      highlight=False, soft_wrap=True)
    total = plan["total_max_cost"]
    budget = plan["budget"]
    console.print(f"upper bound on cost: {'?' if total is None else f'${total:.4f}'}"
                  + (f" (budget: {budget['tokens'] or '-'} tokens, ${budget['cost'] or '-'})" if any(budget.values()) else "")
                  + (f"; then reduce → reduce/{plan['reduce']['output']}" if plan["reduce"] else ""), highlight=False)


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
    console.print(f"{status_counts(summary.tasks.model_dump())} · {usage.total:,} tokens ({usage.cached:,} cached) · "
                  f"${usage.cost:.4f} · {summary.seconds:.1f}s", highlight=False, soft_wrap=True)
    if summary.stop_note:
        console.print(f"[yellow]{summary.stop_note}[/yellow]", highlight=False, soft_wrap=True)
    if result.reduce:
        console.print(f"reduce ({result.reduce.status}) → {result.reduce.path}", highlight=False, soft_wrap=True)
        console.print(result.reduce.answer or result.reduce.reason, highlight=False, markup=False, soft_wrap=True)
    console.print(f"run directory: {result.run_dir}", highlight=False, soft_wrap=True)  # paths and answers never cut
