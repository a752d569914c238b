"""Runs too large for a row per task: the digest `ga fanout` prints, and a kill while the queued lines are
being written in batches. Real `ga` processes, the scripted model over real HTTP, the in-process executor."""
from __future__ import annotations

import json
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

from orchestrator.ledger import QUEUED_BATCH, read_spec
from orchestrator.views.digest import FULL_TABLE_MAX
from tests.fanout_support import done_tasks_file, first_user_message, read_jsonl, result_lines, start_server
from tests.ga_support import GA, REPO, ga_env, run_ga


def _tasks_file(path: Path, url: str, n: int, failing: set[int] = frozenset(), concurrency: int = 16) -> Path:
    return done_tasks_file(path, url, n, name="large", failing=failing, concurrency=concurrency,
                           prompt="item {i} of the large run")


def test_a_run_larger_than_the_table_prints_a_digest_naming_the_failed_tasks(tmp_path: Path) -> None:
    n = FULL_TABLE_MAX + 50
    server = start_server({"latency": 0, "tasks": [{"match": ".*", "turns": [{"content": "task done"}]}]},
                          tmp_path / "requests.jsonl")
    try:
        tasks = _tasks_file(tmp_path / "tasks.yaml", server.base_url, n, failing={7, 42, 99})
        proc = run_ga("fanout", str(tasks), "--out", str(tmp_path / "runs"), "--no-preflight", cwd=tmp_path)
    finally:
        server.stop()

    assert proc.returncode == 1, proc.stderr[-2000:]
    run_dir = next((tmp_path / "runs").iterdir())
    assert len(result_lines(run_dir)) == n  # the digest leaves the run's records whole
    lines = proc.stdout.splitlines()
    assert len(lines) < 80, proc.stdout[-3000:]
    assert f"ga runs show {run_dir.name}" in proc.stdout
    assert "failed: 3" in proc.stdout
    for task_id in ("t0007", "t0042", "t0099"):
        assert any(task_id in line and "failed" in line for line in lines), proc.stdout
    rows = [line for line in lines if line.strip().startswith("t0")]
    assert len(rows) <= 3 + 10  # the failed and the ten costliest, not a row per task
    assert f"{n - 3}/{n} succeeded" in proc.stdout

    shown = run_ga("runs", "show", run_dir.name, "--out", str(tmp_path / "runs"), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert all(f"t{i:04d}" in shown.stdout for i in range(n))  # where the digest sends you: every task

    # --json (a parent agent's view), from a resume with nothing left to run: the failed ones, and the file
    again = run_ga("fanout", str(tasks), "--out", str(tmp_path / "runs"), "--resume", run_dir.name, "--no-preflight",
                   "--json", cwd=tmp_path)
    data = json.loads(again.stdout)
    assert [r["id"] for r in data["results"]] == ["t0007", "t0042", "t0099"], again.stdout[-2000:]
    assert data["results_file"] == str(run_dir / "results.jsonl") and data["tasks"]["total"] == n


def test_a_small_run_keeps_its_full_table(tmp_path: Path) -> None:
    server = start_server({"latency": 0, "tasks": [{"match": ".*", "turns": [{"content": "task done"}]}]},
                          tmp_path / "requests.jsonl")
    try:
        tasks = _tasks_file(tmp_path / "tasks.yaml", server.base_url, 12)
        proc = run_ga("fanout", str(tasks), "--out", str(tmp_path / "runs"), "--no-preflight", cwd=tmp_path)
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert all(f"t{i:04d}" in proc.stdout for i in range(12))
    assert "ga runs show" not in proc.stdout


def test_kill_while_queued_lines_are_written_then_resume_runs_each_task_once(tmp_path: Path) -> None:
    """kill -9 as soon as the ledger holds a queued line and the run its spec.jsonl (written while the first tasks
    start; the batches of QUEUED_BATCH lines may be partly written), then `ga fanout --resume`: every task ends with
    one result, none is sent twice, all are queued."""
    n = QUEUED_BATCH + QUEUED_BATCH // 5
    log_path = tmp_path / "requests.jsonl"
    server = start_server({"latency": 0, "tasks": [{"match": ".*", "turns": [{"content": "task done"}]}]}, log_path)
    runs = tmp_path / "runs"
    try:
        tasks = _tasks_file(tmp_path / "tasks.yaml", server.base_url, n, concurrency=32)
        proc = subprocess.Popen([*GA, "fanout", str(tasks), "--out", str(runs), "--no-preflight", "--json"], cwd=REPO,
                                env=ga_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        ledger_path = None
        while time.monotonic() < deadline:
            found = list(runs.glob("*/ledger.jsonl"))
            if found and b'"queued"' in found[0].read_bytes() and (found[0].parent / "spec.jsonl").is_file():
                ledger_path = found[0]
                break
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            time.sleep(0.002)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert ledger_path is not None, "no queued line was written"
        raw = ledger_path.read_text(encoding="utf-8")
        whole = raw.splitlines()[:-1] if not raw.endswith("\n") else raw.splitlines()
        queued_at_kill = sum(json.loads(line)["event"] == "queued" for line in whole)
        finished_at_kill = {r["task_id"] for r in result_lines(ledger_path.parent)}
        resumed = run_ga("fanout", str(tasks), "--out", str(runs), "--resume", ledger_path.parent.name,
                         "--no-preflight", "--json", cwd=tmp_path, timeout=600)
    finally:
        server.stop()

    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert json.loads(resumed.stdout)["status"] == "succeeded"
    results = result_lines(ledger_path.parent)
    assert sorted(r["task_id"] for r in results) == [f"t{i:04d}" for i in range(n)], \
        f"queued at the kill: {queued_at_kill}, finished: {len(finished_at_kill)}"
    sent = Counter(first_user_message(r) for r in read_jsonl(log_path))
    assert all(sent[f"item {i} of the large run"] >= 1 for i in range(n)), "a task was never sent"
    assert all(sent[f"item {int(t[1:])} of the large run"] == 1 for t in finished_at_kill), "a finished task was sent again"
    events = read_jsonl(ledger_path)  # whole lines only: a torn tail was cut when the resume opened it
    assert {e["task_id"] for e in events if e["event"] == "queued"} == {f"t{i:04d}" for i in range(n)}


def test_the_run_keeps_its_plan_whole_in_spec_jsonl(tmp_path: Path) -> None:
    """spec.jsonl is written as JSON lines (the plan's fields, then one task a line) without a task's unset fields; the plan read back (what `--resume RUN`
    without a file runs) is the plan that ran, a task with no tools and one with a check included."""
    from orchestrator import spec as specs
    from orchestrator.fanout import stored_plan

    server = start_server({"latency": 0, "tasks": [{"match": ".*", "turns": [{"content": "task done"}]}]},
                          tmp_path / "requests.jsonl")
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(f"version: 1\nname: kept\nmemory: {{commit: false}}\ndefaults: {{model: 'scripted@{server.base_url}'}}\n"
                     "tasks:\n  - {id: bare, prompt: 'no tools at all', tools: [], max_turns: 2}\n"
                     "  - {id: checked, prompt: 'say done', check: {pattern: done}, truncate: true, timeout: 30}\n")
    try:
        proc = run_ga("fanout", str(tasks), "--out", str(tmp_path / "runs"), "--no-preflight", cwd=tmp_path)
    finally:
        server.stop()
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    run_dir = next((tmp_path / "runs").iterdir())
    lines = [json.loads(line) for line in (run_dir / "spec.jsonl").read_text().splitlines()]
    assert lines[0]["name"] == "kept" and lines[0]["tasks"] == 2 and [t["id"] for t in lines[1:]] == ["bare", "checked"]
    kept = stored_plan(tmp_path / "runs", run_dir.name)
    planned = specs.load(tasks)
    assert [(t.id, t.tools, t.max_turns, t.check, t.truncate, t.timeout, t.model, t.inputs) for t in kept.tasks] == \
        [(t.id, t.tools, t.max_turns, t.check, t.truncate, t.timeout, t.model, t.inputs) for t in planned.tasks]
    assert kept.tasks[0].tools == [] and kept.fingerprints == {}  # no task has inputs: each follows from its fields
    stored = specs.stored_fingerprints(read_spec(run_dir / "spec.jsonl"))
    assert stored == {t.id: t.fingerprint() for t in planned.tasks}
