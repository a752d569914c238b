"""Skill usage from the memory access statistics: a task that reads a skill's SOP uses it once."""
from __future__ import annotations

from bisect import bisect_right
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Optional, Sequence

from skilltree.tree import Skill, SkillTree

if TYPE_CHECKING:
    from configs.settings import PlannerSettings
    from memory_shared.stats import AccessLog


def _norm(path: str) -> str:
    path = (path or "").replace("\\", "/")
    while path.startswith(("./", "/")):
        path = path[2:] if path.startswith("./") else path[1:]
    return path


def _sop_owners(tree: SkillTree) -> dict[str, str]:
    return {_norm(skill.sop): skill.id for skill in tree.skills.values() if skill.sop}


def usage(tree: SkillTree, access_log: AccessLog, since: Optional[datetime] = None,
          until: Optional[datetime] = None) -> dict[str, int]:
    """{skill_id: distinct tasks that read its SOP in [since, until)}; every skill is present
    (0 when unused or without a SOP). `access_log` is a memory_shared.AccessLog."""
    counts = {skill_id: 0 for skill_id in tree.skills}
    owners = _sop_owners(tree)
    if owners:
        for path, n in access_log.counts(since=since, until=until, distinct_tasks=True).items():
            owner = owners.get(_norm(path))
            if owner is not None:
                counts[owner] += n
    return counts


def usage_timeline(tree: SkillTree, access_log: AccessLog,
                   edges: Sequence[datetime]) -> list[dict[str, int]]:
    """Usage per consecutive window [edges[i], edges[i+1]) in one pass over the log."""
    owners = _sop_owners(tree)
    stamps = [edge.timestamp() for edge in edges]
    seen: list[dict[str, set[str]]] = [{} for _ in range(max(0, len(edges) - 1))]
    if owners and seen:
        for entry in access_log.entries(since=edges[0], until=edges[-1]):
            owner = owners.get(_norm(entry["path"]))
            if owner is None:
                continue
            index = _bucket(stamps, float(entry["t"]))
            if index is not None:
                seen[index].setdefault(owner, set()).add(entry.get("task", ""))
    return [{skill_id: len(bucket.get(skill_id, ())) for skill_id in tree.skills} for bucket in seen]


def _bucket(stamps: list[float], t: float) -> Optional[int]:
    index = bisect_right(stamps, t) - 1
    return index if 0 <= index < len(stamps) - 1 else None


def usage_after_creation(skills: Sequence[Skill], access_log: AccessLog, window: timedelta) -> dict[str, int]:
    """{skill_id: distinct tasks that read its SOP in [created, created + window)}, one log pass."""
    by_sop = {_norm(s.sop): s for s in skills if s.sop}
    seen: dict[str, set[str]] = {s.id: set() for s in skills}
    if by_sop:
        start = min(s.created for s in by_sop.values())
        end = max(s.created for s in by_sop.values()) + window
        for entry in access_log.entries(since=start, until=end):
            skill = by_sop.get(_norm(entry["path"]))
            if skill is not None and skill.created.timestamp() <= float(entry["t"]) < (skill.created + window).timestamp():
                seen[skill.id].add(entry.get("task", ""))
    return {skill_id: len(tasks) for skill_id, tasks in seen.items()}


def recent_usage(tree: SkillTree, access_log: AccessLog, now: datetime, planner: Optional[PlannerSettings]) -> tuple[dict[str, int], dict[str, int]]:
    """Uses per skill in the demand rule's window and trend window, ending at `now`."""
    if planner is None or planner.rule != "demand":
        return {}, {}
    return (usage(tree, access_log, now - timedelta(days=planner.window_days), now),
            usage(tree, access_log, now - timedelta(days=planner.trend_days), now))
