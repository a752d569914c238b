"""`ga reflect` and `ga schedule`: work started by a trigger script or a clock, shown one record a line."""
from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.text import Text

from cli.kit import console, emit_json, emit_json_line, fail, must_be_dir, settings
from cli.turns import check_model
from configs import Settings
from orchestrator.exitcodes import daemon_exit
from orchestrator.triggers.activity import Clock, local_now
from orchestrator.triggers.authority import writable_by_tasks
from orchestrator.triggers.jobrules import next_slot
from orchestrator.triggers.jobs import Job, JobsError, load_jobs
from orchestrator.triggers.reflect import TriggerError, load_trigger, reflect
from orchestrator.triggers.schedule import ScheduleError, load_state, run_schedule, schedule_dir
from orchestrator.triggers.stopping import stop_on_signals
from orchestrator.views.columns import Column, Paragraph, Rows

commands = typer.Typer()


def clock_at(value: Optional[str]) -> Optional[Clock]:
    """--now: a clock stopped at this ISO time (local time when it has no offset); None: the real clock."""
    if value is None:
        return None
    try:
        fixed = datetime.fromisoformat(value)
    except ValueError:
        fail(f"--now {value!r}: not an ISO time; use e.g. 2026-05-01T03:30:00+02:00")
    fixed = fixed if fixed.tzinfo else fixed.astimezone()
    return lambda: fixed


def show_daemon_record(record: dict, as_json: bool) -> None:
    """One line per reflect/schedule record: a task or job result, a skip, a reload."""
    if as_json:
        emit_json_line(record)
        return
    head = f"[dim]{record['time'][:19]}[/] " + (f"[bold]{escape(record['job'])}[/] " if "job" in record else "")
    status = record.get("status")
    if status is None:
        note = record.get("why") or record.get("error") or ""
        console.print(f"{head}[yellow]{record.get('event', '')}[/] {escape(str(note))}", highlight=False, soft_wrap=True)
        return
    details = []
    if "turns" in record:
        details.append(f"{record['turns']} turns, {record.get('tokens', 0):,} tokens")
    if "compressed" in record:
        details.append(f"{record['compressed']} session(s) compressed")
    if status != "succeeded" and record.get("reason"):
        details.append(record["reason"])
    what = " ".join(str(record.get("task") or record.get("builtin") or "").split())
    what = what if len(what) <= 80 else what[:79] + "…"
    style = "green" if status == "succeeded" else "red"
    console.print(Paragraph(Text.from_markup(f"{head}[{style}]{status}[/] {escape(what)} "
                                             f"({escape('; '.join(details))})")))
    if record.get("answer"):  # what the task answered, as `ga run` prints it
        console.print(record["answer"], markup=False, highlight=False, soft_wrap=True)


@commands.command("reflect")
def reflect_command(
    ctx: typer.Context,
    trigger: Path = typer.Argument(..., help="A .py file: check() returns a task or None; INTERVAL seconds; ONCE"),
    model: Optional[str] = typer.Option(None, "--model", help="Model name (configs/models.yaml), scripted:FILE or scripted@URL"),
    workdir: Optional[Path] = typer.Option(None, "--workdir", help="Where the tasks run (default: current directory)"),
    max_cycles: Optional[int] = typer.Option(None, "--max-cycles", min=1, help="Stop after this many check() calls"),
    as_json: bool = typer.Option(False, "--json", help="Print each record as a JSON line"),
) -> None:
    """Call TRIGGER's check() every INTERVAL seconds and hand each task it returns to a worker (Ctrl-C stops)."""
    current = settings(ctx, **{"worker.model": model})
    must_be_dir("--workdir", workdir)
    try:
        load_trigger(trigger, writable_by_tasks(current, [workdir]))
    except TriggerError as exc:
        fail(str(exc))
    check_model(model, current)
    with stop_on_signals() as stop:
        summary = reflect(trigger, current, model_name=model, workdir=workdir, max_cycles=max_cycles, stop=stop,
                          on_record=lambda record: show_daemon_record(record, as_json))
    tasks = [r for r in summary.records if r.get("event") == "task"]
    if not as_json:
        console.print(f"{summary.cycles} check(s), {len(tasks)} task(s), stopped by {summary.stopped_by}; "
                      f"log: {summary.log_path}", highlight=False, soft_wrap=True)
    raise typer.Exit(daemon_exit(tasks[-1:]))


@commands.command("schedule")
def schedule_command(
    ctx: typer.Context,
    jobs_file: Path = typer.Argument(..., help="Jobs file (see configs/examples/jobs.yaml)"),
    once: bool = typer.Option(False, "--once", help="Run what is due now, then exit (for cron and tests)"),
    list_jobs: bool = typer.Option(False, "--list", help="Show each job's next run and last result; run nothing"),
    tick: float = typer.Option(30.0, "--tick", min=0.05, help="Seconds between two looks at the clock"),
    model: Optional[str] = typer.Option(None, "--model", help="Model for task jobs without their own (default: worker.model)"),
    as_json: bool = typer.Option(False, "--json", help="Print each record (or, with --list, the jobs) as JSON"),
    max_ticks: Optional[int] = typer.Option(None, "--max-ticks", min=1, hidden=True, help="Stop after N ticks (tests)"),
    now: Optional[str] = typer.Option(None, hidden=True, help="With --once or --list: pretend it is this ISO time"),
) -> None:
    """Run the jobs of JOBS_FILE at their times of day or intervals; a missed run is caught up once within max_delay."""
    current = settings(ctx, **{"worker.model": model})
    if now is not None and not (once or list_jobs):
        fail("--now needs --once or --list (a stopped clock would never reach the next slot)")
    clock = clock_at(now)
    try:
        jobs = load_jobs(jobs_file)
        if list_jobs:
            _list_jobs(jobs, current, clock, as_json)
            return
        needing = [job.name for job in jobs if job.task and job.enabled and not job.model]
        if needing:
            check_model(model, current, f"{jobs_file}: job {needing[0]!r} runs a task with the default model: ")
        with stop_on_signals() as stop:
            summary = run_schedule(jobs_file, current, once=once, tick=tick, max_ticks=max_ticks, stop=stop,
                                   now=clock, model_name=model,
                                   on_record=lambda record: show_daemon_record(record, as_json))
    except (JobsError, ScheduleError) as exc:
        fail(str(exc))
    ran = [r for r in summary.records if r.get("event") == "ran"]
    if not as_json and once:
        console.print(f"{len(ran)} job(s) ran" + ("" if ran else " (nothing due)"), highlight=False)
    raise typer.Exit(daemon_exit(ran))


def _list_jobs(jobs: list[Job], current: Settings, clock: Optional[Clock], as_json: bool) -> None:
    moment = (clock or local_now)()
    stored = load_state(schedule_dir(current.home_dir) / "state.json")
    rows = []
    for job in jobs:
        entry = stored.get(job.name)
        upcoming = next_slot(job, moment) if job.enabled else None
        rows.append({"name": job.name, "what": job.task or f"builtin {job.builtin}", "when": job.describe(),
                     "enabled": job.enabled, "next": upcoming.isoformat() if upcoming else None,
                     "last_run": entry.state.last_run.isoformat() if entry and entry.state.last_run else None,
                     "last_status": entry.last_status if entry else None, "runs": entry.state.runs if entry else 0})
    if as_json:
        emit_json(rows)
        return
    columns = [Column("name", whole=True), Column("when", whole=True), Column("next", whole=True),
               Column("last run", whole=True), Column("status", whole=True), Column("runs", right=True, whole=True),
               Column("what", least=12)]

    def short(iso: Optional[str]) -> str:
        return iso[5:16].replace("T", " ") if iso else "-"

    console.print(Rows(columns, [[row["name"], row["when"] if row["enabled"] else "disabled", short(row["next"]),
                                  short(row["last_run"]), row["last_status"] or "-", str(row["runs"]), row["what"]]
                                 for row in rows]))


# explore (skilltree.explore: one cycle; skilltree.daemon: --when-idle)
