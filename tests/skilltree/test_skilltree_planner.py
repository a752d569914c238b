"""The planner against the scripted model server over real HTTP: candidates, judge, retries, plan.json."""
import json
from datetime import datetime, timezone

import pytest

from skilltree.plan import read_plan
from skilltree.planner import parse_json_array, plan_exploration
from skilltree.tree import Category, Skill, SkillTree
from worker.model import LLMClient
from worker.modelconfig import ModelConfig
from worker.scripted import ScriptedServer

NOW = datetime(2026, 5, 1, tzinfo=timezone.utc)
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def tree() -> SkillTree:
    skills = {f"web-{n}": Skill(id=f"web-{n}", name=f"web {n}", category="web", created=T0, sop=f"L3/web/web-{n}.md")
              for n in range(5)}
    skills["pdf-tables"] = Skill(id="pdf-tables", name="PDF tables", category="documents", created=T0)
    return SkillTree(categories={"web": Category(name="web"), "documents": Category(name="documents")}, skills=skills)


def task(title, category, target="new-skill"):
    return {"title": title, "category": category, "target_skill": target, "description": f"do {title} and verify it"}


GOOD = [task("Scrape infinite scroll pages", "web", "web-0"), task("Fill web forms", "web"),
        task("Log in with TOTP", "web"), task("Merge PDFs", "documents", "pdf-tables"),
        task("Plot CSV data", "data"), task("Watch a folder", "shell")]


def client(server: ScriptedServer) -> LLMClient:
    return LLMClient(ModelConfig(name="test", base_url=server.base_url, model="scripted", request_timeout=5,
                                 max_retries=1, backoff_base=0.01, backoff_max=0.02))


def script(propose_turns, judge_turns):
    return {"tasks": [{"match": "Propose exactly", "turns": propose_turns},
                      {"match": "You judge candidate", "turns": judge_turns}]}


JUDGED = [{"index": n, "utility": u, "innovation": i}
          for n, (u, i) in enumerate([(9, 8), (9, 7), (8, 8), (6, 5), (5, 4), (4, 3)], 1)]


def test_plan_scores_every_candidate_and_covers_four_categories(tmp_path):
    turns = script([{"content": "Here you go:\n```json\n" + json.dumps(GOOD) + "\n```"}],
                   [{"content": json.dumps({"judgements": JUDGED})}])
    with ScriptedServer(turns) as server:
        result = plan_exploration(client(server), tree(), {"web-0": 3}, now=NOW, candidates=6, batch_size=4,
                                  run_dir=tmp_path)
        sent = list(server.requests)
    assert len(sent) == 2 and result.model_calls == 2 and result.tokens > 0
    assert "web (5): web-0 x3" in sent[0]["messages"][0]["content"]        # the tree summary went into the prompt
    assert "Scrape infinite scroll pages" in sent[1]["messages"][0]["content"]  # one judge call for the batch
    assert len(result.candidates) == 6 and result.dropped == []
    assert result.categories_covered == 4
    assert sorted(s.category for s in result.selected) == ["data", "documents", "shell", "web"]
    top_web = next(c for c in result.candidates if c.title == "Scrape infinite scroll pages")
    # web: 5 skills, mean (5 + 1) / 2 = 3 -> breadth 10 * max(0, 1 - 5/4) = 0; web-0 used 3 of max 3 -> depth 7.5
    assert (top_web.vector.breadth, top_web.vector.depth) == (0.0, 7.5)
    assert top_web.score == pytest.approx(0.3 * 0 + 0.2 * 7.5 + 0.3 * 9 + 0.2 * 8)
    saved = read_plan(tmp_path / "plan.json")
    assert saved == result
    assert all("vector" in c for c in json.loads((tmp_path / "plan.json").read_text())["candidates"])


def test_invalid_json_is_retried_once_then_used(tmp_path):
    turns = script([{"content": "I think you should learn PDFs."}, {"content": json.dumps(GOOD)}],
                   [{"content": json.dumps(JUDGED)}])
    with ScriptedServer(turns) as server:
        result = plan_exploration(client(server), tree(), {}, now=NOW, candidates=6, run_dir=tmp_path)
        sent = list(server.requests)
    assert len(sent) == 3
    retry = sent[1]["messages"]
    assert retry[1] == {"role": "assistant", "content": "I think you should learn PDFs."}
    assert "not a JSON array" in retry[2]["content"]
    assert len(result.candidates) == 6 and result.dropped == []


def test_invalid_twice_is_dropped_with_a_log_line(tmp_path, capsys):
    turns = script([{"content": "no json"}, {"content": "still no json ["}], [{"content": "[]"}])
    with ScriptedServer(turns) as server:
        result = plan_exploration(client(server), tree(), {}, now=NOW, candidates=6, run_dir=tmp_path)
        sent = list(server.requests)
    assert len(sent) == 2  # two proposals, no judge call for nothing
    assert result.candidates == [] and result.selected == []
    assert [d.stage for d in result.dropped] == ["propose"]
    captured = capsys.readouterr()
    assert "planner.dropped" in captured.out + captured.err
    assert read_plan(tmp_path / "plan.json").dropped[0].reason == "the reply is not a JSON array"


def test_invalid_items_and_judgements_are_dropped_after_one_retry(tmp_path):
    bad = GOOD[:4] + [{"title": "No category", "target_skill": "x", "description": "y"}, GOOD[0]]
    judged_bad = JUDGED[:2] + [{"index": 3, "utility": 11, "innovation": 5}, {"index": 4, "utility": "high"}]
    turns = script([{"content": json.dumps(bad)}, {"content": json.dumps(bad)}],
                   [{"content": json.dumps(judged_bad)}, {"content": json.dumps(judged_bad)}])
    with ScriptedServer(turns) as server:
        result = plan_exploration(client(server), tree(), {}, now=NOW, candidates=6, run_dir=tmp_path)
        sent = list(server.requests)
    assert len(sent) == 4
    reasons = [(d.stage, d.reason) for d in result.dropped]
    assert ("propose", "item 5: category: Field required") in reasons
    assert any(stage == "propose" and "duplicate title" in reason for stage, reason in reasons)
    assert any(stage == "judge" and "less than or equal to 10" in reason for stage, reason in reasons)
    assert sum(1 for stage, reason in reasons if stage == "judge" and "has no valid judgement" in reason) == 2
    # the two candidates left, both web: 0.3*9 + 0.2*8 = 4.3 ranks above 0.3*9 + 0.2*7 = 4.1
    assert [c.title for c in result.candidates] == ["Scrape infinite scroll pages", "Fill web forms"]


@pytest.mark.parametrize("content, expected", [
    ('[{"a": 1}]', [{"a": 1}]),
    ('{"tasks": [1, 2]}', [1, 2]),
    ("text\n```json\n[3]\n```\nmore", [3]),
    ("Sure! [4, 5] hope that helps", [4, 5]),
])
def test_parse_json_array(content, expected):
    assert parse_json_array(content) == expected


@pytest.mark.parametrize("content", ["", "{}", '{"a": [1], "b": [2]}', "[1, 2", "prose only"])
def test_parse_json_array_refuses(content):
    with pytest.raises(ValueError):
        parse_json_array(content)
