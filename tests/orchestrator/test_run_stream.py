"""`ga runs show RUN` as a stream (orchestrator/views/runstream.py): the ledger's last lines read from the file's end, a
torn line left out; a run without a summary (its driver killed) still gets every task and its counts."""
from __future__ import annotations

import json
from pathlib import Path

from orchestrator.views.runstream import LEDGER_TAIL, ledger_tail
from tests.fanout_support import start_server
from tests.ga_support import run_ga


def test_the_ledger_tail_is_read_from_the_end_without_the_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    lines = [{"time": i, "event": "queued", "task_id": f"t{i:05d}", "pad": "x" * 40} for i in range(5000)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"time": 5000, "event": "sta')
    assert path.stat().st_size > 4 * 65536  # several blocks back from the end
    assert ledger_tail(path) == lines[-LEDGER_TAIL:]
    assert ledger_tail(tmp_path / "missing.jsonl") == []


def test_a_run_without_a_summary_lists_every_task_and_counts_them_at_the_end(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    server = start_server({"latency": 0, "tasks": [{"match": ".*", "turns": [{"content": "task done"}]}]},
                          tmp_path / "requests.jsonl")
    try:
        tasks = tmp_path / "tasks.yaml"
        tasks.write_text(f"version: 1\nname: stream\nconcurrency: 2\nmemory: {{commit: false}}\n"
                         f"defaults: {{model: 'scripted@{server.base_url}', check: {{pattern: task done}}}}\ntasks:\n"
                         + "".join(f"  - {{id: task-{i}, prompt: 'item {i}'}}\n" for i in range(5)))
        done = run_ga("fanout", str(tasks), "--out", str(runs), "--no-preflight", "--json", cwd=tmp_path)
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr[-2000:]
    run_dir = Path(json.loads(done.stdout)["run_dir"])
    (run_dir / "summary.json").unlink()  # as after a kill -9 of its driver
    results = (run_dir / "results.jsonl").read_text().splitlines()
    (run_dir / "results.jsonl").write_text("\n".join(results[:3]) + "\n")  # two tasks never reported
    cut = {json.loads(line)["task_id"] for line in results[3:]}
    ledger = [line for line in (run_dir / "ledger.jsonl").read_text().splitlines()
              if not (json.loads(line).get("task_id") in cut and json.loads(line)["event"] == "succeeded")
              and json.loads(line)["event"] != "run_finished"]
    (run_dir / "ledger.jsonl").write_text("\n".join(ledger) + "\n")

    shown = run_ga("runs", "show", run_dir.name, "--out", str(runs), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr[-2000:]
    lines = shown.stdout.splitlines()
    assert lines[0] == f"run {run_dir.name}: stopped"
    rows = {line.split()[0]: line.split() for line in lines if line.startswith("task-")}
    assert sorted(rows) == [f"task-{i}" for i in range(5)]
    assert sorted(row[0] for row in rows.values() if row[1] == "stopped") == sorted(cut)
    assert lines[-1].startswith("3/5 succeeded, 0 unverified, 0 failed, 2 unfinished"), shown.stdout
