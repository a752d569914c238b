"""`ga memory ...`: the shared memory tier's commands (memory_shared itself imports nothing of ours)."""
from __future__ import annotations

import difflib
import tempfile
import time
from contextlib import contextmanager
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Iterator, Optional

import typer
from rich.markup import escape
from rich.panel import Panel

from cli.kit import console, emit_json, fail, say, settings, write_text
from memory_shared import AccessLog, Archive, GenerationMissing, MemoryStore, MemoryStoreError, render_l1
from memory_shared import review as reviews
from memory_shared.commitlog import Commit
from memory_shared.demo import run_demo
from memory_shared.provenance import all_records, is_reserved, records_for, trust_level, trust_of
from orchestrator.views.columns import Column, Rows

memory_app = typer.Typer(no_args_is_help=True, help="The shared memory tier: show, log, review, accept, reject, revert, "
                                                    "diff, verify, repair, gc, archive.")


@contextmanager
def _memory_errors(ctx: typer.Context) -> Iterator[None]:
    """Errors a user can cause (missing or corrupt store, bad path or generation) become one line."""
    try:
        yield
    except (MemoryStoreError, ValueError) as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"{exc.filename or settings(ctx).memory_root}: {exc.strerror}; check GA_HOME or memory.root in your config")


def _memory_store(ctx: typer.Context, create: bool = False, recover: bool = True) -> MemoryStore:
    """The store; `recover=False` opens it as it is, changing nothing (verify, repair --dry-run)."""
    current = settings(ctx)
    with _memory_errors(ctx):
        return MemoryStore(current.memory_root, l1_max_lines=current.memory.l1_max_lines,
                           l1_max_chars=current.memory.l1_max_chars, create=create, recover=recover)


def _commit_rows(commits: list[Commit]) -> Rows:
    """One line a commit at 80 columns: the generation and time whole, the author, message and paths give way."""
    columns = [Column("gen", right=True, whole=True), Column("time", whole=True), Column("author", least=8),
               Column("message", least=12), Column("paths", least=12)]
    return Rows(columns, [[str(commit.generation), datetime.fromtimestamp(commit.time).strftime("%m-%d %H:%M:%S"),
                           commit.author, commit.message.splitlines()[0] if commit.message else "",
                           ", ".join(commit.paths[:4]) + (f" (+{len(commit.paths) - 4})" if len(commit.paths) > 4
                                                          else "")] for commit in commits])


def _memory_verify_or_fail(ctx: typer.Context, store: MemoryStore, quick: bool = False, as_json: bool = False,
                           plan: bool = False) -> None:
    """Verify the store; on a problem print one line naming `ga memory repair` (or the JSON) and exit 2.
    With `plan`, what repair would do is listed first (`repair --dry-run`: it changes nothing either)."""
    with _memory_errors(ctx):
        problems = store.verify(quick=quick)
        would, unsolved = store.repair(dry_run=True) if plan and problems else ([], [])
    if as_json:
        emit_json({"root": str(store.root), "ok": not problems, "problems": problems, "fixed": store.recovered,
                   "repair_would": would, "repair_cannot": unsolved})
    if problems:
        more = f" (+{len(problems) - 1} more: `ga memory verify --json`)" if len(problems) > 1 else ""
        if not as_json:
            for line in would:
                console.print(f"repair would: {line}", highlight=False, soft_wrap=True, markup=False)
            for line in unsolved:
                console.print(f"repair cannot: {line}", highlight=False, soft_wrap=True, markup=False)
            fail(f"memory store at {store.root}: {problems[0]}{more}; run `ga memory repair --dry-run` to see the "
                 "fix, then `ga memory repair`")
        raise typer.Exit(2)


@memory_app.command("init")
def memory_init(ctx: typer.Context) -> None:
    """Create the memory store (generation 0 holds the shipped L0-L3 defaults); safe to re-run."""
    root = settings(ctx).memory_root
    existed = MemoryStore.exists(root)
    store = _memory_store(ctx, create=True)
    verb = "already exists" if existed else "created"
    console.print(f"memory store {verb} at [bold]{store.root}[/]; HEAD = generation {store.head()}", highlight=False)

@memory_app.command("show")
def memory_show(
    ctx: typer.Context,
    path: Optional[str] = typer.Argument(None, help="A file or folder relative to the store, e.g. L2/facts.md"),
    generation: Optional[int] = typer.Option(None, "--generation", "-g", help="Default: HEAD"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON"),
    provenance: bool = typer.Option(False, "--provenance", help="With a file: print who wrote it and what backs it, "
                                                                "not its text"),
) -> None:
    """Show a generation: its files (with their trust), the L1 index, or one file's text (or provenance)."""
    store = _memory_store(ctx)
    with _memory_errors(ctx):
        try:
            snapshot = store.snapshot(generation)
        except GenerationMissing:
            if generation is not None:
                raise
            fail(f"memory store at {store.root} is corrupt: HEAD {store.head()} has no generation; "
                 "run `ga memory verify`")
    with _memory_errors(ctx), snapshot as snap:
        text = snap.read(path) if path else None
        files = [f for f in snap.files() if not path or f.startswith(path.rstrip("/") + "/")]
        if path and text is None and not files:
            fail(f"{path}: not in generation {snap.generation} of {store.root}; `ga memory show` lists the files")
        records = [asdict(r) for r in records_for(snap.path, path)] if path else []
        if as_json:
            emit_json({"generation": snap.generation, "path": path, "text": text, "provenance": records}
                      if text is not None else {"generation": snap.generation, "files": files})
            return
        if text is not None and provenance:
            _print_provenance(path or "", text, snap.path)
            return
        if text is not None:
            write_text(text if text.endswith("\n") else text + "\n")
            return
        rows = []
        for rel in files:
            if is_reserved(rel):
                continue
            found = trust_of(snap.path, rel, snap.read(rel))
            record = found.file or next(iter(found.lines.values()), None)
            trust = (trust_level(found.file) if found.file or not found.lines
                     else "lines: " + ", ".join(sorted({trust_level(r) for r in found.lines.values()})))
            rows.append([rel, f"{(snap.path / rel).stat().st_size:,}", trust,
                         record.source() if record is not None else ""])
        table = Rows([Column("path", whole=True), Column("bytes", right=True, whole=True), Column("trust"),
                      Column("from")], rows)
        say(f"generation {snap.generation} of {store.root}")
        console.print(table)
        if not path:
            console.print(Panel(render_l1(snap.path, store.l1_max_lines, store.l1_max_chars), title="L1 index",
                                expand=False), markup=False)


def _print_provenance(path: str, text: str, tree: Path) -> None:
    found = trust_of(tree, path, text)
    if found.file is None and not found.lines:
        console.print(f"{path}: written by a person or by ga (no task's provenance)", highlight=False, markup=False)
        return
    by_id = {r.id: r for r in found.lines.values()}
    for record in ([found.file] if found.file else []) + sorted(by_id.values(), key=lambda r: r.time):
        console.print(f"{path}: {trust_level(record)} ({record.scope}): {record.source()}", highlight=False, markup=False)
        for line in record.lines:
            console.print(f"  line: {line.get('text', '')}", highlight=False, markup=False)
        for run in record.backs:
            console.print(f"  backed by: {run.get('tool')} {run.get('call')} exit {run.get('exit_code')} output "
                          f"sha256 {str(run.get('output_sha256', ''))[:16]}"
                          f"{'' if run.get('evidence') else ' (no evidence)'}", highlight=False, markup=False)
        for item in record.read:
            console.print(f"  read: {', '.join(f'{k} {v}' for k, v in item.items())}", highlight=False, markup=False)


@memory_app.command("log")
def memory_log(
    ctx: typer.Context,
    limit: Optional[int] = typer.Option(None, "--limit", "-n", min=1, help="Only the newest N commits"),
    run: Optional[str] = typer.Option(None, "--run", help="Only the commits of this run (its id)"),
    task: Optional[str] = typer.Option(None, "--task", help="Only the commits of this task (its id)"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON"),
) -> None:
    """List commits, newest last; with --run or --task, what that run or task changed, with its provenance."""
    store = _memory_store(ctx)
    with _memory_errors(ctx):
        commits = store.log()
    if run is not None or task is not None:
        commits = reviews.commits_of(commits, run, task)
    commits = commits[-limit:] if limit else commits
    if as_json:
        emit_json([asdict(commit) for commit in commits])
        return
    console.print(_commit_rows(commits))
    if run is not None or task is not None:
        with _memory_errors(ctx), store.snapshot() as snap:
            records = all_records(snap.path)
        for commit in commits:
            console.print(f"generation {commit.generation} ({commit.key or commit.author}):", highlight=False,
                          markup=False)
            for line in commit.message.splitlines()[1:]:
                console.print(f"  {line}", highlight=False, markup=False)
            mine = [r for r in records if commit.key and r.who.get("run") and commit.key.startswith(str(r.who["run"]))
                    and r.who.get("task") and f"/{r.who['task']}/" in f"/{commit.key}/"]
            for record in mine:
                console.print(f"  {record.path}: {trust_level(record)}: {record.source()}", highlight=False, markup=False)
        if not commits:
            console.print("no commits of that run or task", highlight=False)


@memory_app.command("review")
def memory_review(
    ctx: typer.Context,
    every: bool = typer.Option(False, "--all", help="Also the accepted and rejected ones"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON"),
) -> None:
    """Proposals that wait for a person: what each would change (a diff against HEAD), why it waits, who made it."""
    store = _memory_store(ctx)
    with _memory_errors(ctx):
        proposals = reviews.all_proposals(store) if every else reviews.open_proposals(store)
        diffs = {p.id: reviews.proposal_diff(store, p) for p in proposals if p.state == "open"}
    if as_json:
        emit_json([{**asdict(p), "diff": diffs.get(p.id, [])} for p in proposals])
        return
    for proposal in proposals:
        who = proposal.who
        console.print(f"[bold]proposal {proposal.id}[/] ({proposal.state}) from task {who.get('task')}"
                      f"{' of run ' + str(who['run']) if who.get('run') else ''}"
                      f"{', model ' + str(who['model']) if who.get('model') else ''}", highlight=False)
        console.print(f"  waits because: {proposal.reason}", highlight=False, markup=False, soft_wrap=True)
        if proposal.state != "open":
            console.print(f"  {proposal.state} by {proposal.decided_by}"
                          f"{': ' + proposal.decision_note if proposal.decision_note else ''}", highlight=False,
                          markup=False)
        for data in proposal.records:
            backs = ", ".join(f"{b.get('tool')} {b.get('call')} exit {b.get('exit_code')}" for b in data.get("backs", []))
            read = ", ".join(next(iter(r.values())) for r in data.get("read", []))
            console.print(f"  {data.get('path')}: {data.get('trust')}; backed by: {backs or 'nothing'}"
                          f"{'; read: ' + read if read else ''}", highlight=False, markup=False, soft_wrap=True)
        for diff in diffs.get(proposal.id, []):
            write_text(diff if diff.endswith("\n") or not diff else diff + "\n")
    if not proposals:
        console.print("no proposals wait for review" if not every else "no proposals")


@memory_app.command("accept")
def memory_accept(ctx: typer.Context, ident: str = typer.Argument(..., help="A proposal id (or its start)")) -> None:
    """Apply a proposal to HEAD as a person (a new generation); its entries count as the person's from then on."""
    store = _memory_store(ctx)
    with _memory_errors(ctx):
        generation = reviews.accept(store, ident)
    console.print(f"accepted proposal {ident}: generation {generation}", highlight=False)


@memory_app.command("reject")
def memory_reject(
    ctx: typer.Context,
    ident: str = typer.Argument(..., help="A proposal id (or its start)"),
    note: str = typer.Option("", "--note", help="Why, kept with the decision"),
) -> None:
    """Reject a proposal (a new generation; the proposal and its decision stay in proposals/ and the log)."""
    store = _memory_store(ctx)
    with _memory_errors(ctx):
        generation = reviews.reject(store, ident, note=note)
    console.print(f"rejected proposal {ident}: generation {generation}", highlight=False)


@memory_app.command("revert")
def memory_revert(ctx: typer.Context, generation: int = typer.Argument(..., help="The older generation to restore")) -> None:
    """Write a new generation holding the memory of an older one (proposals stay as they are); deletes nothing."""
    store = _memory_store(ctx)
    with _memory_errors(ctx):
        made = reviews.revert(store, generation)
    if made is None:
        console.print(f"HEAD already holds the memory of generation {generation}", highlight=False)
    else:
        console.print(f"reverted to generation {generation}: generation {made}", highlight=False)


@memory_app.command("diff")
def memory_diff(
    ctx: typer.Context,
    gen_a: int = typer.Argument(..., help="The older generation"),
    gen_b: int = typer.Argument(..., help="The newer generation"),
    patch: bool = typer.Option(False, "--patch", "-p", help="Also show the text changes of modified files"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON"),
) -> None:
    """What changed between two generations, by path."""
    store = _memory_store(ctx)
    with _memory_errors(ctx):
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
            write_text("".join(lines))
    if not changes:
        console.print(f"generations {gen_a} and {gen_b} are identical")


@memory_app.command("verify")
def memory_verify(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print JSON"),
    quick: bool = typer.Option(False, "--quick", help="Check only HEAD's contents against its manifest"),
) -> None:
    """Check the store (HEAD, log, generations, contents against manifests) and say what repair would do; exit 2
    if anything is wrong. Changes nothing (not even what opening the store would fix: it is reported)."""
    store = _memory_store(ctx, recover=False)
    _memory_verify_or_fail(ctx, store, quick=quick, as_json=as_json, plan=True)
    if not as_json:
        console.print(f"[green]ok[/]: {store.root}, HEAD = generation {store.head()}, {len(store.log())} commits"
                      f"{' (HEAD only)' if quick else ''}", highlight=False)


@memory_app.command("repair")
def memory_repair(ctx: typer.Context, dry_run: bool = typer.Option(False, "--dry-run", help="Show what would be done; change nothing")) -> None:
    """Bring the store back to one that verifies; whatever is removed goes to quarantine/, never deleted."""
    store = _memory_store(ctx, recover=not dry_run)
    for line in store.recovered:
        console.print(f"[yellow]fixed[/]: {line}", highlight=False, soft_wrap=True)
    with _memory_errors(ctx):
        done, unsolved = store.repair(dry_run=dry_run)
    for line in done:
        console.print(f"{'would' if dry_run else 'done'}: {line}", highlight=False, soft_wrap=True)
    if unsolved:
        more = f" (+{len(unsolved) - 1} more)" if len(unsolved) > 1 else ""
        fail(f"memory store at {store.root}: cannot repair: {unsolved[0]}{more}")
    if not dry_run:
        with _memory_errors(ctx):
            problems = store.verify()
        if problems:
            fail(f"memory store at {store.root}: still wrong after repair: {problems[0]}")
    console.print(f"[green]{'nothing to repair' if not done else 'repaired' if not dry_run else 'dry run'}[/]: "
                  f"{store.root}", highlight=False)


@memory_app.command("gc")
def memory_gc(ctx: typer.Context, keep: int = typer.Option(..., "--keep", min=1, help="Keep the newest N generations (and pinned ones)")) -> None:
    """Remove old generations nobody pins; refuses on a store that does not verify."""
    store = _memory_store(ctx)
    with _memory_errors(ctx):
        removed = store.gc(keep)
    console.print(f"removed {len(removed)} generation(s)" + (f": {removed[0]}..{removed[-1]}" if removed else ""))


@memory_app.command("archive")
def memory_archive(
    ctx: typer.Context,
    compress: bool = typer.Option(False, "--compress", help="Fold old raw sessions into monthly archives"),
    older_than: int = typer.Option(7, "--older-than", min=0, help="With --compress: sessions older than N days"),
    search: Optional[str] = typer.Option(None, "--search", help="Sessions whose text contains this"),
    date: Optional[str] = typer.Option(None, "--date", help="Sessions of a day (YYYY-MM-DD) or month (YYYY-MM)"),
    task: Optional[str] = typer.Option(None, "--task", help="Sessions of this task id"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON"),
) -> None:
    """The L4 session archive: status, compress, search."""
    store = _memory_store(ctx)
    archive = Archive(store.root, keep_months=settings(ctx).memory.archive_keep_months)
    with _memory_errors(ctx):
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
    ctx: typer.Context,
    days: Optional[float] = typer.Option(None, "--days", min=0, help="Only reads of the last N days"),
    prefix: Optional[str] = typer.Option(None, "--prefix", help="Only paths starting with this, e.g. L3/"),
    tasks: bool = typer.Option(False, "--tasks", help="Count distinct tasks instead of reads"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON"),
) -> None:
    """Reads of memory files (from the access log), per path."""
    store = _memory_store(ctx)
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
    ctx: typer.Context,
    directory: Optional[Path] = typer.Option(None, "--dir", help="Where to create the demo store (default: a new temp dir)"),
    processes: int = typer.Option(8, min=2, help="Processes committing at once"),
    commits: int = typer.Option(5, min=1, help="Commits per process"),
) -> None:
    """Show the memory tier working: concurrent commits, snapshot isolation, a conflict, the gate."""
    if directory is not None and directory.exists() and any(directory.iterdir()) and not MemoryStore.exists(directory):
        fail(f"--dir {directory}: not empty and not a memory store; give a new or empty directory")
    root = directory or Path(tempfile.mkdtemp(prefix="ga-memory-demo-"))
    console.rule(f"ga memory demo · {root}")

    def tell(title: str, detail: str) -> None:
        console.print(f"[bold cyan]{title}[/]: {escape(detail)}", highlight=False)

    with _memory_errors(ctx):
        result = run_demo(root, tell, processes=processes, commits=commits)
        store = MemoryStore(root)
        console.print(_commit_rows(store.log()[-6:]))
        _memory_verify_or_fail(ctx, store)
    console.print(f"[green]verify: ok[/] (HEAD = generation {store.head()}); look around with "
                  f"`GA_MEMORY__ROOT={root} ga memory log` (or show, diff, verify)", highlight=False)
    healthy = result["lost_updates"] == 0 and result["snapshot_stable"] and not result["failed_processes"]
    raise typer.Exit(0 if healthy and result["gate_generation"] is not None else 1)

