"""Orphans: kill -9 of a worker (a `ga run` process, or a Ray worker actor) while its code_run runs a sleeping
child. Sandboxed (PID namespace + die-with-parent) nothing of it remains; unsandboxed the child lives on,
which shows the test can tell the difference."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Optional

import pytest

from tests.fanout_support import start_server

ROOT = Path(__file__).resolve().parents[2]


def cmdline(pid: int) -> str:
    try:
        return (Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
    except OSError:
        return ""


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def parent_of(pid: int) -> Optional[int]:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def sleepers(marker: str) -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir()
            if p.name.isdigit() and cmdline(int(p.name)).startswith(f"sleep {marker}") and alive(int(p.name))]


def wait_for(predicate, seconds: float):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    return predicate()


def sleeping_task(marker: str) -> dict:
    script = f"sleep {marker} &\nsleep {marker}\n"  # a background child and a foreground one
    return {"match": ".*", "turns": [
        {"content": "sleeping", "tool_calls": [{"name": "code_run", "arguments": {
            "type": "bash", "script": script, "timeout": 600}}]},
        {"content": "woke up"}]}


@pytest.mark.parametrize("mode", ["bwrap", "off"])
def test_kill_9_of_a_worker_process_leaves_no_child(tmp_path: Path, mode: str) -> None:
    marker = f"900.{os.getpid()}{'1' if mode == 'bwrap' else '2'}"
    server = start_server({"tasks": [sleeping_task(marker)]}, tmp_path / "requests.jsonl")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GA_SANDBOX__MODE": mode}
    worker = subprocess.Popen([sys.executable, "-m", "cli", "run", "sleep", "--model",
                               f"scripted@{server.base_url}", "--json"], cwd=tmp_path, env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    children: list[int] = []
    try:
        children = wait_for(lambda: sleepers(marker) if len(sleepers(marker)) == 2 else [], 60)
        assert len(children) == 2, "the script's two sleeps never started"
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        if mode == "bwrap":
            assert wait_for(lambda: not any(alive(pid) for pid in children), 10), "a child outlived its worker"
        else:
            time.sleep(1)
            assert all(alive(pid) for pid in children), "unsandboxed children are expected to be orphaned"
    finally:
        server.stop()
        for pid in children:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.usefixtures("ray_session")
def test_kill_9_of_a_worker_actor_leaves_no_child(tmp_path: Path) -> None:
    from orchestrator import fanout

    marker = f"900.{os.getpid()}3"
    server = start_server({"tasks": [sleeping_task(marker)]}, tmp_path / "requests.jsonl")
    spec = {"tasks": [{"id": "sleeper", "prompt": "sleep"}], "retries": 0,
            "defaults": {"model": f"scripted@{server.base_url}", "timeout": 300}}
    outcome: dict = {}
    thread = threading.Thread(target=lambda: outcome.update(run=fanout(spec, out=tmp_path / "runs", display="quiet")),
                              daemon=True)
    thread.start()
    children: list[int] = []
    try:
        children = wait_for(lambda: sleepers(marker) if len(sleepers(marker)) == 2 else [], 120)
        assert len(children) == 2, "the task's two sleeps never started"
        actor = children[0]
        while actor and not cmdline(actor).startswith("ray::"):
            actor = parent_of(actor) or 0
        assert actor > 1, "no Ray worker process above the script"
        os.kill(actor, signal.SIGKILL)
        assert wait_for(lambda: not any(alive(pid) for pid in children), 10), "a child outlived its actor"
        thread.join(120)
    finally:
        server.stop()
        for pid in children:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert outcome["run"].results[0]["status"] == "failed"


def test_the_gateway_relay_ends_when_the_command_it_became_is_killed(tmp_path: Path) -> None:
    """The launcher of a sandbox with forwards forks a relay and execs the command. A reaper that kills the command
    after ga died must not leave the relay behind: bubblewrap's init waits for every child, so a relay that lived
    on would keep the whole sandbox alive (seen after kill -9 tests: bwrap and the relay, hours later)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    launcher = subprocess.Popen([sys.executable, "-I", "-S", str(ROOT / "worker" / "sandbox_launch.py"),
                                 f"{port}={tmp_path / 'gateway.sock'}", "--", "sleep", "60"])
    relay = None
    try:
        children = Path(f"/proc/{launcher.pid}/task/{launcher.pid}/children")
        relay = wait_for(lambda: cmdline(launcher.pid).startswith("sleep 60") and
                         int((children.read_text().split() or ["0"])[0]), 20)
        assert relay, f"no relay under the launcher: {cmdline(launcher.pid)!r}"
        launcher.send_signal(signal.SIGKILL)  # what the reaper does to a sandbox's command
        launcher.wait()
        assert wait_for(lambda: not alive(relay), 20), "the relay outlived its command"
    finally:
        if relay and alive(relay):
            os.kill(relay, signal.SIGKILL)
