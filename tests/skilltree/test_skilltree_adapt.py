"""The §6 adaptation rule on synthetic 30-day usage recorded in a real access log and store."""
from datetime import datetime, timedelta, timezone

import pytest

from memory_shared import MemoryStore
from memory_shared.stats import AccessLog
from skilltree.adapt import adapt_weights, due, feedback, rule_for
from skilltree.commit import commit_tree
from skilltree.operations import run_feedback
from skilltree.tree import Skill, SkillTree, load
from skilltree.vectors import ScoreVector, Weights

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
DAY = timedelta(days=1)
INITIAL = Weights()


def skill(sid: str, predicted: float, vector: tuple, created: datetime = T0) -> Skill:
    return Skill(id=sid, name=sid, category="web", created=created, sop=f"L3/web/{sid}.md", predicted=predicted,
                 score_vector=ScoreVector.model_validate(list(vector)), verified=True)


@pytest.mark.parametrize("predicted, used, rule", [
    (8.5, 0, "over"), (8.01, 2, "over"), (8.0, 0, None), (8.5, 3, None),
    (4.9, 6, "under"), (4.99, 20, "under"), (5.0, 9, None), (4.0, 5, None),
    (6.5, 0, None), (6.5, 50, None),
])
def test_rule_thresholds(predicted, used, rule):
    assert rule_for(predicted, used) == rule


@pytest.mark.parametrize("predicted, used, vector, expected", [
    # over-predicted, dominant utility: utility x0.9 then renormalized (sum 0.97)
    (8.6, 1, (2, 1, 9, 5), (0.3 / 0.97, 0.2 / 0.97, 0.27 / 0.97, 0.2 / 0.97)),
    # under-predicted, dominant breadth: breadth x1.1 then renormalized (sum 1.03)
    (4.2, 7, (10, 0, 3, 2), (0.33 / 1.03, 0.2 / 1.03, 0.3 / 1.03, 0.2 / 1.03)),
    # under-predicted, dominant depth
    (3.0, 6, (0, 8, 2, 2), (0.3 / 1.02, 0.22 / 1.02, 0.3 / 1.02, 0.2 / 1.02)),
    # neither rule: unchanged
    (7.0, 1, (1, 1, 9, 1), (0.3, 0.2, 0.3, 0.2)),
])
def test_adapt_weights(predicted, used, vector, expected):
    weights, _ = adapt_weights(INITIAL, ScoreVector.model_validate(list(vector)), predicted, used)
    assert weights.values() == pytest.approx(expected)
    assert sum(weights.values()) == pytest.approx(1.0)


def test_only_skills_past_30_days_and_not_yet_judged_are_due():
    tree = SkillTree().add(skill("old", 9, (1, 1, 9, 1), T0)).add(skill("young", 9, (1, 1, 9, 1), T0 + 2 * DAY))
    tree = tree.add(Skill(id="hand", name="hand", category="web", created=T0))  # no prediction: never judged
    assert [s.id for s in due(tree, T0 + 30 * DAY)] == ["old"]
    assert [s.id for s in due(tree, T0 + 29 * DAY)] == []
    assert [s.id for s in due(tree, T0 + 40 * DAY)] == ["old", "young"]


def test_order_of_judged_skills_does_not_change_the_result():
    a, b = skill("a", 9, (1, 1, 9, 1)), skill("b", 3, (10, 1, 1, 1))
    used = {"a": 0, "b": 8}
    one = feedback(SkillTree().add(a).add(b), lambda s: used[s.id], T0 + 31 * DAY)
    two = feedback(SkillTree().add(b).add(a), lambda s: used[s.id], T0 + 31 * DAY)
    assert one.tree.weights.values() == pytest.approx(two.tree.weights.values())
    expected = Weights(breadth=0.33, depth=0.2, utility=0.27, innovation=0.2).normalized()
    assert one.tree.weights.values() == pytest.approx(expected.values())


def _record_uses(log: AccessLog, sid: str, tasks: int, start: datetime, reads_per_task: int = 1) -> None:
    for n in range(tasks):
        for _ in range(reads_per_task):
            log.record(f"L3/web/{sid}.md", f"{sid}-task-{n}", start + n * DAY / 2)


def test_feedback_on_synthetic_30_day_usage_commits_once_and_keeps_history(tmp_path):
    root = tmp_path / "mem"
    store = MemoryStore(root, create=True)
    tree = SkillTree()
    tree = tree.add(skill("hyped", 8.6, (2, 1, 9, 5)))           # predicted high, used twice -> utility x0.9
    tree = tree.add(skill("sleeper", 4.2, (10, 0, 3, 2)))        # predicted low, used 7 times -> breadth x1.1
    tree = tree.add(skill("fine", 6.0, (1, 1, 1, 9)))            # neither rule
    tree = tree.add(skill("late-user", 8.9, (1, 1, 1, 9)))       # uses only after day 30 do not count
    tree = tree.add(skill("recent", 9.0, (1, 1, 9, 1), T0 + 20 * DAY))  # not due yet at day 31
    commit_tree(store, lambda _: tree, message="seed test skills", author="test")
    log = AccessLog(root)
    _record_uses(log, "hyped", 2, T0 + DAY, reads_per_task=3)    # 3 reads by each task: still 2 uses
    _record_uses(log, "sleeper", 7, T0 + DAY)
    _record_uses(log, "fine", 4, T0 + DAY)
    _record_uses(log, "late-user", 9, T0 + 31 * DAY)

    now = T0 + 31 * DAY
    dry = run_feedback(root, now, dry_run=True)
    assert dry.generation is None and load(store.snapshot().path).weight_history == []

    result = run_feedback(root, now)
    assert result.generation == store.snapshot().generation
    saved = load(store.snapshot().path)
    assert sum(saved.weights.values()) == pytest.approx(1.0)
    verdicts = {sid: (s.feedback.used, s.feedback.rule, s.feedback.dimension) if s.feedback else None
                for sid, s in saved.skills.items()}
    assert verdicts == {"hyped": (2, "over", "utility"), "sleeper": (7, "under", "breadth"),
                        "fine": (4, None, None), "late-user": (0, "over", "innovation"), "recent": None}
    # late-user: 0 uses in its window, predicted 8.9, dominant innovation -> innovation x0.9 too
    expected = Weights(breadth=0.33, depth=0.2, utility=0.27, innovation=0.18).normalized()
    assert saved.weights.values() == pytest.approx(expected.values())
    [record] = saved.weight_history
    assert record.before == INITIAL and record.after == saved.weights
    assert [(a.skill, a.rule, a.factor) for a in record.adjustments] == [
        ("hyped", "over", 0.9), ("late-user", "over", 0.9), ("sleeper", "under", 1.1)]

    # a second run the same day judges nothing again: no commit, no new history
    head = store.snapshot().generation
    assert run_feedback(root, now).generation is None and store.snapshot().generation == head

    # "recent" comes due on day 50 with 0 uses in its window: one more record
    run_feedback(root, T0 + 50 * DAY)
    later = load(store.snapshot().path)
    assert len(later.weight_history) == 2 and later.weight_history[1].before == saved.weights
    assert later.skills["recent"].feedback.rule == "over"
    assert sum(later.weights.values()) == pytest.approx(1.0)
