"""docs/design.md §6 scoring, formula by formula, against hand-computed values."""
from datetime import datetime, timezone

import pytest

from skilltree.scoring import Candidate, Judgement, TreeStats, breadth, depth, score_task
from skilltree.tree import Category, Skill, SkillTree
from skilltree.vectors import ScoreVector, Weights

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def tree_of(spec: dict[str, int], empty: tuple[str, ...] = (), weights=None) -> SkillTree:
    """spec: category -> number of skills, named <category>-<n>."""
    skills = {f"{c}-{n}": Skill(id=f"{c}-{n}", name=f"{c} {n}", category=c, created=T0)
              for c, count in spec.items() for n in range(count)}
    categories = {c: Category(name=c) for c in [*spec, *empty]}
    return SkillTree(categories=categories, skills=skills, **({"weights": weights} if weights else {}))


def candidate(category: str, target: str = "new-skill") -> Candidate:
    return Candidate(title=f"Explore {category} {target}", category=category, target_skill=target, description="d")


@pytest.mark.parametrize("size, mean, expected", [
    (0, 0.0, 10.0),    # empty tree, new category
    (1, 0.0, 0.0),     # 1 - 1/1
    (2, 0.0, 0.0),     # clamped at 0
    (0, 5.0, 10.0),
    (1, 3.0, 7.5),     # 1 - 1/4
    (3, 2.0, 0.0),     # 1 - 3/3
    (2, 3.0, 5.0),     # 1 - 2/4
    (9, 5.0, 0.0),     # negative, clamped
    (1, 1.5, 6.0),     # 1 - 1/2.5
])
def test_breadth(size, mean, expected):
    assert breadth(size, mean) == pytest.approx(expected)


@pytest.mark.parametrize("used, max_used, expected", [
    (0, 0, 0.0),       # nothing used anywhere
    (0, 9, 0.0),
    (5, 9, 5.0),
    (9, 9, 9.0),       # the most used skill gets 10*u/(u+1), never 10
    (3, 3, 7.5),
    (1, 1, 5.0),
])
def test_depth(used, max_used, expected):
    assert depth(used, max_used) == pytest.approx(expected)


# (tree, usage, candidate, expected breadth, expected depth)
CASES = {
    "empty tree": (tree_of({}), {}, candidate("web"), 10.0, 0.0),
    "one category, inside": (tree_of({"web": 3}), {}, candidate("web"), 2.5, 0.0),
    "one category, new one": (tree_of({"web": 3}), {}, candidate("docs"), 10.0, 0.0),
    "zero usage, existing target": (tree_of({"web": 2, "docs": 2}), {}, candidate("web", "web-0"), 10 / 3, 0.0),
    "most used target": (tree_of({"web": 2, "docs": 2}), {"web-0": 4, "docs-1": 1},
                         candidate("web", "web-0"), 10 / 3, 8.0),
    "less used target": (tree_of({"web": 2, "docs": 2}), {"web-0": 4, "docs-1": 1},
                         candidate("docs", "docs-1"), 10 / 3, 2.0),
    "absent target has usage 0": (tree_of({"web": 2}), {"web-0": 4}, candidate("web", "nope"), 10 / 3, 0.0),
    "target by name": (tree_of({"web": 2}), {"web-1": 3}, candidate("web", "Web 1"), 10 / 3, 7.5),
    "category up to case": (tree_of({"web": 1, "docs": 3}), {}, candidate("WEB"), 10 * (1 - 1 / 3), 0.0),
    "empty listed category counts in the mean": (tree_of({"web": 4}, empty=("docs",)), {}, candidate("docs"), 10.0, 0.0),
    "big category clamps": (tree_of({"web": 4}, empty=("docs",)), {}, candidate("web"), 0.0, 0.0),
    "usage of unknown ids ignored": (tree_of({"web": 2}), {"ghost": 99, "web-0": 1}, candidate("web", "web-0"), 10 / 3, 5.0),
}


@pytest.mark.parametrize("name", list(CASES))
def test_score_task(name):
    tree, usage, cand, want_breadth, want_depth = CASES[name]
    scored = score_task(cand, Judgement(utility=7, innovation=4), TreeStats.build(tree, usage), tree.weights)
    assert scored.vector.breadth == pytest.approx(want_breadth)
    assert scored.vector.depth == pytest.approx(want_depth)
    assert (scored.vector.utility, scored.vector.innovation) == (7, 4)
    expected = 0.3 * want_breadth + 0.2 * want_depth + 0.3 * 7 + 0.2 * 4
    assert scored.score == pytest.approx(expected)


def test_mean_category_size_definition():
    assert TreeStats.build(tree_of({}), {}).mean_size == 0
    assert TreeStats.build(tree_of({"a": 3, "b": 1}, empty=("c", "d")), {}).mean_size == 1.0
    assert TreeStats.build(tree_of({"a": 3}), {"a-0": 2, "a-2": 7}).max_usage == 7


def test_score_uses_the_trees_current_weights():
    tree = tree_of({"web": 1}, weights=Weights(breadth=0.1, depth=0.1, utility=0.7, innovation=0.1))
    scored = score_task(candidate("docs"), Judgement(utility=10, innovation=1), TreeStats.build(tree, {}), tree.weights)
    assert scored.score == pytest.approx(0.1 * 10 + 0 + 0.7 * 10 + 0.1 * 1)
    assert scored.new_category and scored.category == "docs" and scored.target_skill_id is None


@pytest.mark.parametrize("utility, innovation", [(0, 5), (11, 5), (5, 0.5), (5, 10.5)])
def test_judgements_outside_1_to_10_are_rejected(utility, innovation):
    with pytest.raises(ValueError):
        Judgement(utility=utility, innovation=innovation)


@pytest.mark.parametrize("vector, dominant", [
    ((10, 0, 5, 5), "breadth"), ((1, 9, 5, 5), "depth"), ((1, 1, 8, 2), "utility"), ((1, 1, 2, 8), "innovation"),
    ((5, 5, 5, 5), "breadth"),     # ties go to the first dimension
    ((0, 0, 7, 7), "utility"),
])
def test_dominant_dimension(vector, dominant):
    assert ScoreVector.model_validate(list(vector)).dominant() == dominant
