"""Twenty malformed tasks files: each gives exactly its one-line error (file:line, the fix) and starts nothing.

Each file in tests/spec_errors/ says on its first line `# expect: LINE: TEXT`.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.ga_support import invoke_ga, run_ga

FILES = sorted((Path(__file__).parents[1] / "spec_errors").glob("*.yaml"))
EXPECT = re.compile(r"^# expect: (\d+): (.+)$")


def test_there_are_twenty() -> None:
    assert len(FILES) == 20


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_malformed_tasks_file_gives_its_one_line_error_and_starts_nothing(path: Path, tmp_path: Path) -> None:
    line, text = EXPECT.match(path.read_text().splitlines()[0]).groups()
    runs = tmp_path / "runs"
    result = invoke_ga("fanout", str(path), "--out", str(runs))
    errors = [out for out in result.output.splitlines() if out.strip()]
    assert result.exit_code == 2, result.output
    assert len(errors) == 1, result.output
    assert errors[0].startswith(f"error: {path}:{line}: "), errors[0]
    assert text in errors[0], errors[0]
    assert not runs.exists()


def test_dry_run_prints_the_plan_with_a_cost_bound_and_starts_nothing(tmp_path: Path) -> None:
    quickstart = Path(__file__).resolve().parents[2] / "configs" / "examples" / "quickstart.yaml"
    runs = tmp_path / "runs"
    result = invoke_ga("fanout", str(quickstart), "--dry-run", "--json", "--out", str(runs))
    assert result.exit_code == 0, result.output
    import json

    plan = json.loads(result.output)
    assert [t["id"] for t in plan["tasks"]] == ["count-alpha.txt", "count-beta.txt", "count-gamma.txt", "(reduce)"]
    assert plan["total_max_cost"] == 0.0 and plan["reduce"]["output"] == "total.md"
    assert not runs.exists()


def test_an_address_where_nothing_answers_is_a_one_line_error(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    runs = tmp_path / "runs"
    proc = run_ga("fanout", str(root / "configs" / "examples" / "quickstart.yaml"), "--address", "127.0.0.1:1",
                  "--out", str(runs), cwd=root, timeout=120)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2 and len(errors) == 1
    assert "127.0.0.1:1" in errors[0] and "check --address" in errors[0]
    assert not runs.exists()
