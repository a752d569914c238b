"""Faults on real Ray: a worker actor killed -9 mid-task, retries running out, a task past its timeout."""
from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from configs import load_settings
from orchestrator import fanout
from tests.fanout_support import ledger, read_jsonl, result_lines, start_server
from worker.record import Stop

pytestmark = pytest.mark.usefixtures("ray_session")


def _sleeper(match: str, seconds: float) -> dict:
    script = f"import time\ntime.sleep({seconds})\nprint('slept')"
    return {"match": match, "turns": [
        {"content": "sleeping", "tool_calls": [{"name": "code_run", "arguments": {"type": "python", "script": script}}]},
        {"content": "Result:", "echo_last_tool_result": True}]}


def _kill_when_running(run_root: Path, kills: dict[str, int], stop: threading.Event) -> list[tuple[str, int]]:
    """Kill -9 the worker process of each task in `kills` (that many times) as soon as the ledger shows it running."""
    done: list[tuple[str, int]] = []
    seen: set[tuple[str, int]] = set()
    while not stop.is_set():
        for path in run_root.glob("*/ledger.jsonl"):
            for event in read_jsonl(path):
                key = (event.get("task_id"), event.get("attempt"))
                if event["event"] == "running" and key not in seen and kills.get(key[0], 0) > 0:
                    seen.add(key)
                    kills[key[0]] -= 1
                    os.kill(event["pid"], signal.SIGKILL)
                    done.append((key[0], event["pid"]))
        time.sleep(0.1)
    return done


def test_killed_worker_is_replaced_and_its_task_retried_exactly_once(tmp_path: Path) -> None:
    script = {"tasks": [_sleeper("victim", 4), _sleeper("doomed", 4), _sleeper("bystander", 0.2)]}
    server = start_server(script, tmp_path / "requests.jsonl")
    runs = tmp_path / "runs"
    stop = threading.Event()
    kills = {"victim": 1, "doomed": 2}
    killed: list = []
    killer = threading.Thread(target=lambda: killed.extend(_kill_when_running(runs, kills, stop)), daemon=True)
    killer.start()
    try:
        run = fanout({"tasks": [{"id": "victim", "prompt": "victim"}, {"id": "doomed", "prompt": "doomed"},
                                *[{"id": f"bystander-{i}", "prompt": f"bystander {i}"} for i in range(3)]],
                      "retries": 1, "concurrency": 2, "defaults": {"model": f"scripted@{server.base_url}"}},
                     out=runs, display="quiet", settings=load_settings({"fanout.slots_per_actor": 1}))
    finally:
        stop.set()
        killer.join(5)
        server.stop()
    assert sorted(t for t, _ in killed) == ["doomed", "doomed", "victim"]
    lines = result_lines(run.run_dir)
    assert sorted(r["task_id"] for r in lines) == sorted(["victim", "doomed", "bystander-0", "bystander-1", "bystander-2"])
    by_id = {r["task_id"]: r for r in lines}
    assert by_id["victim"]["status"] == "succeeded" and by_id["victim"]["attempt"] == 2
    assert by_id["doomed"]["status"] == "failed" and by_id["doomed"]["attempt"] == 2
    assert "worker died" in by_id["doomed"]["reason"] and "after 2 attempts" in by_id["doomed"]["reason"]
    retried = [e for e in ledger(run.run_dir) if e["event"] == "retried"]
    assert sorted(e["task_id"] for e in retried) == ["doomed", "victim"]
    assert run.exit_code == 1 and run.status == "failed"


def test_a_killed_process_running_several_slots_has_each_of_its_tasks_retried_once(tmp_path: Path) -> None:
    server = start_server({"tasks": [_sleeper("shared", 3)]}, tmp_path / "requests.jsonl")
    runs = tmp_path / "runs"
    stop = threading.Event()
    killed: list = []
    killer = threading.Thread(target=lambda: killed.extend(_kill_when_running(runs, {"s0": 1}, stop)), daemon=True)
    killer.start()
    try:
        run = fanout({"tasks": [{"id": f"s{i}", "prompt": f"shared {i}"} for i in range(3)], "concurrency": 3,
                      "defaults": {"model": f"scripted@{server.base_url}"}},
                     out=runs, display="quiet", settings=load_settings({"fanout.slots_per_actor": 3}))
    finally:
        stop.set()
        killer.join(5)
        server.stop()
    assert len(killed) == 1
    pids = {e["pid"] for e in ledger(run.run_dir) if e["event"] == "running" and e["attempt"] == 1}
    assert len(pids) == 1  # all three ran in one process
    assert run.status == "succeeded"
    assert sorted(r["task_id"] for r in result_lines(run.run_dir)) == ["s0", "s1", "s2"]
    retried = sorted(e["task_id"] for e in ledger(run.run_dir) if e["event"] == "retried")
    assert retried == ["s0", "s1", "s2"]  # the process took all its running tasks down; each ran again once


def test_task_past_its_timeout_is_stopped_and_its_processes_killed(tmp_path: Path) -> None:
    script = "import time\nopen('started', 'w').write('yes')\ntime.sleep(120)"  # in its sandbox: its workdir
    hang = {"match": "hang", "turns": [
        {"content": "hanging", "tool_calls": [{"name": "code_run", "arguments": {"type": "python", "script": script, "timeout": 300}}]},
        {"content": "never"}]}
    server = start_server({"tasks": [hang, _sleeper("quick", 0.1)]}, tmp_path / "requests.jsonl")
    started = time.monotonic()
    try:
        run = fanout({"tasks": [{"id": "hang", "prompt": "hang", "timeout": 3}, {"id": "quick", "prompt": "quick"}],
                      "concurrency": 2, "defaults": {"model": f"scripted@{server.base_url}"}},
                     out=tmp_path / "runs", display="quiet")
    finally:
        server.stop()
    by_id = {r.task_id: r for r in run.results}
    assert by_id["quick"].status == "succeeded"
    assert by_id["hang"].status == "failed" and "timeout after 3s" in by_id["hang"].reason
    assert time.monotonic() - started < 60
    assert list((tmp_path / "runs").glob("*/tasks/hang/workdir/started")), "the script never ran"
    for _ in range(50):  # the killed process may take a moment to be reaped
        if not _scripts_of(tmp_path):
            break
        time.sleep(0.1)
    assert not _scripts_of(tmp_path), "the task's code_run process outlived its timeout"


def _scripts_of(tmp_path: Path) -> list[int]:
    """Host pids of live processes running a script of this test's runs (a sandboxed script's own pid is not
    its host pid)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and str(tmp_path / "runs").encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return [pid for pid in found if _alive(pid)]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (killed, not yet reaped) counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_an_actor_cancels_the_task_of_a_driver_that_stops_renewing_its_lease(tmp_path: Path) -> None:
    """A driver on another machine cannot be checked by pid: its tasks run while it renews, and stop when it stops."""
    import ray

    from orchestrator.actor import CONTROL_CALLS, LEASE_LOST
    from orchestrator.pool import RemoteWorkerActor
    from orchestrator.records import Job
    from tests.kill_support import code_run_pids
    from worker.modelconfig import resolve_model

    marker = f"ga-lease-{tmp_path.name}"
    work = f"import os, sys\nos.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)', '{marker}'])"
    turns = [{"content": "working", "tool_calls": [{"name": "code_run", "arguments": {"type": "python", "script": work}}]},
             {"content": "never"}]
    log_path = tmp_path / "requests.jsonl"
    server = start_server({"tasks": [{"match": ".*", "turns": turns}]}, log_path)
    settings = load_settings()
    lease = {"lessee": "elsewhere:1:abc", "ttl": 3.0, "pid": 1, "pid_started": None, "namespace": ""}
    job = Job(task_id="leased", attempt=1, prompt="work", task_dir=str(tmp_path / "leased"), settings=settings,
              model_name=None, endpoint=resolve_model(f"scripted@{server.base_url}", settings), memory="none",
              commit_key="run/leased/1", lease=lease)
    actor = RemoteWorkerActor.options(max_concurrency=1 + CONTROL_CALLS).remote("lease-test", 1)
    try:
        ref = actor.run_task.remote(job)
        deadline = time.monotonic() + 60
        while not code_run_pids(marker) and time.monotonic() < deadline:
            actor.renew.remote(lease["lessee"], lease["ttl"])
            time.sleep(0.2)
        renewed_until = time.monotonic() + 3 * lease["ttl"]  # a 3 s ttl: a busy machine delays a renewal
        while time.monotonic() < renewed_until:  # three times its ttl, renewed: it keeps running
            actor.renew.remote(lease["lessee"], lease["ttl"])
            time.sleep(0.3)
        still_running = not ray.wait([ref], timeout=0)[0]
        stopped_renewing = time.monotonic()
        record = ray.get(ref, timeout=30)
        took = time.monotonic() - stopped_renewing
    finally:
        ray.kill(actor)
        server.stop()
    assert still_running and code_run_pids(marker) == []
    assert record.stop == Stop.lease_lost and record.reason.startswith(LEASE_LOST)
    assert took < 30, f"the task ran {took:.1f}s past its last renewal"  # its script sleeps 60 s
    assert len(read_jsonl(log_path)) == 1  # the model was not asked again once the lease ran out
