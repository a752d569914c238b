"""Candidate scoring exactly as docs/design.md §6; pure functions, no model calls.

For a candidate in category c targeting skill s:
    breadth = 10 * max(0, 1 - size(c) / (mean category size + 1))
    depth   = 10 * usage(s) / (max usage over all skills + 1)
    score   = w_b*breadth + w_d*depth + w_u*utility + w_i*innovation
Definitions that §6 leaves open:
- size(c) is the number of skills in c; a category not in the tree has size 0. A candidate's
  category matches an existing one up to case and punctuation ("Web Tools" = "web-tools").
- the mean category size is taken over the categories the tree lists (a listed category with no
  skills counts, with size 0); it is 0 when the tree has no category. A candidate's new category
  does not enter the mean.
- usage(s) is the number of distinct tasks that read s's SOP in the usage window (all time unless
  the caller passes a window); a target that is not in the tree (matched by id, name or slug) has
  usage 0; the max is over the skills of the tree and 0 when it has none.
- utility and innovation are the judge's values in [1, 10]; the weights are used as stored (the
  adaptation keeps them summing to 1), so a score lies in [0, 10].
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional

from pydantic import BaseModel, ConfigDict, Field

from skilltree.tree import SkillTree, TreeIndex
from skilltree.vectors import ScoreVector, Weights


def breadth(category_size: int, mean_category_size: float) -> float:
    return 10.0 * max(0.0, 1.0 - category_size / (mean_category_size + 1.0))


def depth(skill_usage: int, max_usage: int) -> float:
    return 10.0 * skill_usage / (max_usage + 1.0)


class Candidate(BaseModel):
    """One proposed exploration task, as the model must return it."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)
    title: str = Field(min_length=3, max_length=200)
    category: str = Field(min_length=1, max_length=80)
    target_skill: str = Field(min_length=1, max_length=120)
    description: str = Field(min_length=1, max_length=2000)


class Judgement(BaseModel):
    model_config = ConfigDict(extra="ignore")
    utility: float = Field(ge=1, le=10)
    innovation: float = Field(ge=1, le=10)


class ScoredCandidate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    candidate: Candidate
    category: str  # resolved against the tree
    new_category: bool
    category_size: int
    target_skill_id: Optional[str]  # None: the target is not in the tree yet
    target_usage: int
    vector: ScoreVector
    score: float                      # §6, exactly; what the 30-day rule later judges
    demand: Optional[float] = None    # the category's demand term in [0, 10] (rule `demand`; None under s6)
    planned: Optional[float] = None   # the score the batch is ranked by (s6: None, i.e. `score`)

    @property
    def title(self) -> str:
        return self.candidate.title

    @property
    def rank_score(self) -> float:
        return self.score if self.planned is None else self.planned


@dataclass(frozen=True)
class TreeStats:
    """What scoring needs from the tree, computed once per plan."""

    tree: SkillTree
    index: TreeIndex
    sizes: Mapping[str, int]
    mean_size: float
    usage: Mapping[str, int]
    max_usage: int

    @classmethod
    def build(cls, tree: SkillTree, usage: Mapping[str, int]) -> "TreeStats":
        sizes = {name: 0 for name in tree.categories}
        for skill in tree.skills.values():
            sizes[skill.category] = sizes.get(skill.category, 0) + 1
        mean = sum(sizes.values()) / len(sizes) if sizes else 0.0
        known = {skill_id: int(usage.get(skill_id, 0)) for skill_id in tree.skills}
        return cls(tree, TreeIndex(tree), sizes, mean, known, max(known.values(), default=0))


def score_task(candidate: Candidate, judgement: Judgement, stats: TreeStats, weights: Weights) -> ScoredCandidate:
    """Score one candidate against the tree (§6)."""
    category = stats.index.category_name(candidate.category)
    size = stats.sizes.get(category, 0)
    target = stats.index.find(candidate.target_skill)
    used = stats.usage.get(target.id, 0) if target else 0
    vector = ScoreVector(breadth=breadth(size, stats.mean_size), depth=depth(used, stats.max_usage),
                         utility=judgement.utility, innovation=judgement.innovation)
    return ScoredCandidate(candidate=candidate, category=category, new_category=category not in stats.sizes,
                           category_size=size, target_skill_id=target.id if target else None,
                           target_usage=used, vector=vector, score=weights.dot(vector))
