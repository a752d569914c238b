"""Crash safety: a committer SIGKILLed at every fault point never leaves the store wedged or torn."""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from memory_shared import MemoryStore, StoreMissing, faults
from memory_shared.layers import default_files

END = "<!-- end -->\n"
# Die once the generation is renamed into place (its tree complete): recovery finishes the commit, restoring
# a record lost or torn from its MANIFEST.record (issue 22: a complete generation is never discarded).
DONE = ["published", "logging", "logged", "head", "committed"]

COMMIT = """
import sys
from memory_shared import MemoryStore
store = MemoryStore(sys.argv[1])
with store.transaction("crashing commit", "crasher", base=int(sys.argv[2])) as txn:
    txn.write("L3/new.md", "new")
    txn.patch("L3/shared.md", "{end}", "- crasher\\n{end}")
    txn.delete("L3/gone.md")
""".replace("{end}", END.replace("\n", "\\n"))

GC = "import sys; from memory_shared import MemoryStore; MemoryStore(sys.argv[1]).gc(keep=1)"
INIT = "import sys; from memory_shared import MemoryStore; MemoryStore(sys.argv[1], create=True)"


def commit_in_child(root: Path, base: int, point: str) -> int:
    """The same commit as COMMIT, in a forked child armed at `point`; returns its exit code."""
    def child() -> None:
        os.environ[faults.ENV] = point
        exec(COMMIT.replace("sys.argv[1]", repr(str(root))).replace("sys.argv[2]", str(base)), {})
        os._exit(0)

    proc = mp.get_context("fork").Process(target=child)
    proc.start()
    proc.join(timeout=60)
    return proc.exitcode


def run_child(code: str, *args: object, fault: str) -> subprocess.CompletedProcess:
    env = {**os.environ, faults.ENV: fault}
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], env=env, capture_output=True,
                          text=True, timeout=60)


@pytest.fixture
def store(store: MemoryStore) -> MemoryStore:
    """Generation 1 seeds the files; generation 2 moves HEAD past the crasher's base (1) so it rebases."""
    with store.transaction("seed", "seed") as txn:
        txn.write("L3/shared.md", "# shared\n" + END)
        txn.write("L3/gone.md", "soon gone")
    with store.transaction("move head", "other") as txn:
        txn.patch("L3/shared.md", "# shared\n", "# shared\n- other\n")
    return store


def assert_head_is_whole(store: MemoryStore, crashed_commit_landed: bool) -> None:
    with store.snapshot() as snap:
        if crashed_commit_landed:
            assert snap.read("L3/new.md") == "new" and snap.read("L3/gone.md") is None
            assert snap.read("L3/shared.md") == "# shared\n- other\n- crasher\n" + END
        else:
            assert snap.read("L3/new.md") is None and snap.read("L3/gone.md") == "soon gone"
            assert snap.read("L3/shared.md") == "# shared\n- other\n" + END


def leftovers_before_recovery(root: Path, point: str) -> bool:
    """Proof that the crash left something for recovery to deal with."""
    if point in ("staging", "linking", "writing", "locked", "rebased"):
        return any((root / "staging").iterdir())
    if point == "published":
        return (root / "generations/3").is_dir() and (root / "HEAD").read_text() == "2\n"
    if point == "logging":
        return not (root / "log.jsonl").read_bytes().endswith(b"\n")
    if point in ("logged", "head"):
        return (root / "HEAD").read_text() == "2\n" and (root / "generations/3").is_dir()
    return (root / "HEAD").read_text() == "3\n"


COMMIT_POINTS = [p for p in faults.POINTS if p != "gc"]


@pytest.mark.parametrize("recovery", ["reopen", "commit with an old handle"])
@pytest.mark.parametrize("point", COMMIT_POINTS)
def test_kill_at_each_commit_fault_point(store: MemoryStore, point: str, recovery: str) -> None:
    assert commit_in_child(store.root, 1, point) == -signal.SIGKILL
    assert leftovers_before_recovery(store.root, point)
    landed = point in DONE
    if recovery == "reopen":
        reopened = MemoryStore(store.root)
        assert reopened.verify() == []
        assert reopened.head() == (3 if landed else 2)
        assert_head_is_whole(reopened, landed)
        handle = reopened
    else:
        handle = store  # opened before the crash: its next commit recovers under the lock
    with handle.transaction("after the crash", "survivor") as txn:
        txn.write("L3/after.md", "ok")
    assert txn.generation == (4 if landed else 3)
    assert_head_is_whole(handle, landed)
    assert MemoryStore(store.root).verify() == []
    assert [c.generation for c in handle.log()] == list(range(txn.generation + 1))


def test_kill_during_gc(store: MemoryStore) -> None:
    proc = run_child(GC, store.root, fault="gc")
    assert proc.returncode == -signal.SIGKILL
    assert sorted(os.listdir(store.root / "generations")) == ["2"]
    assert any((store.root / "staging").iterdir())  # the moved generations await removal
    reopened = MemoryStore(store.root)
    assert reopened.verify() == [] and list((store.root / "staging").iterdir()) == []
    with reopened.transaction("after gc crash", "t") as txn:
        txn.write("L3/after.md", "ok")
    assert reopened.verify() == [] and reopened.head() == 3


@pytest.mark.parametrize("point", ["writing", "published", "logging", "logged", "head"])
def test_kill_during_init(tmp_path: Path, point: str) -> None:
    root = tmp_path / "mem"
    proc = run_child(INIT, root, fault=point)
    assert proc.returncode == -signal.SIGKILL
    if point in ("logging", "logged", "head"):  # generation 0 is in place and log.jsonl exists: recovery
        store = MemoryStore(root)                  # publishes it (a torn line's record restored from the tree)
    else:
        with pytest.raises(StoreMissing):
            MemoryStore(root)
        store = MemoryStore.init(root)
    assert store.head() == 0 and store.verify() == []
    assert len(store.snapshot(0).files()) == len(default_files())


def test_a_killed_lock_holder_does_not_wedge_the_store(store: MemoryStore) -> None:
    child = subprocess.Popen([sys.executable, "-c", COMMIT, str(store.root), "1"],
                             env={**os.environ, faults.ENV: "locked:block"}, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stderr.readline().split()[:2] == ["FAULT", "locked"]
        done = threading.Event()

        def commit() -> None:
            with store.transaction("waits for the lock", "waiter") as txn:
                txn.write("L3/waiter.md", "w")
            done.set()

        waiter = threading.Thread(target=commit)
        waiter.start()
        assert not done.wait(0.3), "the commit must wait while the blocked child holds the lock"
        os.kill(child.pid, signal.SIGKILL)
        waiter.join(timeout=30)
        assert done.is_set()
    finally:
        child.kill()
        child.wait()
    assert store.head() == 3
    assert MemoryStore(store.root).verify() == []


@pytest.mark.parametrize("at", ["published", "logging"])
def test_an_exception_mid_publish_takes_the_generation_back(store: MemoryStore, at: str) -> None:
    """The committer is alive and told the commit failed: it takes its generation back itself, and a half
    written line (a complete generation left without a record would be published by recovery, issue 22)."""
    log_before = (store.root / "log.jsonl").read_bytes()

    def explode(point: str) -> None:
        if point == at:
            raise OSError("disk vanished")

    faults.hook = explode
    try:
        with pytest.raises(OSError):
            with store.transaction("half", "t") as txn:
                txn.write("L3/half.md", "x")
    finally:
        faults.hook = None
    assert store.head() == 2 and store.verify() == [] and not (store.root / "generations/3").exists()
    assert (store.root / "log.jsonl").read_bytes() == log_before
    with store.transaction("next", "t") as txn:
        txn.write("L3/next.md", "y")
    assert txn.generation == 3 and store.verify() == []
    with store.snapshot() as snap:
        assert snap.read("L3/half.md") is None and snap.read("L3/next.md") == "y"
