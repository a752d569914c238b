"""`ga fanout`, `ga run`, `ga chat` and `ga replay`: the commands that put workers to work for a person (a replay
runs a recorded run's tasks again without a model call, or forks one onto a live model).

The first three are user jobs (orchestrator.triggers.activity) that `ga explore --when-idle` waits for. Modules that
load the agent loop (worker.agent: the tools, playwright) are imported inside the command that runs it,
so that `ga --help` does not pay for them; Ray is imported by the fan-out itself when it starts.
"""
from __future__ import annotations

import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer
from rich.markup import escape
from rich.text import Text

from cli.kit import console, emit_json, err_console, fail, fail_lines, invocation, must_be_dir, say, settings
from cli.turns import ToolClock, ask_person, model_problem, preflight_run, text_stream, turn_printer
from configs import Settings
from orchestrator import FanoutError, Run
from orchestrator import dry_run as plan_only
from orchestrator import fanout as run_fanout
from orchestrator.exitcodes import DONE, INTERRUPTED, NOT_DONE, task_exit
from orchestrator.fanout import DryRun, nested_here, plan_for
from orchestrator.ledger import RunDir
from orchestrator.spec import Plan
from orchestrator.triggers.activity import user_job
from orchestrator.views.columns import Column, Rows
from orchestrator.views.digest import FULL_TABLE_MAX, print_run_digest
from orchestrator.views.outcome import session_workers
from orchestrator.views.progress import status_counts, status_style
from orchestrator.views.replaydiff import difference_diff
from orchestrator.views.runlist import list_runs, resume_command
from orchestrator.views.runview import REDUCE, load_run_view, runs_of_session
from orchestrator.views.tables import tasks_table
from worker.modelconfig import ModelConfigError, model_override
from worker.record import TaskRecord
from worker.sessionfiles import SessionError, find

if TYPE_CHECKING:
    from orchestrator.replay import ReplayRun

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
    from worker.oneshot import Abandoned, run_one  # the agent loop: see the module's docstring

    current = settings(ctx, **{"worker.model": model, "worker.max_turns": max_turns})
    must_be_dir("--workdir", workdir)
    model = model_override(model)
    if not no_preflight:
        preflight_run(model, continue_session, current)
    interactive = sys.stdin.isatty() and not as_json
    stream = text_stream() if sys.stdout.isatty() and not as_json else None
    show_turns = sys.stderr.isatty() and not as_json
    clock = ToolClock(stream) if show_turns else None
    started = time.time()
    try:
        with user_job(current.home_dir, "run"):  # `ga explore --when-idle` never starts while this runs
            result = run_one(task, current, model_name=model, workdir=workdir, interactive=interactive, ask=ask_person,
                             on_turn=turn_printer(stream, clock) if show_turns else None,
                             continue_session=continue_session, on_text=stream,
                             on_tool_start=clock.start if clock else None,
                             on_interrupt=lambda: say("stopping… (Ctrl-C again leaves at once)", "yellow", err_console))
    except (ModelConfigError, SessionError) as exc:
        fail(str(exc))
    except Abandoned as left:
        say(f"left at once · session {left.session_id} · continue it: {continue_command(ctx, left.session_id)}",
            "yellow", err_console)
        raise typer.Exit(INTERRUPTED) from None
    finally:
        if clock is not None:
            clock.stop()
    code = task_exit(result, session_workers(Path(current.fanout.runs_dir), result.task_id, started))
    if as_json:
        emit_json({**result.run_json(), "usage": result.spent.model_dump(),
                   **({"nested_usage": result.nested_usage.model_dump()} if result.nested_usage else {}),
                   "exit_code": code})
        raise typer.Exit(code)
    streamed = stream is not None and stream.close()
    if not (streamed and result.status in ("succeeded", "unverified")):  # a streamed answer is on the screen already
        console.print(result.answer, markup=False, highlight=False, soft_wrap=True)
    if code == INTERRUPTED:
        say(f"stopped after {_turns(result.turns)}, {result.spent.total:,} tokens · session {result.task_id}", "yellow",
            err_console)
        say(f"continue it: {continue_command(ctx, result.task_id)}", to=err_console)
    elif show_turns or code != DONE or result.status != "succeeded":  # piped: a label that is not plain success
        say(outcome_line(result, code), to=err_console)
    raise typer.Exit(code)


def outcome_line(result: TaskRecord, code: int) -> Text:
    """`succeeded after 2 turns, 12,927 tokens (3,533 its own, 9,394 in 1 fan-out) · session ID`: the label, the
    one count of tokens, why it is not done."""
    spent, nested = result.spent, result.nested_usage
    split = (f" ({result.usage.total:,} its own, {spent.total - result.usage.total:,} in {nested.runs} "
             f"fan-out{'s' if nested.runs > 1 else ''})" if nested else "")
    why = f" ({result.reason})" if result.reason else ""
    if code == NOT_DONE and result.status in ("succeeded", "unverified") and not result.reason:
        why = " (none of the workers it started got done)"
    return Text.assemble((result.status, status_style(result.status)), f" after {_turns(result.turns)}, "
                         f"{spent.total:,} tokens{split}{why} · session {result.task_id}")


def _turns(count: int) -> str:
    return f"{count} turn{'' if count == 1 else 's'}"


def continue_command(ctx: typer.Context, session_id: str) -> str:
    """The command that goes on with a session, with the flags that find it again (`--home`)."""
    home = invocation(ctx).overrides.get("home")
    return f"ga {f'--home {home} ' if home else ''}run --continue {session_id} \"go on\""


@commands.command()
def chat(
    ctx: typer.Context,
    resume: Optional[str] = typer.Option(None, "--resume", help="Continue a session: its id (or a prefix of it), "
                                         "or `last` (the latest with a completed turn)"),
    model: Optional[str] = typer.Option(None, help="A name from configs/models.yaml or scripted:FILE"),
    no_preflight: bool = typer.Option(False, "--no-preflight", help="Skip the GET /models probe of the endpoint"),
) -> None:
    """A conversation with the parent agent: follow-ups, /help, /runs, /cost, /model, /resume, /quit; Ctrl-C stops
    a turn. The model (and its endpoint) is checked before the first message."""
    from worker.chat import Chat  # the agent loop: see the module's docstring

    current = settings(ctx, **{"worker.model": model})
    try:
        session = find(current, resume, answered=True) if resume else None
    except SessionError as exc:
        fail(str(exc))
    model = model_override(model)
    if not no_preflight:
        preflight_run(model or (session.model if session else None), None, current)
    stream = text_stream()
    clock = ToolClock(stream)
    try:
        Chat(current, console, session, model, show_turn=turn_printer(stream, clock), stream=stream,
             list_runs=lambda session_id: [dict(row) for row in runs_of_session(Path(current.fanout.runs_dir), session_id)],
             show_tool=clock.start, check_model=lambda name: model_problem(name, current)).loop()
    finally:
        clock.stop()


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
    from orchestrator import replay as replays  # the agent loop: see the module's docstring

    current = settings(ctx)
    if model and from_turn is None:
        fail("--model needs --from TURN: a replay calls no model")
    if tool_mode not in (None, "native", "text"):
        fail(f"--tool-mode {tool_mode}: use native or text")
    try:
        outcome = replays.replay(run, tasks or None, settings=current, runs_dir=Path(current.fanout.runs_dir), out=out,
                                 keep_going=keep_going, from_turn=from_turn, model=model, workers=workers,
                                 tool_mode=tool_mode, inputs=inputs, preflight=not no_preflight)
    except (replays.ReplayError, ModelConfigError) as exc:
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
    from orchestrator.replay import ReplayError, fork_failed  # the agent loop: see the module's docstring

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
