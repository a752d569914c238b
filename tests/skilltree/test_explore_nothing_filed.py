"""Issue 35: `ga explore --once` that files no skill, because every task failed (no report.md) or stayed unverified,
ends `no-skill-filed` and exits 1, where it used to say `consolidated` and exit 0. The offline example, whose
self-checks are computing scripts ga re-runs, still files verified skills and exits 0
(tests/skilltree/test_explore_cycle.py). A task that succeeded on a computing run and wrote no report.md gets its
report from ga, and files a skill only when that run's script, re-run alone, does something."""
from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.ga_support import run_ga

EXAMPLE = Path(__file__).resolve().parents[2] / "configs" / "examples" / "scripts" / "explore.yaml"


def planner_and(workers: list[dict], folder: Path) -> Path:
    """The example's planner (propose, judge) with these exploration workers."""
    script = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    planner = [t for t in script["tasks"] if not t["match"].startswith("Explore:")]
    path = folder / "explore.yaml"
    path.write_text(yaml.safe_dump({**script, "tasks": planner + workers}, sort_keys=False), encoding="utf-8")
    return path


def explore_once(tmp_path: Path, model: Path) -> tuple[int, dict, str]:
    done = run_ga("explore", "--once", "--model", f"scripted:{model}", "--out", str(tmp_path / "runs"), "--json",
                  cwd=tmp_path, env={"OPENAI_API_KEY": None, "GA_MODEL": None})
    return done.returncode, json.loads(done.stdout[done.stdout.index("{"):]), done.stderr


def test_a_cycle_whose_tasks_all_fail_exits_1(tmp_path: Path) -> None:
    model = planner_and([{"match": "Explore: ", "turns": [{"content": "I ran out of time."}]}], tmp_path)
    code, printed, stderr = explore_once(tmp_path, model)
    assert code == 1, stderr[-2000:]
    assert printed["status"] == "no-skill-filed"
    assert printed["outcomes"] and {o["outcome"] for o in printed["outcomes"]} == {"failed"}
    assert all("no report.md" in o["problems"][0] for o in printed["outcomes"])


def test_a_cycle_that_keeps_only_unverified_reports_exits_1(tmp_path: Path) -> None:
    """A report whose only script says something (echo) is kept as a report, never as a skill."""
    report = ("---\ntitle: T\ncategory: text\nskill: t\ndescription: d\nverified: true\nartifacts: [check.sh]\n---\n"
              "## Verification\nIt printed ok.\n")
    turns = [{"tool_calls": [{"name": "file_write", "arguments": {"path": "check.sh", "content": "echo ok\n"}}]},
             {"tool_calls": [{"name": "code_run", "arguments": {"type": "bash", "script": "wc -c check.sh"}}]},
             {"tool_calls": [{"name": "file_write", "arguments": {"path": "report.md", "content": report}}]},
             {"content": "Verified."}]
    model = planner_and([{"match": "Explore: ", "turns": turns}], tmp_path)
    code, printed, stderr = explore_once(tmp_path, model)
    assert code == 1, stderr[-2000:]
    assert printed["status"] == "no-skill-filed" and {o["outcome"] for o in printed["outcomes"]} == {"report"}
    assert all(any("only prints what it spells out" in p for p in o["problems"]) for o in printed["outcomes"])


def test_a_task_that_ran_a_computing_script_and_wrote_no_report_files_a_verified_skill(tmp_path: Path) -> None:
    script = "total = sum(range(1, 101))\nprint(total)"
    turns = [{"tool_calls": [{"name": "code_run", "arguments": {"type": "python", "script": script}}]},
             {"content": "5050"}]
    model = planner_and([{"match": "Explore: ", "turns": turns}], tmp_path)
    code, printed, stderr = explore_once(tmp_path, model)
    assert code == 0, stderr[-2000:]
    # every planned task ran the same script: the first files the skill, the others add their evidence to it
    assert printed["status"] == "consolidated"
    assert [o["outcome"] for o in printed["outcomes"]].count("skill") == 1
    assert {o["outcome"] for o in printed["outcomes"]} == {"skill", "evidence"}
    for outcome in printed["outcomes"]:
        assert "no report.md: ga wrote the report from the task's last run" in outcome["checks"]
        assert "re-ran ran.py: exit 0" in outcome["checks"]


def test_a_run_that_needs_the_task_s_files_is_no_skill_without_a_report(tmp_path: Path) -> None:
    """The script read a file the task wrote: alone, in a fresh directory, it fails, so no skill is filed."""
    turns = [{"tool_calls": [{"name": "file_write", "arguments": {"path": "n.txt", "content": "41\n"}}]},
             {"tool_calls": [{"name": "code_run", "arguments": {"type": "python",
                                                                "script": "print(int(open('n.txt').read()) + 1)"}}]},
             {"content": "42"}]
    model = planner_and([{"match": "Explore: ", "turns": turns}], tmp_path)
    code, printed, stderr = explore_once(tmp_path, model)
    assert code == 1, stderr[-2000:]
    assert printed["status"] == "no-skill-filed" and {o["outcome"] for o in printed["outcomes"]} == {"report"}
    assert all(any(p.startswith("re-ran ran.py: exit 1") for p in o["problems"]) for o in printed["outcomes"])
