"""L4 archive: store, compress, search, bounded months, crash safety, many processes at once."""
from __future__ import annotations

import gzip
import json
import multiprocessing
import os
import subprocess
import sys
import textwrap
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from memory_shared import faults
from memory_shared.archive import Archive, compact_session

NOW = datetime(2025, 6, 20, 12, 0, tzinfo=timezone.utc)


def write_history(path: Path, task: str, answer: str = "done") -> Path:
    """A history.jsonl shaped like the worker's: each line one turn, the request re-sends the history."""
    user = {"role": "user", "content": f"please {task}"}
    call = {"role": "assistant", "content": "", "tool_calls": [{
        "id": "c1", "type": "function",
        "function": {"name": "code_run", "arguments": json.dumps({"script": "print(1+1)\n" * 20, "type": "python"})}}]}
    result = {"role": "tool", "tool_call_id": "c1", "content": "2"}
    anchor = {"role": "user", "content": "<history>turn 1: code_run</history><key_info>x</key_info>"}
    final = {"role": "assistant", "content": answer}
    turns = [
        {"turn": 1, "sent": [user], "received": call, "usage": {"prompt": 10}},
        {"turn": 2, "sent": [user, call, result, anchor], "received": final, "usage": {"prompt": 20}},
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(t) + "\n" for t in turns))
    return path


def test_store_copies_raw_and_search_reads_it(tmp_path):
    archive = Archive(tmp_path / "mem")
    history = write_history(tmp_path / "h.jsonl", "add numbers", answer="the sum is 2")
    stored = archive.store_session("task-1", history, when=NOW)
    assert stored == tmp_path / "mem/archive/raw/2025-06/2025-06-20_task-1.jsonl"
    assert stored.read_bytes() == history.read_bytes()
    [record] = archive.search(task_id="task-1")
    assert record["state"] == "raw" and record["date"] == "2025-06-20" and record["turns"] == 2
    assert record["user"] == ["please add numbers"]  # deduplicated, anchor-only user turns dropped
    assert record["steps"][0].startswith("1: code_run(script=print(1+1) print(1+1)")
    assert len(record["steps"][0]) <= 200
    assert record["final"] == "the sum is 2"


def test_same_task_twice_is_kept_twice_and_odd_ids_round_trip(tmp_path):
    archive = Archive(tmp_path / "mem")
    history = write_history(tmp_path / "h.jsonl", "x")
    ids = ["a/b c", "..", "x~y", "task-1", "task-1"]
    paths = [archive.store_session(task, history, when=NOW) for task in ids]
    assert len(set(paths)) == 5 and all(p.parent == tmp_path / "mem/archive/raw/2025-06" for p in paths)
    assert sorted(r["task_id"] for r in archive.search()) == sorted(ids)
    assert len(archive.search(task_id="task-1")) == 2


def test_threads_archiving_the_same_task_at_once_each_keep_their_copy(tmp_path):
    """Workers add sessions under a shared lock: 24 threads archiving one task id at the same moment land 24
    whole copies under distinct names, and leave no temporary file behind."""
    from concurrent.futures import ThreadPoolExecutor

    archive = Archive(tmp_path / "mem")
    history = write_history(tmp_path / "h.jsonl", "x")
    with ThreadPoolExecutor(24) as pool:
        paths = list(pool.map(lambda _: archive.store_session("same", history, when=NOW), range(24)))
    month = tmp_path / "mem/archive/raw/2025-06"
    assert len(set(paths)) == 24 and sorted(p.name for p in month.iterdir()) == sorted(p.name for p in paths)
    assert all(p.read_bytes() == history.read_bytes() for p in paths)
    assert len(archive.search(task_id="same")) == 24


def test_tolerant_of_text_mode_content_parts_and_torn_lines(tmp_path):
    raw = tmp_path / "2025-06-01_t.jsonl"
    raw.write_text("\n".join([
        json.dumps({"request": {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi there"}]}]},
                    "reply": {"message": {"role": "assistant",
                                          "content": '<tool_use>{"name": "file_read", "arguments": {"path": "a.md"}}</tool_use>'}}}),
        '{"torn": ',
        json.dumps({"messages": [{"role": "assistant", "content": "final words", "tool_calls": None}]}),
    ]) + "\n")
    record = compact_session(raw)
    assert record["user"] == ["hi there"]
    assert record["steps"] == ["1: file_read(path=a.md)", "2: answer: final words"]
    assert record["final"] == "final words" and record["task_id"] == "t"


def test_compress_folds_old_sessions_and_keeps_recent_ones_raw(tmp_path):
    archive = Archive(tmp_path / "mem")
    history = write_history(tmp_path / "h.jsonl", "compress me")
    archive.store_session("old-1", history, when=NOW - timedelta(days=40))
    archive.store_session("old-2", history, when=NOW - timedelta(days=10))
    archive.store_session("new-1", history, when=NOW - timedelta(days=1))
    result = archive.compress(older_than_days=7, now=NOW)
    assert sorted(result["compressed"]) == ["2025-05-11_old-1.jsonl", "2025-06-10_old-2.jsonl"]
    assert sorted(p.name for p in (tmp_path / "mem/archive/raw").rglob("*.jsonl")) == ["2025-06-19_new-1.jsonl"]
    with gzip.open(tmp_path / "mem/archive/2025-05.jsonl.gz", "rt") as handle:
        [may] = [json.loads(line) for line in handle]
    assert may["task_id"] == "old-1" and may["final"] == "done" and may["state"] == "compressed"
    assert [r["task_id"] for r in archive.search(date="2025-06")] == ["old-2", "new-1"]
    assert [r["state"] for r in archive.search(date="2025-06-10")] == ["compressed"]
    assert [r["task_id"] for r in archive.search(text="COMPRESS me")] == ["old-1", "old-2", "new-1"]
    assert archive.search(text="nowhere to be found") == []
    assert archive.compress(older_than_days=7, now=NOW)["compressed"] == []  # idempotent
    assert len(archive.search()) == 3


def test_bounded_old_months_are_summarized_and_dropped(tmp_path):
    archive = Archive(tmp_path / "mem", keep_months=2)
    history = write_history(tmp_path / "h.jsonl", "t")
    for months_ago in range(5):
        archive.store_session(f"task-{months_ago}", history, when=NOW - timedelta(days=31 * months_ago))
    result = archive.compress(older_than_days=0, now=NOW)
    assert result["months_dropped"] == ["2025-02", "2025-03", "2025-04"]
    assert sorted(p.name for p in (tmp_path / "mem/archive").glob("*.gz")) == ["2025-05.jsonl.gz"]  # today's stays raw
    [summary] = archive.search(task_id="task-4")
    assert summary == {"month": "2025-02", "state": "summarized", "sessions": 1, "task_ids": ["task-4"]}
    assert archive.search(task_id="task-1")[0]["state"] == "compressed"
    assert archive.search(task_id="task-0")[0]["state"] == "raw"
    assert archive.status()["summarized_months"] == ["2025-02", "2025-03", "2025-04"]


def test_bad_arguments_are_refused(tmp_path):
    archive = Archive(tmp_path / "mem")
    with pytest.raises(ValueError, match="YYYY-MM-DD"):
        archive.search(date="June")
    with pytest.raises(FileNotFoundError, match="no such history"):
        archive.store_session("t", tmp_path / "missing.jsonl")
    with pytest.raises(ValueError, match="keep_months"):
        Archive(tmp_path / "mem", keep_months=0)


COMPRESS_CHILD = textwrap.dedent("""
    import sys
    from datetime import datetime, timezone
    from memory_shared.archive import Archive
    Archive(sys.argv[1], keep_months=1).compress(older_than_days=0, now=datetime(2025, 6, 21, tzinfo=timezone.utc))
""")


FAULT_POINTS = ["archive." + point for point in (
    "before_rename", "after_month_write", "after_raw_unlink", "after_raw_unlink:3",
    "before_rename:2", "after_month_write:2", "before_rename:3", "after_summary_write")]


@pytest.mark.parametrize("point", FAULT_POINTS)
def test_compress_killed_at_each_fault_point_loses_nothing(tmp_path, point):
    root = tmp_path / "mem"
    archive = Archive(root, keep_months=1)
    history = write_history(tmp_path / "h.jsonl", "keep me")
    tasks = [f"t{i}" for i in range(4)]
    for i, task in enumerate(tasks):  # two sessions in May (to be dropped to a summary), two in June
        archive.store_session(task, history, when=NOW - timedelta(days=25 * (i % 2)))
    env = {**os.environ, faults.ENV: point}
    child = subprocess.run([sys.executable, "-c", COMPRESS_CHILD, str(root)], env=env, cwd=Path(__file__).parents[2])
    assert child.returncode == -9, "the fault point was not reached"
    found = {r["task_id"] for r in archive.search(date="2025-06")}
    assert found == {"t0", "t2"}  # June sessions: exactly once each, raw or compressed
    assert len(archive.search(date="2025-06")) == 2
    may = archive.search(date="2025-05")
    assert {t for r in may for t in r.get("task_ids", [r.get("task_id")])} == {"t1", "t3"}
    subprocess.run([sys.executable, "-c", COMPRESS_CHILD, str(root)], check=True, cwd=Path(__file__).parents[2])
    assert not list((root / "archive").rglob("*.tmp-*")) and not list((root / "archive/raw").rglob("*.jsonl"))
    assert sorted(r["task_id"] for r in archive.search(date="2025-06")) == ["t0", "t2"]
    assert archive.search(task_id="t1")[0]["state"] == "summarized"


def _store_many(root: str, history: str, worker: int) -> None:
    archive = Archive(root)
    for i in range(15):
        day = datetime(2025, 6, 1 + i, tzinfo=timezone.utc)
        archive.store_session(f"w{worker}-{i}", history, when=day)
        if i % 5 == 4:
            archive.compress(older_than_days=10, now=NOW)


def test_many_processes_store_and_compress_at_once(tmp_path):
    history = write_history(tmp_path / "h.jsonl", "parallel")
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_store_many, args=(str(tmp_path / "mem"), str(history), w)) for w in range(6)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    archive = Archive(tmp_path / "mem")
    records = archive.search()
    assert sorted(r["task_id"] for r in records) == sorted(f"w{w}-{i}" for w in range(6) for i in range(15))
    assert {r["state"] for r in records} == {"raw", "compressed"}
