"""Many real processes committing to one store at once: no lost update, conflicts exactly when due,
snapshots stable while commits and gc run."""
from __future__ import annotations

import multiprocessing as mp

import pytest

from memory_shared import CommitConflict, MemoryStore

CTX = mp.get_context("fork")
PROCS = 8
END = "<!-- end -->\n"


@pytest.fixture
def store(store: MemoryStore) -> MemoryStore:
    """The shared empty store, seeded with the files the races write."""
    with store.transaction("seed", "seed") as txn:
        txn.write("L3/shared.md", "# shared\n" + END)
        txn.write("L3/counter.md", "0")
        txn.write("L3/pair-a.md", "0")
        txn.write("L3/pair-b.md", "0")
    return store


def run_all(target, args_for, count: int = PROCS) -> list[object]:
    """Start `count` processes, wait for all, return what each put on the queue (one item each)."""
    results = CTX.Queue()
    barrier = CTX.Barrier(count)
    procs = [CTX.Process(target=target, args=(results, barrier, *args_for(i))) for i in range(count)]
    for proc in procs:
        proc.start()
    out = [results.get(timeout=60) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    return out


# ---- disjoint files and shared patches, all from one stale base --------------------------------------


def disjoint_and_shared(results, barrier, root: str, me: int, commits: int) -> None:
    store = MemoryStore(root)
    conflicts = 0
    with store.snapshot() as snap:  # every commit below is based on this generation: each one rebases
        barrier.wait()
        for k in range(commits):
            try:
                with store.transaction(f"p{me} k{k}", f"p{me}", base=snap.generation) as txn:
                    txn.write(f"L3/p{me}/{k}.md", f"p{me} k{k}")
                    txn.patch("L3/shared.md", END, f"- p{me} k{k}\n{END}")
            except CommitConflict:
                conflicts += 1
    results.put(conflicts)


def test_disjoint_writes_and_shared_patches_all_land(store: MemoryStore) -> None:
    commits = 4
    start = store.head()
    conflicts = run_all(disjoint_and_shared, lambda i: (str(store.root), i, commits))
    assert conflicts == [0] * PROCS
    assert store.head() == start + PROCS * commits
    with store.snapshot() as snap:
        shared = snap.read("L3/shared.md")
        for me in range(PROCS):
            for k in range(commits):
                assert snap.read(f"L3/p{me}/{k}.md") == f"p{me} k{k}"
                assert shared.count(f"- p{me} k{k}\n") == 1
        assert shared.endswith(END) and shared.count(END) == 1
        assert len(shared.splitlines()) == 2 + PROCS * commits
    assert store.verify() == []


# ---- the same path written from the same base: exactly one wins -----------------------------------------


def contested_write(results, barrier, root: str, me: int, base: int) -> None:
    store = MemoryStore(root)
    txn = store.transaction(f"claim by p{me}", f"p{me}", base=base)
    txn.write("L3/contested.md", f"owner p{me}")
    barrier.wait()
    try:
        txn.commit()
        results.put(("won", me, ""))
    except CommitConflict as exc:
        results.put(("conflict", me, str(exc)))


def test_overlapping_writes_conflict_exactly_when_they_must(store: MemoryStore) -> None:
    base = store.head()
    outcomes = run_all(contested_write, lambda i: (str(store.root), i, base))
    winners = [me for kind, me, _ in outcomes if kind == "won"]
    assert len(winners) == 1
    winner = winners[0]
    with store.snapshot() as snap:
        assert snap.read("L3/contested.md") == f"owner p{winner}"
    for kind, me, message in outcomes:
        if kind == "conflict":
            assert f"p{me} changed it" in message and f"but p{winner} changed it" in message
            assert "L3/contested.md" in message
    assert store.head() == base + 1 and store.verify() == []


# ---- read-modify-write with retry on conflict: no increment lost ----------------------------------------


def increment(results, barrier, root: str, me: int, times: int) -> None:
    store = MemoryStore(root)
    conflicts = 0
    barrier.wait()
    for _ in range(times):
        while True:
            try:
                with store.transaction(f"p{me} +1", f"p{me}") as txn:
                    txn.write("L3/counter.md", str(int(txn.read("L3/counter.md")) + 1))
                break
            except CommitConflict:
                conflicts += 1
    results.put(conflicts)


def test_read_modify_write_with_retry_loses_no_increment(store: MemoryStore) -> None:
    times = 4
    run_all(increment, lambda i: (str(store.root), i, times))
    with store.snapshot() as snap:
        assert snap.read("L3/counter.md") == str(PROCS * times)
    assert sum(1 for c in store.log() if c.paths == ["L3/counter.md"]) == PROCS * times
    assert store.verify() == []


# ---- snapshot isolation while commits and gc run ------------------------------------------------------


def churn(results, barrier, root: str, me: int, rounds: int) -> None:
    """Writers change files in pairs (one commit each), a collector runs gc, readers check each snapshot."""
    store = MemoryStore(root)
    barrier.wait()
    problems = 0
    for i in range(rounds):
        if me == 0:
            store.gc(keep=1)
        elif me < 4:
            while True:
                try:
                    with store.transaction(f"pair {me}.{i}", f"p{me}") as txn:
                        value = f"{me}.{i}"
                        txn.write("L3/pair-a.md", value)
                        txn.write("L3/pair-b.md", value)
                        txn.patch("L3/shared.md", END, f"- {value}\n{END}")
                        if i % 3 == 0 and txn.read("L0/rules.md") is not None:
                            txn.delete("L0/rules.md")
                        elif i % 3 == 0:
                            txn.write("L0/rules.md", value)
                    break
                except CommitConflict:
                    continue
        else:
            with store.snapshot() as snap:  # a commit is all or nothing for readers too
                if snap.read("L3/pair-a.md") != snap.read("L3/pair-b.md"):
                    problems += 1
    results.put(problems)


def test_pinned_snapshot_stays_byte_identical_under_commits_and_gc(store: MemoryStore) -> None:
    snap = store.snapshot()
    before = {rel: (snap.path / rel).read_bytes() for rel in snap.files()}
    problems = run_all(churn, lambda i: (str(store.root), i, 8))
    assert problems == [0] * PROCS
    assert store.head() >= snap.generation + 3 * 8
    assert {rel: (snap.path / rel).read_bytes() for rel in snap.files()} == before
    store.gc(keep=1)
    assert snap.path.is_dir()
    snap.release()
    store.gc(keep=1)
    assert not snap.path.exists()
    assert store.verify() == []
    with store.snapshot() as head:
        assert head.read("L3/shared.md").count("\n- ") == 3 * 8
