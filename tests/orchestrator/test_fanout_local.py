"""The in-process executor (orchestrator/local.py): `ga fanout` with no address runs its workers as threads of
its own process, never imports Ray, and keeps the ledger, governor, timeouts, steering and resume of the Ray path.
Everything real: `ga fanout` subprocesses, the scripted model over HTTP, bubblewrap for code_run."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from configs import load_settings
from orchestrator import fanout
from tests.fanout_support import (
    StormProxy,
    answer_task,
    beating_task,
    ledger,
    read_jsonl,
    requests_for,
    result_lines,
    start_server,
    wait_for_beat,
)
from tests.ga_support import invoke_ga
from tests.kill_support import code_run_pids, kill_and_resume, kill_script, map_requests, sleeps, task_id, tasks_file

ROOT = Path(__file__).resolve().parents[2]


def _local() -> object:
    """Settings that pick the in-process executor even when this pytest process is attached to Ray already."""
    return load_settings({"fanout.executor": "local"})






def test_the_quick_start_runs_in_one_process_without_importing_ray(tmp_path: Path) -> None:
    probe = tmp_path / "modules.json"
    code = ("import json, os, sys\nprobe = sys.argv[3]\n"
            "sys.argv = ['ga', 'fanout', sys.argv[1], '--out', sys.argv[2], '--json']\nimport cli\n"
            "try:\n    cli.app()\nfinally:\n"
            "    ray = sorted(m for m in sys.modules if m.split('.')[0] == 'ray')\n"
            "    open(probe, 'w').write(json.dumps({'ray': ray, 'pid': os.getpid()}))\n")
    proc = subprocess.run([sys.executable, "-c", code, str(ROOT / "configs/examples/quickstart.yaml"),
                           str(tmp_path / "runs"), str(probe)], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run = json.loads(proc.stdout)
    assert run["status"] == "succeeded" and run["tasks"]["succeeded"] == 3
    assert "56 words in 3 files" in run["reduce"]["answer"]  # the reduce's code_run read the map's answers
    seen = json.loads(probe.read_text())
    assert seen["ray"] == []
    run_dir = Path(run["run_dir"])
    started = next(e for e in ledger(run_dir) if e["event"] == "run_started")
    assert started["executor"] == "local" and started["address"] is None
    assert {r["actor"]["pid"] for r in result_lines(run_dir)} == {seen["pid"]}  # every worker in the driver


def test_a_task_past_its_timeout_is_cancelled_its_script_killed_and_the_others_finish(tmp_path: Path) -> None:
    server = start_server({"tasks": [beating_task("slow", 120), answer_task("quick")]}, tmp_path / "requests.jsonl")
    spec = {"concurrency": 2, "retries": 0, "defaults": {"model": f"scripted@{server.base_url}"},
            "tasks": [{"id": "slow", "prompt": "slow", "timeout": 3}, {"id": "quick", "prompt": "quick"}]}
    try:
        run = fanout(spec, out=tmp_path / "runs", display="quiet", settings=_local())
    finally:
        server.stop()
    by_id = {r.task_id: r for r in run.results}
    assert by_id["quick"].status in ("succeeded", "unverified")
    assert by_id["slow"].status == "failed" and "timeout" in by_id["slow"].reason, by_id["slow"]
    beat = run.run_dir / "tasks" / "slow" / "workdir" / "beat"
    last = beat.read_text()
    time.sleep(1.0)
    assert beat.read_text() == last, "the timed-out task's script kept running"


@pytest.mark.slow  # a task beats for 10 s, then the run is resumed: 15 s, too long for the fast lane
def test_tell_and_stop_reach_a_task_through_the_run_directory(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    server = start_server({"tasks": [beating_task("long one", 10), beating_task("short one", 3), answer_task("quick")]},
                          tmp_path / "requests.jsonl")
    spec = {"name": "steered", "concurrency": 3, "defaults": {"model": f"scripted@{server.base_url}", "timeout": 300},
            "tasks": [{"id": "long", "prompt": "long one"}, {"id": "short", "prompt": "short one"},
                      {"id": "quick", "prompt": "quick"}]}
    said: dict[str, object] = {}

    def steer() -> None:
        run_id, _ = wait_for_beat(runs, "short")
        wait_for_beat(runs, "long")
        said["tell"] = invoke_ga("runs", "tell", run_id, "short", "the port is 8123", "--out", str(runs))
        said["stop"] = invoke_ga("runs", "stop", run_id, "long", "--out", str(runs))

    helper = threading.Thread(target=steer)
    helper.start()
    try:
        run = fanout(spec, out=runs, display="quiet", settings=_local())
        helper.join(30)
        resumed = fanout(spec, resume=run.run_id, out=runs, display="quiet", settings=_local())
    finally:
        server.stop()
    assert said["tell"].exit_code == 0, said["tell"].output
    assert said["stop"].exit_code == 0, said["stop"].output
    assert run.unfinished == ["long"] and {r.task_id for r in run.results} == {"short", "quick"}
    short_requests = requests_for(read_jsonl(tmp_path / "requests.jsonl"), "short one")
    assert "the port is 8123" in short_requests[-1]["body"]["messages"][-1]["content"]
    events = [(e["event"], e.get("task_id")) for e in ledger(run.run_dir)]
    assert ("told", "short") in events and ("stopped", "long") in events
    assert list((run.run_dir / "steer").iterdir()) == []  # every request answered and cleaned up
    assert {r.task_id: r.status for r in resumed.results}["long"] == "succeeded"


def test_a_429_storm_is_governed_in_process(tmp_path: Path) -> None:
    workers, storm, retry_after = 6, 3.0, 0.5
    server = start_server({"tasks": [{"match": "job", "turns": [{"content": "ok"}]}]}, tmp_path / "requests.jsonl")
    proxy = StormProxy(server.base_url, seconds=storm, retry_after=retry_after)
    try:
        run = fanout([f"job {i}" for i in range(workers * 2)], concurrency=workers, settings=_local(),
                     defaults={"model": f"scripted@{proxy.base_url}"}, out=tmp_path / "runs", display="quiet")
    finally:
        proxy.stop()
        server.stop()
    assert len(result_lines(run.run_dir)) == workers * 2 and run.status == "unverified"  # none failed in the storm
    assert proxy.rejected <= workers + storm / retry_after + 3, proxy.rejected
    governor = run.summary.governors[0]
    assert governor["pauses"] >= 2 and governor["waits"] > 0


def test_kills_of_the_driver_leave_no_script_running_and_resume_sends_no_finished_task_again(tmp_path: Path) -> None:
    n = 12
    marker = f"ga-localkill-{tmp_path.name}"
    log_path = tmp_path / "requests.jsonl"
    server = start_server(kill_script(sleeps(n), marker), log_path)
    tasks = tasks_file(tmp_path / "tasks.yaml", server.base_url, n, concurrency=3)
    runs = tmp_path / "runs"
    try:
        report = kill_and_resume(tasks, runs, None, log_path, marker, kills=3, seed=11, delay=(1.0, 3.0),
                                 env={"GA_FANOUT__EXECUTOR": "local"})
        final = fanout(tasks, resume=report.run_dir.name, out=runs, display="quiet", settings=_local())
    finally:
        server.stop()
    for number, kill in enumerate(report.kills, 1):
        assert kill.children_left == [], f"code_run processes outlived kill {number}: {kill.children_left}"
        assert kill.late_requests == 0, f"{kill.late_requests} model requests later than 2 s after kill {number}"
    assert code_run_pids(marker) == []
    assert final.status == "succeeded" and final.reduce.status == "succeeded"
    assert sorted(r["task_id"] for r in result_lines(report.run_dir)) == [task_id(i) for i in range(n)]
    recorded = {e["task_id"]: e["time"] for e in ledger(report.run_dir)
                if e["event"] == "succeeded" and e.get("task_id") and e.get("step") != "reduce"}
    assert [(t, when) for when, t, _ in map_requests(read_jsonl(log_path)) if when > recorded[t]] == []
