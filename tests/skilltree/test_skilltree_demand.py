"""The demand rule (docs/design.md §6b): the formula against an independent calculation, its reduction to §6
without usage, selection still covering min(4, available) categories, and bounded weights."""
import math
import random
from datetime import datetime, timedelta, timezone

import pytest

from configs.settings import PlannerSettings
from skilltree.adapt import Band, adapt_weights, feedback, project
from skilltree.demand import category_demand
from skilltree.plan import read_plan, score_and_select, write_plan
from skilltree.scoring import Candidate, Judgement
from skilltree.tree import Category, Skill, SkillTree
from skilltree.vectors import INITIAL_WEIGHTS, ScoreVector, Weights
from tests.ga_support import run_ga

NOW = datetime(2026, 6, 1, tzinfo=timezone.utc)
DEMAND = PlannerSettings(rule="demand")


def tree_with(ages: dict[str, list[float]]) -> SkillTree:
    """Skills per category, each created `age` days before NOW."""
    tree = SkillTree(categories={name: Category(name=name) for name in ages})
    for name, days in ages.items():
        for n, age in enumerate(days):
            tree = tree.add(Skill(id=f"{name}-{n}", name=f"{name} {n}", category=name, created=NOW - timedelta(days=age),
                                  sop=f"L3/{name}/{n}.md"))
    return tree


def test_demand_matches_an_independent_calculation():
    tree = tree_with({"web": [60, 10], "mail": [90], "art": [5], "empty": []})
    recent = {"web-0": 12, "web-1": 3, "mail-0": 1, "art-0": 0}
    trend = {"web-0": 2, "web-1": 1, "mail-0": 1}
    got = category_demand(tree, recent, NOW, DEMAND, trend)
    # by hand: window 30 days, trend 5 days, exposure in skill-months
    e = {"web": 30 / 30 + 10 / 30, "mail": 1.0, "art": 5 / 30}
    u = {"web": 15, "mail": 1, "art": 0}
    r_short = {"web": 3 / (10 / 30), "mail": 1 / (5 / 30)}
    total_e = sum(e.values())
    mean = 16 / total_e
    bound = {c: max(u[c] / e[c], r_short[c]) + 1.0 * math.sqrt(max(u[c] / e[c], mean) * math.log1p(total_e) / e[c])
             for c in ("web", "mail")}
    best = max(bound.values())
    assert got["web"].uses == 15 and got["web"].exposure == pytest.approx(e["web"])
    assert got["web"].demand == pytest.approx(10 * bound["web"] / best)
    assert got["mail"].demand == pytest.approx(10 * bound["mail"] / best)
    assert got["art"].rate is None and got["art"].demand == pytest.approx(10 * DEMAND.untried_demand)  # < 1 skill-month
    assert got["empty"].rate is None and got["empty"].demand == pytest.approx(10 * DEMAND.untried_demand)
    assert max(d.demand for d in got.values()) == pytest.approx(10)


def candidates(spec):
    cands = [Candidate(title=f"task {n} {cat}", category=cat, target_skill=f"new-{n}", description="d")
             for n, (cat, _) in enumerate(spec)]
    return cands, [Judgement(utility=u, innovation=u) for _, u in spec]


SPEC = [("art", 9), ("art", 8), ("mail", 8), ("web", 5), ("web", 4), ("docs", 7), ("music", 6)]


def test_without_use_the_rule_is_s6():
    tree = tree_with({"web": [60] * 3, "mail": [60] * 3, "art": [60], "docs": [60] * 2})
    s6 = score_and_select(tree, {}, *candidates(SPEC), batch_size=4, now=NOW)
    demand = score_and_select(tree, {}, *candidates(SPEC), batch_size=4, now=NOW, planner=DEMAND, recent={}, trend={})
    assert [c.title for c in demand.selected] == [c.title for c in s6.selected]
    assert all(c.demand is None and c.planned is None for c in demand.candidates) and demand.demand == {}
    assert [c.score for c in demand.candidates] == [c.score for c in s6.candidates]


def test_demand_steers_the_batch_to_used_categories_and_keeps_four_categories(tmp_path):
    tree = tree_with({"web": [60] * 3, "mail": [60] * 3, "art": [60], "docs": [60] * 2})
    recent = {f"web-{n}": 9 for n in range(3)}
    s6 = score_and_select(tree, recent, *candidates(SPEC), batch_size=4, now=NOW)
    plan = score_and_select(tree, recent, *candidates(SPEC), batch_size=4, now=NOW, planner=DEMAND, recent=recent,
                            trend={})
    web = [c for c in plan.selected if c.category == "web"]
    assert not [c for c in s6.selected if c.category == "web"] and web  # §6 leaves the used category out
    assert plan.categories_covered == 4 == s6.categories_covered
    for item in plan.candidates:  # the §6 score is untouched; the ranking score is the blend
        assert item.score == pytest.approx(next(c.score for c in s6.candidates if c.title == item.title))
        assert item.planned == pytest.approx(0.5 * item.score + 0.5 * item.demand)
    assert plan.demand["web"].demand == pytest.approx(10) and plan.rule == "demand" and plan.blend == 0.5
    assert read_plan(write_plan(tmp_path, plan)) == plan


@pytest.mark.parametrize("seed", range(20))
def test_selection_covers_min_4_available_under_demand(seed):
    rng = random.Random(seed)
    names = [f"c{n}" for n in range(rng.randint(1, 7))]
    tree = tree_with({name: [rng.uniform(1, 90) for _ in range(rng.randint(0, 4))] for name in names})
    recent = {sid: rng.randint(0, 20) for sid in tree.skills}
    spec = [(rng.choice(names + ["new"]), rng.randint(1, 10)) for _ in range(rng.randint(1, 12))]
    plan = score_and_select(tree, recent, *candidates(spec), batch_size=4, now=NOW, planner=DEMAND, recent=recent,
                            trend=recent)
    available = len({c.category for c in plan.candidates})
    assert plan.categories_covered >= min(4, available, len(plan.candidates))
    assert all(0 <= (c.demand or 0) <= 10 for c in plan.candidates)


BAND = Band.around_initial(0.2, 0.1, 0.5)


def test_projection_keeps_the_weights_in_the_band_and_summing_to_one():
    inside = Weights(breadth=0.33, depth=0.2, utility=0.27, innovation=0.2)
    assert project(inside, BAND) == inside  # what §6 gives inside the band is left exactly as it is
    rng = random.Random(3)
    for _ in range(300):
        raw = Weights(**{k: rng.uniform(0.001, 2) for k in INITIAL_WEIGHTS}).normalized()
        got = project(raw, BAND)
        assert sum(got.values()) == pytest.approx(1.0) and BAND.contains(got)
    assert project(Weights(breadth=0.01, depth=0.01, utility=0.97, innovation=0.01), BAND).utility == pytest.approx(0.5)


def test_bounded_feedback_equals_s6_inside_the_band_and_stops_drift_outside():
    tree = SkillTree()
    vector = ScoreVector(breadth=1, depth=1, utility=9, innovation=2)
    for n in range(60):  # every one predicted high and never used: utility x0.9 each time under §6
        tree = tree.add(Skill(id=f"s{n}", name=f"s{n}", category="web", created=NOW - timedelta(days=40 + n),
                              sop=f"L3/s{n}.md", predicted=8.5, score_vector=vector))
    free = feedback(tree, lambda s: 0, NOW)
    bounded = feedback(tree, lambda s: 0, NOW, BAND)
    assert free.tree.weights.utility < 0.01  # §6 alone: utility all but gone
    assert bounded.tree.weights.utility == pytest.approx(0.1) and BAND.contains(bounded.tree.weights)
    one = tree.copy_with(skills={"s0": tree.skills["s0"]})
    expected, _ = adapt_weights(Weights(), vector, 8.5, 0)
    assert feedback(one, lambda s: 0, NOW, BAND).tree.weights == expected  # one step stays inside: same as §6
    assert "kept within the band" in bounded.record.reason


def test_planner_settings_are_validated():
    with pytest.raises(ValueError):
        PlannerSettings(rule="bandit")
    with pytest.raises(ValueError):
        PlannerSettings(blend=1.5)
    assert PlannerSettings().rule == "demand"


def test_the_cli_plans_with_the_configured_rule(tmp_path, ga_home):
    """`ga skills plan` reads planner.rule: demand (default) follows the access log, s6 does not."""
    import json

    import yaml

    from memory_shared import MemoryStore
    from memory_shared.stats import AccessLog
    from skilltree.commit import commit_tree

    store = MemoryStore(ga_home / "memory", create=True)
    tree = tree_with({"web": [60, 60, 60], "mail": [60, 60], "art": [60], "docs": [60]})
    commit_tree(store, lambda _: tree, message="skills", author="test")
    log = AccessLog(ga_home / "memory")
    for n in range(30):
        log.record(f"L3/web/{n % 3}.md", f"t-{n}", NOW - timedelta(days=1 + n % 20))
    tasks = [{"title": f"Task {n} {c}", "category": c, "target_skill": "new", "description": "try"}
             for n, (c, _) in enumerate(SPEC)]
    judged = [{"index": n, "utility": u, "innovation": u} for n, (_, u) in enumerate(SPEC, 1)]
    script = tmp_path / "planner.yaml"
    script.write_text(yaml.safe_dump({"tasks": [
        {"match": "Propose exactly", "turns": [{"content": json.dumps(tasks)}]},
        {"match": "You judge candidate", "turns": [{"content": json.dumps(judged)}]}]}))
    plans = {}
    for rule in ("demand", "s6"):
        env = {"GA_PLANNER__RULE": rule} if rule == "s6" else {}
        result = run_ga("skills", "plan", "--model", f"scripted:{script}", "--run-dir", str(tmp_path / rule),
                        "--candidates", "7", "--now", NOW.isoformat(), env=env)
        assert result.returncode == 0, result.stderr
        plans[rule] = read_plan(tmp_path / rule / "plan.json")
    assert plans["demand"].rule == "demand" and plans["demand"].demand["web"].uses == 30
    assert plans["s6"].rule == "s6" and plans["s6"].demand == {}
    assert "web" in {c.category for c in plans["demand"].selected} - {c.category for c in plans["s6"].selected}
    bad = run_ga("skills", "plan", "--model", f"scripted:{script}", env={"GA_PLANNER__RULE": "bandit"})
    assert bad.returncode == 2 and "planner" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
