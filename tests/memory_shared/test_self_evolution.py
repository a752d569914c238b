"""Issue 31, item 7: self-evolution still works. configs/examples/learn_reuse.yaml learns a procedure in one task
(ga re-runs its script to verify it) and the next task reuses it from memory: fewer turns and fewer tokens. Under
`memory.admit: review` the same procedure waits for a person, so the second task has nothing to reuse."""
from __future__ import annotations

import json
from pathlib import Path

from tests.ga_support import run_ga
from tests.memory_shared.memory_attack_support import NO_MODEL, first_request
from tests.store_support import store_in_ga_home  # noqa: F401  (fixture)

EXAMPLE = Path(__file__).resolve().parents[2] / "configs" / "examples" / "learn_reuse.yaml"
POINTER = "- Count the words of .txt files: L3/text/count_words.md"


def run_example(tmp_path: Path, admit: str) -> dict[str, dict]:
    done = run_ga("fanout", str(EXAMPLE), "--json", "--out", str(tmp_path / admit), cwd=tmp_path,
                  env={**NO_MODEL, "GA_MEMORY__ADMIT": admit})
    assert done.returncode in (0, 1), done.stdout + done.stderr
    run_dir = Path(json.loads(done.stdout)["run_dir"])
    return {r["task_id"]: r for r in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())}


def test_a_verified_procedure_makes_the_next_task_cheaper(tmp_path: Path, store_root: Path) -> None:
    results = run_example(tmp_path, "verified")
    learn, reuse = results["learn"], results["reuse"]
    assert learn["status"] == reuse["status"] == "succeeded"
    assert learn["memory"]["committed"] == ["L1/index.md", "L3/scripts/count_words.py", "L3/text/count_words.md"]
    assert reuse["turns"] < learn["turns"] and reuse["usage"]["total"] < learn["usage"]["total"]
    assert "gamma.txt 16 words" in reuse["answer"]
    system = first_request(reuse["history_path"])[0]["content"]
    assert POINTER in system and "verified: task learn" in system  # shown with its provenance, as a hint


def test_under_review_nothing_is_reused_until_a_person_accepts(tmp_path: Path, store_root: Path) -> None:
    results = run_example(tmp_path, "review")
    assert results["learn"]["memory"]["proposed"] and not results["learn"]["memory"]["committed"]
    reuse = results["reuse"]
    assert reuse["status"] != "succeeded" and POINTER not in first_request(reuse["history_path"])[0]["content"]
