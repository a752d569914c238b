"""`ga explore`: grow the skill tree, one cycle now or cycles while the machine is idle (skilltree.explore_modes).

skilltree.explore_modes (the cycle, consolidation, verification: 72 modules, ~70 ms) is imported when `ga explore`
runs, not for `ga explore --help`.
"""
from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Iterator, Optional

import typer
from rich.markup import escape
from rich.table import Table

from cli.kit import NOW_HELP, console, emit_json, emit_json_line, fail, say, settings
from cli.skills import skills_now
from cli.turns import check_model
from configs import Settings
from orchestrator.triggers.durations import parse_duration
from worker.model import ModelError

if TYPE_CHECKING:
    from skilltree.explore import CycleResult  # imported when `ga explore` runs: see the module's docstring

commands = typer.Typer()


def _explore_table(result: CycleResult) -> None:
    table = Table(box=None, pad_edge=False, header_style="bold", title=f"exploration {result.run_id}",
                  title_justify="left")
    for column in ("task", "category", "score", "outcome", "skill", "generation"):
        table.add_column(column, overflow="fold", no_wrap=column in ("task", "skill"))  # ids stay whole at 80 columns
    styles = {"skill": "green", "evidence": "green", "report": "yellow", "already": "dim"}
    plans = {t.task_id: t for t in result.tasks}
    for item in result.outcomes:
        task = plans[item.task_id]
        table.add_row(item.task_id, task.category, f"{task.predicted:.2f}",
                      f"[{styles.get(item.outcome, 'red')}]{item.outcome}[/]", item.skill_id or "-",
                      str(item.generation) if item.generation is not None else "-")
    console.print(table)
    for item in result.outcomes:
        if item.problems:
            console.print(f"  {item.task_id}: {escape('; '.join(item.problems))}", highlight=False, soft_wrap=True)
    counts = ", ".join(f"{n} {k}" for k, n in sorted(result.counts().items())) or "no task ran"
    say(f"{result.status}: {counts} · {result.tokens:,} tokens · ${result.cost:.4f} · {result.run_dir}")


def _show_explore_record(record: dict, as_json: bool) -> None:
    if as_json:
        emit_json_line(record)
        return
    details = {k: v for k, v in record.items() if k not in ("time", "event")}
    text = details.pop("why", None) or details.pop("error", None) or json.dumps(details, default=str)
    style = {"cycle_finished": "green", "cycle_failed": "red", "waiting": "yellow"}.get(record["event"], "bold")
    console.print(f"[dim]{record['time'][:19]}[/] [{style}]{record['event']}[/] {escape(str(text))}",
                  highlight=False, soft_wrap=True)



@contextmanager
def _explore_errors(model: Optional[str], current: Settings, user_errors: tuple) -> Iterator[None]:
    """Errors a user can cause (bad run, store, tree, a second daemon, the model) become one line."""
    try:
        yield
    except user_errors as exc:
        fail(str(exc))
    except ModelError as exc:
        fail(f"model {model or current.worker.model}: {exc}")


@commands.command("explore")
def explore_command(
    ctx: typer.Context,
    once: bool = typer.Option(False, "--once", help="Run one cycle now: plan, explore in parallel, verify, file skills"),
    when_idle: Optional[str] = typer.Option(None, "--when-idle", metavar="WINDOW",
                                            help="Run cycles whenever no `ga run`/`ga fanout` was active for WINDOW (e.g. 30m)"),
    resume: Optional[str] = typer.Option(None, "--resume", metavar="RUN", help="Finish an interrupted cycle (its unfinished tasks, then consolidation)"),
    consolidate: Optional[str] = typer.Option(None, "--consolidate", metavar="RUN",
                                              help="Collect, verify and file a cycle's finished tasks again (never files a task twice)"),
    model: Optional[str] = typer.Option(None, "--model", help="Model name (configs/models.yaml), scripted:FILE or scripted@URL"),
    batch: Optional[int] = typer.Option(None, "--batch", min=1, max=50, help="Tasks per cycle (explore.batch_size)"),
    candidates: Optional[int] = typer.Option(None, "--candidates", min=1, max=100, help="Candidates to plan from (explore.candidates)"),
    out: Optional[Path] = typer.Option(None, "--out", help="Directory for run directories (default: fanout.runs_dir)"),
    trigger: Optional[Path] = typer.Option(None, "--trigger", help="A .py file whose check() -> bool replaces the idle window (explore.idle_trigger)"),
    tick: float = typer.Option(60.0, "--tick", min=0.05, help="With --when-idle: seconds between two looks"),
    max_cycles: Optional[int] = typer.Option(None, "--max-cycles", min=1, hidden=True, help="With --when-idle: stop after N cycles"),
    as_json: bool = typer.Option(False, "--json", help="Print the result (or each daemon record) as JSON"),
    now: Optional[str] = typer.Option(None, hidden=True, help=NOW_HELP),
) -> None:
    """Grow the skill tree: one exploration cycle (--once), or cycles while the machine is idle (--when-idle)."""
    from skilltree import explore_modes as modes  # here: +72 modules on `ga explore --help` (docstring)

    try:
        mode = modes.pick_mode(once, when_idle, resume, consolidate)
    except modes.ExploreError as exc:
        fail(str(exc))
    current = settings(ctx, **{"worker.model": model, "fanout.runs_dir": out})
    trigger = trigger or current.explore.idle_trigger
    if trigger is not None and not Path(trigger).is_file():
        fail(f"--trigger {trigger}: no such file; give a .py file with def check() -> bool")
    display = "quiet" if as_json else None
    options = dict(model_name=model, candidates=candidates, batch_size=batch, display=display)
    if mode == "--when-idle":
        assert when_idle  # pick_mode chose the mode whose option was given
        _when_idle(modes, current, when_idle, model, trigger, tick, max_cycles, as_json, options)
        return
    with _explore_errors(model, current, modes.USER_ERRORS):
        when = skills_now(now) if now else None
        if mode == "--once":
            check_model(model, current)
            result = modes.explore_once(current, when, **options)
        elif mode == "--resume":
            assert resume
            result = modes.resume_cycle(current, resume, now=when, display=display)
        else:
            assert consolidate
            result = modes.consolidate_run(current, consolidate, now=when)
    if as_json:
        emit_json({**result.record(), "outcomes": [vars(o) for o in result.outcomes],
                   "plan": str(result.run_dir / "plan.json")})
    else:
        _explore_table(result)
    raise typer.Exit(0 if result.status == "consolidated" else 1)


def _when_idle(modes: ModuleType, current: Settings, when_idle: str, model: Optional[str], trigger: Optional[Path], tick: float,
               max_cycles: Optional[int], as_json: bool, options: dict) -> None:
    try:
        window = parse_duration(when_idle)
    except ValueError as exc:
        fail(f"--when-idle: {exc}")
    check_model(model, current)
    with _explore_errors(model, current, modes.USER_ERRORS):
        summary = modes.explore_when_idle(current, window, trigger=trigger, tick=tick, max_cycles=max_cycles,
                                          on_record=lambda record: _show_explore_record(record, as_json), **options)
    if not as_json:
        console.print(f"{summary.cycles} cycle(s); stopped by {summary.stopped_by}", highlight=False)
