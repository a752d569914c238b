"""`ga explore --once` twice with the shipped scripted model (real processes, a real store): the second cycle
explores the same skills again and files none of them twice; each gets the new report as evidence."""
from __future__ import annotations

import json
from pathlib import Path

from memory_shared import MemoryStore, parse_sop
from skilltree.tree import load
from tests.ga_support import run_ga

SCRIPT = Path(__file__).resolve().parents[2] / "configs" / "examples" / "scripts" / "explore.yaml"
VERIFIED = {"count-words", "csv-column-sum", "sha256-checksums"}


def explore_once(runs: Path) -> dict:
    done = run_ga("explore", "--once", "--model", f"scripted:{SCRIPT}", "--batch", "5", "--out", str(runs), "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout[done.stdout.index("{"):])


def test_exploring_the_same_tasks_twice_files_each_skill_once(tmp_path: Path, ga_home: Path) -> None:
    first = explore_once(tmp_path / "runs")
    assert {o["skill_id"] for o in first["outcomes"] if o["outcome"] == "skill"} == VERIFIED
    second = explore_once(tmp_path / "runs")
    again = {o["skill_id"]: o for o in second["outcomes"] if o["skill_id"]}
    assert set(again) == VERIFIED and {o["outcome"] for o in again.values()} == {"evidence"}

    with MemoryStore(ga_home / "memory").snapshot() as snap:
        tree = load(snap.path)
        assert set(tree.skills) == VERIFIED  # no count-words-2
        for skill_id, outcome in again.items():
            assert tree.skills[skill_id].evidence == [outcome["report_path"]]
            assert snap.read(outcome["report_path"])
        sop, _ = parse_sop(snap.read(tree.skills["count-words"].sop))
        assert f"verified again by explore run {Path(second['run_dir']).name}" in sop["evidence"]
