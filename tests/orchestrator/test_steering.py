"""Steering a running fan-out over real Ray with the scripted server: `tell` reaches the task's next request,
`stop` ends one task while the others finish, `--resume` runs it; the ledger records both."""
from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from orchestrator import fanout
from tests.fanout_support import (
    answer_task,
    beating_task,
    ledger,
    read_jsonl,
    requests_for,
    start_server,
    wait_for_beat,
)
from tests.ga_support import invoke_ga

pytestmark = pytest.mark.usefixtures("ray_session")






def test_tell_reaches_the_next_request_stop_ends_one_task_and_resume_runs_it(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    script = {"tasks": [beating_task("long one", 10), beating_task("short one", 4), answer_task("quick")]}
    server = start_server(script, tmp_path / "requests.jsonl")
    spec = {"name": "steered", "concurrency": 3, "defaults": {"model": f"scripted@{server.base_url}", "timeout": 300},
            "tasks": [{"id": "long", "prompt": "long one"}, {"id": "short", "prompt": "short one"},
                      {"id": "quick", "prompt": "quick"}]}
    said: dict[str, object] = {}

    def steer() -> None:
        run_id, _ = wait_for_beat(runs, "short")
        wait_for_beat(runs, "long")
        said["tell"] = invoke_ga("runs", "tell", run_id, "short", "the port is 8123", "--out", str(runs))
        said["stop"] = invoke_ga("runs", "stop", run_id, "long", "--out", str(runs))
        said["late"] = invoke_ga("runs", "tell", run_id, "long", "too late", "--out", str(runs))

    helper = threading.Thread(target=steer)
    helper.start()
    try:
        run = fanout(spec, out=runs, display="quiet")
        helper.join(30)
        assert said["tell"].exit_code == 0, said["tell"].output
        assert said["stop"].exit_code == 0, said["stop"].output
        assert said["late"].exit_code == 2 and "'long'" in said["late"].output, said["late"].output  # being stopped

        by_id = {r.task_id: r for r in run.results}
        assert set(by_id) == {"short", "quick"} and run.unfinished == ["long"]  # stopped: not a result
        assert by_id["short"].status == "succeeded"
        short_requests = requests_for(read_jsonl(tmp_path / "requests.jsonl"), "short one")
        assert "<note from the person>\nthe port is 8123\n</note>" in short_requests[-1]["body"]["messages"][-1]["content"]
        assert not any("8123" in str(r["body"]) for r in short_requests[:-1])  # delivered into the next request
        beat = run.run_dir / "tasks" / "long" / "workdir" / "beat"
        last_beat = beat.read_text()
        time.sleep(1.0)
        assert beat.read_text() == last_beat, "the stopped task's script kept running"
        events = [(e["event"], e.get("task_id")) for e in ledger(run.run_dir)]
        assert ("told", "short") in events and ("stopped", "long") in events

        resumed = fanout(spec, resume=run.run_id, out=runs, display="quiet")
        assert {r.task_id: r.status for r in resumed.results} == {"short": "succeeded", "quick": "succeeded",
                                                                         "long": "succeeded"}
    finally:
        server.stop()


def test_steering_a_run_that_is_not_running_is_one_line(tmp_path: Path) -> None:
    server = start_server({"tasks": [answer_task("quick")]}, tmp_path / "requests.jsonl")
    try:
        run = fanout({"tasks": [{"id": "q", "prompt": "quick"}], "defaults": {"model": f"scripted@{server.base_url}"}},
                     out=tmp_path / "runs", display="quiet")
    finally:
        server.stop()
    for args in (["tell", run.run_id, "q", "hello"], ["stop", run.run_id, "q"], ["stop", run.run_id]):
        result = invoke_ga("runs", *args, "--out", str(tmp_path / "runs"))
        assert result.exit_code == 2 and "is not running" in result.output, result.output
    missing = invoke_ga("runs", "tell", "nope", "q", "hi", "--out", str(tmp_path / "runs"))
    assert missing.exit_code == 2 and "no run 'nope'" in missing.output
