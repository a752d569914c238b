"""What a run shows while it runs: a rich live view on a terminal, periodic log lines otherwise."""
from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Mapping, Optional, TypedDict

import structlog
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text
from typing_extensions import Unpack

from orchestrator.views.printable import Shown

if TYPE_CHECKING:
    from orchestrator.executor import TaskProgress

log = structlog.get_logger("ga.fanout")
LOG_EVERY = 10.0


def choose_mode(requested: Optional[str]) -> str:
    """'live' on a terminal, 'log' when not, 'quiet' for --json and nested runs (their output goes to a parent)."""
    if requested:
        return requested
    return "live" if sys.stderr.isatty() else "log"


class ShownState(TypedDict):
    """What the live view shows: failed counts every task that did not succeed; unverified (answered, nothing
    backs it) is shown apart."""

    done: int
    failed: int
    unverified: int
    running: list[TaskProgress]  # in the order of their slots
    tokens: int
    cost: float
    note: str


class StateUpdate(TypedDict, total=False):
    """Some of ShownState's fields, new."""

    done: int
    failed: int
    unverified: int
    running: list[TaskProgress]
    tokens: int
    cost: float
    note: str


class Display:
    def __init__(self, mode: str, name: str, total: int):
        self.mode, self.name, self.total = mode, name, total
        self.started = time.monotonic()
        self.last_log = 0.0
        self.state: ShownState = {"done": 0, "failed": 0, "unverified": 0, "running": [], "tokens": 0, "cost": 0.0,
                                  "note": ""}
        self._live: Optional[Live] = None
        if mode == "live":
            # drawn anew at each refresh, so that the seconds of a long tool call keep counting between updates
            self._live = Live(console=Console(stderr=True), get_renderable=lambda: Shown(self._render()), refresh_per_second=4,
                              transient=False)
            self._live.start()

    def update(self, **state: Unpack[StateUpdate]) -> None:
        self.state.update(state)
        if self._live is not None:
            self._live.refresh()
        elif self.mode == "log" and time.monotonic() - self.last_log >= LOG_EVERY:
            self.last_log = time.monotonic()
            s = self.state
            log.info("fanout.progress", run=self.name, done=s["done"], total=self.total,
                     failed=s["failed"] - s["unverified"], unverified=s["unverified"],
                     running=len(s["running"]), eta=self._eta(), tokens=s["tokens"], cost=round(s["cost"], 4),
                     note=s["note"] or None)

    def close(self) -> None:
        if self._live is not None:
            self._live.refresh()
            self._live.stop()
            self._live = None

    def _eta(self) -> str:
        done = self.state["done"]
        if not done or done >= self.total:
            return "-"
        elapsed = time.monotonic() - self.started
        return _clock(elapsed / done * (self.total - done))

    def _render(self) -> Group:
        s = self.state
        width = 20
        filled = int(width * s["done"] / self.total) if self.total else width
        header = Text.assemble(
            (f"{self.name} ", "bold"), ("█" * filled + "░" * (width - filled), "green"),
            f" {s['done']}/{self.total} done",
            (f" · {s['failed'] - s['unverified']} failed" if s["failed"] > s["unverified"] else "", "red"),
            (f" · {s['unverified']} unverified" if s["unverified"] else "", "yellow"),
            f" · {len(s['running'])} running · {_clock(time.monotonic() - self.started)} · ETA {self._eta()}"
            f" · {s['tokens']:,} tokens · ${s['cost']:.4f}",
            (f" · {s['note']}" if s["note"] else "", "yellow"),
        )
        table = Table(box=None, show_header=True, header_style="dim", pad_edge=False)
        for column in ("worker", "task", "turn", "doing", "tokens", "time"):
            table.add_column(column, no_wrap=True, overflow="ellipsis")
        now = time.time()
        for row in s["running"]:
            table.add_row(str(row.get("slot", "")), Text(row.get("task_id", "")), str(row.get("turn", "")),
                          doing(row, now), f"{row.get('tokens', 0):,}",
                          _clock(now - started) if (started := row.get("started")) else "")
        return Group(header, table)


def doing(row: TaskProgress, now: float) -> str:
    """'code_run 12s' while a tool runs, 'model 3s' while the worker waits for the model's reply."""
    since = f" {int(max(0, now - began))}s" if (began := row.get("since")) else ""
    return f"{row.get('tool') or 'model'}{since}"


STATUS_STYLES = {"succeeded": "green", "unverified": "yellow", "interrupted": "yellow", "stopped": "yellow",
                 "paused": "yellow", "running": "cyan", "queued": "dim", "not started": "dim"}


def status_style(status: str) -> str:
    """green: succeeded; yellow: unverified (answered, nothing backs it) or left to resume; red: failed."""
    return STATUS_STYLES.get(status, "red")


def status_counts(tasks: Mapping[str, int]) -> str:
    """'2/4 succeeded, 1 unverified, 1 failed, 0 unfinished' from a summary's task counts."""
    unverified = tasks.get("unverified", 0)
    failed = tasks["total"] - tasks["succeeded"] - unverified - tasks["unfinished"]
    return (f"{tasks['succeeded']}/{tasks['total']} succeeded, {unverified} unverified, {failed} failed, "
            f"{tasks['unfinished']} unfinished")


def _clock(seconds: float) -> str:
    seconds = int(max(0, seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"
