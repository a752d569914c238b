"""When a scheduled job runs: pure functions of (job, state, now), no clock and no disk.

A job has slots: its time of day on allowed days (`at`), or a grid of `every` steps on allowed days.
At any moment only the newest slot at or before now counts, so however many runs were missed (machine
off, scheduler down), at most one is caught up, and only if it is no later than `max_delay`; an older
missed slot is recorded as skipped (for a job never seen before, such a slot is just not due). A slot is
handled once: the state remembers the newest handled slot.
`cooldown` holds a due slot back until that long after the previous run started (while within max_delay).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal, Optional

from orchestrator.triggers.durations import format_duration
from orchestrator.triggers.jobs import Job

GRID_ORIGIN = datetime(2000, 1, 3)  # a Monday at local midnight: `every: 30m` lands on :00 and :30
SEARCH_DAYS = 8
CATCH_UP_AFTER = timedelta(minutes=2)  # later than a few ticks: the run was missed, not just polled


@dataclass(frozen=True)
class JobState:
    last_slot: Optional[datetime] = None  # the newest slot handled (run or skipped)
    last_run: Optional[datetime] = None   # when the newest run started
    runs: int = 0
    skips: int = 0


@dataclass(frozen=True)
class Decision:
    job: str
    action: Literal["run", "skip", "wait"]
    slot: Optional[datetime]
    reason: str


def latest_slot(job: Job, now: datetime) -> Optional[datetime]:
    """The newest slot at or before `now` (None if there is none within a week)."""
    if job.at is not None:
        slot = now.replace(hour=job.at.hour, minute=job.at.minute, second=0, microsecond=0)
        if slot > now:
            slot -= timedelta(days=1)
        for _ in range(SEARCH_DAYS):
            if slot.weekday() in job.allowed_days:
                return slot
            slot -= timedelta(days=1)
        return None
    every, limit = _interval(job), now
    for _ in range(SEARCH_DAYS):
        slot = _grid_floor(every, limit)
        if slot.weekday() in job.allowed_days:
            return slot
        limit = slot.replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(microseconds=1)
    return None


def next_slot(job: Job, now: datetime) -> Optional[datetime]:
    """The first slot after `now`."""
    if job.at is not None:
        slot = now.replace(hour=job.at.hour, minute=job.at.minute, second=0, microsecond=0)
        if slot <= now:
            slot += timedelta(days=1)
        for _ in range(SEARCH_DAYS):
            if slot.weekday() in job.allowed_days:
                return slot
            slot += timedelta(days=1)
        return None
    every = _interval(job)
    slot = _grid_floor(every, now) + every
    for _ in range(SEARCH_DAYS * 2):
        if slot.weekday() in job.allowed_days:
            return slot
        day_after = slot.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
        slot = _grid_floor(every, day_after - timedelta(microseconds=1)) + every
    return None


def _interval(job: Job) -> timedelta:
    """An `every` job's interval (Job's validator: a job without `at` has one)."""
    if job.every is None:
        raise ValueError(f"job {job.name}: give 'at' or 'every'")
    return job.every


def decide(job: Job, state: JobState, now: datetime) -> Decision:
    """What to do about `job` at `now`: run its newest slot, skip it (and say why), or wait."""
    if not job.enabled:
        return Decision(job.name, "wait", None, "disabled")
    if job.once and state.runs > 0:
        return Decision(job.name, "wait", None, "repeat: once, and it has run")
    slot = latest_slot(job, now)
    if slot is None or (state.last_slot is not None and slot <= state.last_slot):
        return _wait_for_next(job, now)
    late = now - slot
    if late > job.max_delay and state.last_slot is None:
        return _wait_for_next(job, now)  # a new job: a slot from before it existed was not missed
    if late > job.max_delay:
        return Decision(job.name, "skip", slot, f"missed the {slot:%Y-%m-%d %H:%M} run by {format_duration(late)}, "
                                                f"more than max_delay {format_duration(job.max_delay)}")
    if state.last_run is not None and now - state.last_run < job.cooldown:
        until = state.last_run + job.cooldown
        return Decision(job.name, "wait", slot, f"cooling down until {until:%H:%M:%S} (cooldown "
                                                f"{format_duration(job.cooldown)})")
    if late > CATCH_UP_AFTER:
        return Decision(job.name, "run", slot, f"catching up the {slot:%Y-%m-%d %H:%M} run, {format_duration(late)} late")
    return Decision(job.name, "run", slot, f"due at {slot:%Y-%m-%d %H:%M}")


def after_run_started(state: JobState, slot: datetime, started: datetime) -> JobState:
    return replace(state, last_slot=slot, last_run=started, runs=state.runs + 1)


def after_skip(state: JobState, slot: datetime) -> JobState:
    return replace(state, last_slot=slot, skips=state.skips + 1)


def _wait_for_next(job: Job, now: datetime) -> Decision:
    upcoming = next_slot(job, now)
    return Decision(job.name, "wait", upcoming, f"next at {upcoming:%Y-%m-%d %H:%M}" if upcoming else "no slot")


def _grid_floor(every: timedelta, moment: datetime) -> datetime:
    origin = GRID_ORIGIN.replace(tzinfo=moment.tzinfo)
    return origin + every * ((moment - origin) // every)
