"""The README's parent-agent example, as a newcomer runs it: `ga run` with the shipped scripted parent,
whose code_run fans out one worker per file with orchestrator.fanout and adds up what they report."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.ga_support import run_ga

ROOT = Path(__file__).resolve().parents[2]


def test_parent_fans_out_from_code_run_and_answers_with_the_workers_results(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "configs" / "examples" / "data", tmp_path / "configs" / "examples" / "data")
    env = {"GA_HOME": str(tmp_path / "home"), "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "GA_MODEL": None}
    done = run_ga("run", "Count the words in the example files, one worker each",
                  "--model", f"scripted:{ROOT / 'configs/examples/scripts/parent.yaml'}", "--json",
                  cwd=tmp_path, env=env, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    answer = result["answer"]
    assert result["status"] == "succeeded" and result["turns"] == 2
    assert "alpha.txt: succeeded, 15 words" in answer and "gamma.txt: succeeded, 16 words" in answer
    assert "total: 56 words in 3 files" in answer and "(succeeded)" in answer
    (nested,) = (tmp_path / "runs").glob("*-parent-example-*")  # the workers' run, with its own ledger
    results = [json.loads(line) for line in (nested / "results.jsonl").read_text().splitlines()]
    assert sorted(r["task_id"] for r in results) == ["alpha.txt", "beta.txt", "gamma.txt"]
