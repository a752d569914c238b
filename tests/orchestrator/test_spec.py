"""tasks.yaml expansion: defaults and overrides, matrix from inline items, CSV and JSONL, stable ids."""
from __future__ import annotations

import json
from pathlib import Path

from orchestrator import spec


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_defaults_overrides_and_paths_relative_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.md").write_text("alpha")
    (tmp_path / "script.yaml").write_text("tasks: [{match: '.*', turns: [{content: ok}]}]\n")
    plan = spec.load(_write(tmp_path / "t.yaml", """
version: 1
name: review
defaults: {model: "scripted:script.yaml", max_turns: 7, timeout: 30, tools: [file_read], limits: {max_tokens: 900}}
concurrency: 3
retries: 0
budget: {cost: 2.5}
memory: {commit: false}
tasks:
  - {id: one, prompt: "read a.md", inputs: [in/a.md]}
  - {id: two, prompt: "other", max_turns: 2, tools: [code_run], limits: {max_cost: 0.1}}
"""))
    one, two = plan.tasks
    assert plan.name == "review" and plan.concurrency == 3 and plan.retries == 0 and plan.budget_cost == 2.5
    assert plan.memory_commit is False
    assert one.model == f"scripted:{tmp_path / 'script.yaml'}" and one.inputs == [str((tmp_path / "in" / "a.md").resolve())]
    assert (one.max_turns, one.timeout, one.tools, one.max_tokens) == (7, 30, ["file_read"], 900)
    assert (two.max_turns, two.tools, two.max_cost, two.max_tokens) == (2, ["code_run"], 0.1, None)


def test_generated_ids_are_stable_and_independent_of_order(tmp_path: Path) -> None:
    first = spec.from_data({"tasks": [{"prompt": "Summarize the intro"}, {"prompt": "List the authors"}]})
    again = spec.from_data({"tasks": [{"prompt": "List the authors"}, {"prompt": "Summarize the intro"}]})
    assert {t.id for t in first.tasks} == {t.id for t in again.tasks}
    assert first.tasks[0].id.startswith("Summarize-the-intro-")
    same = spec.from_prompts(["same", "same"])
    assert len({t.id for t in same.tasks}) == 2 and same.tasks[1].id == same.tasks[0].id + "-2"


def test_matrix_from_inline_csv_and_jsonl(tmp_path: Path) -> None:
    (tmp_path / "rows.csv").write_text("city,country\nLyon,France\nOsaka,Japan\n")
    (tmp_path / "rows.jsonl").write_text(json.dumps({"n": 1}) + "\n\n" + json.dumps({"n": 2}) + "\n")
    plan = spec.load(_write(tmp_path / "t.yaml", """
version: 1
matrix:
  - {template: "Weather in {{city}}, {{ country }}", from: rows.csv, id: "w-{{city}}"}
  - {template: "Square {{n}}", from: rows.jsonl}
  - {template: "Say {{item}} (#{{index}})", items: [hi, bye], max_turns: 1}
"""))
    prompts = {t.id: t.prompt for t in plan.tasks}
    assert prompts["w-Lyon"] == "Weather in Lyon, France" and prompts["w-Osaka"] == "Weather in Osaka, Japan"
    assert sorted(p for p in prompts.values() if p.startswith("Square")) == ["Square 1", "Square 2"]
    assert sorted(p for p in prompts.values() if p.startswith("Say")) == ["Say bye (#1)", "Say hi (#0)"]
    assert [t.max_turns for t in plan.tasks if t.prompt.startswith("Say")] == [1, 1]


def test_fingerprint_follows_the_prompt_and_the_input_content(tmp_path: Path) -> None:
    data = tmp_path / "a.txt"
    data.write_text("one")
    make = lambda prompt: spec.from_data({"tasks": [{"id": "a", "prompt": prompt, "inputs": ["a.txt"]}]},
                                         base_dir=tmp_path).tasks[0].fingerprint()
    before = make("count")
    assert make("count") == before
    assert make("count again") != before
    data.write_text("two")
    assert make("count") != before


def test_several_problems_are_reported_one_line_each(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.yaml", "version: 1\nconcurrency: 0\nretries: x\ntasks:\n  - {prompt: ''}\n")
    try:
        spec.load(path)
    except spec.SpecError as exc:
        lines = str(exc).splitlines()
    assert len(lines) == 3
    assert lines[0].startswith(f"{path}:2: 'concurrency'") and lines[1].startswith(f"{path}:3: 'retries'")
    assert lines[2].startswith(f"{path}:5: 'tasks[0].prompt'")
