"""Bounded change: how much of the tree one task's commit may rewrite or delete before it waits for review.

A task may rewrite or delete at most `rewrite_share` of the L3 files (SOPs and scripts), of the skills in
skilltree.json and of the lines of any existing file, and add at most `l1_task_share` of L1's line bound (at
least one of each, so a small tree still learns). Past that the whole commit is held as a proposal: one
gated commit can no longer wipe the skill tree or fill L1 so that every later task's learning is refused.
"""
from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from typing import Optional

from .layers import L1_INDEX, L3_DIR, SKILLTREE


@dataclass(frozen=True)
class Bounds:
    rewrite_share: float = 0.25
    l1_task_share: float = 0.2
    l1_max_lines: int = 30


def _allowed(share: float, total: int) -> int:
    return max(1, math.floor(share * total))


def removed_lines(before: Optional[str], after: Optional[str]) -> int:
    old = Counter(line.strip() for line in (before or "").splitlines() if line.strip())
    new = Counter(line.strip() for line in (after or "").splitlines() if line.strip())
    return sum((old - new).values())


def added_lines(before: Optional[str], after: Optional[str]) -> int:
    return removed_lines(after, before)


def _skills(text: Optional[str]) -> dict[str, str]:
    try:
        skills = json.loads(text or "{}").get("skills") or {}
    except (ValueError, AttributeError):
        return {}
    return {str(k): json.dumps(v, sort_keys=True) for k, v in skills.items()} if isinstance(skills, dict) else {}


def over_bound(finals: dict[str, tuple[Optional[str], Optional[str]]], l3_files: int, bounds: Bounds) -> Optional[str]:
    """Why this commit rewrites too much (one line), or None. `finals`: path -> (text before, text after);
    `l3_files`: how many files L3/ holds before the commit."""
    l3_rewritten = sorted(p for p, (before, after) in finals.items()
                          if p.startswith(L3_DIR + "/") and before is not None
                          and (after is None or removed_lines(before, after) > 0))
    if len(l3_rewritten) > _allowed(bounds.rewrite_share, l3_files):
        return (f"it rewrites or deletes {len(l3_rewritten)} of {l3_files} L3 files ({', '.join(l3_rewritten[:3])}"
                f"{', ...' if len(l3_rewritten) > 3 else ''}); a task may change at most "
                f"{_allowed(bounds.rewrite_share, l3_files)} (memory.rewrite_share {bounds.rewrite_share:g})")
    if SKILLTREE in finals:
        before, after = (_skills(t) for t in finals[SKILLTREE])
        touched = [k for k, v in before.items() if after.get(k) != v]
        if before and len(touched) > _allowed(bounds.rewrite_share, len(before)):
            return (f"it removes or rewrites {len(touched)} of {len(before)} skills in {SKILLTREE}; a task may change "
                    f"at most {_allowed(bounds.rewrite_share, len(before))} (memory.rewrite_share "
                    f"{bounds.rewrite_share:g})")
    if L1_INDEX in finals:
        added = added_lines(*finals[L1_INDEX])
        most = _allowed(bounds.l1_task_share, bounds.l1_max_lines)
        if added > most:
            return (f"it adds {added} lines to {L1_INDEX}; a task may add at most {most} "
                    f"(memory.l1_task_share {bounds.l1_task_share:g} of {bounds.l1_max_lines} lines)")
    for path, (before, after) in sorted(finals.items()):
        if before is None or path.startswith(L3_DIR + "/") or path == SKILLTREE:
            continue
        total = sum(1 for line in before.splitlines() if line.strip())
        gone = total if after is None else removed_lines(before, after)
        if total and gone > _allowed(bounds.rewrite_share, total):
            return (f"it removes {gone} of the {total} lines of {path}; a task may remove at most "
                    f"{_allowed(bounds.rewrite_share, total)} (memory.rewrite_share {bounds.rewrite_share:g})")
    return None
