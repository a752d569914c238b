"""How `ga explore` runs: exactly one of four modes; a --once cycle counted in the day's caps; cycles while idle."""
from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Callable, Optional

from configs import Settings
from memory_shared import MemoryStoreError
from orchestrator.triggers.activity import local_now
from orchestrator.triggers.stopping import stop_on_signals
from skilltree.daemon import Caps, CycleRecord, DaemonBusy, DaemonSummary, count_end, count_start, run_daemon
from skilltree.explore import CycleResult, ExploreError, consolidate_run, resume_cycle, run_cycle
from skilltree.tree import SkillTreeError

MODES = ("--once", "--when-idle", "--resume", "--consolidate")
USER_ERRORS = (ExploreError, MemoryStoreError, SkillTreeError, DaemonBusy)  # one line each, exit 2
__all__ = ["MODES", "USER_ERRORS", "ExploreError", "consolidate_run", "explore_once", "explore_when_idle",
           "pick_mode", "resume_cycle"]


def pick_mode(once: bool, when_idle: Optional[str], resume: Optional[str], consolidate: Optional[str]) -> str:
    """The one mode asked for (one of MODES); ExploreError when none or several are."""
    chosen = [name for name, on in zip(MODES, (once, when_idle, resume, consolidate)) if on]
    if len(chosen) != 1:
        raise ExploreError("give exactly one of --once, --when-idle WINDOW, --resume RUN, --consolidate RUN"
                           + (f" (got {', '.join(chosen)})" if chosen else ""))
    return chosen[0]


def explore_once(current: Settings, now: Optional[datetime] = None, **options: Any) -> CycleResult:
    """One cycle now, counted (started and ended) in the day's cycles and spend that --when-idle's caps read."""
    day = (now or local_now()).astimezone().date().isoformat()
    count_start(current.home_dir, day)
    result = run_cycle(current, now=now, **options)
    count_end(current.home_dir, day, result.record(), local_now())
    return result


def explore_when_idle(current: Settings, window: timedelta, *, trigger: Optional[Path], tick: float,
                      max_cycles: Optional[int], on_record: Callable[[dict], None], **options: Any) -> DaemonSummary:
    """Cycles whenever the machine is idle (or `trigger` says so), within the daily caps, until Ctrl-C."""
    caps = Caps(current.explore.max_cycles_per_day, current.explore.max_spend_per_day)
    with stop_on_signals() as stop:
        def cycle(budget: Optional[float]) -> CycleRecord:
            return run_cycle(current, budget_cost=budget, stop=stop, **{**options, "display": "quiet"}).record()

        return run_daemon(current.home_dir, caps, cycle, window=window, trigger=trigger, stop=stop, tick=tick,
                          max_cycles=max_cycles, on_record=on_record)
