"""The rate-limit governor: its decisions on a fake clock, then a real 429 storm and a quota circuit on Ray."""
from __future__ import annotations

from pathlib import Path

import pytest

from configs import load_settings
from orchestrator import fanout
from orchestrator.governor import CIRCUIT_OPEN, GovernorState
from tests.fanout_support import StormProxy, answer_task, result_lines, start_server


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_request_rate_is_spread_after_the_burst() -> None:
    clock = Clock()
    state = GovernorState("e", rpm=60, clock=clock)  # one a second, a burst of ten seconds' worth
    granted = sum(1 for _ in range(15) if state.acquire("w") == 0)
    assert granted == 11
    assert 0.9 <= state.acquire("w") <= 1.0
    clock.now += 1.0
    assert state.acquire("w") == 0


def test_token_rate_corrects_estimates_with_actual_usage() -> None:
    clock = Clock()
    exact = GovernorState("e", tpm=6000, clock=clock)  # 100 tokens a second, a burst of 10 s worth
    assert exact.acquire("w", tokens=1000) == 0
    exact.done("w", tokens=1000, estimate=1000)
    assert exact.acquire("w", tokens=1000) == 0  # 20 s reserved, 10 s of burst: still free
    state = GovernorState("e", tpm=6000, clock=clock)
    assert state.acquire("w", tokens=1000) == 0
    state.done("w", tokens=3000, estimate=1000)  # it was three times bigger: 30 s reserved
    assert state.acquire("w", tokens=1000) == pytest.approx(20.0)


def test_a_429_pauses_everyone_then_one_probe_goes_first() -> None:
    clock = Clock()
    state = GovernorState("e", clock=clock)
    state.rate_limited("a", retry_after=2.0)
    assert all(state.acquire(w) > 1.9 for w in "abc")  # everyone waits out the Retry-After
    clock.now += 3.5
    assert state.acquire("b") == 0  # b probes
    assert state.acquire("a") > 0 and state.acquire("c") > 0  # the others wait for the probe
    assert state.acquire("b") == 0  # the probe's own retry passes
    state.done("b", tokens=10, estimate=10)
    assert state.acquire("a") == 0 and state.acquire("c") == 0


def test_repeated_pauses_open_the_circuit_until_the_cooldown() -> None:
    clock = Clock()
    state = GovernorState("e", circuit_after=3, circuit_cooldown=30, clock=clock)
    for _ in range(3):
        state.rate_limited("a", retry_after=1.0)
        state.rate_limited("b", retry_after=1.0)  # in flight before the pause: not a new failure
        clock.now += 2.0
    assert state.acquire("a") == CIRCUIT_OPEN
    clock.now += 31
    assert state.acquire("a") == 0  # half-open: one probe may try
    assert state.snapshot()["circuit_opened"] == 1


@pytest.mark.usefixtures("ray_session")
def test_a_429_storm_costs_one_probe_per_pause_not_one_retry_per_worker(tmp_path: Path) -> None:
    workers, storm, retry_after = 6, 3.0, 0.5
    server = start_server({"tasks": [{"match": "job", "turns": [{"content": "ok"}]}]}, tmp_path / "requests.jsonl")
    proxy = StormProxy(server.base_url, seconds=storm, retry_after=retry_after)
    try:
        run = fanout([f"job {i}" for i in range(workers * 2)], concurrency=workers,
                     defaults={"model": f"scripted@{proxy.base_url}"}, out=tmp_path / "runs", display="quiet")
    finally:
        proxy.stop()
        server.stop()
    # every task answered ("ok", with no tool run behind it: unverified); none failed in the storm
    assert run.status == "unverified", [r.reason for r in run.results]
    assert len(result_lines(run.run_dir)) == workers * 2
    each_on_its_own = workers * storm / retry_after  # every worker retrying every Retry-After through the storm
    assert proxy.rejected <= workers + storm / retry_after + 3, proxy.rejected
    assert proxy.rejected < each_on_its_own / 2
    governor = run.summary.governors[0]
    assert governor["pauses"] >= 2 and governor["waits"] > 0


@pytest.mark.usefixtures("ray_session")
def test_a_quota_that_never_recovers_pauses_the_run_which_resumes_later(tmp_path: Path) -> None:
    server = start_server({"tasks": [answer_task("quota")]}, tmp_path / "requests.jsonl")
    proxy = StormProxy(server.base_url, seconds=float("inf"), retry_after=0.1)
    settings = load_settings({"fanout.circuit_after": 3, "fanout.circuit_cooldown": 1.0})
    spec = {"tasks": [{"id": f"q{i}", "prompt": f"quota {i}"} for i in range(4)], "concurrency": 2,
            "defaults": {"model": f"scripted@{proxy.base_url}"}}
    try:
        paused = fanout(spec, out=tmp_path / "runs", display="quiet", settings=settings)
        assert paused.status == "paused" and paused.exit_code == 1
        assert result_lines(paused.run_dir) == []  # nothing recorded as failed: all resumable
        assert "resume" in paused.summary.stop_note
        proxy.calm()
        import time

        time.sleep(1.2)  # the circuit's cooldown
        resumed = fanout(spec, resume=paused.run_id, out=tmp_path / "runs", display="quiet", settings=settings)
    finally:
        proxy.stop()
        server.stop()
    assert resumed.status == "succeeded"
    assert sorted(r["task_id"] for r in result_lines(paused.run_dir)) == ["q0", "q1", "q2", "q3"]
