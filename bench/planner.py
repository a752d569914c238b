"""Exploration planner benchmark: planning time, category coverage, the planning rules side by side.

1. Planning time excluding model calls, on synthetic trees of 10, 100 and 1,000 skills: parsing
   skilltree.json, the prompt summary, and scoring + selecting 12 candidates (also 100). Goal:
   under 1 s at 1,000 skills.
2. Categories covered by the selected batch of 4, against a plain top-4-by-score baseline, over
   200 candidate sets per tree in which the model favours one category (60 % of candidates);
   also the total score the rule gives up for that diversity.
3. The rules `s6` and `demand` (planner.rule) side by side over seeds of 180 simulated days: every
   day a batch of 4 is planned from 12 simulated candidates and becomes skills; the skills of 4
   categories are used (about 9 tasks a month each), the others almost never, and one more
   category becomes as popular at day 90; every day `ga skills feedback`'s rule (bounded under
   `demand`) judges the skills whose 30 days are over. Printed per seed and against the goals:
   share of each batch in the used categories (>= 65 %), uses per new skill in its first 30 days
   (>= 1.5x s6), weights within [0.1, 0.5] on every day, share of batches for the newly popular
   category in the 30 days after the change (>= 15 %), and every batch covering min(4, available)
   categories.

    python bench/planner.py                         # ~1-2 minutes on 2 cores
    python bench/planner.py --rules-only --seeds 8  # section 3 alone
"""
from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from configs.settings import PlannerSettings  # noqa: E402
from skilltree.adapt import Band, feedback  # noqa: E402
from skilltree.plan import score_and_select  # noqa: E402
from skilltree.scoring import Candidate, Judgement, TreeStats, score_task  # noqa: E402
from skilltree.selection import categories_covered, select_batch, top_k  # noqa: E402
from skilltree.summary import summary_for_prompt  # noqa: E402
from skilltree.synthetic import synthetic_candidates, synthetic_tree, synthetic_usage  # noqa: E402
from skilltree.tree import Category, Skill, SkillTree, parse  # noqa: E402
from skilltree.vectors import DIMENSIONS, Weights  # noqa: E402

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
        parse_t, _ = timed(lambda text=text: parse(text), 20)
        summary_t, _ = timed(lambda tree=tree, usage=usage: summary_for_prompt(tree, 3000, usage), 20)
        plan_t, plan_max = timed(lambda tree=tree, usage=usage, small=small:
                                 score_and_select(tree, usage, *small, batch_size=4, now=NOW), 20)
        plan100_t, _ = timed(lambda tree=tree, usage=usage, large=large:
                             score_and_select(tree, usage, *large, batch_size=4, now=NOW), 20)
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
            scored = [score_task(c, j, stats, tree.weights) for c, j in zip(cands, judged, strict=True)]
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
NEW = ("music", "legal")  # categories the model proposes that the tree does not have yet
HOT_LATER, HOT_DAY = "email", 90  # a category nobody used becomes as popular as the used ones
RATE_USED, RATE_UNUSED = 0.3, 0.01  # distinct tasks a day using one skill
RULES = ("s6", "demand")


def _candidates(tree: SkillTree, rng: random.Random, day: int) -> tuple[list[Candidate], list[Judgement]]:
    cands, judged = [], []
    for n in range(12):
        category = rng.choice(ALL + NEW)
        existing = [s.id for s in tree.skills.values() if s.category == category]
        target = rng.choice(existing) if existing and rng.random() < 0.5 else f"new-{day}-{n}"
        cands.append(Candidate(title=f"day {day} task {n} {category}", category=category, target_skill=target,
                               description="simulated"))
        judged.append(Judgement(utility=rng.randint(3, 10), innovation=rng.randint(2, 10)))
    return cands, judged


@dataclass
class Run:
    """What one simulated rule did over the days."""

    rule: str
    weights: list[Weights] = field(default_factory=list)       # after every day
    share_used: list[float] = field(default_factory=list)      # per batch: share in the then-used categories
    hot_share: list[float] = field(default_factory=list)       # per batch in the 30 days after HOT_DAY
    hot_any: list[bool] = field(default_factory=list)          # the batch has at least one such task
    first_30: list[int] = field(default_factory=list)          # uses of each new skill in its first 30 days
    cats_ok: int = 0                                           # batches covering >= min(4, available)
    batches: int = 0
    min_cats: int = 99
    over: int = 0
    under: int = 0


def used_categories(day: int) -> tuple[str, ...]:
    return USED + ((HOT_LATER,) if day >= HOT_DAY else ())


def simulate(rule: str, seed: int, days: int = 180) -> Run:
    """Every day a batch of 4 is planned from 12 simulated candidates and becomes 4 skills; tasks use
    skills of the used categories ~9 times a month, the others ~0.3 times; the 30-day rule runs daily."""
    rng = random.Random(seed)
    params = PlannerSettings(rule=rule)
    band = Band.around_initial(params.weight_band, params.weight_min, params.weight_max) if rule == "demand" else None
    start = NOW - timedelta(days=days)
    tree = SkillTree(categories={c: Category(name=c) for c in ALL})
    for n, category in enumerate(ALL * 2):
        tree = tree.add(Skill(id=f"seed-{n}", name=f"seed {n}", category=category, created=start - timedelta(days=40),
                              sop=f"L3/{category}/seed-{n}.md"))
    spread = {sid: 1.0 for sid in tree.skills}
    uses: dict[str, list[float]] = {sid: [] for sid in tree.skills}  # when distinct tasks used it (day numbers)
    run = Run(rule)
    for day in range(days):
        today = start + timedelta(days=day)
        popular = used_categories(day)
        total = {sid: len(t) for sid, t in uses.items()}
        recent = {sid: sum(1 for x in t if x >= day - params.window_days) for sid, t in uses.items()}
        trend = {sid: sum(1 for x in t if x >= day - params.trend_days) for sid, t in uses.items()}
        plan = score_and_select(tree, total, *_candidates(tree, rng, day), batch_size=4, now=today, planner=params,
                          recent=recent, trend=trend)
        available = len({c.category for c in plan.candidates})
        run.batches += 1
        run.cats_ok += plan.categories_covered >= min(4, available)
        run.min_cats = min(run.min_cats, plan.categories_covered)
        run.share_used.append(sum(s.category in popular for s in plan.selected) / max(1, len(plan.selected)))
        if HOT_DAY <= day < HOT_DAY + 30:
            run.hot_share.append(sum(s.category == HOT_LATER for s in plan.selected) / max(1, len(plan.selected)))
            run.hot_any.append(any(s.category == HOT_LATER for s in plan.selected))
        for n, item in enumerate(plan.selected):
            sid = f"d{day}-{n}"
            tree = tree.add(Skill(id=sid, name=item.title, category=item.category, created=today, sop=f"L3/{sid}.md",
                                  predicted=item.score, score_vector=item.vector, verified=True))
            spread[sid] = rng.lognormvariate(0, 0.5)
            uses[sid] = []
        for sid, factor in spread.items():  # Poisson arrivals of distinct tasks today
            lam = (RATE_USED if tree.skills[sid].category in popular else RATE_UNUSED) * factor
            uses[sid] += [day + rng.random() for _ in range(_poisson(rng, lam))]

        def used_in_window(skill: Skill) -> int:
            born = (skill.created - start).days
            return sum(1 for t in uses[skill.id] if born <= t < born + 30)

        outcome = feedback(tree, used_in_window, today, band)
        for skill, verdict in outcome.judged:
            if skill.id.startswith("d"):
                run.first_30.append(verdict.used)
            run.over += verdict.rule == "over"
            run.under += verdict.rule == "under"
        tree = outcome.tree
        run.weights.append(tree.weights)
    return run


def compare_rules(seeds: int, days: int = 180) -> None:
    print(f"3. Rules side by side over {seeds} seeds, {days} simulated days each: a batch of 4 a day from 12 candidates "
          f"(categories {', '.join(ALL)} and new {', '.join(NEW)}); skills of {', '.join(USED)} are used ~9 times a month, "
          f"the others ~0.3; from day {HOT_DAY} {HOT_LATER} is as popular as the used ones; the 30-day rule runs daily")
    runs = {rule: [simulate(rule, seed, days) for seed in range(1, seeds + 1)] for rule in RULES}
    header = (f"{'rule':>7} {'seed':>4} {'in used':>8} {'uses/new skill 30d':>19} {'weight min':>11} {'weight max':>11} "
              f"{'email d90-120':>14} {'cats>=min(4,avail)':>19} {'min cats':>9} {'over':>5} {'under':>6}")
    print(header)
    summary: dict[str, dict[str, float]] = {}
    for rule, items in runs.items():
        for seed, run in enumerate(items, 1):
            lows = [min(w.values()) for w in run.weights]
            highs = [max(w.values()) for w in run.weights]
            print(f"{rule:>7} {seed:>4} {statistics.mean(run.share_used) * 100:>7.1f}% {statistics.mean(run.first_30):>19.2f} "
                  f"{min(lows):>11.3f} {max(highs):>11.3f} {statistics.mean(run.hot_share) * 100:>13.1f}% "
                  f"{run.cats_ok:>11}/{run.batches:<7} {run.min_cats:>9} {run.over:>5} {run.under:>6}")
        summary[rule] = {
            "used": statistics.mean(statistics.mean(r.share_used) for r in items),
            "per_skill": statistics.mean(statistics.mean(r.first_30) for r in items),
            "low": min(min(min(w.values()) for w in r.weights) for r in items),
            "high": max(max(max(w.values()) for w in r.weights) for r in items),
            "hot": statistics.mean(statistics.mean(r.hot_share) for r in items),
            "hot_min": min(statistics.mean(r.hot_share) for r in items),
            "hot_any": statistics.mean(statistics.mean(r.hot_any) for r in items),
            "cats": all(r.cats_ok == r.batches for r in items),
        }
        per_dim = {d: (min(getattr(w, d) for r in items for w in r.weights), max(getattr(w, d) for r in items for w in r.weights))
                   for d in DIMENSIONS}
        print(f"{rule:>7} weight ranges over {days} days: " + ", ".join(f"{d} {lo:.3f}-{hi:.3f}" for d, (lo, hi) in per_dim.items()))
    s6, demand = summary["s6"], summary["demand"]
    print()
    print(f"{'measure (mean over seeds)':<44} {'s6':>9} {'demand':>9} {'ratio':>7} {'goal':>22}  met")
    rows = [
        ("batch share in used categories", f"{s6['used'] * 100:.1f}%", f"{demand['used'] * 100:.1f}%",
         demand["used"] / s6["used"], ">= 65 %", demand["used"] >= 0.65),
        ("uses per new skill in its first 30 days", f"{s6['per_skill']:.2f}", f"{demand['per_skill']:.2f}",
         demand["per_skill"] / s6["per_skill"], ">= 1.5x s6", demand["per_skill"] >= 1.5 * s6["per_skill"]),
        ("lowest weight, any day, any seed", f"{s6['low']:.3f}", f"{demand['low']:.3f}", None, ">= 0.1", demand["low"] >= 0.1),
        ("highest weight, any day, any seed", f"{s6['high']:.3f}", f"{demand['high']:.3f}", None, "<= 0.5", demand["high"] <= 0.5),
        (f"share of batch tasks in {HOT_LATER}, days {HOT_DAY}-{HOT_DAY + 30}", f"{s6['hot'] * 100:.1f}%", f"{demand['hot'] * 100:.1f}%",
         demand["hot"] / s6["hot"] if s6["hot"] else None, ">= 15 %", demand["hot"] >= 0.15),
        ("  same, worst seed", f"{s6['hot_min'] * 100:.1f}%", f"{demand['hot_min'] * 100:.1f}%", None, ">= 15 %",
         demand["hot_min"] >= 0.15),
        (f"  batches with any {HOT_LATER} task, same days", f"{s6['hot_any'] * 100:.1f}%", f"{demand['hot_any'] * 100:.1f}%",
         demand["hot_any"] / s6["hot_any"] if s6["hot_any"] else None, "(looser reading)", demand["hot_any"] >= 0.15),
        ("every batch covers min(4, available) categories", str(s6["cats"]), str(demand["cats"]), None, "always", demand["cats"]),
    ]
    for name, a, b, ratio, goal, met in rows:
        shown = f"{ratio:.2f}x" if ratio is not None else "-"
        print(f"{name:<44} {a:>9} {b:>9} {shown:>7} {goal:>22}  {'yes' if met else 'NO'}")
    print()


def _poisson(rng: random.Random, lam: float) -> int:
    threshold, k, p = math.exp(-lam), 0, 1.0
    while True:
        p *= rng.random()
        if p <= threshold:
            return k
        k += 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=8, help="seeds for the rule comparison (default 8)")
    parser.add_argument("--days", type=int, default=180)
    parser.add_argument("--rules-only", action="store_true", help="only the rule comparison (section 3)")
    args = parser.parse_args()
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores\n")
    if not args.rules_only:
        planning_time()
        coverage()
    compare_rules(args.seeds, args.days)
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
