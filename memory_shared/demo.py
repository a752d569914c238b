"""`ga memory demo`: the store's guarantees shown on a fresh store, by real code and real processes."""
from __future__ import annotations

import multiprocessing
import time
from pathlib import Path
from typing import Callable, Optional, TypedDict

from .errors import CommitConflict
from .gate import Execution, StagedChange, consolidate
from .layers import L2_FACTS
from .store import MemoryStore

SLOTS = "## Demo slots\n"


def _slot(worker: int, k: int) -> str:
    return f"- slot {worker}.{k}: open\n"


def _committer(root: str, worker: int, commits: int) -> None:
    """One process: each commit adds its own file and patches its own line of the shared facts file."""
    store = MemoryStore(root)
    for k in range(commits):
        with store.transaction(message=f"demo worker {worker} commit {k}", author=f"demo-{worker}") as txn:
            txn.write(f"L3/demo/worker-{worker}-{k}.md", f"written by process {worker}, commit {k}\n")
            txn.patch(L2_FACTS, _slot(worker, k), f"- slot {worker}.{k}: filled by process {worker}\n")


class DemoFigures(TypedDict):
    root: str
    head: int
    lost_updates: int
    snapshot_stable: bool
    conflict: str
    gate_generation: Optional[int]
    failed_processes: list[Optional[int]]  # the exit codes of the processes that failed


def run_demo(root: Path, say: Callable[[str, str], None], *, processes: int = 8, commits: int = 5) -> DemoFigures:
    """Run every step, reporting each through `say(title, detail)`; return the figures."""
    store = MemoryStore(root, create=True)
    say("store", f"created at {root}, HEAD = generation {store.head()}")
    with store.transaction(message="demo: open slots", author="demo") as txn:
        slots = "".join(_slot(w, k) for w in range(processes) for k in range(commits))
        txn.patch(L2_FACTS, "## Environment\n", SLOTS + slots + "\n## Environment\n")
    snapshot = store.snapshot()
    pinned_facts, pinned_files = snapshot.read(L2_FACTS), snapshot.files()
    say("snapshot", f"pinned generation {snapshot.generation} ({len(pinned_files)} files)")
    lost, failed = _concurrent_commits(store, say, processes, commits)
    stable = snapshot.read(L2_FACTS) == pinned_facts and snapshot.files() == pinned_files
    say("snapshot isolation", f"generation {snapshot.generation} still reads exactly as pinned while HEAD moved to "
        f"{store.head()}: {'stable' if stable else 'CHANGED (a bug)'}")
    snapshot.release()
    conflict = _conflict(store, say)
    generation = _gate(store, say)
    return {"root": str(root), "head": store.head(), "lost_updates": lost, "snapshot_stable": stable,
            "conflict": conflict, "gate_generation": generation, "failed_processes": failed}


def _concurrent_commits(store: MemoryStore, say: Callable[[str, str], None], processes: int,
                        commits: int) -> tuple[int, list[Optional[int]]]:
    """`processes` processes commit at once; return the lost updates and the exit codes of failed ones."""
    forks = "fork" in multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork") if forks else multiprocessing.get_context("spawn")
    workers = [context.Process(target=_committer, args=(str(store.root), w, commits)) for w in range(processes)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started
    failed = [w.exitcode for w in workers if w.exitcode != 0]
    with store.snapshot() as head:
        facts = head.read(L2_FACTS) or ""
        files = [f for f in head.files() if f.startswith("L3/demo/")]
        filled = facts.count(": filled by process")
    expected = processes * commits
    lost = expected - min(len(files), filled)
    say("concurrent commits", f"{processes} processes x {commits} commits in {elapsed:.2f}s; each commit adds a "
        f"file and patches the shared {L2_FACTS}: {len(files)}/{expected} files, {filled}/{expected} patched lines, "
        f"lost updates: {lost}" + (f"; failed processes: {failed}" if failed else ""))
    return lost, failed


def _conflict(store: MemoryStore, say: Callable[[str, str], None]) -> str:
    base = store.head()
    first = store.transaction(message="demo: first writer", author="alice", base=base)
    second = store.transaction(message="demo: second writer", author="bob", base=base)
    first.write("L3/demo/contested.md", "alice's version\n")
    second.write("L3/demo/contested.md", "bob's version\n")
    first.commit()
    try:
        second.commit()
        conflict = "none raised (a bug)"
    except CommitConflict as exc:
        conflict = str(exc)
    say("conflict", f"alice and bob both rewrite L3/demo/contested.md from generation {base}; alice commits first. "
        f"bob gets: {conflict}")
    return conflict


def _gate(store: MemoryStore, say: Callable[[str, str], None]) -> Optional[int]:
    executions = [Execution(seq=2, call_id="call_2", tool="code_run", ok=True, evidence=True)]
    changes = [
        StagedChange(seq=1, call_id="call_1", op="write", path="L3/demo/guess.md", text="a guess, never verified\n"),
        StagedChange(seq=3, call_id="call_3", op="patch", path=L2_FACTS, old="## Environment\n",
                     new="## Environment\n- demo: verified by call_2 (code_run)\n"),
    ]
    report = consolidate(store, changes, executions, task_id="demo-task", task_succeeded=True,
                         author="worker:demo-task", base=store.head())
    accepted = ", ".join(f"{c.op} {c.path}" for c in report.accepted)
    refused = "; ".join(f"{c.op} {c.path} ({reason})" for c, reason in report.refused)
    say("consolidation gate", f"accepted [{accepted}] as generation {report.generation}; refused [{refused}]")
    return report.generation
