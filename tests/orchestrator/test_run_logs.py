"""Each run's ga.log holds its own run's lines (configs.logs: the run and task bound in structlog's context), even
when two runs share a process. Real fan-outs in threads of this process, the scripted model over HTTP, bubblewrap."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from configs import load_settings
from configs.logs import setup_logging
from orchestrator import fanout
from tests.fanout_support import answer_task, start_server


def _fields(line: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in line.split()[3:] if "=" in part)


def test_two_runs_in_one_process_each_log_only_their_own_lines(tmp_path: Path) -> None:
    setup_logging("warning")  # as `ga` does before anything logs
    tasks = {side: [f"{side}{i}" for i in range(3)] for side in ("a", "b")}
    script = {"tasks": [answer_task(task, latency_turns=2) for ids in tasks.values() for task in ids]}
    server = start_server(script, tmp_path / "requests.jsonl")
    start = threading.Barrier(2)
    runs: dict[str, Any] = {}
    errors: list[BaseException] = []

    def one(side: str) -> None:
        spec = {"name": f"run-{side}", "concurrency": 3, "retries": 0, "defaults": {"model": f"scripted@{server.base_url}"},
                "tasks": [{"id": task, "prompt": task} for task in tasks[side]]}
        start.wait()
        try:
            runs[side] = fanout(spec, out=tmp_path / side, display="log",  # its progress lines name the run
                                settings=load_settings({"fanout.executor": "local"}))
        except BaseException as exc:  # noqa: BLE001  (raised below, in the test's thread)
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(side,)) for side in tasks]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(300)
    finally:
        server.stop()
    assert not errors, errors
    for side, others in (("a", "b"), ("b", "a")):
        run_dir = runs[side].run_dir
        lines = (run_dir / "ga.log").read_text().splitlines()
        fields = [_fields(line) for line in lines]
        foreign = {runs[others].run_dir.name, f"run-{others}", *tasks[others]}
        assert not [line for line, f in zip(lines, fields) if {f.get("run"), f.get("task")} & foreign], lines
        assert {f["run"] for f in fields if "run" in f} == {run_dir.name, f"run-{side}"}, lines  # progress: its name
        done = {f["task"] for line, f in zip(lines, fields) if " info: task_done " in line}
        assert done == set(tasks[side]), lines  # its tasks' own lines, bound to their task
