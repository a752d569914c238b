"""A run's results.jsonl read back, every way (RunDir.results and each_result, the records fanout() returns, a
resume's open, `ga runs list`), through the one JSON-lines reader: a torn last line is left out, a reader that
measured the file reads no further than it did, and a symlink or FIFO planted in the file's place is refused in
one line, never followed nor waited on. Real files in a real run directory."""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any, Callable

import pytest

from memory_shared.fsutil import Unsafe
from orchestrator.ledger import RunDir, StoredResults
from orchestrator.records import TaskRecord
from orchestrator.views.runlist import scan

PLAN = {"name": "read", "tasks": [{"id": "a", "prompt": "x"}, {"id": "b", "prompt": "y"}, {"id": "c", "prompt": "z"}]}
DEADLINE = 60  # seconds: far past what a refusal takes; a reader blocked on the FIFO never returns


def finished_run(tmp_path: Path, *task_ids: str) -> RunDir:
    run = RunDir.create(tmp_path, "run", PLAN)
    for task_id in task_ids:
        run.add_result(TaskRecord(task_id=task_id, status="succeeded", attempt=1, answer=f"answer {task_id}"))
    run.close()
    return run


def returns_in_time(read: Callable[[], Any]) -> Any:
    """What `read()` returned or raised, from a thread of its own, so a read that blocks fails the test."""
    outcome: list[Any] = []
    thread = threading.Thread(target=lambda: outcome.append(_called(read)), daemon=True)
    thread.start()
    thread.join(DEADLINE)
    assert outcome, f"the read did not return within {DEADLINE} s (blocked on the file?)"
    return outcome[0]


def _called(read: Callable[[], Any]) -> Any:
    try:
        return read()
    except Exception as exc:  # noqa: BLE001  (the test looks at which)
        return exc


def test_a_torn_last_line_is_left_out_and_cut_when_the_run_is_opened_again(tmp_path: Path) -> None:
    run = finished_run(tmp_path, "a", "b")
    results = run.path / "results.jsonl"
    with results.open("a") as handle:
        handle.write('{"task_id": "c", "status": "succ')  # a crash mid-write
    assert list(run.results()) == ["a", "b"]
    assert [r.task_id for r in StoredResults(run.path, 2).each()] == ["a", "b"]
    reopened = RunDir(run.path).open_files()
    try:
        assert reopened.add_result(TaskRecord(task_id="c", status="succeeded", attempt=1))
    finally:
        reopened.close()
    assert [json.loads(line)["task_id"] for line in results.read_text().splitlines()] == ["a", "b", "c"]


def test_the_records_fanout_returned_are_the_lines_there_when_the_run_ended(tmp_path: Path) -> None:
    run = finished_run(tmp_path, "a", "b")
    returned = StoredResults(run.path, 2)
    resumed = RunDir(run.path).open_files()  # a resume appends its own after them
    try:
        resumed.add_result(TaskRecord(task_id="c", status="failed", attempt=1))
        assert [r.task_id for r in returned.each()] == ["a", "b"]
        assert list(resumed.results()) == ["a", "b", "c"]
        resumed.forget_failed()  # --retry-failed rewrites the file
    finally:
        resumed.close()
    with pytest.raises(FileNotFoundError, match="results.jsonl was rewritten .* --retry-failed"):
        list(returned.each())


@pytest.mark.parametrize("planted", ["symlink", "fifo"])
def test_a_symlink_or_fifo_planted_as_results_jsonl_is_refused_never_followed_nor_waited_on(
        tmp_path: Path, planted: str) -> None:
    run = finished_run(tmp_path, "a")
    results = run.path / "results.jsonl"
    returned = StoredResults(run.path, 1)
    elsewhere = tmp_path / "elsewhere.jsonl"  # lines that would pass for the run's own
    elsewhere.write_text(json.dumps({"task_id": "forged", "status": "succeeded"}) + "\n")
    results.unlink()
    if planted == "symlink":
        results.symlink_to(elsewhere)
    else:
        os.mkfifo(results)

    readers: dict[str, Callable[[], Any]] = {
        "results": run.results, "each_result": lambda: list(run.each_result()),
        "returned": lambda: list(returned.each()), "resume": lambda: RunDir(run.path).open_files()}
    for name, read in readers.items():
        outcome = returns_in_time(read)
        assert isinstance(outcome, Unsafe), f"{name}: {outcome!r}"
        assert str(outcome).startswith(f"{results}: ") and "\n" not in str(outcome), f"{name}: {outcome}"
    rows, damaged = returns_in_time(lambda: scan(tmp_path))
    assert rows == [] and [d.run_id for d in damaged] == ["run"]
    assert damaged[0].line().startswith("run run: cannot read results.jsonl: ")
    assert elsewhere.read_text() == json.dumps({"task_id": "forged", "status": "succeeded"}) + "\n"
