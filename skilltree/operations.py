"""What the `ga skills ...` commands do, on a memory root; the CLI only parses and prints."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from memory_shared import MemoryStore
from memory_shared.provenance import trust_level, trust_of
from memory_shared.stats import AccessLog
from skilltree.adapt import WINDOW, Band, FeedbackOutcome, due, feedback
from skilltree.commit import commit_tree
from skilltree.plan import ExplorationPlan
from skilltree.planner import plan_exploration
from skilltree.report import write_report
from skilltree.report_data import gather
from skilltree.reports import REPORTS_DIR, load_reports
from skilltree.tree import SkillTree, load, utc
from skilltree.usage import recent_usage, usage, usage_after_creation

if TYPE_CHECKING:
    from configs.settings import PlannerSettings
    from worker.model import Model

AUTHOR = "ga skills"


@dataclass
class TreeView:
    tree: SkillTree
    usage: dict[str, int]
    generation: int
    root: Path
    provenance: dict[str, str] = field(default_factory=dict)  # skill id -> trust and source of its SOP


def open_store(root: Path) -> MemoryStore:
    """The store at `root`; memory_shared.StoreMissing (one line, says `ga memory init`) if none."""
    return MemoryStore(root)


def view(root: Path, since: Optional[datetime] = None, until: Optional[datetime] = None) -> TreeView:
    """The tree at HEAD with usage in [since, until) (all time by default)."""
    store = open_store(root)
    with store.snapshot() as snap:
        tree = load(snap.path)
        generation = snap.generation
        provenance = {skill.id: _provenance(snap.path, skill.sop, snap.read(skill.sop)) for skill in tree.skills.values()
                      if skill.sop}
    return TreeView(tree, usage(tree, AccessLog(root), since, until), generation, root, provenance)


def _provenance(tree_path: Path, sop: str, text: Optional[str]) -> str:
    """'<trust>: <who, what backs it>' of a skill's SOP; a person's (or an old store's) when it has no record."""
    record = trust_of(tree_path, sop, text).file
    return f"{trust_level(record)}: {record.source()}" if record is not None else "person: no task's provenance"


@dataclass
class FeedbackRun:
    outcome: Optional[FeedbackOutcome]
    generation: Optional[int]  # the commit, None when nothing was due or on a dry run
    weights_before: object


def band_for(planner: Optional[PlannerSettings]) -> Optional[Band]:
    """The weight band of rule `demand` (None under s6: the 30-day rule unbounded, as in §6)."""
    if planner is None or planner.rule != "demand":
        return None
    return Band.around_initial(planner.weight_band, planner.weight_min, planner.weight_max)


def run_feedback(root: Path, now: datetime, dry_run: bool = False, planner: Optional[PlannerSettings] = None) -> FeedbackRun:
    """Judge every skill whose 30 days are over; one atomic commit of skilltree.json. `planner`
    (configs PlannerSettings) under rule `demand` keeps the weights in its band."""
    now = utc(now)
    band = band_for(planner)
    store, log = open_store(root), AccessLog(root)
    seen: dict[str, object] = {}

    def update(tree: SkillTree) -> Optional[SkillTree]:
        used = usage_after_creation(due(tree, now), log, WINDOW)
        outcome = feedback(tree, lambda skill: used[skill.id], now, band)
        seen.update(outcome=outcome, before=tree.weights)
        return outcome.tree if outcome.changed and not dry_run else None

    generation = commit_tree(store, update, author=AUTHOR,
                             message=f"skills feedback: 30-day rule applied at {now.isoformat()}")
    return FeedbackRun(seen.get("outcome"), generation, seen.get("before"))  # type: ignore[arg-type]


def build_report(root: Path, out: Path, now: datetime, reports_dir: Optional[Path] = None,
                 weeks: int = 12, runs_dir: Optional[Path] = None) -> tuple[Path, Path]:
    """report.md and report.html in `out` from HEAD, the access log, the exploration reports
    (`reports/` of the HEAD generation unless `reports_dir` is given) and the exploration runs in
    `runs_dir` (their plans and failures); the files the skills point to are embedded."""
    store = open_store(root)
    with store.snapshot() as snap:
        tree = load(snap.path)
        reports = load_reports(reports_dir if reports_dir is not None else snap.path / REPORTS_DIR)
        data = gather(tree, AccessLog(root), reports, now, weeks=weeks, generation=snap.generation,
                      runs_dir=runs_dir, read=snap.read)
    return write_report(data, out)


def run_plan(root: Path, model: Model, run_dir: Path, now: datetime, *, candidates: int = 12,
             batch_size: int = 4, planner: Optional[PlannerSettings] = None) -> ExplorationPlan:
    """One planning step on HEAD: propose, judge, score, select; plan.json in run_dir."""
    store = open_store(root)
    with store.snapshot() as snap:
        tree = load(snap.path)
        reports = load_reports(snap.path / REPORTS_DIR, limit=10)
        generation = snap.generation
    log, now = AccessLog(root), utc(now)
    recent, trend = recent_usage(tree, log, now, planner)
    return plan_exploration(model, tree, usage(tree, log), now=now, candidates=candidates, batch_size=batch_size,
                            reports=reports, run_dir=run_dir, generation=generation, planner_settings=planner,
                            recent=recent, trend=trend)
