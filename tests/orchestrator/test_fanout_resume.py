"""Resume: kill -9 the `ga fanout` process mid-run, resume, and nothing is lost, duplicated or paid twice."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator import FanoutError, fanout
from tests.fanout_support import answer_task, first_user_message, ledger, read_jsonl, result_lines, start_server

pytestmark = pytest.mark.usefixtures("ray_session")


def _tasks_file(path: Path, url: str, n: int, prompt: str = "item {i}") -> Path:
    tasks = "\n".join(f"  - {{id: t{i}, prompt: \"{prompt.format(i=i)}\"}}" for i in range(n))
    path.write_text(f"version: 1\nname: resumable\nconcurrency: 2\ndefaults: {{model: \"scripted@{url}\"}}\ntasks:\n{tasks}\n")
    return path


def test_kill_the_driver_then_resume_runs_only_what_did_not_finish(tmp_path: Path, ray_session: dict) -> None:
    work = "import time\ntime.sleep(0.8)\nprint('worked')"
    script = {"tasks": [{"match": "item", "turns": [
        {"content": "working", "tool_calls": [{"name": "code_run", "arguments": {"type": "python", "script": work}}]},
        {"content": "Result:", "echo_last_tool_result": True}]}]}
    log_path = tmp_path / "requests.jsonl"
    server = start_server(script, log_path)
    tasks_file = _tasks_file(tmp_path / "tasks.yaml", server.base_url, 8)
    runs = tmp_path / "runs"
    try:
        proc = subprocess.Popen([sys.executable, "-m", "cli", "fanout", str(tasks_file), "--address", ray_session["address"],
                                 "--out", str(runs), "--json"], cwd=Path(__file__).resolve().parents[2],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ})
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            found = list(runs.glob("*/results.jsonl"))
            if found and len(result_lines(found[0].parent)) >= 3:
                break
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        run_dir = found[0].parent
        finished_before = {r["task_id"] for r in result_lines(run_dir)}
        assert 3 <= len(finished_before) < 8, "the kill must land mid-run"
        resumed_at = time.time()
        run = fanout(tasks_file, resume=run_dir.name, out=runs, display="quiet")
    finally:
        server.stop()

    assert run.status == "succeeded" and run.run_dir == run_dir
    lines = result_lines(run_dir)
    assert sorted(r["task_id"] for r in lines) == [f"t{i}" for i in range(8)]  # nothing lost, nothing twice
    log = read_jsonl(log_path)
    after = [r for r in log if r["time"] >= resumed_at]
    prompts_after = {first_user_message(r) for r in after}
    assert not prompts_after & {f"item {t[1:]}" for t in finished_before}, "a finished task was sent to the model again"
    assert {f"item {i}" for i in range(8) if f"t{i}" not in finished_before} <= prompts_after
    events = [e["event"] for e in ledger(run_dir)]
    assert "run_resumed" in events and events[-1] == "run_finished"


def test_resume_refuses_changed_tasks_and_retry_failed_reruns_failures(tmp_path: Path) -> None:
    run = {"content": "checking", "tool_calls": [{"name": "code_run", "arguments": {"type": "bash", "script": "true"}}]}
    flaky = {"match": "item 1", "faults": [{"turn": 0, "kind": "unauthorized", "times": 1}],
             "turns": [run, {"content": "fine now"}]}  # a tool run backs each answer: succeeded, not unverified
    script = {"tasks": [flaky, {"match": "item", "turns": [run, {"content": "fine"}]}]}
    server = start_server(script, tmp_path / "requests.jsonl")
    tasks_file = _tasks_file(tmp_path / "tasks.yaml", server.base_url, 3)
    runs = tmp_path / "runs"
    try:
        first = fanout(tasks_file, out=runs, display="quiet")
        assert first.status == "failed" and first.exit_code == 1
        assert {r.task_id: r.status for r in first.results} == {"t0": "succeeded", "t1": "failed", "t2": "succeeded"}

        again = fanout(tasks_file, resume=first.run_id, out=runs, display="quiet")  # failed ones stay failed
        assert again.status == "failed" and len(result_lines(first.run_dir)) == 3

        changed = _tasks_file(tmp_path / "changed.yaml", server.base_url, 4, prompt="item {i}")
        text = changed.read_text().replace('prompt: "item 2"', 'prompt: "item two"')
        changed.write_text(text)
        with pytest.raises(FanoutError) as refused:
            fanout(changed, resume=first.run_id, out=runs, display="quiet")
        assert "changed: t2" in str(refused.value) and "added: t3" in str(refused.value)

        retried = fanout(tasks_file, resume=first.run_id, retry_failed=True, out=runs, display="quiet")
    finally:
        server.stop()
    assert retried.status == "succeeded" and retried.exit_code == 0
    lines = result_lines(first.run_dir)
    assert sorted(r["task_id"] for r in lines) == ["t0", "t1", "t2"]
    assert {r["task_id"]: r["answer"] for r in lines}["t1"] == "fine now"
    assert len(read_jsonl(first.run_dir / "results.retried.jsonl")) == 1


@pytest.mark.parametrize("executor", ["ray", "local"])
def test_ctrl_c_stops_running_tasks_writes_the_ledger_exits_130_and_resumes(tmp_path: Path, ray_session: dict,
                                                                          executor: str) -> None:
    # the marker lives in the run directory, which the sandboxed script sees (its private /tmp hides tmp_path)
    work = "import os, time\ntime.sleep(0.1 if os.path.exists(os.path.join(os.environ['GA_RUN_DIR'], 'calm')) else 60)\nprint('worked')"
    script = {"tasks": [{"match": "item", "turns": [
        {"content": "working", "tool_calls": [{"name": "code_run", "arguments": {"type": "python", "script": work,
                                                                                  "timeout": 120}}]},
        {"content": "Result:", "echo_last_tool_result": True}]}]}
    server = start_server(script, tmp_path / "requests.jsonl")
    tasks_file = _tasks_file(tmp_path / "tasks.yaml", server.base_url, 4)
    runs = tmp_path / "runs"
    try:
        where = ["--address", ray_session["address"]] if executor == "ray" else []  # none: the in-process executor
        proc = subprocess.Popen([sys.executable, "-m", "cli", "fanout", str(tasks_file), *where,
                                 "--out", str(runs)], cwd=Path(__file__).resolve().parents[2],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "COLUMNS": "400"})
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:  # both workers are inside their 60 s scripts
            found = list(runs.glob("*/ledger.jsonl"))
            if found and sum(e["event"] == "running" for e in ledger(found[0].parent)) >= 2:
                break
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            time.sleep(0.1)
        interrupted_at = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err.decode()[-2000:]
        assert time.monotonic() - interrupted_at < 30  # the 60 s scripts were killed, not waited for
        run_dir = found[0].parent
        events = ledger(run_dir)
        assert sum(1 for e in events if e["event"] == "interrupted" and e.get("task_id")) == 2
        skipped = [e for e in events if e["event"] == "skipped"]  # the two that never started, one line each
        assert len({e["task_id"] for e in skipped}) == len(skipped) == 2 and {e["reason"] for e in skipped} == {"interrupted"}
        assert events[-1]["event"] == "run_finished" and events[-1]["status"] == "interrupted"
        assert events[0]["executor"] == executor
        assert result_lines(run_dir) == []
        shown = " ".join(out.decode().split())  # the hint may be broken between words at the terminal's width
        assert f"resume with `ga fanout --resume {run_dir.name} --out {runs}`" in shown  # works as printed
        (run_dir / "calm").write_text("ok")
        run = fanout(tasks_file, resume=run_dir.name, out=runs, display="quiet")
    finally:
        server.stop()
    assert run.status == "succeeded"
    assert sorted(r["task_id"] for r in result_lines(run_dir)) == ["t0", "t1", "t2", "t3"]


def test_a_run_still_held_by_its_driver_cannot_be_resumed(tmp_path: Path) -> None:
    from orchestrator.ledger import RunDir

    held = RunDir.create(tmp_path / "runs", "held-run", {"fingerprints": {}})  # this process holds it
    other = subprocess.run([sys.executable, "-c", "import sys; from orchestrator.ledger import RunDir; "
                            f"print(RunDir.existing({str(tmp_path / 'runs')!r}, 'held-run').lock())"],
                           capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2])
    assert other.stdout.strip() == "False"
    held.close()
    again = subprocess.run([sys.executable, "-c", "from orchestrator.ledger import RunDir; "
                            f"print(RunDir.existing({str(tmp_path / 'runs')!r}, 'held-run').lock())"],
                           capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2])
    assert again.stdout.strip() == "True"


def test_a_failed_reduce_is_kept_on_resume_and_run_again_with_retry_failed(tmp_path: Path) -> None:
    reduce_script = {"match": "MERGE", "faults": [{"turn": 0, "kind": "unauthorized", "times": 1}],
                     "turns": [{"content": "merged"}]}
    log_path = tmp_path / "requests.jsonl"
    server = start_server({"tasks": [reduce_script, answer_task("item", "fine")]}, log_path)
    tasks_file = _tasks_file(tmp_path / "tasks.yaml", server.base_url, 2)
    tasks_file.write_text(tasks_file.read_text() + 'reduce: {prompt: "MERGE them"}\n')
    runs = tmp_path / "runs"
    try:
        first = fanout(tasks_file, out=runs, display="quiet")
        asked = len(read_jsonl(log_path))
        again = fanout(tasks_file, resume=first.run_id, out=runs, display="quiet")
        asked_again = len(read_jsonl(log_path))
        retried = fanout(tasks_file, resume=first.run_id, retry_failed=True, out=runs, display="quiet")
    finally:
        server.stop()
    assert first.reduce.status == "failed" and first.status == "failed"
    assert again.reduce.status == "failed" and again.reduce.reused == ["reduce"] and asked_again == asked
    # answered this time: a reduce over succeeded tasks is backed by them (issue 35)
    assert retried.reduce.status == "succeeded" and retried.reduce.answer == "merged"
    assert retried.status == "succeeded" and len(read_jsonl(log_path)) == asked + 1
    assert (first.run_dir / "reduce" / "answer.md").read_text() == "merged\n"
