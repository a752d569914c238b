"""The skill tree model: tolerant loading, add, save through a real store commit, usage, summary."""
import json
from datetime import datetime, timedelta, timezone

import pytest

from memory_shared import MemoryStore
from memory_shared.stats import AccessLog
from skilltree.commit import commit_tree
from skilltree.summary import summary_for_prompt
from skilltree.tree import TREE_FILE, Skill, SkillTree, SkillTreeError, load, parse, save
from skilltree.usage import usage, usage_timeline

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def skill(sid: str, category: str = "web", **extra) -> Skill:
    return Skill(id=sid, name=sid.replace("-", " "), category=category, created=T0,
                 sop=f"L3/{category}/{sid}.md", **extra)


@pytest.mark.parametrize("text", [
    '{"version": 1, "categories": {}, "skills": {}, "weights": {"breadth": 0.3, "depth": 0.2, "utility": 0.3, "innovation": 0.2}}',
    '{"version": 1, "categories": {}, "skills": {}, "weights": [0.3, 0.2, 0.3, 0.2]}',
    '{"categories": [], "skills": []}',
    '{"weights": {"current": {"breadth": 0.3, "depth": 0.2, "utility": 0.3, "innovation": 0.2}, "history": []}}',
    "",
])
def test_seed_shapes_load_as_an_empty_tree_with_initial_weights(text):
    tree = parse(text)
    assert tree.skills == {} and tree.categories == {}
    assert tree.weights.values() == (0.3, 0.2, 0.3, 0.2)


def test_tolerant_skill_forms_and_unknown_keys_survive_a_round_trip():
    text = json.dumps({"categories": ["docs"], "skills": {"pdf": {"name": "PDF", "category": "files", "created": "2026-01-01"}},
                       "owner_note": "kept"})
    tree = parse(text)
    assert tree.skills["pdf"].id == "pdf"
    assert set(tree.categories) == {"docs", "files"}  # a skill's category is created when missing
    again = parse(tree.to_json())
    assert again == tree and json.loads(again.to_json())["owner_note"] == "kept"


@pytest.mark.parametrize("text, expected", [
    ('{"skills": {', "skilltree.json:1: not valid JSON"),
    ('{"skills": {"a": {"name": "A"}}}', "'skills.a.category'"),
    ('{"weights": [1, 2]}', "'weights'"),
    ('{"weights": [0, 0, 0, 0]}', "at least one weight must be positive"),
])
def test_broken_files_are_one_line_errors(text, expected):
    with pytest.raises(SkillTreeError) as info:
        parse(text, "skilltree.json")
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_add_returns_a_new_tree_and_refuses_duplicates():
    empty = SkillTree()
    one = empty.add(skill("scrape"))
    assert empty.skills == {} and one.skills["scrape"].category == "web" and "web" in one.categories
    with pytest.raises(ValueError, match="already exists"):
        one.add(skill("scrape", "other"))
    assert one.find("SCRAPE") is not None and one.find("scrape") is one.skills["scrape"] and one.find("nope") is None
    assert one.unique_id("Scrape") == "scrape-2"


def test_save_in_a_store_transaction_and_load_from_the_snapshot(tmp_path):
    store = MemoryStore(tmp_path / "mem", create=True)
    assert load(store.snapshot().path).skills == {}  # the store's seed
    tree = load(store.snapshot().path).add(skill("scrape"))
    with store.transaction(message="add skill scrape", author="test") as txn:
        save(txn, tree)
    snap = store.snapshot()
    assert load(snap.path) == tree
    assert load(tmp_path / "no-generation-here") == SkillTree()


def test_commit_tree_reapplies_the_update_on_a_concurrent_change(tmp_path):
    store = MemoryStore(tmp_path / "mem", create=True)
    calls = []

    def add_b(tree):
        calls.append(sorted(tree.skills))
        if len(calls) == 1:  # someone else commits a skill while we are working
            with store.transaction(message="add a", author="other") as other:
                other.write(TREE_FILE, tree.add(skill("a")).to_json())
        return tree.add(skill("b"))

    generation = commit_tree(store, add_b, message="add b", author="test")
    assert calls == [[], ["a"]]
    assert sorted(load(store.snapshot().path).skills) == ["a", "b"]
    assert generation == store.snapshot().generation
    assert commit_tree(store, lambda tree: None, message="noop", author="test") is None


def test_usage_counts_distinct_tasks_reading_the_sop(tmp_path):
    tree = SkillTree().add(skill("scrape")).add(skill("login")).add(skill("nosop").model_copy(update={"sop": None}))
    log = AccessLog(tmp_path)
    day = timedelta(days=1)
    log.record("L3/web/scrape.md", "t1", T0 + day)
    log.record("L3/web/scrape.md", "t1", T0 + day)        # same task twice: one use
    log.record("L3/web/scrape.md", "t2", T0 + 2 * day)
    log.record("L3/web/scrape.md", "t3", T0 + 9 * day)    # outside the window below
    log.record("L3/web/login.md", "t1", T0 + 3 * day)
    log.record("L2/facts.md", "t1", T0 + 3 * day)         # not a skill
    assert usage(tree, log, T0, T0 + 5 * day) == {"scrape": 2, "login": 1, "nosop": 0}
    assert usage(tree, log) == {"scrape": 3, "login": 1, "nosop": 0}
    assert usage(SkillTree(), log) == {}
    weekly = usage_timeline(tree, log, [T0, T0 + 7 * day, T0 + 14 * day])
    assert weekly == [{"scrape": 2, "login": 1, "nosop": 0}, {"scrape": 1, "login": 0, "nosop": 0}]


def test_summary_stays_within_budget_and_keeps_the_most_used():
    tree = SkillTree()
    for n in range(200):
        tree = tree.add(skill(f"s{n:03d}", f"cat{n % 9}"))
    used = {"s100": 40}
    text = summary_for_prompt(tree, 700, used)
    assert len(text) <= 700
    assert "s100 x40" in text and "200 skills in 9 categories" in text and "more" in text
    assert len(summary_for_prompt(tree, 120)) <= 120
    full = summary_for_prompt(tree, 100_000)
    assert "more" not in full and full.count("\n") == 9
    assert "no categories yet" in summary_for_prompt(SkillTree(), 500)
