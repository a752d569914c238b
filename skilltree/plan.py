"""An exploration plan: every candidate with its scores, the selected batch, what was dropped. Pure;
written as plan.json in the run directory. (A fan-out's plan of concrete tasks is orchestrator.spec.Plan.)"""
from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Mapping, Optional, Sequence

from pydantic import BaseModel, ConfigDict

from configs.settings import PlannerSettings
from memory_shared.fsutil import atomic_write_text
from skilltree.demand import apply_demand, category_demand
from skilltree.scoring import Candidate, Judgement, ScoredCandidate, TreeStats, score_task
from skilltree.selection import MIN_CATEGORIES, categories_covered, ranked, select_batch
from skilltree.tree import SkillTree, utc
from skilltree.vectors import Weights

PLAN_FILE = "plan.json"


class Dropped(BaseModel):
    stage: str  # "propose" or "judge"
    reason: str
    item: object = None  # the reply's item as the model wrote it


class DemandRow(BaseModel):
    """One category's demand term when the plan was made (rule `demand`)."""

    uses: int
    exposure: float
    rate: Optional[float]
    demand: float


class ExplorationPlan(BaseModel):
    model_config = ConfigDict(extra="forbid")
    created: datetime
    generation: Optional[int] = None
    weights: Weights
    batch_size: int
    min_categories: int
    mean_category_size: float
    max_usage: int
    candidates: list[ScoredCandidate]  # all scored candidates, best first
    selected: list[ScoredCandidate]    # the batch, best first
    categories_covered: int
    dropped: list[Dropped] = []
    rule: str = "s6"                   # planner.rule the batch was ranked by
    blend: float = 0.0                 # share of the demand term in the ranking score
    demand: dict[str, DemandRow] = {}  # per category; empty under s6 or with no recent use
    model_calls: int = 0
    tokens: int = 0


def score_and_select(tree: SkillTree, usage: Mapping[str, int], candidates: Sequence[Candidate],
                     judgements: Sequence[Judgement], *, batch_size: int, now: datetime,
                     min_categories: int = MIN_CATEGORIES, generation: Optional[int] = None,
                     planner: Optional[PlannerSettings] = None, recent: Optional[Mapping[str, int]] = None,
                     trend: Optional[Mapping[str, int]] = None) -> ExplorationPlan:
    """Score every judged candidate (§6) and select the batch; candidates[i] goes with judgements[i].
    Under `planner.rule: demand` (with `recent`: uses per skill in the last window_days) the batch is
    ranked by the demand-blended score (skilltree.demand; `trend`: uses in the last trend_days);
    without `planner` the rule is §6 alone."""
    if len(candidates) != len(judgements):
        raise ValueError(f"{len(candidates)} candidates but {len(judgements)} judgements")
    params = planner or PlannerSettings(rule="s6")
    stats = TreeStats.build(tree, usage)
    scored = [score_task(c, j, stats, tree.weights) for c, j in zip(candidates, judgements, strict=False)]
    demand = category_demand(tree, recent or {}, now, params, trend) if params.rule == "demand" else {}
    scored = ranked(apply_demand(scored, demand, params))
    batch = select_batch(scored, batch_size, min_categories)
    rows = {name: DemandRow(uses=d.uses, exposure=round(d.exposure, 4), rate=d.rate, demand=round(d.demand, 4))
            for name, d in sorted(demand.items())}
    return ExplorationPlan(created=utc(now), generation=generation, weights=tree.weights, batch_size=batch_size,
                min_categories=min_categories, mean_category_size=stats.mean_size, max_usage=stats.max_usage,
                candidates=scored, selected=batch, categories_covered=categories_covered(batch),
                rule=params.rule, blend=params.blend if demand else 0.0, demand=rows)


def write_plan(run_dir: Path | str, plan: ExplorationPlan) -> Path:
    """plan.json in `run_dir`, replaced atomically."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    target = run_dir / PLAN_FILE
    atomic_write_text(target, plan.model_dump_json(indent=2) + "\n")
    return target


def read_plan(path: Path | str) -> ExplorationPlan:
    return ExplorationPlan.model_validate_json(Path(path).read_text(encoding="utf-8"))
