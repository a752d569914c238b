"""Weight adaptation from real usage, docs/design.md §6; pure, with the clock passed in.

A skill is judged once, when 30 days have passed since its creation, on the number of distinct
tasks that used it (read its SOP) in [created, created + 30 days):
- predicted score > 8 and used < 3 times  -> weight of its dominant dimension x 0.9 ("over")
- predicted score < 5 and used > 5 times  -> weight of its dominant dimension x 1.1 ("under")
then the weights are renormalized to sum 1. The dominant dimension is the argmax of the skill's
score vector at creation (ties to the first of breadth, depth, utility, innovation). Skills
without a predicted score or vector (added by hand) are never judged. Several skills judged in one
run are applied one after the other; since scaling commutes and renormalizing does not change
ratios, the order does not change the result. Each run that changes a weight appends one record
(before, after, adjustments) to the tree's weight history; every judged skill gets its verdict
stored in `feedback`, so running the command again never counts a skill twice.

Bounded adaptation (rule `demand`, docs/design.md §6b): the same step, then the weights are projected onto
{each w_k in [max(weight_min, w0_k - band), min(weight_max, w0_k + band)], sum 1} (w0 the initial
weights; Euclidean projection: w_k = clip(v_k - tau) with tau chosen so the sum is 1). Weights
inside the band are left exactly as §6 makes them; nothing can drift past it.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Callable, Optional

from skilltree.tree import Adjustment, Feedback, Skill, SkillTree, WeightRecord, utc
from skilltree.vectors import INITIAL_WEIGHTS, ScoreVector, Weights

WINDOW = timedelta(days=30)
OVER, UNDER = "over", "under"
FACTORS = {OVER: 0.9, UNDER: 1.1}


def rule_for(predicted: float, used: int) -> Optional[str]:
    if predicted > 8.0 and used < 3:
        return OVER
    if predicted < 5.0 and used > 5:
        return UNDER
    return None


def adapt_weights(weights: Weights, vector: ScoreVector, predicted: float, used: int) -> tuple[Weights, Optional[str]]:
    """The weights after judging one skill, and the rule that applied (None: unchanged)."""
    rule = rule_for(predicted, used)
    if rule is None:
        return weights, None
    return weights.scaled(vector.dominant(), FACTORS[rule]).normalized(), rule


@dataclass(frozen=True)
class Band:
    """Per-dimension [low, high] the weights must stay in (their sum, 1, must be reachable)."""

    low: dict[str, float]
    high: dict[str, float]

    @classmethod
    def around_initial(cls, band: float, weight_min: float, weight_max: float) -> "Band":
        return cls({k: max(weight_min, w - band) for k, w in INITIAL_WEIGHTS.items()},
                   {k: min(weight_max, w + band) for k, w in INITIAL_WEIGHTS.items()})

    def contains(self, weights: Weights) -> bool:
        return all(self.low[k] - 1e-9 <= v <= self.high[k] + 1e-9 for k, v in weights.items())


def project(weights: Weights, band: Band) -> Weights:
    """The closest weights summing to 1 within the band (bisection on the shift tau)."""
    if band.contains(weights) and abs(sum(weights.values()) - 1) < 1e-12:
        return weights
    values = dict(weights.items())

    def clipped(tau: float) -> dict[str, float]:
        return {k: min(band.high[k], max(band.low[k], v - tau)) for k, v in values.items()}

    lo, hi = -2.0, 2.0
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if sum(clipped(mid).values()) > 1 else (lo, mid)
    return Weights(**clipped((lo + hi) / 2))


def due(tree: SkillTree, now: datetime) -> list[Skill]:
    """Skills whose 30 days are over and that were not judged yet, oldest first."""
    now = utc(now)
    return sorted((s for s in tree.skills.values()
                   if s.feedback is None and s.predicted is not None and s.score_vector is not None
                   and s.created + WINDOW <= now), key=lambda s: (s.created, s.id))


@dataclass
class FeedbackOutcome:
    tree: SkillTree
    judged: list[tuple[Skill, Feedback]]
    record: Optional[WeightRecord]  # None when no weight changed

    @property
    def changed(self) -> bool:
        return bool(self.judged)


def feedback(tree: SkillTree, used_in_window: Callable[[Skill], int], now: datetime,
             band: Optional[Band] = None) -> FeedbackOutcome:
    """Judge every due skill; `used_in_window(skill)` counts its uses in its first 30 days. With a
    band (rule `demand`) every step is followed by the projection onto it."""
    now = utc(now)
    new = tree.copy_with()
    weights, adjustments, judged = tree.weights, [], []
    for skill in due(tree, now):
        used = int(used_in_window(skill))
        assert skill.predicted is not None and skill.score_vector is not None
        weights, rule = adapt_weights(weights, skill.score_vector, skill.predicted, used)
        if rule and band is not None:
            weights = project(weights, band)
        dimension = skill.score_vector.dominant() if rule else None
        verdict = Feedback(time=now, used=used, rule=rule, dimension=dimension)
        new.skills[skill.id] = skill.model_copy(update={"feedback": verdict})
        judged.append((new.skills[skill.id], verdict))
        if rule:
            assert dimension is not None  # set above whenever a rule applied
            adjustments.append(Adjustment(skill=skill.id, rule=rule, dimension=dimension, factor=FACTORS[rule],
                                          predicted=skill.predicted, used=used))
    record = None
    if adjustments:
        record = WeightRecord(time=now, before=tree.weights, after=weights, adjustments=adjustments,
                              reason=f"30-day rule on {len(adjustments)} of {len(judged)} judged skills"
                                     + (" (kept within the band)" if band is not None else ""))
        new.weights = weights
        new.weight_history.append(record)
    return FeedbackOutcome(new, judged, record)
