"""Whole exploration cycles on real Ray with the shipped scripted model: `ga explore --once`, a stopped
cycle resumed, and kill -9 during consolidation (memory and explore fault points) followed by recovery."""
from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

import pytest

from configs import load_settings
from memory_shared import L1_INDEX, MemoryStore, parse_sop
from memory_shared.paths import tree_files
from memory_shared.stats import AccessLog
from skilltree.explore import read_record, resume_cycle, run_cycle
from skilltree.plan import read_plan
from skilltree.reports import load_reports, read_report
from skilltree.tree import load
from tests.ga_support import invoke_ga, run_ga

pytestmark = pytest.mark.usefixtures("ray_session")
ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "configs" / "examples" / "scripts" / "explore.yaml"
MODEL = f"scripted:{SCRIPT}"
VERIFIED = {"count-words": ("text", 6.6), "csv-column-sum": ("data", 6.4), "sha256-checksums": ("files", 6.3)}


def consistent(memory: Path) -> tuple[dict, list[str]]:
    """Open the store (its recovery runs), check it, and check that the tree and its files agree."""
    store = MemoryStore(memory)
    assert store.verify() == []
    with store.snapshot() as snap:
        tree = load(snap.path)
        index = snap.read(L1_INDEX) or ""
        reports = sorted(str(p.relative_to(snap.path)) for p in tree_files(Path(snap.path, "reports"))
                         if p.suffix == ".md")  # through shared folders (rglob does not follow them)
        for skill in tree.skills.values():
            assert snap.read(skill.sop) and all(snap.read(path) for path in skill.scripts), skill.id
            assert skill.report in reports, skill.id
            assert index.count(f"L3/{skill.category}/{skill.id}.md") == 1, skill.id
        for rel in reports:  # a report names one task; a verified one has exactly one skill pointing to it
            owners = [s.id for s in tree.skills.values() if s.report == rel]
            verified = read_report(Path(snap.path) / rel).verified
            assert len(owners) == (1 if verified else 0), rel
    return tree.skills, reports


def test_explore_once_files_verified_skills_and_keeps_the_unverified_report(tmp_path: Path, ga_home: Path) -> None:
    runs = tmp_path / "runs"
    result = invoke_ga("explore", "--once", "--model", MODEL, "--batch", "5", "--out", str(runs), "--json")
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout[result.stdout.index("{"):])
    assert printed["status"] == "consolidated" and printed["outcomes"]
    run_dir = Path(printed["run_dir"])
    outcomes = {o["task_id"]: o for o in printed["outcomes"]}
    assert {k: o["outcome"] for k, o in outcomes.items()} == {
        "1-count-words": "skill", "2-csv-column-sum": "skill", "3-sha256-checksums": "skill",
        "4-locale-check": "report", "5-html-links": "failed"}
    assert "re-ran locale_check.py: exit 1 (LC_ALL is not set)" in outcomes["4-locale-check"]["problems"]
    assert "no YAML front matter" in outcomes["5-html-links"]["problems"][0]

    memory = load_settings().memory_root
    assert_one_commit_per_filed_task(MemoryStore(memory), run_dir)
    assert_the_filed_skills_and_reports(memory)
    assert_the_run_records_plan_and_spend(run_dir, printed, ga_home)
    # the count-words worker read L1 through the memory tier: usage statistics see exploration too
    assert any(e["path"] == L1_INDEX for e in AccessLog(memory).entries())

    report_dir = tmp_path / "skills-report"
    shown = invoke_ga("skills", "report", "--out", str(report_dir))
    assert shown.exit_code == 0, shown.output
    text = (report_dir / "report.md").read_text()
    assert "count-words" in text and "Check the locale the shell runs with" in text


def assert_one_commit_per_filed_task(store: MemoryStore, run_dir: Path) -> None:
    commits = store.log()[1:]
    assert [c.generation for c in commits] == [1, 2, 3, 4]  # one commit per filed task, none for the failed one
    for commit, skill_id in zip(commits[:3], VERIFIED, strict=False):
        folder = VERIFIED[skill_id][0]
        assert commit.author == "ga explore" and "evidence: code_run call_" in commit.message
        assert {L1_INDEX, "skilltree.json", f"L3/{folder}/{skill_id}.md",
                f"reports/{run_dir.name}/{outcomes_id(skill_id)}.md"} <= set(commit.paths)
        assert any(p.startswith(f"L3/scripts/{skill_id}/") for p in commit.paths)
    assert [p for p in commits[3].paths if not p.endswith(".prov")] == [
        f"reports/{run_dir.name}/4-locale-check.md"]


def assert_the_filed_skills_and_reports(memory: Path) -> None:
    skills, reports = consistent(memory)
    assert set(skills) == set(VERIFIED)
    for skill_id, (category, predicted) in VERIFIED.items():
        skill = skills[skill_id]
        assert skill.verified and skill.category == category and skill.predicted == pytest.approx(predicted)
        assert skill.score_vector.breadth == 10 and skill.score_vector.depth == 0 and skill.score_vector.utility >= 7
    with MemoryStore(memory).snapshot() as snap:
        front, body = parse_sop(snap.read("L3/text/count-words.md"))
        assert front["category"] == "text" and "count_words.py exit 0" in front["evidence"] and "## Steps" in body
        assert "- L3/text/count-words.md: Count words in text files" in snap.read(L1_INDEX)
        stored = {r.skill: r for r in load_reports(Path(snap.path) / "reports")}
    assert len(reports) == 4 and set(stored) == {*VERIFIED, "locale-check"}
    assert not stored["locale-check"].verified and stored["count-words"].verified
    assert stored["count-words"].score_vector == skills["count-words"].score_vector


def assert_the_run_records_plan_and_spend(run_dir: Path, printed: dict, ga_home: Path) -> None:
    """The run directory: the plan with every score, the cycle record, the spend; the day's state."""
    plan = read_plan(run_dir / "plan.json")
    assert len(plan.candidates) == 6 and len(plan.selected) == 5 and plan.categories_covered == 5
    assert all(c.vector.utility >= 1 and c.score > 0 for c in plan.candidates)
    record = read_record(run_dir)
    fanout_usage = json.loads((run_dir / "summary.json").read_text())["usage"]
    assert record["fanout"]["usage"]["total"] == fanout_usage["total"] > 0
    assert record["planner"]["calls"] == 2 and record["planner"]["tokens"] == plan.tokens > 0
    assert printed["tokens"] == record["planner"]["tokens"] + fanout_usage["total"]
    assert printed["cost"] > 0  # the script's made-up prices
    state = json.loads((ga_home / "explore" / "state.json").read_text())
    assert state["cycles"] == 1 and state["runs"] == [run_dir.name]
    assert state["spend"] == pytest.approx(printed["cost"], abs=1e-5)


def outcomes_id(skill_id: str) -> str:
    return {"count-words": "1-count-words", "csv-column-sum": "2-csv-column-sum",
            "sha256-checksums": "3-sha256-checksums"}[skill_id]


def consolidate(run_dir: Path, runs: Path, fault: dict[str, str]) -> subprocess.CompletedProcess:
    return run_ga("explore", "--consolidate", run_dir.name, "--out", str(runs), "--json",
                  env={"GA_MEMORY_FAULT": None, **fault}, timeout=120)


def test_a_stopped_cycle_resumes_and_kill_9_during_consolidation_never_breaks_or_duplicates(tmp_path: Path) -> None:
    settings = load_settings()
    runs = tmp_path / "runs"
    stop = threading.Event()
    stop.set()  # a signal arrived while planning: the run is left planned, nothing started
    stopped = run_cycle(settings, model_name=MODEL, runs_dir=runs, batch_size=5, stop=stop)
    assert stopped.status == "stopped" and (stopped.run_dir / "plan.json").is_file()
    assert not (stopped.run_dir / "results.jsonl").read_text()
    ran = resume_cycle(settings, stopped.run_dir, consolidate=False)
    assert ran.status == "ran" and ran.fanout["status"] == "succeeded"
    memory = settings.memory_root
    assert MemoryStore(memory).head() == 0

    # 1. killed just before the first commit's tree is renamed into place: the commit never happened (a kill
    # once the tree is in place lands the commit: its record is restored from MANIFEST.record, issue 22)
    died = consolidate(ran.run_dir, runs, {"GA_MEMORY_FAULT": "rebased"})
    assert died.returncode == -9, died.stderr[-2000:]
    skills, reports = consistent(memory)
    assert MemoryStore(memory).head() == 0 and not skills and not reports

    # 2. killed right after the second task's commit, before the run directory recorded it
    died = consolidate(ran.run_dir, runs, {"GA_MEMORY_FAULT": "explore.committed:2"})
    assert died.returncode == -9
    skills, reports = consistent(memory)
    assert MemoryStore(memory).head() == 2 and set(skills) == {"count-words", "csv-column-sum"}
    assert "2-csv-column-sum" not in read_record(ran.run_dir)["outcomes"]

    # 3. killed after the next commit's log line, before HEAD moved: recovery completes that commit
    died = consolidate(ran.run_dir, runs, {"GA_MEMORY_FAULT": "logged"})
    assert died.returncode == -9
    skills, reports = consistent(memory)
    assert MemoryStore(memory).head() == 3 and set(skills) == set(VERIFIED)

    # 4. a clean pass files only what is missing; 5. another one files nothing
    for expected_head, expected in ((4, {"already": 3, "report": 1, "failed": 1}), (4, {"already": 4, "failed": 1})):
        done = consolidate(ran.run_dir, runs, {})
        assert done.returncode == 0, done.stderr[-2000:]
        printed = json.loads(done.stdout[done.stdout.index("{"):])
        counted: dict[str, int] = {}
        for item in printed["outcomes"]:
            counted[item["outcome"]] = counted.get(item["outcome"], 0) + 1
        assert counted == expected
        assert MemoryStore(memory).head() == expected_head
    skills, reports = consistent(memory)
    assert set(skills) == set(VERIFIED) and len(reports) == 4  # no "-2" duplicates, one report per filed task
    record = read_record(ran.run_dir)
    assert {t: o["outcome"] for t, o in record["outcomes"].items()} == {
        "1-count-words": "skill", "2-csv-column-sum": "already", "3-sha256-checksums": "already",
        "4-locale-check": "report", "5-html-links": "failed"}


def test_the_idle_daemon_runs_a_real_cycle_within_the_days_budget(tmp_path: Path, ga_home: Path, ray_session: dict) -> None:
    env = {"GA_FANOUT__ADDRESS": ray_session["address"]}  # attach to this session's Ray
    done = run_ga("explore", "--when-idle", "1s", "--tick", "0.1", "--max-cycles", "1", "--model", MODEL,
                  "--out", str(tmp_path / "runs"), "--json", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    records = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    events = [r["event"] for r in records]
    assert events == ["started", "cycle_started", "cycle_finished", "stopped"], events
    started, finished = records[1], records[2]
    assert started["budget"] == load_settings().explore.max_spend_per_day  # nothing spent yet today
    assert finished["status"] == "consolidated" and finished["outcomes"] == {"skill": 3, "report": 1}
    assert 0 < finished["cost"] < started["budget"]
    spec_budget = read_record(Path(finished["run_dir"]))["spec"]["budget"]["cost"]
    assert spec_budget == pytest.approx(started["budget"] - read_record(Path(finished["run_dir"]))["planner"]["cost"])
    state = json.loads((ga_home / "explore" / "state.json").read_text())
    assert state["cycles"] == 1 and state["spend"] == pytest.approx(finished["cost"]) and state["runs"] == [Path(finished["run_dir"]).name]
    skills, reports = consistent(load_settings().memory_root)
    assert set(skills) == set(VERIFIED) and len(reports) == 4
