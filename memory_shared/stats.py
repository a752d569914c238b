"""Access statistics: which memory file was read, when, by which task. Outside the generations.

One JSON line per read appended to <root>/stats/access.jsonl with a single O_APPEND write(2) of
fewer than PIPE_BUF bytes, so lines from many processes never interleave and a read never costs a
commit. Queries scan the file; a line that is not valid JSON (a disk-full tail) is skipped.
"""
from __future__ import annotations

import json
import os
import select
from datetime import datetime
from pathlib import Path
from typing import Iterator, Optional, Union

from .jsontypes import JSONObject

PIPE_BUF = getattr(select, "PIPE_BUF", 4096)
When = Union[datetime, float, int, None]


def _epoch(when: When) -> Optional[float]:
    if when is None:
        return None
    if isinstance(when, datetime):
        return when.timestamp()  # a naive datetime is taken as local time
    return float(when)


class AccessLog:
    """Append-only read log of one memory root; safe from many processes at once."""

    def __init__(self, root: Path | str):
        self.path = Path(root) / "stats" / "access.jsonl"

    def record(self, path: str, task_id: str, when: When = None) -> None:
        """Log one read of `path` (relative to the memory root) by `task_id`."""
        stamp = _epoch(when)
        entry = {"t": round(stamp if stamp is not None else datetime.now().timestamp(), 3),
                 "path": str(path), "task": str(task_id)}
        line = (json.dumps(entry, ensure_ascii=False) + "\n").encode("utf-8")
        if len(line) > PIPE_BUF:  # keep the write atomic: cut the task id, never the path
            spare = len(line) - PIPE_BUF
            entry["task"] = entry["task"][: max(0, len(entry["task"]) - spare - 8)] + "…"
            line = (json.dumps(entry, ensure_ascii=False) + "\n").encode("utf-8")
            if len(line) > PIPE_BUF:
                raise ValueError(f"memory path too long to log ({len(str(path))} chars): {str(path)[:80]}…")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def entries(self, since: When = None, until: When = None, prefix: Optional[str] = None) -> Iterator[JSONObject]:
        """Reads in [since, until), optionally only paths starting with `prefix` (lines as written)."""
        low, high = _epoch(since), _epoch(until)
        if not self.path.exists():
            return
        with open(self.path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                try:
                    entry = json.loads(line)
                    stamp, path = float(entry["t"]), entry["path"]
                except (ValueError, KeyError, TypeError):
                    continue
                if low is not None and stamp < low or high is not None and stamp >= high:
                    continue
                if prefix and not path.startswith(prefix):
                    continue
                yield entry

    def counts(self, since: When = None, until: When = None, prefix: Optional[str] = None, *,
               distinct_tasks: bool = False) -> dict[str, int]:
        """Reads per path in the window; with distinct_tasks, the number of different tasks that
        read each path (a task that reads a skill's SOP uses the skill once)."""
        if not distinct_tasks:
            totals: dict[str, int] = {}
            for entry in self.entries(since, until, prefix):
                totals[entry["path"]] = totals.get(entry["path"], 0) + 1
            return totals
        tasks: dict[str, set[str]] = {}
        for entry in self.entries(since, until, prefix):
            tasks.setdefault(entry["path"], set()).add(entry.get("task", ""))
        return {path: len(ids) for path, ids in tasks.items()}

    def tasks_using(self, path: str, since: When = None, until: When = None) -> int:
        """Distinct tasks that read exactly `path` in the window."""
        return len({e.get("task", "") for e in self.entries(since, until) if e["path"] == path})
