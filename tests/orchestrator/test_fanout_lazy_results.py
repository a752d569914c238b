"""What `fanout()` returns holds no task record until its results are read: the summary, the exit status, --json and
the digest read them from the run directory one at a time (a run of 10,000 tasks held 31 MB of records at its end).
The scripted model over real HTTP, the in-process executor."""
from __future__ import annotations

import gc
import io
from pathlib import Path

from rich.console import Console

from orchestrator import fanout
from orchestrator.exitcodes import NOT_DONE, run_exit
from orchestrator.records import COMPACT_ROWS, TaskRecord
from orchestrator.views.digest import print_run_digest
from tests.fanout_support import done_tasks_file, start_server

FAILING = (3, COMPACT_ROWS + 10)


def _records_alive() -> int:
    gc.collect()
    return sum(isinstance(thing, TaskRecord) for thing in gc.get_objects())


def test_the_run_fanout_returns_reads_its_records_only_when_asked(tmp_path: Path) -> None:
    n = COMPACT_ROWS + 20
    server = start_server({"latency": 0, "tasks": [{"match": ".*", "turns": [{"content": "task done"}]}]},
                          tmp_path / "requests.jsonl")
    before = _records_alive()
    try:
        run = fanout(done_tasks_file(tmp_path / "tasks.yaml", server.base_url, n, name="lazy", failing=FAILING,
                                     concurrency=8), out=tmp_path / "runs",
                     display="quiet", preflight=False)
    finally:
        server.stop()
    assert run.status == "failed" and run.summary.tasks.failed == len(FAILING)
    assert _records_alive() == before  # the records of the run are on disk, not held

    assert run_exit(run) == NOT_DONE == run.exit_code
    data = run.compact()
    assert [row["id"] for row in data["results"]] == [f"t{i:04d}" for i in FAILING], data
    assert data["results_note"].startswith(f"{n:,} results")
    printed = Console(file=io.StringIO(), width=160)
    print_run_digest(printed, run)
    digest = printed.file.getvalue()  # type: ignore[attr-defined]
    assert f"failed: {len(FAILING)}" in digest and all(f"t{i:04d}" in digest for i in FAILING), digest
    assert _records_alive() == before  # the exit status, --json and the digest kept none of them

    assert [r.task_id for r in run.results] == [f"t{i:04d}" for i in range(n)]  # read now, in the plan's order
    assert len(run.results) == n and run.results[FAILING[0]].status == "failed"
    assert _records_alive() == before + n
