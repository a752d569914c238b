"""Exploration planner benchmark: planning time, category coverage, weight adaptation over 180 days.

1. Planning time excluding model calls, on synthetic trees of 10, 100 and 1,000 skills: parsing
   skilltree.json, the prompt summary, and scoring + selecting 12 candidates (also 100). Goal:
   under 1 s at 1,000 skills.
2. Categories covered by the selected batch of 4, against a plain top-4-by-score baseline, over
   200 candidate sets per tree in which the model favours one category (60 % of candidates);
   also the total score the rule gives up for that diversity.
3. The weights over 180 simulated days: every day a batch of 4 is planned and becomes skills; the
   skills of 4 categories are used (about 9 tasks a month each), the others almost never; every
   day `ga skills feedback`'s rule judges the skills whose 30 days are over.

    python bench/planner.py            # ~1 minute on 2 cores
"""
from __future__ import annotations

import math
import random
import statistics
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from skilltree.adapt import feedback  # noqa: E402
from skilltree.plan import build_plan  # noqa: E402
from skilltree.scoring import Candidate, Judgement, TreeStats, score_task  # noqa: E402
from skilltree.selection import categories_covered, select_batch, top_k  # noqa: E402
from skilltree.summary import summary_for_prompt  # noqa: E402
from skilltree.synthetic import synthetic_candidates, synthetic_tree, synthetic_usage  # noqa: E402
from skilltree.tree import Category, Skill, SkillTree, parse  # noqa: E402
from skilltree.vectors import DIMENSIONS  # noqa: E402

NOW = datetime(2026, 6, 1, tzinfo=timezone.utc)
SIZES = (10, 100, 1000)
GOAL_SECONDS = 1.0


def timed(fn, repeat: int) -> tuple[float, float]:
    """(median, max) seconds of `repeat` runs."""
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs), max(runs)


def planning_time() -> None:
    print("1. Planning time, model calls excluded (median of 20 runs)")
    print(f"{'skills':>7} {'categories':>10} {'parse json':>11} {'summary':>9} {'plan K=12':>10} {'plan K=100':>11} "
          f"{'total K=12':>11} {'vs goal 1 s':>12}")
    for size in SIZES:
        tree = synthetic_tree(size, now=NOW, seed=size)
        usage = synthetic_usage(tree, seed=size)
        text = tree.to_json()
        small = synthetic_candidates(tree, 12, seed=1)
        large = synthetic_candidates(tree, 100, seed=2)
        parse_t, _ = timed(lambda: parse(text), 20)
        summary_t, _ = timed(lambda: summary_for_prompt(tree, 3000, usage), 20)
        plan_t, plan_max = timed(lambda: build_plan(tree, usage, *small, batch_size=4, now=NOW), 20)
        plan100_t, _ = timed(lambda: build_plan(tree, usage, *large, batch_size=4, now=NOW), 20)
        total = parse_t + summary_t + plan_t
        print(f"{size:>7} {len(tree.categories):>10} {parse_t * 1e3:>9.2f}ms {summary_t * 1e3:>7.2f}ms "
              f"{plan_t * 1e3:>8.2f}ms {plan100_t * 1e3:>9.2f}ms {total * 1e3:>9.2f}ms {GOAL_SECONDS / total:>10.0f}x under")
    print()


def coverage() -> None:
    print("2. Categories covered by a batch of 4 (200 candidate sets of 12, 60 % in one favoured category)")
    print(f"{'skills':>7} {'rule: mean':>11} {'min':>4} {'top-4: mean':>12} {'min':>4} {'ratio':>6} "
          f"{'batches >= 4 cats':>18} {'(top-4)':>8} {'score kept':>11}")
    for size in SIZES:
        tree = synthetic_tree(size, now=NOW, seed=size)
        usage = synthetic_usage(tree, seed=size)
        stats = TreeStats.build(tree, usage)
        rule, base, full_rule, full_base, kept = [], [], 0, 0, []
        for seed in range(200):
            cands, judged = synthetic_candidates(tree, 12, seed=1000 + seed)
            scored = [score_task(c, j, stats, tree.weights) for c, j in zip(cands, judged)]
            chosen, plain = select_batch(scored, 4), top_k(scored, 4)
            rule.append(categories_covered(chosen))
            base.append(categories_covered(plain))
            full_rule += categories_covered(chosen) >= min(4, len({s.category for s in scored}))
            full_base += categories_covered(plain) >= min(4, len({s.category for s in scored}))
            kept.append(sum(s.score for s in chosen) / sum(s.score for s in plain))
        print(f"{size:>7} {statistics.mean(rule):>11.2f} {min(rule):>4} {statistics.mean(base):>12.2f} {min(base):>4} "
              f"{statistics.mean(rule) / statistics.mean(base):>5.2f}x {full_rule / 2:>17.1f}% {full_base / 2:>7.1f}% "
              f"{statistics.mean(kept) * 100:>10.1f}%")
    print()


USED = ("web", "documents", "data", "shell")
ALL = USED + ("email", "images", "finance", "calendar")


def _candidates(tree: SkillTree, rng: random.Random, day: int) -> tuple[list[Candidate], list[Judgement]]:
    cands, judged = [], []
    for n in range(12):
        category = rng.choice(ALL + ("music", "legal"))
        existing = [s.id for s in tree.skills.values() if s.category == category]
        target = rng.choice(existing) if existing and rng.random() < 0.5 else f"new-{day}-{n}"
        cands.append(Candidate(title=f"day {day} task {n} {category}", category=category, target_skill=target,
                               description="simulated"))
        judged.append(Judgement(utility=rng.randint(3, 10), innovation=rng.randint(2, 10)))
    return cands, judged


def simulate(seed: int, days: int = 180, every: int = 30) -> tuple[list[tuple], dict[str, int], SkillTree]:
    """Rows (day, weights, skills, judged, over, under, share of the last period's batches in used
    categories), adjustments by rule:dimension, and the final tree."""
    rng = random.Random(seed)
    start = NOW - timedelta(days=days)
    tree = SkillTree(categories={c: Category(name=c) for c in ALL})
    for n, category in enumerate(ALL * 2):
        tree = tree.add(Skill(id=f"seed-{n}", name=f"seed {n}", category=category, created=start - timedelta(days=40),
                              sop=f"L3/{category}/seed-{n}.md"))
    rate = {sid: (0.3 if tree.skills[sid].category in USED else 0.01) for sid in tree.skills}
    uses: dict[str, list[float]] = {sid: [] for sid in tree.skills}  # when distinct tasks used it (day numbers)
    rows: list[tuple] = []
    judged_total = over = under = 0
    share: list[float] = []
    adjust: dict[str, int] = {}
    for day in range(days + 1):
        today = start + timedelta(days=day)
        if day % every == 0:
            rows.append((day, tree.weights, len(tree.skills), judged_total, over, under,
                         statistics.mean(share) if share else None))
            share = []
        if day == days:
            break
        usage = {sid: len(days_used) for sid, days_used in uses.items()}
        plan = build_plan(tree, usage, *_candidates(tree, rng, day), batch_size=4, now=today)
        share.append(sum(s.category in USED for s in plan.selected) / max(1, len(plan.selected)))
        for n, item in enumerate(plan.selected):
            sid = f"d{day}-{n}"
            tree = tree.add(Skill(id=sid, name=item.title, category=item.category, created=today, sop=f"L3/{sid}.md",
                                  predicted=item.score, score_vector=item.vector, verified=True))
            rate[sid] = (0.3 if item.category in USED else 0.01) * rng.lognormvariate(0, 0.5)
            uses[sid] = []
        for sid, lam in rate.items():  # Poisson arrivals of distinct tasks today
            uses[sid] += [day + rng.random() for _ in range(_poisson(rng, lam))]

        def used_in_window(skill: Skill) -> int:
            born = (skill.created - start).days
            return sum(1 for t in uses[skill.id] if born <= t < born + 30)

        outcome = feedback(tree, used_in_window, today)
        judged_total += len(outcome.judged)
        for _, verdict in outcome.judged:
            over += verdict.rule == "over"
            under += verdict.rule == "under"
            if verdict.rule:
                key = f"{verdict.rule}:{verdict.dimension}"
                adjust[key] = adjust.get(key, 0) + 1
        tree = outcome.tree
    return rows, adjust, tree


def weight_trajectory(days: int = 180) -> None:
    print(f"3. Weights over {days} simulated days: a batch of 4 planned a day becomes 4 skills; skills of "
          f"{', '.join(USED)} are used by ~9 tasks a month, those of {', '.join(ALL[4:])} (and new categories) "
          f"by ~0.3; the 30-day rule runs daily")
    rows, adjust, tree = simulate(seed=42, days=days)
    print(f"{'day':>4} " + " ".join(f"{d:>10}" for d in DIMENSIONS) + f" {'skills':>7} {'judged':>7} {'over':>5} "
          f"{'under':>6} {'batch share in used categories, last 30 d':>42}")
    for day, weights, skills, judged, over, under, share in rows:
        shown = f"{share * 100:.0f}%" if share is not None else "-"
        print(f"{day:>4} " + " ".join(f"{w:>10.3f}" for w in weights.values()) +
              f" {skills:>7} {judged:>7} {over:>5} {under:>6} {shown:>42}")
    print("adjustments (rule:dominant dimension): " + ", ".join(f"{k} {v}" for k, v in sorted(adjust.items())))
    print(f"weight history: {len(tree.weight_history)} records; weights sum to {sum(tree.weights.values()):.6f}")
    print("\nSame simulation, 5 seeds: weights on day 180 (and the highest utility weight seen)")
    print(f"{'seed':>4} " + " ".join(f"{d:>10}" for d in DIMENSIONS) + f" {'max utility':>12} {'over':>5} {'under':>6}")
    finals = []
    for seed in range(1, 6):
        rows, _, _ = simulate(seed=seed, days=days)
        weights = rows[-1][1]
        finals.append(weights.values())
        print(f"{seed:>4} " + " ".join(f"{w:>10.3f}" for w in weights.values()) +
              f" {max(r[1].utility for r in rows):>12.3f} {rows[-1][4]:>5} {rows[-1][5]:>6}")
    print(f"{'mean':>4} " + " ".join(f"{statistics.mean(col):>10.3f}" for col in zip(*finals)))
    print()


def _poisson(rng: random.Random, lam: float) -> int:
    threshold, k, p = math.exp(-lam), 0, 1.0
    while True:
        p *= rng.random()
        if p <= threshold:
            return k
        k += 1


if __name__ == "__main__":
    planning_time()
    coverage()
    weight_trajectory()
