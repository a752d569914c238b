"""Everything a skill-tree report shows, gathered once from the tree, the access log, the exploration
reports, the exploration runs (plan.json, explore.json) and the files the skills point to; both
renderers (Markdown, HTML) read only this."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Sequence

import structlog

from memory_shared.jsontypes import JSONObject
from skilltree.adapt import WINDOW, rule_for
from skilltree.plan import ExplorationPlan, read_plan
from skilltree.reports import ExplorationReport
from skilltree.scoring import ScoredCandidate
from skilltree.selection import MIN_CATEGORIES
from skilltree.tree import Skill, SkillTree, WeightRecord, utc
from skilltree.usage import usage, usage_after_creation, usage_timeline
from skilltree.vectors import Weights

if TYPE_CHECKING:
    from memory_shared.stats import AccessLog

log = structlog.get_logger("skilltree.report")
RECENT_DAYS = 30
FILE_CHARS = 20_000  # embedded text per file; longer files are cut with a note


@dataclass
class CategoryRow:
    name: str
    skills: int
    verified: int
    uses: int          # all time
    recent: int = 0    # last 30 days
    proposed: int = 0  # candidates in the exploration runs' plans
    selected: int = 0
    used: int = 0      # skills used at least once
    failed: int = 0    # explorations that ended unverified, failed or unfinished


@dataclass
class Attempt:
    """An exploration that did not become a verified skill."""

    title: str
    category: str
    skill: str
    outcome: str       # unverified, failed, unfinished
    reasons: list[str]
    run: str = ""
    task: str = ""
    when: Optional[datetime] = None
    report: Optional[str] = None  # path in the store, when kept


@dataclass
class Judged:
    """A skill's predicted score against its uses in its first 30 days (what the 30-day rule reads)."""

    skill: Skill
    uses: int
    complete: bool     # its 30 days are over
    zone: Optional[str]  # "over" (x0.9) / "under" (x1.1) / None


@dataclass
class PlanLine:
    item: ScoredCandidate
    selected: bool
    why: str


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
    recent: dict[str, int] = field(default_factory=dict)     # skill -> uses in the last 30 days
    attempts: list[Attempt] = field(default_factory=list)
    judged: list[Judged] = field(default_factory=list)
    plan: Optional[ExplorationPlan] = None
    plan_run: str = ""
    plan_lines: list[PlanLine] = field(default_factory=list)
    runs: int = 0
    files: dict[str, str] = field(default_factory=dict)      # store path -> text (embedded)

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


def _runs(runs_dir: Optional[Path]) -> list[tuple[Path, JSONObject, Optional[ExplorationPlan]]]:
    """Exploration runs (explore.json, as written: unchecked) with their plans, oldest first; unreadable ones
    skipped."""
    found: list[tuple[Path, JSONObject, Optional[ExplorationPlan]]] = []
    if runs_dir is None or not Path(runs_dir).is_dir():
        return found
    for record_path in sorted(Path(runs_dir).glob("*/explore.json")):
        try:
            record = json.loads(record_path.read_text(encoding="utf-8"))
            plan_path = record_path.with_name("plan.json")
            plan = read_plan(plan_path) if plan_path.is_file() else None
        except (OSError, ValueError) as exc:
            log.warning("report.run_skipped", file=str(record_path), problem=str(exc).splitlines()[0][:200])
            continue
        found.append((record_path.parent, record, plan))
    found.sort(key=lambda item: (str(item[1].get("created", "")), item[0].name))
    return found


def why_lines(plan: ExplorationPlan) -> list[PlanLine]:
    """Each candidate of a plan, best first, with why it was or was not selected (skilltree.selection)."""
    selected_keys = {(s.candidate.title, s.category) for s in plan.selected}
    required = min(plan.min_categories or MIN_CATEGORIES, plan.batch_size, len({c.category for c in plan.candidates}))
    representatives: list[str] = []
    for item in plan.candidates:
        if item.category not in representatives:
            representatives.append(item.category)
    covering = representatives[:required]
    first_of: dict[str, ScoredCandidate] = {}
    for item in plan.candidates:
        first_of.setdefault(item.category, item)
    lines = []
    for rank, item in enumerate(plan.candidates, 1):
        selected = (item.candidate.title, item.category) in selected_keys
        best_in_category = first_of[item.category] is item
        if selected and best_in_category and item.category in covering:
            why = f"selected: best of {item.category}, one of the {required} categories a batch must cover"
        elif selected:
            why = f"selected: among the best of the rest (rank {rank})"
        elif item.category not in covering and best_in_category:
            why = f"not selected: {item.category} ranked below the {required} covered categories and the rest filled the batch"
        else:
            why = f"not selected: rank {rank}; the {plan.batch_size} slots went to higher-ranked candidates"
        lines.append(PlanLine(item, selected, why))
    return lines


def _attempts(reports: Sequence[ExplorationReport], runs: list[tuple[Path, JSONObject, Optional[ExplorationPlan]]],
              tree: SkillTree) -> list[Attempt]:
    attempts: list[Attempt] = []
    kept = set()
    for report in reports:
        if report.verified:
            continue
        extra = report.model_extra or {}
        reasons = [str(p) for p in extra.get("problems") or []] or ["not verified (the report gives no reason)"]
        attempts.append(Attempt(report.title, tree.category_name(report.category or "misc"), report.skill,
                                "unverified", reasons, str(extra.get("run") or ""), str(extra.get("task") or ""),
                                report.created, _store_path(report.path)))
        kept.add((str(extra.get("run") or ""), str(extra.get("task") or "")))
    for run_dir, record, _ in runs:
        tasks = {t.get("task_id"): t for t in record.get("tasks", [])}
        for task_id, outcome in (record.get("outcomes") or {}).items():
            if outcome.get("outcome") not in ("failed", "unfinished") or (run_dir.name, task_id) in kept:
                continue
            task = tasks.get(task_id, {})
            when = outcome.get("time")
            attempts.append(Attempt(task.get("title", task_id), tree.category_name(task.get("category") or "misc"),
                                    task.get("target_skill", ""), outcome["outcome"],
                                    [str(p) for p in outcome.get("problems") or []] or ["no reason recorded"],
                                    run_dir.name, task_id, utc(datetime.fromisoformat(when)) if when else None))
    attempts.sort(key=lambda a: (a.when.timestamp() if a.when else 0.0, a.title), reverse=True)
    return attempts


def _store_path(path: Optional[str]) -> Optional[str]:
    """A report's path relative to the generation (…/reports/x.md -> reports/x.md)."""
    if not path:
        return None
    parts = Path(path).parts
    return "/".join(parts[parts.index("reports"):]) if "reports" in parts else Path(path).name


def gather(tree: SkillTree, access_log: AccessLog, reports: Sequence[ExplorationReport], now: datetime, *,
           weeks: int = 12, generation: Optional[int] = None, recent_reports: int = 12,
           runs_dir: Optional[Path] = None, read: Optional[Callable[[str], Optional[str]]] = None) -> ReportData:
    """`read(path)` returns a file of the generation (None when absent): the SOPs, scripts and
    reports the skills point to are embedded."""
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
    recent = usage(tree, access_log, now - timedelta(days=RECENT_DAYS), now)
    runs = _runs(runs_dir)
    attempts = _attempts(reports, runs, tree)
    rows = []
    for name in sorted(tree.categories):
        skills = tree.skills_in(name)
        rows.append(CategoryRow(name, len(skills), sum(s.verified for s in skills), sum(used.get(s.id, 0) for s in skills),
                                sum(recent.get(s.id, 0) for s in skills), used=sum(used.get(s.id, 0) > 0 for s in skills)))
    by_name = {row.name: row for row in rows}
    for _, _, plan in runs:
        for item in plan.candidates if plan else []:
            row = by_name.setdefault(item.category, CategoryRow(item.category, 0, 0, 0))
            row.proposed += 1
        for item in plan.selected if plan else []:
            by_name[item.category].selected += 1
    for attempt in attempts:
        by_name.setdefault(attempt.category, CategoryRow(attempt.category, 0, 0, 0)).failed += 1
    rows = sorted(by_name.values(), key=lambda r: r.name)
    first_30 = usage_after_creation([s for s in tree.skills.values() if s.predicted is not None], access_log, WINDOW)
    judged = [Judged(s, first_30.get(s.id, 0), s.created + WINDOW <= now,
                     rule_for(s.predicted, first_30.get(s.id, 0)) if s.predicted is not None else None)
              for s in sorted(tree.skills.values(), key=lambda s: s.id) if s.predicted is not None]
    latest = next(((d, p) for d, _, p in reversed(runs) if p is not None), None)
    files: dict[str, str] = {}
    if read is not None:
        wanted = [p for s in tree.skills.values() for p in (s.sop, *s.scripts, s.report) if p]
        wanted += [a.report for a in attempts if a.report]
        for path in sorted(set(wanted)):
            text = read(path)
            if text is not None:
                files[path] = text if len(text) <= FILE_CHARS else text[:FILE_CHARS] + f"\n… cut at {FILE_CHARS:,} characters"
    return ReportData(now, generation, tree, used, edges[:-1], timeline, list(reports)[:recent_reports], rows,
                      recent=recent, attempts=attempts, judged=judged,
                      plan=latest[1] if latest else None, plan_run=latest[0].name if latest else "",
                      plan_lines=why_lines(latest[1]) if latest else [], runs=len(runs), files=files)
