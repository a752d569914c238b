"""Synthetic skill trees, usage and candidates (seeded) for the benchmark, tests and demos."""
from __future__ import annotations

import math
import random
from datetime import datetime, timedelta

from skilltree.scoring import Candidate, Judgement
from skilltree.tree import Category, Skill, SkillTree
from skilltree.vectors import ScoreVector

TOPICS = ["web", "documents", "data", "shell", "email", "images", "finance", "calendar", "git", "audio",
          "video", "pdf", "spreadsheets", "databases", "networking", "security", "cloud", "chat", "maps", "search"]
VERBS = ["extract", "convert", "monitor", "summarize", "schedule", "clean", "merge", "scrape", "archive", "compare"]


def category_names(count: int) -> list[str]:
    return [TOPICS[n] if n < len(TOPICS) else f"{TOPICS[n % len(TOPICS)]}-{n // len(TOPICS)}" for n in range(count)]


def synthetic_tree(skills: int, categories: int = 0, *, seed: int = 0, now: datetime) -> SkillTree:
    """`skills` skills over `categories` categories (default ~sqrt(skills)), sizes skewed so a few
    categories are large and others small, created over the 120 days before `now`."""
    rng = random.Random(seed)
    names = category_names(categories or max(1, round(math.sqrt(skills))))
    weights = [1 / (n + 1) ** 0.8 for n in range(len(names))]
    tree_skills = {}
    for n in range(skills):
        category = rng.choices(names, weights)[0]
        sid = f"{rng.choice(VERBS)}-{category}-{n}"
        vector = ScoreVector(breadth=rng.uniform(0, 10), depth=rng.uniform(0, 10),
                             utility=rng.randint(1, 10), innovation=rng.randint(1, 10))
        tree_skills[sid] = Skill(id=sid, name=sid.replace("-", " "), category=category,
                                 created=now - timedelta(days=rng.uniform(0, 120)), sop=f"L3/{category}/{sid}.md",
                                 predicted=round(rng.uniform(2, 9.5), 2), score_vector=vector,
                                 verified=rng.random() < 0.85, description=f"{sid} (synthetic)")
    return SkillTree(categories={name: Category(name=name) for name in names}, skills=tree_skills)


def synthetic_usage(tree: SkillTree, *, seed: int = 0) -> dict[str, int]:
    """Heavy-tailed use counts: most skills rarely used, a few used a lot."""
    rng = random.Random(seed)
    return {sid: int(rng.paretovariate(1.2)) - 1 for sid in sorted(tree.skills)}


def synthetic_candidates(tree: SkillTree, count: int, *, seed: int = 0,
                         hot_share: float = 0.6) -> tuple[list[Candidate], list[Judgement]]:
    """Candidates as a model tends to propose them: `hot_share` of them in the largest category
    (the one the model knows best, judged a little higher), the rest spread, some in new categories."""
    rng = random.Random(seed)
    names = sorted(tree.categories, key=lambda c: (-len(tree.skills_in(c)), c)) or ["web"]
    hot = names[0]
    fresh = [f"new-{t}" for t in ("robotics", "music", "legal", "health")]
    skills = sorted(tree.skills)
    candidates, judgements = [], []
    for n in range(count):
        is_hot = rng.random() < hot_share
        category = hot if is_hot else rng.choice(names[1:] + fresh if len(names) > 1 else fresh)
        target = rng.choice(skills) if skills and rng.random() < 0.5 else f"new-skill-{n}"
        candidates.append(Candidate(title=f"{rng.choice(VERBS)} {category} task {n}", category=category,
                                    target_skill=target, description="synthetic candidate"))
        bonus = 2 if is_hot else 0
        judgements.append(Judgement(utility=min(10, rng.randint(3, 8) + bonus), innovation=min(10, rng.randint(2, 8) + bonus)))
    return candidates, judgements
