"""The batch rule: best tasks covering at least 4 categories; deterministic ties."""
import itertools
import random
from datetime import datetime, timezone

import pytest

from skilltree.plan import read_plan, score_and_select, write_plan
from skilltree.scoring import Candidate, Judgement, ScoredCandidate
from skilltree.selection import categories_covered, rank_key, select_batch, top_k
from skilltree.tree import SkillTree
from skilltree.vectors import ScoreVector


def item(title: str, category: str, score: float) -> ScoredCandidate:
    return ScoredCandidate(candidate=Candidate(title=f"do {title}", category=category, target_skill="x", description="d"),
                           category=category, new_category=False, category_size=0, target_skill_id=None,
                           target_usage=0, vector=ScoreVector(breadth=0, depth=0, utility=1, innovation=1), score=score)


def titles(items):
    return [i.title.removeprefix("do ") for i in items]


# (candidates as (title, category, score), k, expected selected titles, expected categories covered)
CASES = {
    "top-k would be one category": (
        [("a1", "a", 9.0), ("a2", "a", 8.9), ("a3", "a", 8.8), ("a4", "a", 8.7), ("b1", "b", 5.0),
         ("c1", "c", 4.0), ("d1", "d", 3.0), ("e1", "e", 2.0)], 4, ["a1", "b1", "c1", "d1"], 4),
    "k above 4 fills with the best rest": (
        [("a1", "a", 9.0), ("a2", "a", 8.9), ("a3", "a", 8.8), ("b1", "b", 5.0), ("c1", "c", 4.0),
         ("d1", "d", 3.0), ("e1", "e", 2.0)], 6, ["a1", "a2", "a3", "b1", "c1", "d1"], 4),
    "fewer categories exist": (
        [("a1", "a", 9.0), ("a2", "a", 8.0), ("b1", "b", 1.0), ("a3", "a", 7.0)], 4, ["a1", "a2", "a3", "b1"], 2),
    "one category only": ([("a1", "a", 2.0), ("a2", "a", 3.0)], 4, ["a2", "a1"], 1),
    "k below 4 covers k categories": (
        [("a1", "a", 9.0), ("a2", "a", 8.0), ("b1", "b", 1.0), ("c1", "c", 0.5)], 2, ["a1", "b1"], 2),
    "already diverse: same as top-k": (
        [("a1", "a", 9.0), ("b1", "b", 8.0), ("c1", "c", 7.0), ("d1", "d", 6.0), ("a2", "a", 1.0)], 4,
        ["a1", "b1", "c1", "d1"], 4),
    "more slots than candidates": ([("a1", "a", 1.0), ("b1", "b", 2.0)], 5, ["b1", "a1"], 2),
    "no slots": ([("a1", "a", 1.0)], 0, [], 0),
    "no candidates": ([], 4, [], 0),
    "ties by title": ([("zeta", "a", 5.0), ("alpha", "b", 5.0), ("Beta", "c", 5.0), ("gamma", "d", 5.0),
                       ("delta", "e", 5.0)], 4, ["alpha", "Beta", "delta", "gamma"], 4),
}


@pytest.mark.parametrize("name", list(CASES))
def test_select_batch(name):
    spec, k, expected, covered = CASES[name]
    items = [item(*row) for row in spec]
    batch = select_batch(items, k)
    assert titles(batch) == expected
    assert categories_covered(batch) == covered


def test_baseline_top_k_ignores_categories():
    spec = CASES["top-k would be one category"][0]
    assert titles(top_k([item(*row) for row in spec], 4)) == ["a1", "a2", "a3", "a4"]


def test_ties_do_not_depend_on_input_order():
    rng = random.Random(7)
    items = [item(f"t{n:02d}", f"c{n % 6}", float(n % 3)) for n in range(30)]
    first = titles(select_batch(items, 7))
    for _ in range(20):
        rng.shuffle(items)
        assert titles(select_batch(items, 7)) == first
        assert titles(top_k(items, 7)) == titles(sorted(items, key=rank_key)[:7])


def test_float_noise_does_not_break_a_tie():
    a, b = item("b-title", "x", 0.1 + 0.2), item("a-title", "y", 0.3)
    assert a.score != b.score
    assert titles(select_batch([a, b], 1)) == ["a-title"]


@pytest.mark.parametrize("seed", range(40))
def test_selection_is_optimal_against_brute_force(seed):
    rng = random.Random(seed)
    n, k = rng.randint(1, 9), rng.randint(1, 7)
    items = [item(f"t{i}", rng.choice("abcdef"[: rng.randint(1, 6)]), round(rng.uniform(0, 10), 1)) for i in range(n)]
    required = min(4, k, len({i.category for i in items}))
    best = max(sum(i.score for i in combo) for combo in itertools.combinations(items, min(k, n))
               if categories_covered(combo) >= required)
    batch = select_batch(items, k)
    assert len(batch) == min(k, n)
    assert categories_covered(batch) >= required
    assert sum(i.score for i in batch) == pytest.approx(best)


def test_score_and_select_scores_everything_and_round_trips(tmp_path):
    cands = [Candidate(title=f"task {n}", category=cat, target_skill="s", description="d")
             for n, cat in enumerate(["web", "web", "web", "web", "docs", "data", "ops"])]
    judged = [Judgement(utility=10 - n, innovation=5) for n in range(len(cands))]
    plan = score_and_select(SkillTree(), {}, cands, judged, batch_size=4, now=datetime(2026, 5, 1, tzinfo=timezone.utc))
    assert len(plan.candidates) == 7
    assert plan.categories_covered == 4
    assert {s.category for s in plan.selected} == {"web", "docs", "data", "ops"}
    assert [c.score for c in plan.candidates] == sorted((c.score for c in plan.candidates), reverse=True)
    path = write_plan(tmp_path / "run", plan)
    assert path.name == "plan.json"
    again = read_plan(path)
    assert again == plan
    assert again.candidates[0].vector.breadth == 10.0


def test_score_and_select_rejects_mismatched_judgements():
    with pytest.raises(ValueError):
        score_and_select(SkillTree(), {}, [Candidate(title="abc", category="a", target_skill="s", description="d")], [],
                   batch_size=4, now=datetime(2026, 1, 1, tzinfo=timezone.utc))
