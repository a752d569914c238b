"""The `ga` command: parses arguments, calls into the packages, prints. No logic lives here."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, NoReturn, Optional

import typer
import typer.core
from rich.console import Console

from configs import ConfigError, Settings, load_settings
from configs.logs import setup_logging


class _UserErrors(typer.core.TyperGroup):
    """The one place a user-caused error (configs/usererrors.py) becomes `error:` lines and exit 2."""

    def invoke(self, ctx: Any) -> Any:
        import os

        from configs.usererrors import describe_user_error

        try:
            return super().invoke(ctx)
        except Exception as exc:
            text = None if os.environ.get("GA_TRACEBACK") else describe_user_error(exc)
            if text is None:
                raise
            _fail_lines(text)


app = typer.Typer(cls=_UserErrors, no_args_is_help=True, add_completion=False,
                  help="Run GenericAgent-style LLM workers in parallel.")
memory_app = typer.Typer(no_args_is_help=True, help="The shared memory tier: show, log, diff, verify, repair, gc, archive.")
app.add_typer(memory_app, name="memory")
console = Console()
err_console = Console(stderr=True)


class State:
    overrides: dict[str, Any] = {}


def fail(message: str, code: int = 2) -> NoReturn:
    """A user-caused error: one line, no traceback."""
    err_console.print(f"[red]error:[/red] {message}", highlight=False, markup=True, soft_wrap=True)  # never wrapped
    raise typer.Exit(code)


def settings(**flags: Any) -> Settings:
    try:
        return load_settings({**State.overrides, **flags})
    except ConfigError as exc:
        fail(str(exc))


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


@app.callback()
def main(
    ctx: typer.Context,
    log_level: Optional[str] = typer.Option(None, help="debug, info, warning or error"),
    log_json: Optional[Path] = typer.Option(None, help="Also write JSON log lines to this file"),
    home: Optional[Path] = typer.Option(None, help="GA home directory (memory, activity); default ~/.ga"),
) -> None:
    State.overrides = {"log.level": log_level, "log.json_file": log_json, "home": home}
    current = settings()
    setup_logging(current.log.level, current.log.json_file)
    _record_command(current, ctx.invoked_subcommand)  # GA_HOME/activity: read by the idle test


# ---- memory (memory_shared) -------------------------------------------------
from contextlib import contextmanager  # noqa: E402  (kept inside this section: the file is shared)
from typing import Iterator  # noqa: E402


@contextmanager
def _memory_errors() -> Iterator[None]:
    """Errors a user can cause (missing or corrupt store, bad path or generation) become one line."""
    from memory_shared import MemoryStoreError

    try:
        yield
    except (MemoryStoreError, ValueError) as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"{exc.filename or settings().memory_root}: {exc.strerror}; check GA_HOME or memory.root in your config")


def _memory_store(create: bool = False) -> Any:
    from memory_shared import MemoryStore

    current = settings()
    with _memory_errors():
        return MemoryStore(current.memory_root, l1_max_lines=current.memory.l1_max_lines,
                           l1_max_chars=current.memory.l1_max_chars, create=create)


def _commit_rows(commits: list[Any]) -> Any:
    from datetime import datetime

    from rich.table import Table

    table = Table(show_edge=False, header_style="bold")
    for column in ("gen", "time", "author", "message", "paths"):
        table.add_column(column, overflow="fold")
    for commit in commits:
        table.add_row(str(commit.generation), datetime.fromtimestamp(commit.time).strftime("%Y-%m-%d %H:%M:%S"),
                      commit.author, commit.message.splitlines()[0] if commit.message else "",
                      ", ".join(commit.paths[:4]) + (f" (+{len(commit.paths) - 4})" if len(commit.paths) > 4 else ""))
    return table


def _memory_verify_or_fail(store: Any, as_json: bool = False) -> None:
    with _memory_errors():
        problems = store.verify()
    if as_json:
        emit_json({"root": str(store.root), "ok": not problems, "problems": problems})
    if problems:
        more = f" (+{len(problems) - 1} more: `ga memory verify --json`)" if len(problems) > 1 else ""
        if not as_json:
            fail(f"memory store at {store.root} is corrupt: {problems[0]}{more}; run `ga memory repair "
                 "--dry-run` to see the fix, then `ga memory repair`")
        raise typer.Exit(2)


@memory_app.command("init")
def memory_init() -> None:
    """Create the memory store (generation 0 holds the shipped L0-L3 defaults); safe to re-run."""
    from memory_shared import MemoryStore

    root = settings().memory_root
    existed = MemoryStore.exists(root)
    store = _memory_store(create=True)
    verb = "already exists" if existed else "created"
    console.print(f"memory store {verb} at [bold]{store.root}[/]; HEAD = generation {store.head()}", highlight=False)


@memory_app.command("show")
def memory_show(
    path: Optional[str] = typer.Argument(None, help="A file or folder relative to the store, e.g. L2/facts.md"),
    generation: Optional[int] = typer.Option(None, "--generation", "-g", help="Default: HEAD"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON"),
) -> None:
    """Show a generation: its files and the L1 index, or one file's text."""
    from memory_shared import GenerationMissing, render_l1

    store = _memory_store()
    with _memory_errors():
        try:
            snapshot = store.snapshot(generation)
        except GenerationMissing:
            if generation is not None:
                raise
            fail(f"memory store at {store.root} is corrupt: HEAD {store.head()} has no generation; "
                 "run `ga memory verify`")
    with _memory_errors(), snapshot as snap:
        text = snap.read(path) if path else None
        files = [f for f in snap.files() if not path or f.startswith(path.rstrip("/") + "/")]
        if path and text is None and not files:
            fail(f"{path}: not in generation {snap.generation} of {store.root}; `ga memory show` lists the files")
        if as_json:
            emit_json({"generation": snap.generation, "path": path, "text": text} if text is not None
                      else {"generation": snap.generation, "files": files})
            return
        if text is not None:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
            return
        from rich.panel import Panel
        from rich.table import Table

        table = Table(show_edge=False, header_style="bold")
        table.add_column("path")
        table.add_column("bytes", justify="right")
        for rel in files:
            table.add_row(rel, f"{(snap.path / rel).stat().st_size:,}")
        console.print(f"generation {snap.generation} of {store.root}", highlight=False)
        console.print(table)
        if not path:
            console.print(Panel(render_l1(snap.path, store.l1_max_lines, store.l1_max_chars), title="L1 index",
                                expand=False), markup=False)


@memory_app.command("log")
def memory_log(
    limit: Optional[int] = typer.Option(None, "--limit", "-n", min=1, help="Only the newest N commits"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON"),
) -> None:
    """List commits, newest last."""
    from dataclasses import asdict

    store = _memory_store()
    with _memory_errors():
        commits = store.log()
    commits = commits[-limit:] if limit else commits
    if as_json:
        emit_json([asdict(commit) for commit in commits])
    else:
        console.print(_commit_rows(commits))


@memory_app.command("diff")
def memory_diff(
    gen_a: int = typer.Argument(..., help="The older generation"),
    gen_b: int = typer.Argument(..., help="The newer generation"),
    patch: bool = typer.Option(False, "--patch", "-p", help="Also show the text changes of modified files"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON"),
) -> None:
    """What changed between two generations, by path."""
    import difflib

    store = _memory_store()
    with _memory_errors():
        changes = store.diff(gen_a, gen_b)
        texts = {}
        if patch:
            with store.snapshot(gen_a) as left, store.snapshot(gen_b) as right:
                texts = {c.path: (left.read(c.path) or "", right.read(c.path) or "") for c in changes}
    if as_json:
        emit_json([{"path": c.path, "kind": c.kind} for c in changes])
        return
    colors = {"added": "green", "deleted": "red", "modified": "yellow"}
    for change in changes:
        console.print(f"[{colors.get(change.kind, 'white')}]{change.kind:>8}[/] {change.path}", highlight=False)
        if change.path in texts:
            old, new = texts[change.path]
            lines = difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"{gen_a}/{change.path}",
                                         f"{gen_b}/{change.path}")
            sys.stdout.write("".join(lines))
    if not changes:
        console.print(f"generations {gen_a} and {gen_b} are identical")


@memory_app.command("verify")
def memory_verify(
    as_json: bool = typer.Option(False, "--json", help="Print JSON"),
    quick: bool = typer.Option(False, "--quick", help="Check only HEAD's contents against its manifest"),
) -> None:
    """Check the store (HEAD, log, generations, contents against manifests); exit 2 if anything is wrong."""
    store = _memory_store()
    for line in store.recovered:  # what opening the store fixed by itself (also in events.jsonl)
        console.print(f"[yellow]fixed[/]: {line}", highlight=False, soft_wrap=True)
    with _memory_errors():
        problems = store.verify(quick=quick)
    if as_json:
        emit_json({"root": str(store.root), "ok": not problems, "problems": problems, "fixed": store.recovered})
    if problems:
        more = f" (+{len(problems) - 1} more: `ga memory verify --json`)" if len(problems) > 1 else ""
        if not as_json:
            fail(f"memory store at {store.root}: {problems[0]}{more}; run `ga memory repair --dry-run` to see the "
                 "fix, then `ga memory repair`")
        raise typer.Exit(2)
    if not as_json:
        console.print(f"[green]ok[/]: {store.root}, HEAD = generation {store.head()}, {len(store.log())} commits"
                      f"{' (HEAD only)' if quick else ''}", highlight=False)


@memory_app.command("repair")
def memory_repair(dry_run: bool = typer.Option(False, "--dry-run", help="Show what would be done; change nothing")) -> None:
    """Settle what recovery would not decide alone; whatever is removed goes to quarantine/, never deleted."""
    store = _memory_store()
    for line in store.recovered:
        console.print(f"[yellow]fixed[/]: {line}", highlight=False, soft_wrap=True)
    with _memory_errors():
        done, unsolved = store.repair(dry_run=dry_run)
    for line in done:
        console.print(f"{'would' if dry_run else 'done'}: {line}", highlight=False, soft_wrap=True)
    if unsolved:
        more = f" (+{len(unsolved) - 1} more)" if len(unsolved) > 1 else ""
        fail(f"memory store at {store.root}: cannot repair: {unsolved[0]}{more}")
    if not dry_run:
        with _memory_errors():
            problems = store.verify()
        if problems:
            fail(f"memory store at {store.root}: still wrong after repair: {problems[0]}")
    console.print(f"[green]{'nothing to repair' if not done else 'repaired' if not dry_run else 'dry run'}[/]: "
                  f"{store.root}", highlight=False)


@memory_app.command("gc")
def memory_gc(keep: int = typer.Option(..., "--keep", min=1, help="Keep the newest N generations (and pinned ones)")) -> None:
    """Remove old generations nobody pins."""
    store = _memory_store()
    with _memory_errors():
        removed = store.gc(keep)
    console.print(f"removed {len(removed)} generation(s)" + (f": {removed[0]}..{removed[-1]}" if removed else ""))


@memory_app.command("archive")
def memory_archive(
    compress: bool = typer.Option(False, "--compress", help="Fold old raw sessions into monthly archives"),
    older_than: int = typer.Option(7, "--older-than", min=0, help="With --compress: sessions older than N days"),
    search: Optional[str] = typer.Option(None, "--search", help="Sessions whose text contains this"),
    date: Optional[str] = typer.Option(None, "--date", help="Sessions of a day (YYYY-MM-DD) or month (YYYY-MM)"),
    task: Optional[str] = typer.Option(None, "--task", help="Sessions of this task id"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON"),
) -> None:
    """The L4 session archive: status, compress, search."""
    from memory_shared import Archive

    store = _memory_store()
    archive = Archive(store.root, keep_months=settings().memory.archive_keep_months)
    with _memory_errors():
        if compress:
            done = archive.compress(older_than_days=older_than)
            if not as_json:
                console.print(f"compressed {len(done['compressed'])} session(s); "
                              f"months dropped to a summary: {', '.join(done['months_dropped']) or 'none'}")
        if search is not None or date is not None or task is not None:
            found = archive.search(date=date, task_id=task, text=search)
            if as_json:
                emit_json(found)
                return
            for record in found:
                if record["state"] == "summarized":
                    console.print(f"[dim]{record['month']}[/] summarized: {record['sessions']} sessions", highlight=False)
                    continue
                console.print(f"[bold]{record['date']} {record['task_id']}[/] [dim]{record['state']}, "
                              f"{record['turns']} turns[/]", highlight=False)
                for line in record["user"][:3]:
                    console.print(f"  user: {line[:160]}", markup=False, highlight=False)
                console.print(f"  final: {' '.join(record['final'].split())[:160]}", markup=False, highlight=False)
            console.print(f"{len(found)} session(s)")
            return
        status = archive.status()
    if as_json:
        emit_json(status)
        return
    months = ", ".join(f"{m} ({n})" for m, n in status["months"].items()) or "none"
    console.print(f"{store.root / 'archive'}: {status['raw_sessions']} raw session(s); monthly archives: {months}; "
                  f"summarized months: {', '.join(status['summarized_months']) or 'none'}", highlight=False)


@memory_app.command("stats")
def memory_stats(
    days: Optional[float] = typer.Option(None, "--days", min=0, help="Only reads of the last N days"),
    prefix: Optional[str] = typer.Option(None, "--prefix", help="Only paths starting with this, e.g. L3/"),
    tasks: bool = typer.Option(False, "--tasks", help="Count distinct tasks instead of reads"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON"),
) -> None:
    """Reads of memory files (from the access log), per path."""
    import time

    from memory_shared import AccessLog

    store = _memory_store()
    since = time.time() - days * 86400 if days is not None else None
    counts = AccessLog(store.root).counts(since=since, prefix=prefix, distinct_tasks=tasks)
    if as_json:
        emit_json(counts)
        return
    for path, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        console.print(f"{count:>6}  {path}", markup=False, highlight=False)
    if not counts:
        console.print("no reads recorded")


@memory_app.command("demo")
def memory_demo(
    directory: Optional[Path] = typer.Option(None, "--dir", help="Where to create the demo store (default: a new temp dir)"),
    processes: int = typer.Option(8, min=2, help="Processes committing at once"),
    commits: int = typer.Option(5, min=1, help="Commits per process"),
) -> None:
    """Show the memory tier working: concurrent commits, snapshot isolation, a conflict, the gate."""
    import tempfile

    from memory_shared import MemoryStore
    from memory_shared.demo import run_demo

    if directory is not None and directory.exists() and any(directory.iterdir()) and not MemoryStore.exists(directory):
        fail(f"--dir {directory}: not empty and not a memory store; give a new or empty directory")
    root = directory or Path(tempfile.mkdtemp(prefix="ga-memory-demo-"))
    console.rule(f"ga memory demo · {root}")

    def say(title: str, detail: str) -> None:
        from rich.markup import escape

        console.print(f"[bold cyan]{title}[/]: {escape(detail)}", highlight=False)

    with _memory_errors():
        result = run_demo(root, say, processes=processes, commits=commits)
        store = MemoryStore(root)
        console.print(_commit_rows(store.log()[-6:]))
        _memory_verify_or_fail(store)
    console.print(f"[green]verify: ok[/] (HEAD = generation {store.head()}); look around with "
                  f"`GA_MEMORY__ROOT={root} ga memory log` (or show, diff, verify)", highlight=False)
    healthy = result["lost_updates"] == 0 and result["snapshot_stable"] and not result["failed_processes"]
    raise typer.Exit(0 if healthy and result["gate_generation"] is not None else 1)


# ---- run, fake-llm (worker) -------------------------------------------------


@app.command()
def run(
    task: str = typer.Argument(..., help="What the agent should do"),
    model: Optional[str] = typer.Option(None, help="A name from configs/models.yaml or scripted:FILE"),
    max_turns: Optional[int] = typer.Option(None, help="Stop after this many turns"),
    workdir: Optional[Path] = typer.Option(None, help="The worker's directory (default: current directory)"),
    continue_session: Optional[str] = typer.Option(None, "--continue", help="A session id (see `ga sessions list`): "
                                                   "TASK is a follow-up in that conversation"),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON"),
) -> None:
    """Run one worker on TASK and show each turn live (every run is a session that can go on)."""
    from orchestrator.triggers.activity import user_job
    from worker.models import ModelConfigError
    from worker.oneshot import run_one
    from worker.sessions import SessionError

    current = settings(**{"worker.model": model, "worker.max_turns": max_turns})
    if workdir is not None and not workdir.is_dir():
        fail(f"--workdir {workdir}: not a directory; create it or pass an existing one")
    interactive = sys.stdin.isatty() and not as_json
    stream = None if as_json else _text_stream()
    try:
        with user_job(current.home_dir, "run"):  # `ga explore --when-idle` never starts while this runs
            result = run_one(task, current, model_name=model, workdir=workdir, interactive=interactive, ask=_ask_person,
                             on_turn=None if as_json else _turn_printer(stream), continue_session=continue_session,
                             on_text=stream)
    except (ModelConfigError, SessionError) as exc:
        fail(str(exc))
    if as_json:
        emit_json(result.to_dict())
    else:
        from rich.markup import escape

        from orchestrator.display import status_style

        streamed = stream is not None and stream.close()
        style = status_style(result.status)
        console.print(f"[{style}]{result.status}[/] after {result.turns} turns, {result.usage.total:,} tokens"
                      + (f" ({escape(result.reason)})" if result.reason else ""))
        if not (streamed and result.status in ("succeeded", "unverified")):  # a streamed answer is on the screen already
            console.print(result.answer, markup=False)
    raise typer.Exit(0 if result.status == "succeeded" else 1)  # unverified too: fail closed


@app.command()
def chat(
    resume: Optional[str] = typer.Option(None, "--resume", help="Continue a session: its id, or `last`"),
    model: Optional[str] = typer.Option(None, help="A name from configs/models.yaml or scripted:FILE"),
) -> None:
    """A conversation with the parent agent: follow-ups, /runs, /cost, /model, /resume, /quit; Ctrl-C stops a turn."""
    from orchestrator.runview import runs_of_session
    from worker.chat import Chat
    from worker.sessions import SessionError, find

    current = settings(**{"worker.model": model})
    if State.overrides.get("log.level") is None:  # a conversation, not a log: only warnings unless asked
        setup_logging("warning", current.log.json_file)
    try:
        session = find(current, None if resume == "last" else resume) if resume else None
    except SessionError as exc:
        fail(str(exc))
    stream = _text_stream()
    Chat(current, console, session, model, show_turn=_turn_printer(stream), stream=stream,
         list_runs=lambda session_id: runs_of_session(Path(current.fanout.runs_dir), session_id)).loop()


sessions_app = typer.Typer(no_args_is_help=True, help="Sessions of `ga run` and `ga chat`: list them; continue one "
                                                      "with `ga chat --resume ID` or `ga run --continue ID`.")
app.add_typer(sessions_app, name="sessions")


@sessions_app.command("list")
def sessions_list(as_json: bool = typer.Option(False, "--json", help="Print JSON")) -> None:
    """Every session, the latest activity first: first task, turns, cost, last activity."""
    from worker.chat import sessions_table
    from worker.sessions import list_sessions

    rows = list_sessions(settings())
    if as_json:
        emit_json([row.model_dump() for row in rows])
    elif not rows:
        console.print("no sessions yet: `ga run \"TASK\"` or `ga chat` starts one")
    else:
        console.print(sessions_table(rows))


def _text_stream() -> Any:
    from worker.chat import TextStream

    return TextStream(sys.stdout.write, sys.stdout.flush)


def _turn_printer(stream: Any) -> Any:
    """The on_turn callback: a tool line, after ending any text the model streamed."""
    def show(event: dict) -> None:
        if stream is not None:
            stream.close()
        _show_turn(event)
    return show


def _show_turn(event: dict) -> None:
    mark = "[green]ok[/]" if event["ok"] else "[red]error[/]"
    console.print(f"[dim]t{event['turn']:<3}[/] [bold]{event['tool']}[/] {event['arguments'][:60]!r} -> {mark} "
                  f"{event['result_chars']:,} chars · {event['tokens']:,} tokens", highlight=False)


def _ask_person(question: str, candidates: list[str]) -> str:
    from rich.prompt import Prompt

    return Prompt.ask(question, choices=candidates or None, console=console)


@app.command("fake-llm")
def fake_llm(
    script: Path = typer.Option(..., "--script", help="Script YAML (format: worker/scripted/script.py)"),
    port: int = typer.Option(8765, help="Port on 127.0.0.1 (0: any free port)"),
    log: Optional[Path] = typer.Option(None, "--log", help="Append every request received to this JSONL file"),
) -> None:
    """Serve the scripted OpenAI-compatible model on 127.0.0.1 until Ctrl-C."""
    from worker.scripted import ScriptedServer, ScriptError

    try:
        server = ScriptedServer(script, port=port, log_path=log, keep=0)
        url = server.start()
    except ScriptError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot listen on 127.0.0.1:{port} ({exc.strerror}); pass another --port")
    console.print(f"scripted model at {url}: use --model scripted@{url} (Ctrl-C stops)", highlight=False, soft_wrap=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


# ---- fanout, runs (orchestrator) --------------------------------------------

from rich.text import Text  # noqa: E402  (fan-out errors are printed as plain text, one line each)

runs_app = typer.Typer(no_args_is_help=True, help="Fan-out runs: list, show, report, tail; tell or stop a running task.")
app.add_typer(runs_app, name="runs")


def _fail_lines(text: str, code: int = 2) -> NoReturn:
    """Every problem on its own `error:` line (a tasks file can have several)."""
    for line in [line for line in str(text).splitlines() if line.strip()] or ["unknown error"]:
        err_console.print("[red]error:[/red]", Text(line), highlight=False, soft_wrap=True)  # never wrapped
    raise typer.Exit(code)


def _runs_dir(out: Optional[Path]) -> Path:
    return out or Path(settings().fanout.runs_dir)


@app.command()
def fanout(
    file: Path = typer.Argument(..., help="Tasks file (see configs/examples/quickstart.yaml)"),
    workers: Optional[int] = typer.Option(None, "--workers", "-w", min=1, help="Workers at once (default: the file's concurrency)"),
    resume: Optional[str] = typer.Option(None, "--resume", help="Run id (or run directory) to resume: only unfinished tasks run"),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="With --resume: run failed tasks again too"),
    address: Optional[str] = typer.Option(None, "--address", help="run on Ray: auto (a `ray start` cluster), local (a private Ray), "
                                           "HOST:PORT or ray://HOST:PORT; without it, workers are threads of this process"),
    out: Optional[Path] = typer.Option(None, "--out", help="Directory for run directories (default: fanout.runs_dir)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the expanded plan with a cost upper bound; start nothing"),
    as_json: bool = typer.Option(False, "--json", help="Print a compact JSON result (for a parent agent's code_run)"),
    no_preflight: bool = typer.Option(False, "--no-preflight", help="Skip the GET /models probe of each endpoint"),
    executor: Optional[str] = typer.Option(None, "--executor", help="local (threads of this process), ray, or auto "
                                            "(the default: ray when an address is given); fanout.executor"),
) -> None:
    """Run every task of FILE on a pool of workers (in this process, or on Ray), then its reduce step."""
    from orchestrator import FanoutError
    from orchestrator import dry_run as plan_only
    from orchestrator import fanout as run_fanout

    current = settings(**{"fanout.executor": executor})
    if retry_failed and not resume:
        fail("--retry-failed needs --resume RUN_ID (the run whose failed tasks should run again)")
    try:
        if dry_run:
            plan = plan_only(file, current)
            emit_json(plan) if as_json else _print_plan(plan)
            return
        import os
        from contextlib import nullcontext

        from orchestrator.triggers.activity import user_job

        # A nested fan-out (from a task's sandboxed code_run, GA_HOME read-only) is part of its parent's job.
        nested = bool(int(os.environ.get("GA_DEPTH") or 0))
        with nullcontext() if nested else user_job(current.home_dir, "fanout"):  # explore --when-idle waits
            result = run_fanout(file, workers=workers, resume=resume, retry_failed=retry_failed, address=address,
                                out=out, settings=current, display="quiet" if as_json else None,
                                preflight=not no_preflight)
    except FanoutError as exc:
        _fail_lines(str(exc))
    except KeyboardInterrupt:
        err_console.print("interrupted before the run started; nothing ran")
        raise typer.Exit(130) from None
    if as_json:
        emit_json(result.compact())
    else:
        _print_run(result)
    raise typer.Exit(result.exit_code)


def _print_plan(plan: dict) -> None:
    from rich.table import Table

    table = Table(title=f"{plan['name']}: {len(plan['tasks'])} task(s), {plan['concurrency']} at once, "
                        f"{plan['retries']} retries", title_justify="left")
    for column in ("id", "model", "turns", "timeout", "inputs", "max cost", "prompt"):
        table.add_column(column, overflow="fold")
    for row in plan["tasks"]:
        cost = "?" if row["max_cost"] is None else f"${row['max_cost']:.4f}"
        prompt = row["prompt"].replace("\n", " ")
        model = str(row["model"])
        model = f"scripted:{Path(model[9:]).name}" if model.startswith("scripted:") else model
        table.add_row(row["id"], model, str(row["max_turns"]), str(row["timeout"] or "-"),
                      ", ".join(row["inputs"]) or "-", cost, prompt[:70] + ("…" if len(prompt) > 70 else ""))
    console.print(table)
    total = plan["total_max_cost"]
    budget = plan["budget"]
    console.print(f"upper bound on cost: {'?' if total is None else f'${total:.4f}'}"
                  + (f" (budget: {budget['tokens'] or '-'} tokens, ${budget['cost'] or '-'})" if any(budget.values()) else "")
                  + (f"; then reduce → reduce/{plan['reduce']['output']}" if plan["reduce"] else ""), highlight=False)


def _print_run(result: Any) -> None:
    from rich.table import Table

    from orchestrator.display import status_counts, status_style

    summary = result.summary
    table = Table(title=f"run {result.run_id}: {result.status}", title_justify="left")
    for column in ("task", "status", "turns", "tokens", "cost", "answer / reason"):
        table.add_column(column, overflow="fold")
    for row in result.results:
        usage = row.get("usage_with_nested") or row.get("usage") or {}
        text = row.get("answer") if row["status"] == "succeeded" else row.get("reason")
        text = " ".join(str(text or "").split())
        style = status_style(row["status"])
        table.add_row(row["task_id"], f"[{style}]{row['status']}[/{style}]", str(row.get("turns", "")),
                      f"{usage.get('total', 0):,}", f"${usage.get('cost', 0):.4f}", text[:80] + ("…" if len(text) > 80 else ""))
    console.print(table)
    tasks, usage = summary["tasks"], summary["usage"]
    console.print(f"{status_counts(tasks)} · {usage['total']:,} tokens ({usage['cached']:,} cached) · "
                  f"${usage['cost']:.4f} · {summary['seconds']:.1f}s", highlight=False)
    if summary.get("stop_note"):
        console.print(f"[yellow]{summary['stop_note']}[/yellow]", highlight=False)
    if result.reduce:
        console.print(f"reduce ({result.reduce['status']}) → {result.reduce['path']}", highlight=False)
        console.print(result.reduce.get("answer") or result.reduce.get("reason", ""), highlight=False, markup=False)
    console.print(f"run directory: {result.run_dir}", highlight=False)


@runs_app.command("list")
def runs_list(
    out: Optional[Path] = typer.Option(None, "--out", help="Runs directory (default: fanout.runs_dir)"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON"),
) -> None:
    """Runs under the runs directory, newest first."""
    from rich.table import Table

    from orchestrator.ledger import list_runs

    rows = list_runs(_runs_dir(out))
    if as_json:
        emit_json(rows)
        return
    if not rows:
        console.print(f"no runs in {_runs_dir(out)}")
        return
    table = Table()
    for column in ("run", "status", "finished/total", "failed", "unverified", "tokens", "cost"):
        table.add_column(column)
    for r in rows:
        table.add_row(r["run_id"], r["status"], f"{r['finished']}/{r['tasks'] if r['tasks'] is not None else '?'}",
                      str(r["failed"]), str(r["unverified"]), f"{r['tokens'] or 0:,}", f"${r['cost'] or 0:.4f}")
    console.print(table)


@runs_app.command("show")
def runs_show(
    run_id: str = typer.Argument(..., help="Run id (see `ga runs list`) or run directory"),
    task_id: Optional[str] = typer.Argument(None, help="A task id (or `reduce`): show its conversation turn by turn"),
    out: Optional[Path] = typer.Option(None, "--out", help="Runs directory (default: fanout.runs_dir)"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (with TASK: the requests as the model received them)"),
) -> None:
    """A run's summary, its results and the ledger's latest events; with TASK, that task's conversation."""
    from rich.table import Table

    from orchestrator.fanout import load_run

    if task_id is not None:
        _show_task(_runs_dir(out), run_id, task_id, as_json)
        return
    try:
        data = load_run(_runs_dir(out), run_id)
    except FileNotFoundError as exc:
        fail(str(exc))
    if as_json:
        emit_json(data)
        return
    summary = data["summary"] or {}
    console.print(f"run {data['run_id']} ({data['path']}): {summary.get('status', 'running or stopped hard')}", highlight=False)
    if summary:
        t, u = summary["tasks"], summary["usage"]
        from orchestrator.display import status_counts

        console.print(f"{status_counts(t)} · {u['total']:,} tokens · "
                      f"${u['cost']:.4f} · {summary['seconds']:.1f}s", highlight=False)
        if summary.get("stop_note"):
            console.print(f"[yellow]{summary['stop_note']}[/yellow]", highlight=False)
    table = Table()
    for column in ("task", "status", "attempt", "turns", "tokens", "answer / reason"):
        table.add_column(column, overflow="fold")
    for row in data["results"]:
        text = " ".join(str((row.get("answer") if row["status"] == "succeeded" else row.get("reason")) or "").split())
        table.add_row(row["task_id"], row["status"], str(row.get("attempt", "")), str(row.get("turns", "")),
                      f"{(row.get('usage_with_nested') or row.get('usage') or {}).get('total', 0):,}", text[:80])
    console.print(table)


def _show_task(runs_dir: Path, run_id: str, task_id: str, as_json: bool) -> None:
    from orchestrator.runshow import print_conversation
    from orchestrator.runview import load_run_view, replayed_requests

    try:
        view = load_run_view(runs_dir, run_id)
        view.task(task_id)
    except (FileNotFoundError, KeyError) as exc:
        fail(str(exc).strip("'\""))
    if as_json:
        emit_json(replayed_requests(view.history_path(task_id)))
    else:
        print_conversation(console, view, task_id)


@runs_app.command("report")
def runs_report(
    run_id: str = typer.Argument(..., help="Run id (see `ga runs list`) or run directory"),
    out: Optional[Path] = typer.Option(None, "--out", help="Directory for report.html and report.md (default: the run's)"),
    runs_dir: Optional[Path] = typer.Option(None, "--runs-dir", help="Runs directory (default: fanout.runs_dir)"),
) -> None:
    """One self-contained HTML page (timeline, tokens and cost, failures, every conversation) and report.md."""
    from orchestrator.report import write_report
    from orchestrator.runview import load_run_view

    try:
        view = load_run_view(_runs_dir(runs_dir), run_id)
    except FileNotFoundError as exc:
        fail(str(exc))
    try:
        paths = write_report(view, out or view.path)
    except OSError as exc:
        fail(f"cannot write the report to {out or view.path}: {exc.strerror or exc}; choose another --out")
    console.print(f"report: {paths[0]}\n        {paths[1]}", highlight=False)


@runs_app.command("tell")
def runs_tell(
    run_id: str = typer.Argument(..., help="Run id or run directory"),
    task_id: str = typer.Argument(..., help="The running task"),
    message: str = typer.Argument(..., help="What the task should know: added to its next request"),
    out: Optional[Path] = typer.Option(None, "--out", help="Runs directory (default: fanout.runs_dir)"),
) -> None:
    """Tell a running task something it missed (recorded in its history and the run's ledger)."""
    from orchestrator.steer import SteerError, tell

    try:
        tell(run_id, task_id, message, out)
    except SteerError as exc:
        fail(str(exc))
    console.print(f"told {task_id}: its next request carries the note", highlight=False)


@runs_app.command("stop")
def runs_stop(
    run_id: str = typer.Argument(..., help="Run id or run directory"),
    task_id: Optional[str] = typer.Argument(None, help="One running task (default: the whole run)"),
    out: Optional[Path] = typer.Option(None, "--out", help="Runs directory (default: fanout.runs_dir)"),
) -> None:
    """Stop one running task (it ends `stopped`, its processes killed; `ga fanout --resume` runs it again), or the
    whole run as Ctrl-C would."""
    from orchestrator.steer import SteerError, stop

    try:
        stop(run_id, task_id, out)
    except SteerError as exc:
        fail(str(exc))
    console.print(f"stopping {task_id or 'the run'}", highlight=False)


@runs_app.command("tail")
def runs_tail(
    run_id: str = typer.Argument(..., help="Run id or run directory"),
    out: Optional[Path] = typer.Option(None, "--out", help="Runs directory (default: fanout.runs_dir)"),
    lines: int = typer.Option(20, "-n", help="How many ledger lines to show first"),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new ledger lines until the run finishes"),
) -> None:
    """The run's ledger as it grows."""
    import time

    from orchestrator.ledger import RunDir, read_jsonl

    try:
        run = RunDir.existing(_runs_dir(out), run_id)
    except FileNotFoundError as exc:
        fail(str(exc))
    seen = 0
    records = list(read_jsonl(run.path / "ledger.jsonl"))
    for record in records[-lines:]:
        console.print(_ledger_line(record), highlight=False, markup=False, soft_wrap=True)
    seen = len(records)
    while follow and not any(r["event"] == "run_finished" for r in records[-1:]):
        time.sleep(0.5)
        records = list(read_jsonl(run.path / "ledger.jsonl"))
        for record in records[seen:]:
            console.print(_ledger_line(record), highlight=False, markup=False, soft_wrap=True)
        seen = len(records)


def _ledger_line(record: dict) -> str:
    import time

    stamp = time.strftime("%H:%M:%S", time.localtime(record.get("time", 0)))
    rest = " ".join(f"{k}={v}" for k, v in record.items() if k not in ("time", "event", "task_id") and v not in (None, ""))
    return f"{stamp} {record['event']:<12} {record.get('task_id', ''):<24} {rest}".rstrip()


# ---- skills, explore, reflect, schedule (skilltree, orchestrator) -----------
skills_app = typer.Typer(no_args_is_help=True, help="The skill tree: show, plan, report, feedback (weight adaptation).")
app.add_typer(skills_app, name="skills")
NOW_HELP = "Pretend it is this ISO time (for tests and replays)"


def _skills_now(value: Optional[str]) -> Any:
    from datetime import datetime, timezone

    if not value:
        return datetime.now(timezone.utc)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        fail(f"--now {value!r}: not an ISO time; use e.g. 2026-05-01T12:00:00+00:00")
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def _skills_call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Run a skilltree operation; errors a user can cause become one line."""
    from memory_shared import MemoryStoreError
    from skilltree import SkillTreeError

    try:
        return fn(*args, **kwargs)
    except (MemoryStoreError, SkillTreeError) as exc:
        fail(str(exc))


@skills_app.command("show")
def skills_show(json_out: bool = typer.Option(False, "--json", help="Print the tree, weights and usage as JSON")) -> None:
    """Print the skill tree (categories, skills, uses from the memory access statistics) and the weights."""
    from skilltree.commands import view
    from skilltree.view import rich_tree, tree_json, weights_table

    current = _skills_call(view, settings().memory_root)
    if json_out:
        emit_json(tree_json(current))
        return
    console.print(rich_tree(current))
    console.print(weights_table(current.tree))


@skills_app.command("report")
def skills_report(
    out: Path = typer.Option(Path("skills-report"), "--out", help="Directory for report.md and report.html"),
    reports: Optional[Path] = typer.Option(None, "--reports", help="Exploration reports directory (default: reports/ in the memory store)"),
    weeks: int = typer.Option(12, min=1, max=104, help="Weeks of usage history to chart"),
    runs: Optional[Path] = typer.Option(None, "--runs", help="Exploration runs directory, for plans and failures (default: fanout.runs_dir)"),
    now: Optional[str] = typer.Option(None, hidden=True, help=NOW_HELP),
) -> None:
    """Write report.md and a self-contained report.html (coverage, funnel, predictions, last plan, failures)."""
    from skilltree.commands import build_report

    if reports is not None and not reports.is_dir():
        fail(f"--reports {reports}: no such directory; give the folder holding the exploration reports (*.md)")
    if runs is not None and not runs.is_dir():
        fail(f"--runs {runs}: no such directory; give the folder holding the exploration runs (ga explore --out)")
    md, html = _skills_call(build_report, settings().memory_root, out, _skills_now(now), reports, weeks,
                            runs or settings().fanout.runs_dir)
    console.print(f"wrote {md}\nwrote {html}", highlight=False, soft_wrap=True)


@skills_app.command("feedback")
def skills_feedback(
    dry_run: bool = typer.Option(False, "--dry-run", help="Judge and show, but commit nothing"),
    json_out: bool = typer.Option(False, "--json", help="Print the verdicts and the weights as JSON"),
    now: Optional[str] = typer.Option(None, hidden=True, help=NOW_HELP),
) -> None:
    """Apply the 30-day rule to skills created 30+ days ago and adapt the planner's weights (one commit)."""
    from skilltree.commands import run_feedback
    from skilltree.view import feedback_json, feedback_table, weights_table

    run = _skills_call(run_feedback, settings().memory_root, _skills_now(now), dry_run, planner=settings().planner)
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
    model: Optional[str] = typer.Option(None, "--model", help="Model name (configs/models.yaml), scripted:FILE or scripted@URL"),
    run_dir: Optional[Path] = typer.Option(None, "--run-dir", help="Where plan.json goes (default: <runs_dir>/plan-<time>)"),
    candidates: Optional[int] = typer.Option(None, min=1, max=100, help="Candidates to ask for (explore.candidates)"),
    batch: Optional[int] = typer.Option(None, min=1, max=50, help="Tasks to select (explore.batch_size)"),
    json_out: bool = typer.Option(False, "--json", help="Print the plan as JSON"),
    now: Optional[str] = typer.Option(None, hidden=True, help=NOW_HELP),
) -> None:
    """Plan one exploration batch: the model proposes and judges, §6 scores, 4+ categories selected."""
    from rich.table import Table

    from skilltree.commands import run_plan
    from worker.llm import LLMClient
    from worker.models import ModelConfigError, resolve_model
    from worker.types import ModelError

    current = settings()
    when = _skills_now(now)
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
                        f"{result.categories_covered} categories", title_justify="left")
    for column in ("", "title", "category", "breadth", "depth", "utility", "innovation", "§6 score", "demand", "ranking"):
        table.add_column(column, justify="right" if column not in ("title", "category") else "left")
    for item in result.candidates:
        table.add_row("✔" if item in result.selected else "", item.title, item.category,
                      *(f"{x:.1f}" for x in item.vector.values()), f"{item.score:.2f}",
                      f"{item.demand:.1f}" if item.demand is not None else "-", f"{item.rank_score:.2f}")
    console.print(table)
    if result.dropped:
        console.print(f"{len(result.dropped)} invalid items dropped (see plan.json)")
    console.print(f"wrote {target / 'plan.json'}", highlight=False, soft_wrap=True)


# reflect, schedule (orchestrator.triggers.reflect, orchestrator.triggers.schedule) and the activity records


def _record_command(current: Settings, command: Optional[str]) -> None:
    """Note that a `ga` command started (orchestrator.triggers.activity); the idle test of exploration reads it."""
    from orchestrator.triggers.activity import record_activity

    record_activity(current.home_dir, command)


def _clock_at(value: Optional[str]) -> Any:
    """--now: a clock stopped at this ISO time (local time when it has no offset); None: the real clock."""
    from datetime import datetime

    if value is None:
        return None
    try:
        fixed = datetime.fromisoformat(value)
    except ValueError:
        fail(f"--now {value!r}: not an ISO time; use e.g. 2026-05-01T03:30:00+02:00")
    fixed = fixed if fixed.tzinfo else fixed.astimezone()
    return lambda: fixed


def _check_model(model: Optional[str], current: Settings, needed_by: str = "") -> None:
    from worker.models import ModelConfigError, resolve_model

    try:
        resolve_model(model, current)
    except ModelConfigError as exc:
        fail(f"{needed_by}{exc}")


def _show_daemon_record(record: dict, as_json: bool) -> None:
    """One line per reflect/schedule record: a task or job result, a skip, a reload."""
    if as_json:
        sys.stdout.write(json.dumps(record, default=str) + "\n")
        sys.stdout.flush()
        return
    from rich.markup import escape

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
    what = (record.get("task") or record.get("builtin") or "")[:80]
    style = "green" if status == "succeeded" else "red"
    console.print(f"{head}[{style}]{status}[/] {escape(what)} ({escape('; '.join(details))})", highlight=False,
                  soft_wrap=True)


@app.command("reflect")
def reflect_command(
    trigger: Path = typer.Argument(..., help="A .py file: check() returns a task or None; INTERVAL seconds; ONCE"),
    model: Optional[str] = typer.Option(None, "--model", help="Model name (configs/models.yaml), scripted:FILE or scripted@URL"),
    workdir: Optional[Path] = typer.Option(None, "--workdir", help="Where the tasks run (default: current directory)"),
    max_cycles: Optional[int] = typer.Option(None, "--max-cycles", min=1, help="Stop after this many check() calls"),
    as_json: bool = typer.Option(False, "--json", help="Print each record as a JSON line"),
) -> None:
    """Call TRIGGER's check() every INTERVAL seconds and hand each task it returns to a worker (Ctrl-C stops)."""
    from orchestrator.triggers.reflect import TriggerError, load_trigger, reflect
    from orchestrator.triggers.stopping import stop_on_signals

    current = settings(**{"worker.model": model})
    if workdir is not None and not workdir.is_dir():
        fail(f"--workdir {workdir}: not a directory; create it or pass an existing one")
    try:
        load_trigger(trigger)
    except TriggerError as exc:
        fail(str(exc))
    _check_model(model, current)
    with stop_on_signals() as stop:
        summary = reflect(trigger, current, model_name=model, workdir=workdir, max_cycles=max_cycles, stop=stop,
                          on_record=lambda record: _show_daemon_record(record, as_json))
    tasks = [r for r in summary.records if r.get("event") == "task"]
    if not as_json:
        console.print(f"{summary.cycles} check(s), {len(tasks)} task(s), stopped by {summary.stopped_by}; "
                      f"log: {summary.log_path}", highlight=False, soft_wrap=True)
    raise typer.Exit(1 if tasks and tasks[-1]["status"] != "succeeded" else 0)


@app.command("schedule")
def schedule_command(
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
    from orchestrator.triggers.jobs import JobsError, load_jobs
    from orchestrator.triggers.schedule import ScheduleError, run_schedule
    from orchestrator.triggers.stopping import stop_on_signals

    current = settings(**{"worker.model": model})
    if now is not None and not (once or list_jobs):
        fail("--now needs --once or --list (a stopped clock would never reach the next slot)")
    clock = _clock_at(now)
    try:
        jobs = load_jobs(jobs_file)
        if list_jobs:
            _list_jobs(jobs, current, clock, as_json)
            return
        needing = [job.name for job in jobs if job.task and job.enabled and not job.model]
        if needing:
            _check_model(model, current, f"{jobs_file}: job {needing[0]!r} runs a task with the default model: ")
        with stop_on_signals() as stop:
            summary = run_schedule(jobs_file, current, once=once, tick=tick, max_ticks=max_ticks, stop=stop,
                                   now=clock, model_name=model,
                                   on_record=lambda record: _show_daemon_record(record, as_json))
    except (JobsError, ScheduleError) as exc:
        fail(str(exc))
    ran = [r for r in summary.records if r.get("event") == "ran"]
    if not as_json and once:
        console.print(f"{len(ran)} job(s) ran" + ("" if ran else " (nothing due)"), highlight=False)
    raise typer.Exit(1 if any(r["status"] != "succeeded" for r in ran) else 0)


def _list_jobs(jobs: list, current: Settings, clock: Any, as_json: bool) -> None:
    from orchestrator.triggers.activity import local_now
    from orchestrator.triggers.jobrules import next_slot
    from orchestrator.triggers.schedule import load_state, schedule_dir

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
    from rich.table import Table

    table = Table(show_edge=False, header_style="bold")
    for column in ("name", "what", "when", "next", "last run", "status", "runs"):
        table.add_column(column, overflow="fold")

    def short(iso: Optional[str]) -> str:
        return iso[5:16].replace("T", " ") if iso else "-"

    for row in rows:
        what = row["what"] if len(row["what"]) <= 40 else row["what"][:39] + "…"
        table.add_row(row["name"], what, row["when"] if row["enabled"] else "disabled", short(row["next"]),
                      short(row["last_run"]), row["last_status"] or "-", str(row["runs"]))
    console.print(table)


# explore (skilltree.explore: one cycle; skilltree.daemon: --when-idle)


def _explore_table(result: Any) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(show_edge=False, header_style="bold", title=f"exploration {result.run_id}", title_justify="left")
    for column in ("task", "category", "score", "outcome", "skill", "generation"):
        table.add_column(column, overflow="fold")
    styles = {"skill": "green", "report": "yellow", "already": "dim"}
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
    console.print(f"{result.status}: {counts} · {result.tokens:,} tokens · ${result.cost:.4f} · {result.run_dir}",
                  highlight=False, soft_wrap=True)


def _show_explore_record(record: dict, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(json.dumps(record, default=str) + "\n")
        sys.stdout.flush()
        return
    from rich.markup import escape

    details = {k: v for k, v in record.items() if k not in ("time", "event")}
    text = details.pop("why", None) or details.pop("error", None) or json.dumps(details, default=str)
    style = {"cycle_finished": "green", "cycle_failed": "red", "waiting": "yellow"}.get(record["event"], "bold")
    console.print(f"[dim]{record['time'][:19]}[/] [{style}]{record['event']}[/] {escape(str(text))}",
                  highlight=False, soft_wrap=True)


@app.command("explore")
def explore_command(
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
    from memory_shared import MemoryStoreError
    from orchestrator.triggers.activity import local_now
    from orchestrator.triggers.durations import parse_duration
    from skilltree import SkillTreeError
    from skilltree.daemon import Caps, DaemonBusy, count_end, count_start, run_daemon
    from skilltree.explore import ExploreError, consolidate_run, resume_cycle, run_cycle
    from worker.types import ModelError

    modes = [name for name, on in (("--once", once), ("--when-idle", when_idle), ("--resume", resume),
                                   ("--consolidate", consolidate)) if on]
    if len(modes) != 1:
        fail("give exactly one of --once, --when-idle WINDOW, --resume RUN, --consolidate RUN"
             + (f" (got {', '.join(modes)})" if modes else ""))
    current = settings(**{"worker.model": model, "fanout.runs_dir": out})
    trigger = trigger or current.explore.idle_trigger
    if trigger is not None and not Path(trigger).is_file():
        fail(f"--trigger {trigger}: no such file; give a .py file with def check() -> bool")
    options = dict(model_name=model, candidates=candidates, batch_size=batch, display="quiet" if as_json else None)
    try:
        if when_idle:
            try:
                window = parse_duration(when_idle)
            except ValueError as exc:
                fail(f"--when-idle: {exc}")
            _check_model(model, current)
            from orchestrator.triggers.stopping import stop_on_signals

            caps = Caps(current.explore.max_cycles_per_day, current.explore.max_spend_per_day)
            with stop_on_signals() as stop:
                summary = run_daemon(
                    current.home_dir, caps, lambda budget: run_cycle(current, budget_cost=budget, stop=stop,
                                                                     **{**options, "display": "quiet"}).record(),
                    window=window, trigger=trigger, stop=stop, tick=tick, max_cycles=max_cycles,
                    on_record=lambda record: _show_explore_record(record, as_json))
            if not as_json:
                console.print(f"{summary.cycles} cycle(s); stopped by {summary.stopped_by}", highlight=False)
            return
        when = _skills_now(now) if now else None
        if once:
            _check_model(model, current)
            day = (when or local_now()).astimezone().date().isoformat()
            count_start(current.home_dir, day)
            result = run_cycle(current, now=when, **options)
            count_end(current.home_dir, day, result.record(), local_now())
        elif resume:
            result = resume_cycle(current, resume, now=when, display=options["display"])
        else:
            result = consolidate_run(current, consolidate, now=when)
    except (ExploreError, MemoryStoreError, SkillTreeError, DaemonBusy) as exc:
        fail(str(exc))
    except ModelError as exc:
        fail(f"model {model or current.worker.model}: {exc}")
    if as_json:
        emit_json({**result.record(), "outcomes": [vars(o) for o in result.outcomes],
                   "plan": str(result.run_dir / "plan.json")})
    else:
        _explore_table(result)
    raise typer.Exit(0 if result.status == "consolidated" else 1)



if __name__ == "__main__":
    app()
