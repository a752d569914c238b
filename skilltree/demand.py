"""Demand-aware planning (docs/design.md §6b, `planner.rule: demand`): a per-category demand term learned
from the access statistics, blended with the §6 score to rank candidates; pure, clock passed in.

For each category c of the tree, over the last W days (planner.window_days):
    u_c = distinct-task uses of c's skills in the window
    e_c = exposure: sum over c's skills of min(W, age) / 30 days (skill-months it could be used)
    r_c = u_c / e_c                         uses per skill-month
    r'_c = max(r_c, the same rate over the last T days)   (planner.trend_days: rising use counts in days)
    r̄  = sum u / sum e                     the tree's mean rate;  E = sum e
    U_c = r'_c + beta * sqrt(max(r_c, r̄) * ln(1 + E) / e_c)   an upper confidence bound (Poisson)
A category with no exposure (new, or no skill yet) or no use at all while others are used is
untried: U_c = untried_demand * max U. Then
    demand_c = 10 * U_c / max U             in [0, 10]
    planned  = (1 - blend) * score_s6 + blend * demand_c
and the batch is the best by `planned` covering min(4, available) categories (skilltree.selection).
With no use in the window at all, demand is None and planned = score_s6: the rule is §6.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Mapping, Optional, Sequence

from configs.settings import PlannerSettings
from skilltree.scoring import ScoredCandidate
from skilltree.tree import SkillTree, utc

MONTH_DAYS = 30.0


@dataclass(frozen=True)
class CategoryDemand:
    name: str
    uses: int
    exposure: float              # skill-months in the window
    rate: Optional[float]        # uses per skill-month; None when untried
    bound: float                 # U_c
    demand: float                # 10 * U_c / max U


def _rates(tree: SkillTree, used: Mapping[str, int], now: datetime, days: float) -> tuple[dict[str, int], dict[str, float]]:
    uses = {name: 0 for name in tree.categories}
    exposure = {name: 0.0 for name in tree.categories}
    for skill in tree.skills.values():
        age = max(0.0, (now - skill.created) / timedelta(days=1))
        exposure[skill.category] += min(days, age) / MONTH_DAYS
        uses[skill.category] += int(used.get(skill.id, 0))
    return uses, exposure


def category_demand(tree: SkillTree, recent: Mapping[str, int], now: datetime, params: PlannerSettings,
                    trend: Optional[Mapping[str, int]] = None) -> dict[str, CategoryDemand]:
    """Demand per category of the tree from `recent` ({skill id: uses in the last window_days}) and
    `trend` (the same over the last trend_days); empty when nothing was used in the window (then
    the rule reduces to §6)."""
    now = utc(now)
    uses, exposure = _rates(tree, recent, now, params.window_days)
    short_uses, short_exposure = _rates(tree, trend or {}, now, params.trend_days)
    total_uses, total_exposure = sum(uses.values()), sum(exposure.values())
    if total_uses <= 0 or total_exposure <= 0:
        return {}
    mean_rate = total_uses / total_exposure
    log_term = math.log1p(total_exposure)
    bounds: dict[str, Optional[float]] = {}
    for name in tree.categories:
        if exposure[name] <= 0 or uses[name] == 0 and exposure[name] < 1.0:
            bounds[name] = None  # untried: too little exposure to say it is not wanted
            continue
        rate = uses[name] / exposure[name]
        rising = short_uses[name] / short_exposure[name] if short_exposure[name] > 0 else 0.0
        bounds[name] = max(rate, rising) + params.explore_bonus * math.sqrt(max(rate, mean_rate) * log_term / exposure[name])
    best = max((b for b in bounds.values() if b is not None), default=0.0)
    if best <= 0:
        return {}
    result = {}
    for name in tree.categories:
        known = bounds[name]
        bound = known if known is not None else params.untried_demand * best
        result[name] = CategoryDemand(name, uses[name], exposure[name],
                                      uses[name] / exposure[name] if known is not None else None,
                                      bound, min(10.0, 10.0 * bound / best))
    return result


def untried_demand(params: PlannerSettings) -> float:
    return 10.0 * params.untried_demand


def apply_demand(scored: Sequence[ScoredCandidate], demand: Mapping[str, CategoryDemand],
                 params: PlannerSettings) -> list[ScoredCandidate]:
    """Each candidate with its category's demand and the blended ranking score; unchanged (§6)
    under rule s6 or when there is no demand (no use in the window)."""
    if params.rule != "demand" or not demand:
        return list(scored)
    out = []
    for item in scored:
        known = demand.get(item.category)
        value = known.demand if known is not None else untried_demand(params)
        out.append(item.model_copy(update={"demand": value,
                                           "planned": (1 - params.blend) * item.score + params.blend * value}))
    return out
