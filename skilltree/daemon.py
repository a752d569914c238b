"""`ga explore --when-idle WINDOW`: exploration cycles while the machine is idle, within daily caps.

Every tick the rules below are checked in order; the first that holds makes the daemon wait:
1. a stop was asked (SIGINT/SIGTERM): leave (a running cycle finishes first; a second signal aborts);
2. today's cycles >= explore.max_cycles_per_day;
3. today's spend (USD) >= explore.max_spend_per_day;
4. less than `gap` (default: the window) since the last cycle ended, so cycles spread over the day;
5. not idle, per orchestrator.triggers.activity.idle_status: a `ga run`/`ga fanout` job is running, or one was
   active within the window; with a trigger script, its check() decides instead of the window, but a
   running user job still means busy;
otherwise a cycle starts with what is left of today's spend cap as its budget.

"Today" is the local date of the injected clock. The day's state is GA_HOME/explore/state.json
(day, cycles, spend, tokens, runs, last_end), changed under a lock and replaced atomically. A cycle
counts when it starts, so a daemon killed mid-cycle still used up one of the day's cycles; its spend
is added when it ends. `ga explore --once` adds its cycle and spend too, but is not refused by the
caps or the idle test (a person asked for it). One daemon per GA_HOME (flock on daemon.lock).
Records (waiting, cycle started/finished/failed, stopped) go to GA_HOME/explore/log.jsonl; a
"waiting" record is written only when the reason changes.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Callable, Iterator, Optional, TypedDict, Union

import structlog
from pydantic import BaseModel

from configs.logs import redact_text
from memory_shared.fsutil import HeldElsewhere, atomic_replace, flocked, single_instance
from orchestrator.triggers.activity import Clock, IdleStatus, idle_status, local_now
from orchestrator.triggers.durations import format_duration, parse_duration
from orchestrator.triggers.worktask import append_jsonl

log = structlog.get_logger("skilltree.daemon")


class CycleRecord(TypedDict, total=False):
    """What a cycle tells the daemon (skilltree.explore.CycleResult.record), or its error when it raised."""

    run_id: str
    run_dir: str
    status: str
    tokens: int
    cost: float
    outcomes: dict[str, int]
    error: str


Cycle = Callable[[Optional[float]], CycleRecord]  # budget (USD) -> the cycle's record


class DaemonBusy(RuntimeError):
    """Another `ga explore --when-idle` runs on this GA_HOME; str() is one line."""


class DayState(BaseModel):
    day: str
    cycles: int = 0
    spend: float = 0.0
    tokens: int = 0
    runs: list[str] = []
    last_end: Optional[datetime] = None  # kept across days: the gap rule does not reset at midnight


@dataclass(frozen=True)
class Caps:
    cycles_per_day: int
    spend_per_day: float


@dataclass
class DaemonSummary:
    cycles: int = 0
    stopped_by: str = ""
    records: list[dict[str, object]] = field(default_factory=list)


def explore_dir(home: Union[Path, str]) -> Path:
    return Path(home).expanduser() / "explore"


def _today(clock: Clock) -> str:
    return clock().date().isoformat()


def read_state(home: Union[Path, str], today: str) -> DayState:
    """The state of `today` (a fresh day when the file holds another day, or nothing)."""
    path = explore_dir(home) / "state.json"
    try:
        state = DayState.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return DayState(day=today)
    return state if state.day == today else DayState(day=today, last_end=state.last_end)


def change_state(home: Union[Path, str], today: str, change: Callable[[DayState], DayState]) -> DayState:
    """Read, change and atomically replace the day's state, under a lock (daemon and --once share it)."""
    folder = explore_dir(home)
    folder.mkdir(parents=True, exist_ok=True)
    with flocked(folder / ".state.lock"):
        state = change(read_state(home, today))
        atomic_replace(folder / "state.json", (state.model_dump_json(indent=2) + "\n").encode())
    return state


def count_start(home: Union[Path, str], today: str) -> DayState:
    return change_state(home, today, lambda s: s.model_copy(update={"cycles": s.cycles + 1}))


def count_end(home: Union[Path, str], today: str, record: CycleRecord, ended: datetime) -> DayState:
    def change(state: DayState) -> DayState:
        run_id = record.get("run_id")
        runs = state.runs + ([str(run_id)] if run_id else [])
        return state.model_copy(update={"spend": state.spend + float(record.get("cost") or 0.0),
                                        "tokens": state.tokens + int(record.get("tokens") or 0),
                                        "runs": runs, "last_end": ended})
    return change_state(home, today, change)


def wait_reason(state: DayState, caps: Caps, now: datetime, gap: timedelta,
                idle: Callable[[], IdleStatus]) -> Optional[str]:
    """Why no cycle may start now (rules 2-5 of the module doc), or None when one may."""
    if state.cycles >= caps.cycles_per_day:
        return f"cap: {state.cycles} of {caps.cycles_per_day} cycles today"
    if state.spend >= caps.spend_per_day:
        return f"cap: spent ${state.spend:.4f} of ${caps.spend_per_day:.4f} today"
    if state.last_end is not None and now - state.last_end < gap:
        return f"last cycle ended at {state.last_end:%H:%M:%S}; the next starts {format_duration(gap)} later"
    status = idle()
    return None if status.idle else f"not idle: {status.reason}"


@contextmanager
def daemon_lock(home: Union[Path, str]) -> Iterator[None]:
    try:
        with single_instance(explore_dir(home) / "daemon.lock"):
            yield
    except HeldElsewhere as held:
        raise DaemonBusy(f"another `ga explore --when-idle` runs on {Path(home).expanduser()} (pid {held.holder}); "
                         "stop it first (kill -TERM it) or use another --home") from None


def run_daemon(home: Union[Path, str], caps: Caps, cycle: Cycle, *, window: Union[str, timedelta],
               trigger: Optional[Path] = None, clock: Clock = local_now, stop: Optional[threading.Event] = None,
               wait: Optional[Callable[[float], object]] = None, tick: float = 60.0, gap: Optional[timedelta] = None,
               max_cycles: Optional[int] = None, max_ticks: Optional[int] = None,
               on_record: Optional[Callable[[dict[str, object]], None]] = None) -> DaemonSummary:
    """Check the rules every `tick` seconds and run `cycle(budget)` when they allow (module doc).
    `wait(seconds)` sleeps (default: stop.wait); tests pass one that moves their clock."""
    window = parse_duration(window)
    gap = window if gap is None else gap
    stop = stop or threading.Event()
    wait = wait or stop.wait
    summary = DaemonSummary()
    log_path = explore_dir(home) / "log.jsonl"
    last_reason: Optional[str] = None

    def note(event: str, **fields: object) -> None:
        record: dict[str, object] = {"time": clock().isoformat(), "event": event, **fields}
        summary.records.append(record)
        append_jsonl(log_path, record)
        if on_record is not None:
            on_record(record)

    with daemon_lock(home):
        note("started", window=format_duration(window), trigger=str(trigger) if trigger else None,
             caps={"cycles_per_day": caps.cycles_per_day, "spend_per_day": caps.spend_per_day})
        ticks = 0
        while (stopped_by := _stop_reason(stop, summary.cycles, ticks, max_cycles, max_ticks)) is None:
            ticks += 1
            now = clock()
            today = now.date().isoformat()
            reason = wait_reason(read_state(home, today), caps, now, gap,
                                 lambda at=now: idle_status(home, window, now=lambda: at, trigger=trigger))
            if reason is not None:
                if reason != last_reason:
                    note("waiting", why=reason)
                last_reason = reason
                wait(tick)
                continue
            last_reason = None
            summary.cycles += 1
            _run_cycle(home, today, caps, cycle, clock, note)
        summary.stopped_by = stopped_by
        note("stopped", by=summary.stopped_by, cycles=summary.cycles)
    return summary


def _stop_reason(stop: threading.Event, cycles: int, ticks: int, max_cycles: Optional[int],
                 max_ticks: Optional[int]) -> Optional[str]:
    """Why the daemon stops now (DaemonSummary.stopped_by), or None to go on."""
    if stop.is_set():
        return "signal"
    if max_cycles is not None and cycles >= max_cycles:
        return "max-cycles"
    if max_ticks is not None and ticks >= max_ticks:
        return "max-ticks"
    return None


def _run_cycle(home: Union[Path, str], today: str, caps: Caps, cycle: Cycle, clock: Clock,
               note: Callable[..., None]) -> None:
    """One counted cycle with what is left of the day's budget; a failed cycle is logged, not raised."""
    state = count_start(home, today)
    budget = max(0.0, caps.spend_per_day - state.spend)
    note("cycle_started", cycle=state.cycles, budget=round(budget, 6))
    try:
        record: CycleRecord = cycle(budget)
    except Exception as exc:  # a failed cycle is logged; the daemon goes on (it still counted)
        record = {"error": redact_text(f"{type(exc).__name__}: {exc}")[:500]}
        note("cycle_failed", **record)
    else:
        note("cycle_finished", **record)
    ended = clock()
    count_end(home, ended.date().isoformat(), record, ended)
