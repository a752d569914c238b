"""Issue 33, item 2: a task pays for the memory tier only when it uses it. The tasks of a process that start
while HEAD is one generation share that generation's one pin (memory_shared/shared.py) and its rendered L1
text; a task that never touches memory/ archives nothing; each task still sees the generation HEAD was when it
started, and gc keeps it while any of them runs. Real stores, real `ga fanout` and `ga memory gc` processes."""
from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import pytest
import yaml

from configs import load_settings
from memory_shared import GenerationDamaged, MemoryStore
from tests.ga_support import GA, ga_env
from tests.memory_shared.memory_attack_support import NO_MODEL, script_file, write
from tests.store_support import (
    ga_memory,
    sh,
    store_in_ga_home,  # noqa: F401  (fixture)
)
from worker.record import TaskRecord
from worker.taskmemory import MemorySession

OFFLINE: dict[str, str | None] = dict(NO_MODEL)
FACTS = "# L2: verified facts\n\n- the sky is blue\n"


def pins(store: MemoryStore) -> list[str]:
    folder = store.root / "pins"
    return sorted(os.listdir(folder)) if folder.is_dir() else []


def archived(root: Path) -> list[Path]:
    raw = root / "archive" / "raw"
    return sorted(p for p in raw.rglob("*") if p.is_file()) if raw.is_dir() else []


def session(store: MemoryStore, task_id: str) -> MemorySession:
    return MemorySession(store, task_id, settings=load_settings())


def commit_fact(store: MemoryStore, text: str) -> int:
    with store.transaction("another task's fact", "worker:other") as txn:
        txn.write("L2/facts.md", text)
        txn.write("L1/index.md", f"# L1 index\n- {text.strip()}: L2/facts.md\n")
    assert txn.generation is not None
    return txn.generation


def test_tasks_that_start_on_one_head_share_one_pin_and_one_l1_text(store: MemoryStore) -> None:
    started = threading.Barrier(16)
    leave = threading.Event()
    seen: list[tuple[int, str]] = []

    def task(i: int) -> None:
        with session(store, f"t{i}") as memory:
            assert memory.view.generation is not None
            seen.append((memory.view.generation, memory.l1_text))
            started.wait(timeout=30)
            leave.wait(timeout=30)

    with ThreadPoolExecutor(16) as pool:
        running = [pool.submit(task, i) for i in range(16)]
        while len(seen) < 16 and not any(f.done() for f in running):
            time.sleep(0.01)
        held = pins(store)
        leave.set()
        for done in running:
            done.result()
    assert len(seen) == 16 and {g for g, _ in seen} == {0}
    assert len({text for _, text in seen}) == 1 and "L1" in seen[0][1]  # byte-stable for the cache prefix
    assert len(held) == 1 and held[0].startswith("0-")  # one pin for sixteen tasks
    assert pins(store) == [] and store.shared.held() == {}  # the last one out released it


def test_a_task_reads_its_own_generation_after_another_task_commits(store: MemoryStore) -> None:
    commit_fact(store, FACTS)
    with ExitStack() as stack:
        first = stack.enter_context(session(store, "first"))
        second = stack.enter_context(session(store, "second"))
        newer = commit_fact(store, FACTS + "- the grass is green\n")
        late = stack.enter_context(session(store, "late"))  # starts after the commit: the newer generation
        assert (first.view.generation, second.view.generation, late.view.generation) == (1, 1, newer)
        assert len(pins(store)) == 2 and store.shared.held() == {1: 2, newer: 1}
        assert first.view.read("L2/facts.md") == FACTS  # read after the commit: still its own generation
        assert "grass" not in first.l1_text and "grass" in late.l1_text  # and the prompt's L1 came from it
        assert "grass" in (late.view.read("L2/facts.md") or "")
        assert first.view.list("L2") == ["L2/facts.md"] and first.view.root == store.root / "generations" / "1"
    assert pins(store) == []


def test_gc_keeps_the_generation_a_shared_pin_holds(store: MemoryStore) -> None:
    with ExitStack() as stack:
        first = stack.enter_context(session(store, "first"))
        second = stack.enter_context(session(store, "second"))
        for k in range(1, 4):
            commit_fact(store, f"fact {k}\n")
        assert len(pins(store)) == 1
        gc = ga_memory("gc", "--keep", "1")  # another process: the pin's flock is what it sees
        assert gc.returncode == 0, gc.stdout + gc.stderr
        assert sorted(os.listdir(store.root / "generations")) == ["0", "3"]
        assert first.view.read("L1/index.md") is not None
        first.__exit__(None, None, None)
        assert store.gc(keep=1) == [] and second.view.read("L1/index.md") is not None  # one reader still holds it
        stack.pop_all()
        second.__exit__(None, None, None)
    assert store.gc(keep=1) == [0]


def test_a_reader_that_starts_later_is_checked_as_if_it_pinned_on_its_own(store: MemoryStore) -> None:
    with session(store, "early"):
        sh("chmod u+w generations/0/L1/index.md && printf x >> generations/0/L1/index.md", store.root)
        store.core.forget_checks()  # as after CHECK_TRUST_S
        with pytest.raises(GenerationDamaged, match="generation 0 .* damaged: L1/index.md"):
            session(store, "late").__enter__()
        assert len(pins(store)) == 1  # the early reader keeps its pin
    assert pins(store) == []


def test_a_task_archives_only_when_it_used_memory(store: MemoryStore, tmp_path: Path) -> None:
    history = tmp_path / "history.jsonl"
    history.write_text('{"turn": 1}\n')
    record = TaskRecord(task_id="t", status="succeeded", answer="task done", turns=1, history_path=str(history))
    with session(store, "quiet") as memory:
        memory.finish(record, [])
    assert archived(store.root) == []
    with session(store, "reader") as memory:
        assert memory.view.read("L2/facts.md") is not None
        memory.finish(record, [])
    assert [p.name.split("_", 1)[1] for p in archived(store.root)] == ["reader.jsonl"]


def test_a_fanout_that_never_touches_memory_pins_once_and_archives_nothing(tmp_path: Path, store_root: Path) -> None:
    store = MemoryStore(store_root, create=True)
    model = script_file(tmp_path, [
        {"match": "read memory", "turns": [{"tool_calls": [{"name": "file_read",
                                                             "arguments": {"path": "memory/L2/facts.md"}}]},
                                           {"content": "task done"}]},
        {"match": "plain", "turns": [{"tool_calls": [write("notes.md", "step\n")]},
                                     {"tool_calls": [write("notes.md", "more\n", "append")]},
                                     {"content": "task done"}]}])
    data = yaml.safe_load(model.read_text())
    model.write_text(yaml.safe_dump({**data, "latency": 0.15}))
    tasks = [{"id": f"plain-{i}", "prompt": f"plain task {i}"} for i in range(12)]
    spec = tmp_path / "tasks.yaml"
    spec.write_text(yaml.safe_dump({"version": 1, "concurrency": 4, "memory": {"commit": True},
                                    "defaults": {"model": f"scripted:{model}", "max_turns": 6}, "tasks": tasks}))
    proc = subprocess.Popen([*GA, "fanout", str(spec), "--json", "--out", str(tmp_path / "runs")], cwd=tmp_path,
                            env=ga_env(OFFLINE), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    most = 0
    while proc.poll() is None:  # how many pins the running tasks hold at once
        most = max(most, len(pins(store)))
        time.sleep(0.005)
    out, err = proc.communicate()
    assert proc.returncode in (0, 1), out + err  # 1: a file_write backs no answer, so they end unverified
    results = [json.loads(line) for line in
               (Path(json.loads(out)["run_dir"]) / "results.jsonl").read_text().splitlines()]
    assert [r["turns"] for r in results] == [3] * 12 and {r["status"] for r in results} == {"unverified"}
    assert most == 1  # four tasks at a time, one pin (before: one per running task)
    assert pins(store) == [] and archived(store.root) == [] and not (store.root / "stats").exists()

    reader = tmp_path / "reader.yaml"
    reader.write_text(yaml.safe_dump({"version": 1, "defaults": {"model": f"scripted:{model}", "max_turns": 6},
                                      "tasks": [{"id": "reader", "prompt": "read memory"}]}))
    done = subprocess.run([*GA, "fanout", str(reader), "--json", "--out", str(tmp_path / "runs")], cwd=tmp_path,
                          env=ga_env(OFFLINE), capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    assert [p.name.split("_", 1)[1] for p in archived(store.root)] == ["reader.jsonl"]  # a task that read memory
