"""Everything a skill-tree report shows, gathered once from the tree, the access log and the
exploration reports; both renderers (Markdown, HTML) read only this."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Optional, Sequence

from skilltree.reports import ExplorationReport
from skilltree.tree import Skill, SkillTree, WeightRecord, utc
from skilltree.usage import usage, usage_timeline
from skilltree.vectors import Weights


@dataclass
class CategoryRow:
    name: str
    skills: int
    verified: int
    uses: int


@dataclass
class ReportData:
    generated: datetime
    generation: Optional[int]
    tree: SkillTree
    usage: dict[str, int]                      # all time
    week_starts: list[datetime]                # one per bucket of the timeline
    timeline: list[dict[str, int]]             # category -> uses, per week
    reports: list[ExplorationReport]
    categories: list[CategoryRow] = field(default_factory=list)

    @property
    def top_skills(self) -> list[Skill]:
        skills = sorted(self.tree.skills.values(), key=lambda s: (-self.usage.get(s.id, 0), s.id))
        return skills[:10]

    @property
    def weight_points(self) -> list[tuple[str, Weights, Optional[WeightRecord]]]:
        """(label, weights, the record that produced them) from the initial weights on."""
        history = self.tree.weight_history
        first = history[0].before if history else self.tree.weights
        points: list[tuple[str, Weights, Optional[WeightRecord]]] = [("initial", first, None)]
        points += [(record.time.strftime("%Y-%m-%d"), record.after, record) for record in history]
        return points

    @property
    def total_uses(self) -> int:
        return sum(self.usage.values())


def gather(tree: SkillTree, access_log: Any, reports: Sequence[ExplorationReport], now: datetime, *,
           weeks: int = 12, generation: Optional[int] = None, recent_reports: int = 12) -> ReportData:
    now = utc(now)
    end = (now + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    edges = [end - timedelta(weeks=weeks - n) for n in range(weeks + 1)]
    per_skill = usage_timeline(tree, access_log, edges)
    timeline = []
    for bucket in per_skill:
        by_category: dict[str, int] = {name: 0 for name in sorted(tree.categories)}
        for skill_id, n in bucket.items():
            by_category[tree.skills[skill_id].category] += n
        timeline.append(by_category)
    used = usage(tree, access_log)
    rows = [CategoryRow(name, len(skills := tree.skills_in(name)), sum(s.verified for s in skills),
                        sum(used.get(s.id, 0) for s in skills)) for name in sorted(tree.categories)]
    return ReportData(now, generation, tree, used, edges[:-1], timeline, list(reports)[:recent_reports], rows)
