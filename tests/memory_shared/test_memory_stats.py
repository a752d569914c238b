"""Access statistics: counts per path in a window, distinct tasks, many processes appending at once."""
from __future__ import annotations

import json
import multiprocessing
from datetime import datetime, timezone

import pytest

from memory_shared.stats import PIPE_BUF, AccessLog

T0 = datetime(2025, 6, 1, tzinfo=timezone.utc).timestamp()
DAY = 86400.0


def test_counts_window_prefix_and_distinct_tasks(tmp_path):
    log = AccessLog(tmp_path / "mem")
    reads = [  # (path, task, day)
        ("L3/deploy.md", "a", 0), ("L3/deploy.md", "a", 0), ("L3/deploy.md", "b", 1),
        ("L3/scrape.md", "a", 2), ("L2/facts.md", "c", 2), ("L3/deploy.md", "c", 5),
    ]
    for path, task, day in reads:
        log.record(path, task, when=T0 + day * DAY)
    assert log.counts() == {"L3/deploy.md": 4, "L3/scrape.md": 1, "L2/facts.md": 1}
    assert log.counts(since=T0 + DAY, until=T0 + 5 * DAY) == {"L3/deploy.md": 1, "L3/scrape.md": 1, "L2/facts.md": 1}
    assert log.counts(prefix="L3/") == {"L3/deploy.md": 4, "L3/scrape.md": 1}
    assert log.counts(prefix="L3/", distinct_tasks=True) == {"L3/deploy.md": 3, "L3/scrape.md": 1}
    assert log.counts(until=T0 + 2 * DAY, distinct_tasks=True) == {"L3/deploy.md": 2}
    assert log.tasks_using("L3/deploy.md") == 3
    assert log.tasks_using("L3/deploy.md", since=datetime.fromtimestamp(T0 + DAY, timezone.utc)) == 2
    assert log.tasks_using("L3/none.md") == 0


def test_empty_log_and_damaged_tail_are_tolerated(tmp_path):
    log = AccessLog(tmp_path / "mem")
    assert log.counts() == {} and log.tasks_using("x") == 0
    log.record("L2/facts.md", "t1")
    with open(log.path, "a") as handle:
        handle.write('{"t": 1, "path": "L2/fa')  # what a full disk can leave behind
    assert log.counts() == {"L2/facts.md": 1}


def test_oversized_lines_stay_atomic(tmp_path):
    log = AccessLog(tmp_path / "mem")
    log.record("L3/x.md", "t" * 10000)
    [line] = log.path.read_bytes().splitlines(keepends=True)
    assert len(line) <= PIPE_BUF and json.loads(line)["path"] == "L3/x.md"
    with pytest.raises(ValueError, match="too long"):
        log.record("L3/" + "p" * 5000, "t")


def _hammer(root: str, worker: int, n: int) -> None:
    log = AccessLog(root)
    for i in range(n):
        # long paths make a torn or interleaved write visible if appends were not atomic
        log.record(f"L3/{'d' * 900}/{i % 7}.md", f"w{worker}-{i % 3}")


def test_many_processes_append_without_torn_lines(tmp_path):
    workers, per_worker = 8, 400
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_hammer, args=(str(tmp_path / "mem"), w, per_worker)) for w in range(workers)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    log = AccessLog(tmp_path / "mem")
    lines = log.path.read_text().splitlines()
    assert len(lines) == workers * per_worker
    assert all(json.loads(line)["path"].startswith("L3/d") for line in lines)  # every line whole
    counts = log.counts()
    expected = {f"L3/{'d' * 900}/{k}.md": workers * sum(1 for i in range(per_worker) if i % 7 == k) for k in range(7)}
    assert counts == expected
    assert log.tasks_using(f"L3/{'d' * 900}/0.md") == workers * 3
