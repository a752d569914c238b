"""Choosing the batch: the best candidates such that at least 4 categories are covered.

Order: rank score descending (the §6 score, or the demand-blended score of skilltree.demand), then title, category, target skill and description (case-folded, then
exact) — so equal scores always come out the same way whatever order the model listed them in.
Scores are compared rounded to 9 decimals so float noise cannot reorder ties.

Rule: with k slots and C distinct categories among the candidates, the batch covers
r = min(min_categories, k, C) categories. The best candidate of each of the r categories whose
best candidates rank highest is taken first, then the remaining k - r slots go to the best of the
rest. This is optimal: any batch meeting the rule can be exchanged, candidate by candidate, into
one containing those r representatives without lowering its total score.
"""
from __future__ import annotations

from typing import Sequence

from skilltree.scoring import ScoredCandidate

MIN_CATEGORIES = 4


def rank_key(item: ScoredCandidate) -> tuple:
    c = item.candidate
    return (-round(item.rank_score, 9), c.title.casefold(), c.title, item.category.casefold(), item.category,
            c.target_skill.casefold(), c.target_skill, c.description)


def ranked(items: Sequence[ScoredCandidate]) -> list[ScoredCandidate]:
    return sorted(items, key=rank_key)


def top_k(items: Sequence[ScoredCandidate], k: int) -> list[ScoredCandidate]:
    """The baseline: the k best by score, categories ignored."""
    return ranked(items)[: max(0, k)]


def select_batch(items: Sequence[ScoredCandidate], k: int, min_categories: int = MIN_CATEGORIES) -> list[ScoredCandidate]:
    """The k best candidates subject to covering min(min_categories, k, distinct categories)."""
    order = ranked(items)
    k = min(max(0, k), len(order))
    representatives: list[ScoredCandidate] = []
    seen: set[str] = set()
    for item in order:
        if item.category not in seen:
            seen.add(item.category)
            representatives.append(item)
    required = min(min_categories, k, len(representatives))
    chosen = representatives[:required]
    taken = {id(item) for item in chosen}
    chosen += [item for item in order if id(item) not in taken][: k - required]
    return ranked(chosen)


def categories_covered(items: Sequence[ScoredCandidate]) -> int:
    return len({item.category for item in items})
