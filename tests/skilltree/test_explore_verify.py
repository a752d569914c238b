"""Collecting and verifying exploration reports (real files, real re-runs), the L1 pointer lines, and
consolidation into a real memory store: one commit per task, idempotent, unverified kept as report only."""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

import pytest
import yaml

from memory_shared import L1_INDEX, MemoryStore, parse_sop
from skilltree.consolidate import TaskPlan, consolidate_task, report_path
from skilltree.l1index import add_skill_line, skill_line
from skilltree.reports import load_reports
from skilltree.tree import load
from skilltree.vectors import ScoreVector
from skilltree.verify import collect

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
GOOD_SCRIPT = "import sys\nassert sum([1, 2, 3]) == 6\nprint('self-check ok')\n"


def workdir(tmp: Path, files: dict[str, str], front: Optional[dict[str, Any]] = None, *, body: str = "## Steps\nrun it\n",
            report: Optional[str] = None, code_runs: tuple[bool, ...] = (True,)) -> tuple[Path, Path]:
    """A task directory with files, a report.md (front matter + body, or raw text) and a history."""
    folder = tmp / "workdir"
    folder.mkdir(parents=True)
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    if report is not None:
        (folder / "report.md").write_text(report)
    elif front is not None:
        (folder / "report.md").write_text("---\n" + yaml.safe_dump(front) + "---\n" + body)
    history = tmp / "history.jsonl"
    call = {"type": "function", "function": {"name": "code_run", "arguments": json.dumps(
        {"type": "bash", "script": "python3 add.py"})}}
    history.write_text("".join(json.dumps({"turn": n, "received": {"tool_calls": [{**call, "id": f"call_{n}_0"}]},
                                           "tool_results": [{"id": f"call_{n}_0", "name": "code_run", "ok": ok,
                                                             "output": f"exit code {0 if ok else 1}"}]}) + "\n"
        for n, ok in enumerate(code_runs, 1)))
    return folder, history


def memory_paths(commit: Any) -> list[str]:
    """A commit's paths less its provenance records (tests/skilltree/test_explore_provenance.py checks those)."""
    return [p for p in commit.paths if not p.endswith(".prov")]


def front(**changes: Any) -> dict[str, Any]:
    base = {"title": "Add numbers", "category": "data", "skill": "add-numbers", "verified": True,
            "artifacts": ["add.py"], "description": "Add numbers with a self-check"}
    return {**base, **changes}


def test_a_self_checking_script_that_reruns_cleanly_is_verified(tmp_path: Path) -> None:
    folder, history = workdir(tmp_path, {"add.py": GOOD_SCRIPT}, front())
    found = collect("t1", folder, "succeeded", history)
    assert found.outcome == "verified", found.problems
    assert found.evidence == ["call_1_0"]
    assert "re-ran add.py: exit 0" in found.checks
    assert found.artifacts[0].exit_code == 0 and "self-check ok" in found.artifacts[0].output


@pytest.mark.parametrize("case, files, report_front, status, code_runs, problem", [
    ("model says unverified", {"add.py": GOOD_SCRIPT}, front(verified=False), "succeeded", (True,), "not verified"),
    ("task failed", {"add.py": GOOD_SCRIPT}, front(), "failed", (True,), "task ended 'failed'"),
    ("no execution", {"add.py": GOOD_SCRIPT}, front(), "succeeded", (False,), "No Execution, No Memory"),
    ("missing artifact", {}, front(), "succeeded", (True,), "no such file"),
    ("no artifact", {"add.py": GOOD_SCRIPT}, front(artifacts=[]), "succeeded", (True,), "names no artifact"),
    ("escape", {"add.py": GOOD_SCRIPT}, front(artifacts=["../add.py"]), "succeeded", (True,), "not a plain relative path"),
    ("notes only", {"notes.txt": "hello"}, front(artifacts=["notes.txt"]), "succeeded", (True,), "no script among"),
    ("script fails on re-run", {"add.py": "import sys\nsys.exit(3)\n"}, front(), "succeeded", (True,), "exit 3"),
    ("needs a leftover file", {"add.py": "print(open('cache.txt').read())\n", "cache.txt": "x"}, front(),
     "succeeded", (True,), "re-ran add.py: exit 1"),
    ("needs an argument", {"add.py": "import sys\nsys.exit(0 if sys.argv[1:] else 1)\n"}, front(), "succeeded", (True,),
     "exit 1"),
])
def test_every_check_can_refuse(tmp_path: Path, case: str, files: dict, report_front: dict, status: str,
                                code_runs: tuple, problem: str) -> None:
    folder, history = workdir(tmp_path, files, report_front, code_runs=code_runs)
    found = collect("t1", folder, status, history)
    assert found.outcome == "unverified", case
    assert any(problem in p for p in found.problems), (case, found.problems)


def test_a_symlinked_artifact_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "secret.py"
    outside.write_text(GOOD_SCRIPT)
    folder, history = workdir(tmp_path / "t", {}, front())
    (folder / "add.py").symlink_to(outside)
    found = collect("t1", folder, "succeeded", history)
    assert found.outcome == "unverified" and any("symlink" in p for p in found.problems)


def test_a_hanging_script_is_killed_at_the_timeout(tmp_path: Path) -> None:
    folder, history = workdir(tmp_path, {"add.py": "import time\ntime.sleep(30)\n"}, front())
    found = collect("t1", folder, "succeeded", history, timeout=0.5)
    assert found.outcome == "unverified" and any("exit -9" in p for p in found.problems)


def test_the_rerun_sees_no_secrets_of_the_parent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    script = "import os, sys\nprint(sorted(os.environ))\nsys.exit(1 if 'OPENAI_API_KEY' in os.environ else 0)\n"
    folder, history = workdir(tmp_path, {"add.py": script}, front())
    assert collect("t1", folder, "succeeded", history).outcome == "verified"


@pytest.mark.parametrize("report, problem", [
    (None, "no report.md"),
    ("# just a title\n", "no YAML front matter"),
    ("---\ntitle: x\n---\nbody\n", "lacks category, skill, verified, artifacts"),
    ("---\ntitle: x\ncategory: c\nskill: s\nverified: maybe\nartifacts: []\n---\n", "'verified' must be true or false"),
    ("---\ntitle: [unclosed\n---\n", "report.md:"),
])
def test_a_missing_or_invalid_report_is_a_failed_exploration(tmp_path: Path, report: Optional[str], problem: str) -> None:
    folder, history = workdir(tmp_path, {"add.py": GOOD_SCRIPT}, None, report=report)
    found = collect("t1", folder, "succeeded", history)
    assert found.outcome == "failed" and problem in found.problems[0]


# ---- L1 pointer lines


def test_l1_lines_fold_by_category_to_stay_inside_the_bound() -> None:
    text = "# L1 index\n- Skill tree: skilltree.json\n"
    for n in range(60):
        text = add_skill_line(text, skill_line(f"cat{n % 3}", f"skill-{n}", f"Title of skill {n}"), 30, 2000)
        assert text is not None
        assert len(text.splitlines()) <= 30 and len(text) <= 2000
    assert "- Skill tree: skilltree.json" in text  # lines that are not skill pointers are kept
    assert "skill-59" in text  # the newest skill is always reachable from L1
    assert any(line.startswith("- L3/cat") and "skill SOPs (" in line for line in text.splitlines())


def test_l1_gives_up_rather_than_dropping_other_lines() -> None:
    text = "".join(f"- note {n}\n" for n in range(30))
    assert add_skill_line(text, skill_line("web", "a", "A"), 30, 2000) is None


# ---- consolidation into a real store


def plan_for(task_id: str, skill: str = "add-numbers") -> TaskPlan:
    return TaskPlan(task_id=task_id, title="Add numbers", category="data", target_skill=skill,
                    description="Add numbers and check", predicted=6.4,
                    vector=ScoreVector(breadth=10, depth=0, utility=8, innovation=5))


def test_a_verified_task_is_one_commit_and_consolidating_again_changes_nothing(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "memory", create=True)
    folder, history = workdir(tmp_path / "t1", {"add.py": GOOD_SCRIPT}, front())
    found = collect("1-add", folder, "succeeded", history)
    done = consolidate_task(store, "run-a", plan_for("1-add"), found, tokens=1234, now=NOW)
    assert done.outcome == "skill" and done.generation == 1 and done.skill_id == "add-numbers"
    commit = store.log()[-1]
    assert commit.author == "ga explore" and "call_1_0" in commit.message
    assert sorted(memory_paths(commit)) == sorted([L1_INDEX, "L3/data/add-numbers.md", "L3/scripts/add-numbers/add.py",
                                           report_path("run-a", "1-add"), "skilltree.json"])
    with store.snapshot() as snap:
        skill = load(snap.path).skills["add-numbers"]
        assert skill.verified and skill.predicted == 6.4 and skill.score_vector.utility == 8
        assert skill.report == "reports/run-a/1-add.md" and skill.scripts == ["L3/scripts/add-numbers/add.py"]
        assert "- L3/data/add-numbers.md: Add numbers" in snap.read(L1_INDEX)
        assert snap.read("L3/scripts/add-numbers/add.py") == GOOD_SCRIPT
        sop, body = parse_sop(snap.read("L3/data/add-numbers.md"))
        assert sop["name"] == "add-numbers" and "re-run from the stored files: add.py exit 0" in sop["evidence"]
        assert body.startswith("## Steps") and "L3/scripts/add-numbers/add.py" in body
        [report] = load_reports(Path(snap.path) / "reports")
        assert report.verified and report.tokens == 1234 and report.score_vector.breadth == 10
    again = consolidate_task(store, "run-a", plan_for("1-add"), found, tokens=1234, now=NOW)
    assert again.outcome == "already" and store.head() == 1
    assert store.verify() == []


def test_deepening_an_existing_skill_files_a_new_node_and_an_unverified_one_only_its_report(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "memory", create=True)
    first, history = workdir(tmp_path / "t1", {"add.py": GOOD_SCRIPT}, front())
    consolidate_task(store, "run-a", plan_for("1-add"), collect("1-add", first, "succeeded", history), tokens=1, now=NOW)
    deeper = "import sys\nassert sum([1.5, 2.5]) == 4.0\nprint('floats ok')\n"
    second, history2 = workdir(tmp_path / "t2", {"add_floats.py": deeper},
                               front(skill="add-floats", title="Add floating point numbers", artifacts=["add_floats.py"]))
    done = consolidate_task(store, "run-b", plan_for("2-add-floats", "add-numbers"),
                            collect("2-add-floats", second, "succeeded", history2), tokens=1, now=NOW)
    assert done.outcome == "skill" and done.skill_id == "add-floats"  # another procedure: a new node beside it
    bad, history3 = workdir(tmp_path / "t3", {"add.py": "raise SystemExit(2)\n"}, front(skill="broken"))
    found = collect("3-broken", bad, "succeeded", history3)
    done = consolidate_task(store, "run-b", plan_for("3-broken", "broken"), found, tokens=7, now=NOW)
    assert done.outcome == "report" and done.generation == 3
    assert memory_paths(store.log()[-1]) == ["reports/run-b/3-broken.md"]
    with store.snapshot() as snap:
        assert "broken" not in load(snap.path).skills
        stored = snap.read("reports/run-b/3-broken.md")
        assert "verified: false" in stored and "claimed_verified: true" in stored and "exit 2" in stored
    assert consolidate_task(store, "run-b", plan_for("3-broken", "broken"), found, tokens=7, now=NOW).outcome == "already"
    assert store.head() == 3


@pytest.mark.parametrize("again", [
    {"skill": "add-numbers"},  # the same skill id from another run (the planner proposed it again)
    {"skill": "Add_Numbers-3", "title": "Adding numbers, again"},  # the name up to case, separators, a -N suffix
    {"skill": "sum-integers", "title": "Sum integers"},  # another name, the same script byte for byte
])
def test_a_skill_explored_again_updates_its_evidence_instead_of_filing_a_copy(tmp_path: Path, again: dict) -> None:
    store = MemoryStore(tmp_path / "memory", create=True)
    first, history = workdir(tmp_path / "t1", {"add.py": GOOD_SCRIPT}, front())
    consolidate_task(store, "run-a", plan_for("1-add"), collect("1-add", first, "succeeded", history), tokens=1, now=NOW)
    second, history2 = workdir(tmp_path / "t2", {"add.py": GOOD_SCRIPT}, front(**again))
    found = collect("1-add", second, "succeeded", history2)
    done = consolidate_task(store, "run-b", plan_for("1-add", again["skill"]), found, tokens=1, now=NOW)
    assert done.outcome == "evidence" and done.skill_id == "add-numbers" and done.generation == 2
    assert sorted(memory_paths(store.log()[-1])) == ["L3/data/add-numbers.md", "reports/run-b/1-add.md", "skilltree.json"]
    with store.snapshot() as snap:
        tree = load(snap.path)
        assert list(tree.skills) == ["add-numbers"]
        assert tree.skills["add-numbers"].evidence == ["reports/run-b/1-add.md"]
        sop, _ = parse_sop(snap.read("L3/data/add-numbers.md"))
        assert "add.py exit 0" in sop["evidence"] and "verified again by explore run run-b task 1-add" in sop["evidence"]
        assert snap.read(L1_INDEX).count("L3/data/add-numbers.md") == 1
    assert consolidate_task(store, "run-b", plan_for("1-add", again["skill"]), found, tokens=1, now=NOW).outcome == "already"
    assert store.head() == 2 and store.verify() == []
