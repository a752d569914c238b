"""The --when-idle daemon: idle rules with an injected clock (real activity records and job locks), daily
caps on cycles and spend persisted in state.json, one daemon per home, and a clean stop on SIGTERM."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Optional

import pytest

from orchestrator.triggers.activity import record_activity, user_job
from skilltree.daemon import Caps, DaemonBusy, count_end, count_start, daemon_lock, read_state, run_daemon
from tests.ga_support import GA, ga_env

ROOT = Path(__file__).resolve().parents[2]
START = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)


class FakeTime:
    """The daemon's clock and its wait(): waiting moves the clock instead of sleeping."""

    def __init__(self, start: datetime = START):
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def wait(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class Cycles:
    """Stands in for an exploration cycle: records when it ran and with what budget; costs `cost`."""

    def __init__(self, clock: FakeTime, cost: float = 0.0, minutes: float = 5, fail: bool = False):
        self.clock, self.cost, self.minutes, self.fail = clock, cost, minutes, fail
        self.calls: list[tuple[datetime, Optional[float]]] = []

    def __call__(self, budget: Optional[float]) -> dict[str, Any]:
        self.calls.append((self.clock(), budget))
        self.clock.now += timedelta(minutes=self.minutes)
        if self.fail:
            raise RuntimeError("model endpoint down (key sk-abcdefghijklmnopqrstuvwx)")
        return {"run_id": f"run-{len(self.calls)}", "tokens": 100, "cost": self.cost, "status": "consolidated"}


def daemon(home: Path, clock: FakeTime, cycles: Cycles, *, caps: Caps = Caps(10, 100.0), window: str = "30m",
           ticks: int = 50, tick: float = 60.0, **kwargs: Any):
    return run_daemon(home, caps, cycles, window=window, clock=clock, wait=clock.wait, tick=tick,
                      max_ticks=ticks, **kwargs)


def test_no_cycle_while_a_user_job_runs_then_one_once_the_window_has_passed(ga_home: Path) -> None:
    clock = FakeTime()
    cycles = Cycles(clock)
    with user_job(ga_home, "fanout", now=clock):  # a real job lock held by this process
        summary = daemon(ga_home, clock, cycles, ticks=30)
    assert cycles.calls == [] and summary.cycles == 0
    waiting = [r["why"] for r in summary.records if r["event"] == "waiting"]
    assert len(waiting) == 1 and "`ga fanout` is running" in waiting[0]  # logged once, not every tick

    ended = clock()  # the job ended just now: the window starts here
    summary = daemon(ga_home, clock, cycles, ticks=60, max_cycles=1)
    assert len(cycles.calls) == 1
    started = cycles.calls[0][0]
    assert timedelta(minutes=30) <= started - ended <= timedelta(minutes=31)
    assert any("not idle" in r.get("why", "") and "09:30:00" in r["why"] for r in summary.records)


def test_a_recent_ga_run_command_keeps_the_machine_busy(ga_home: Path) -> None:
    clock = FakeTime()
    record_activity(ga_home, "run", now=lambda: START - timedelta(minutes=10))
    cycles = Cycles(clock)
    daemon(ga_home, clock, cycles, ticks=60, max_cycles=1)
    assert cycles.calls[0][0] == START + timedelta(minutes=20)  # 30 minutes after the command started


def test_caps_per_day_on_cycles_and_spend_are_kept_and_reset_the_next_day(ga_home: Path) -> None:
    clock = FakeTime(datetime(2026, 3, 2, 20, 0).astimezone())
    cycles = Cycles(clock, cost=0.4)
    summary = daemon(ga_home, clock, cycles, caps=Caps(cycles_per_day=2, spend_per_day=100.0), gap=timedelta(0),
                     ticks=60)
    assert len(cycles.calls) == 2 and summary.records[-2]["why"] == "cap: 2 of 2 cycles today"
    state = read_state(ga_home, clock().date().isoformat())
    assert state.cycles == 2 and state.runs == ["run-1", "run-2"] and state.spend == pytest.approx(0.8)

    # a restarted daemon sees the same day's state; after midnight the caps start over
    daemon(ga_home, clock, cycles, caps=Caps(2, 100.0), gap=timedelta(0), ticks=60 * 5)
    days = {when.date() for when, _ in cycles.calls}
    assert len(cycles.calls) == 4 and len(days) == 2

    # spend: budgets are what is left of the day's cap; no cycle once it is reached
    clock.now += timedelta(days=1)
    spend = Cycles(clock, cost=0.4)
    summary = daemon(ga_home, clock, spend, caps=Caps(10, 1.0), gap=timedelta(0), ticks=30)
    assert [round(b, 6) for _, b in spend.calls] == [1.0, 0.6, 0.2]
    assert summary.records[-2]["why"].startswith("cap: spent $1.2000 of $1.0000 today")


def test_cycles_are_spread_by_the_gap_and_a_failed_cycle_counts_and_is_logged_without_secrets(ga_home: Path) -> None:
    clock = FakeTime()
    cycles = Cycles(clock, fail=True)
    summary = daemon(ga_home, clock, cycles, ticks=200, max_cycles=3)
    starts = [when for when, _ in cycles.calls]
    assert len(starts) == 3 and all(b - a >= timedelta(minutes=35) for a, b in zip(starts, starts[1:]))
    failed = [r for r in summary.records if r["event"] == "cycle_failed"]
    assert len(failed) == 3 and "sk-abcdef" not in json.dumps(failed) and "RuntimeError" in failed[0]["error"]
    assert read_state(ga_home, START.date().isoformat()).cycles == 3
    logged = [json.loads(line) for line in (ga_home / "explore" / "log.jsonl").read_text().splitlines()]
    assert [r["event"] for r in logged].count("cycle_failed") == 3 and logged[-1]["event"] == "stopped"


def test_a_trigger_script_replaces_the_window_but_never_a_running_job(ga_home: Path, tmp_path: Path) -> None:
    trigger = tmp_path / "trigger.py"
    flag = tmp_path / "go"
    trigger.write_text(f"import os\ndef check():\n    return os.path.exists({str(flag)!r})\n")
    clock = FakeTime()
    record_activity(ga_home, "fanout", now=clock)  # active just now: the window rule alone would wait 30m
    cycles = Cycles(clock)
    summary = daemon(ga_home, clock, cycles, trigger=trigger, ticks=3)
    assert cycles.calls == [] and "returned False" in summary.records[1]["why"]
    flag.write_text("")
    with user_job(ga_home, "run", now=clock):
        daemon(ga_home, clock, cycles, trigger=trigger, ticks=3)
    assert cycles.calls == []
    daemon(ga_home, clock, cycles, trigger=trigger, ticks=3, max_cycles=1)
    assert len(cycles.calls) == 1 and clock() - cycles.calls[0][0] <= timedelta(minutes=5)


def test_one_daemon_per_home_and_once_counts_in_the_same_state(ga_home: Path) -> None:
    with daemon_lock(ga_home):
        with pytest.raises(DaemonBusy, match=f"pid {os.getpid()}"):
            daemon(ga_home, FakeTime(), Cycles(FakeTime()), ticks=1)
    day = START.date().isoformat()
    count_start(ga_home, day)
    count_end(ga_home, day, {"run_id": "manual", "cost": 0.25, "tokens": 10}, START)
    state = read_state(ga_home, day)
    assert (state.cycles, state.spend, state.runs) == (1, 0.25, ["manual"])
    threads = [threading.Thread(target=count_start, args=(ga_home, day)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert read_state(ga_home, day).cycles == 9  # no lost update


def test_sigterm_stops_the_daemon_cleanly(ga_home: Path, tmp_path: Path) -> None:
    model = f"scripted:{ROOT / 'configs' / 'examples' / 'scripts' / 'explore.yaml'}"
    with user_job(ga_home, "run"):  # busy the whole time: the daemon only waits
        proc = subprocess.Popen([*GA, "explore", "--when-idle", "30m", "--tick", "0.1", "--model", model,
                                 "--out", str(tmp_path / "runs"), "--json"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ga_env())
        try:
            lines = []
            for line in proc.stdout:  # wait until it is looking at the machine
                lines.append(json.loads(line))
                if lines[-1]["event"] == "waiting":
                    break
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, err[-2000:]
    records = lines + [json.loads(line) for line in out.splitlines() if line.strip()]
    assert "`ga run` is running" in next(r for r in records if r["event"] == "waiting")["why"]
    assert records[-1] == {**records[-1], "event": "stopped", "by": "signal", "cycles": 0}
    assert read_state(ga_home, datetime.now().astimezone().date().isoformat()).cycles == 0
    with daemon_lock(ga_home):  # released
        pass
