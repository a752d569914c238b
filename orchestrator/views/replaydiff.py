"""A replay's difference shown as a short unified diff: the recorded side `-`, the replay's `+` (`ga replay`)."""
from __future__ import annotations

import difflib
import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from worker.model.playback import Divergence

DIFF_LINES = 12  # of a difference's unified diff; the histories hold the rest


def difference_diff(divergence: Divergence, limit: int = DIFF_LINES) -> list[str]:
    """Both sides of a difference as a short unified diff (the recorded side `-`, the replay's `+`); [] when a side
    is missing (the request gained or lost a message: its line says so)."""
    if divergence.recorded is None or divergence.replayed is None:
        return []
    before, after = (_as_lines(side) for side in (divergence.recorded, divergence.replayed))
    lines = list(difflib.unified_diff(before, after, "recorded", "replayed", n=1, lineterm=""))
    if len(lines) > limit:
        lines = lines[:limit] + [f"… {len(lines) - limit} more diff lines (ga runs show RUN TASK shows each turn)"]
    return lines


def _as_lines(value: object) -> list[str]:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=1, default=str)
    return text.splitlines() or [""]
