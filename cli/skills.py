"""`ga skills ...`: show, report, feedback and plan on the skill tree (skilltree.operations does the work).

worker.model.LLMClient (the model client and its transport: 62 modules, ~40 ms) is imported inside `ga skills plan`,
the one command that calls a model.
"""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Optional, TypeVar

import typer
from rich import box
from rich.table import Table

from cli.kit import NOW_HELP, console, emit_json, fail, settings
from memory_shared import MemoryStoreError
from skilltree import SkillTreeError
from skilltree.operations import build_report, run_feedback, run_plan, view
from skilltree.view import feedback_json, feedback_table, rich_tree, tree_json, weights_table
from worker.model import ModelError
from worker.modelconfig import ModelConfigError, resolve_model

T = TypeVar("T")
skills_app = typer.Typer(no_args_is_help=True, help="The skill tree: show, plan, report, feedback (weight adaptation).")


def skills_now(value: Optional[str]) -> datetime:
    """--now as an aware time (UTC when it has no offset); the real time when not given."""
    if not value:
        return datetime.now(timezone.utc)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        fail(f"--now {value!r}: not an ISO time; use e.g. 2026-05-01T12:00:00+00:00")
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def _skills_call(fn: Callable[..., T], *args: object, **kwargs: object) -> T:
    """Run a skilltree operation; errors a user can cause become one line."""
    try:
        return fn(*args, **kwargs)
    except (MemoryStoreError, SkillTreeError) as exc:
        fail(str(exc))


@skills_app.command("show")
def skills_show(ctx: typer.Context, json_out: bool = typer.Option(False, "--json", help="Print the tree, weights and usage as JSON")) -> None:
    """Print the skill tree (categories, skills, uses from the memory access statistics) and the weights."""
    current = _skills_call(view, settings(ctx).memory_root)
    if json_out:
        emit_json(tree_json(current))
        return
    console.print(rich_tree(current))
    console.print(weights_table(current.tree))


@skills_app.command("report")
def skills_report(
    ctx: typer.Context,
    out: Path = typer.Option(Path("skills-report"), "--out", help="Directory for report.md and report.html"),
    reports: Optional[Path] = typer.Option(None, "--reports", help="Exploration reports directory (default: reports/ in the memory store)"),
    weeks: int = typer.Option(12, min=1, max=104, help="Weeks of usage history to chart"),
    runs: Optional[Path] = typer.Option(None, "--runs", help="Exploration runs directory, for plans and failures (default: fanout.runs_dir)"),
    now: Optional[str] = typer.Option(None, hidden=True, help=NOW_HELP),
) -> None:
    """Write report.md and a self-contained report.html (coverage, funnel, predictions, last plan, failures)."""
    if reports is not None and not reports.is_dir():
        fail(f"--reports {reports}: no such directory; give the folder holding the exploration reports (*.md)")
    if runs is not None and not runs.is_dir():
        fail(f"--runs {runs}: no such directory; give the folder holding the exploration runs (ga explore --out)")
    md, html = _skills_call(build_report, settings(ctx).memory_root, out, skills_now(now), reports, weeks,
                            runs or settings(ctx).fanout.runs_dir)
    console.print(f"wrote {md}\nwrote {html}", highlight=False, soft_wrap=True)


@skills_app.command("feedback")
def skills_feedback(
    ctx: typer.Context,
    dry_run: bool = typer.Option(False, "--dry-run", help="Judge and show, but commit nothing"),
    json_out: bool = typer.Option(False, "--json", help="Print the verdicts and the weights as JSON"),
    now: Optional[str] = typer.Option(None, hidden=True, help=NOW_HELP),
) -> None:
    """Apply the 30-day rule to skills created 30+ days ago and adapt the planner's weights (one commit)."""
    run = _skills_call(run_feedback, settings(ctx).memory_root, skills_now(now), dry_run, planner=settings(ctx).planner)
    if json_out:
        emit_json(feedback_json(run))
        return
    if not run.outcome or not run.outcome.judged:
        console.print("no skill is due: each is judged once, 30 days after its creation")
    else:
        console.print(feedback_table(run))
    if run.outcome:
        console.print(weights_table(run.outcome.tree))
    if run.generation is not None:
        console.print(f"committed generation {run.generation}")
    elif dry_run and run.outcome and run.outcome.judged:
        console.print("dry run: nothing committed")


@skills_app.command("plan")
def skills_plan(
    ctx: typer.Context,
    model: Optional[str] = typer.Option(None, "--model", help="Model name (configs/models.yaml), scripted:FILE or scripted@URL"),
    run_dir: Optional[Path] = typer.Option(None, "--run-dir", help="Where plan.json goes (default: <runs_dir>/plan-<time>)"),
    candidates: Optional[int] = typer.Option(None, min=1, max=100, help="Candidates to ask for (explore.candidates)"),
    batch: Optional[int] = typer.Option(None, min=1, max=50, help="Tasks to select (explore.batch_size)"),
    json_out: bool = typer.Option(False, "--json", help="Print the plan as JSON"),
    now: Optional[str] = typer.Option(None, hidden=True, help=NOW_HELP),
) -> None:
    """Plan one exploration batch: the model proposes and judges, §6 scores, 4+ categories selected."""
    from worker.model import LLMClient  # here: +62 modules on every `ga skills` command (docstring)

    current = settings(ctx)
    when = skills_now(now)
    target = run_dir or current.fanout.runs_dir / f"plan-{when:%Y%m%d-%H%M%S}"
    try:
        client = LLMClient(resolve_model(model, current))
    except ModelConfigError as exc:
        fail(str(exc))
    try:
        result = _skills_call(run_plan, current.memory_root, client, target, when,
                              candidates=candidates or current.explore.candidates,
                              batch_size=batch or current.explore.batch_size, planner=current.planner)
    except ModelError as exc:
        fail(f"model {model or current.worker.model}: {exc}")
    if json_out:
        emit_json(result.model_dump(mode="json"))
        return
    table = Table(title=f"plan: {len(result.selected)} of {len(result.candidates)} candidates, "
                        f"{result.categories_covered} categories", title_justify="left", box=box.SIMPLE_HEAD,
                  show_edge=False, padding=0, caption="b d u i: breadth, depth, utility, innovation; score: the §6 "
                  "score; rank: the ranking (score and demand)", caption_justify="left")
    table.add_column("", no_wrap=True)
    table.add_column("title", ratio=3, min_width=16)  # the columns of words share what the figures leave
    table.add_column("category", ratio=1, min_width=8, overflow="fold")
    for column in ("b", "d", "u", "i", "score", "demand", "rank"):
        table.add_column(column, justify="right", no_wrap=True)
    for item in result.candidates:
        table.add_row("✔" if item in result.selected else "", item.title, item.category,
                      *(f"{x:.1f}" for x in item.vector.values()), f"{item.score:.2f}",
                      f"{item.demand:.1f}" if item.demand is not None else "-", f"{item.rank_score:.2f}")
    console.print(table)
    if result.dropped:
        console.print(f"{len(result.dropped)} invalid items dropped (see plan.json)")
    console.print(f"wrote {target / 'plan.json'}", highlight=False, soft_wrap=True)


# reflect, schedule (orchestrator.triggers.reflect, orchestrator.triggers.schedule) and the activity records
