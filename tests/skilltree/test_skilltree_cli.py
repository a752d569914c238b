"""`ga skills show | feedback | plan` through the real CLI (subprocess) on a real store."""
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import yaml

from memory_shared import MemoryStore
from memory_shared.stats import AccessLog
from skilltree.commit import commit_tree
from skilltree.plan import read_plan
from skilltree.tree import Skill, SkillTree, load
from skilltree.vectors import ScoreVector
from tests.ga_support import run_ga

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def seeded_store(root: Path) -> MemoryStore:
    store = MemoryStore(root, create=True)
    tree = SkillTree()
    for sid, category, predicted, vector in [("scrape-tables", "web", 8.7, (1, 1, 9, 2)),
                                             ("merge-pdfs", "documents", 4.1, (9, 1, 2, 2))]:
        tree = tree.add(Skill(id=sid, name=sid.replace("-", " "), category=category, created=T0, verified=True,
                              sop=f"L3/{category}/{sid}.md", predicted=predicted,
                              score_vector=ScoreVector.model_validate(list(vector))))
    commit_tree(store, lambda _: tree, message="two skills", author="test")
    log = AccessLog(root)
    log.record("L3/web/scrape-tables.md", "t-1", T0 + timedelta(days=2))
    for n in range(6):
        log.record("L3/documents/merge-pdfs.md", f"t-{n}", T0 + timedelta(days=3 + n))
    return store


def test_show_prints_the_tree_and_json(ga_home):
    seeded_store(ga_home / "memory")
    shown = run_ga("skills", "show")
    assert shown.returncode == 0, shown.stderr
    assert "2 in 2 categories" in shown.stdout and "scrape tables (scrape-tables) · 1 uses" in shown.stdout
    assert "merge pdfs (merge-pdfs) · 6 uses" in shown.stdout and "weight history" in shown.stdout
    data = json.loads(run_ga("skills", "show", "--json").stdout)
    assert data["usage"] == {"scrape-tables": 1, "merge-pdfs": 6}
    assert data["weights"] == {"breadth": 0.3, "depth": 0.2, "utility": 0.3, "innovation": 0.2}
    assert set(data["categories"]) == {"web", "documents"} and data["generation"] == 1


def test_feedback_commits_adapted_weights_once(ga_home):
    store = seeded_store(ga_home / "memory")
    early = run_ga("skills", "feedback", "--now", "2026-01-20T00:00:00+00:00")
    assert early.returncode == 0 and "no skill is due" in early.stdout
    dry = json.loads(run_ga("skills", "feedback", "--dry-run", "--json", "--now", "2026-02-15").stdout)
    assert dry["generation"] is None and len(dry["judged"]) == 2
    assert store.snapshot().generation == 1
    done = run_ga("skills", "feedback", "--now", "2026-02-15")
    assert done.returncode == 0, done.stderr
    assert "committed generation 2" in done.stdout and "scrape-tables" in done.stdout
    tree = load(store.snapshot().path)
    # scrape-tables: predicted 8.7, used once -> utility x0.9; merge-pdfs: 4.1, used 6 -> breadth x1.1
    total = 0.33 + 0.2 + 0.27 + 0.2
    assert [round(v, 6) for v in tree.weights.values()] == [round(v / total, 6) for v in (0.33, 0.2, 0.27, 0.2)]
    assert len(tree.weight_history) == 1
    again = run_ga("skills", "feedback", "--now", "2026-03-15")
    assert "no skill is due" in again.stdout and store.snapshot().generation == 2


def test_plan_with_the_scripted_model(tmp_path, ga_home):
    seeded_store(ga_home / "memory")
    tasks = [{"title": f"Task {c}", "category": c, "target_skill": "new", "description": "try and verify"}
             for c in ("web", "web", "documents", "data", "shell", "email")]
    tasks[1]["title"] = "Task web 2"
    judged = [{"index": n, "utility": 9 if n <= 2 else 5, "innovation": 5} for n in range(1, 7)]
    script = tmp_path / "planner.yaml"
    script.write_text(yaml.safe_dump({"tasks": [
        {"match": "Propose exactly", "turns": [{"content": json.dumps(tasks)}]},
        {"match": "You judge candidate", "turns": [{"content": json.dumps(judged)}]}]}))
    run_dir = tmp_path / "run"
    result = run_ga("skills", "plan", "--model", f"scripted:{script}", "--run-dir", str(run_dir), "--candidates", "6")
    assert result.returncode == 0, result.stderr
    assert "4 of 6 candidates, 4 categories" in result.stdout
    plan = read_plan(run_dir / "plan.json")
    assert plan.categories_covered == 4 and plan.model_calls == 2 and plan.generation == 1
    bad = run_ga("skills", "plan", "--model", "no-such-model", "--run-dir", str(run_dir))
    assert bad.returncode == 2 and "unknown model 'no-such-model'" in bad.stderr


def test_plan_is_readable_at_80_columns(tmp_path, ga_home):
    seeded_store(ga_home / "memory")
    titles = [f"Extract every table of a {c} source into clean CSV files" for c in ("web", "documents", "data", "shell")]
    tasks = [{"title": t, "category": c, "target_skill": "new", "description": "try and verify"}
             for t, c in zip(titles, ("web", "documents", "data", "shell"), strict=True)]
    script = tmp_path / "planner.yaml"
    script.write_text(yaml.safe_dump({"tasks": [
        {"match": "Propose exactly", "turns": [{"content": json.dumps(tasks)}]},
        {"match": "You judge candidate", "turns": [{"content": json.dumps(
            [{"index": n, "utility": 7, "innovation": 5} for n in range(1, 5)])}]}]}))
    shown = run_ga("skills", "plan", "--model", f"scripted:{script}", "--run-dir", str(tmp_path / "run"),
                   "--candidates", "4", env={"COLUMNS": "80"})
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert max(len(line) for line in lines if not line.startswith("wrote ")) <= 80  # a path is never wrapped
    words = set(shown.stdout.split())
    assert all(word in words for title in titles for word in title.split()), shown.stdout  # wrapped, never cut
    assert {"web", "documents", "data", "shell"} <= words
    assert sum(1 for line in lines if line.startswith("✔")) == 4  # one row a candidate begins, score figures on it
