"""A run's plan on disk: spec.jsonl, JSON lines read back by a JSON-lines reader; an older ga's spec.yaml still opens."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from orchestrator.ledger import RunDir, read_spec, spec_task_ids
from orchestrator.views.runstream import planned_ids

OLD_RUN = Path(__file__).resolve().parents[1] / "fixtures" / "old_runs" / "20261201-000817-oldrun-5b8a"
PLAN = {"name": "kept", "source": "/x/tasks.yaml", "concurrency": 2,
        "tasks": [{"id": "a", "prompt": "say {\"a\": 1}\non two lines"}, {"id": "b", "prompt": "  {\"id\": \"fake\"}"}],
        "reduce": None, "fingerprints": {}}


def test_the_plan_is_json_lines_its_fields_then_one_task_a_line(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "r1", PLAN)
    run.close()
    lines = (tmp_path / "r1" / "spec.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == [{**PLAN, "tasks": 2}, *PLAN["tasks"]]
    assert RunDir.existing(tmp_path, "r1").spec() == PLAN
    assert planned_ids(RunDir(tmp_path / "r1")) == ["a", "b"]  # a prompt that looks like a task line is no task


def test_a_damaged_or_cut_spec_is_one_line_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "spec.jsonl"
    path.write_text(json.dumps({"name": "x", "tasks": 2}) + "\n" + '{"id": "a"}\n{"id": \n')
    with pytest.raises(ValueError, match=r"^line 3: not JSON"):
        read_spec(path)
    path.write_text(json.dumps({"name": "x", "tasks": 2}) + "\n" + '{"id": "a"}\n')  # a task line lost
    with pytest.raises(ValueError, match="line 1 says 2 tasks follow, 1 do"):
        read_spec(path)
    path.write_text('["not", "a", "plan"]\n')
    with pytest.raises(ValueError, match="line 1: expected an object, found list"):
        read_spec(path)


def test_an_older_gas_spec_yaml_still_opens(tmp_path: Path) -> None:
    old = shutil.copytree(OLD_RUN, tmp_path / OLD_RUN.name)
    run = RunDir.existing(tmp_path, OLD_RUN.name[:10])  # found by a prefix of its id, as a new run is
    assert run.spec_path.name == "spec.yaml"
    assert [t["id"] for t in run.spec()["tasks"]] == list(spec_task_ids(run.spec_path)) == planned_ids(run) != []
    (old / "spec.yaml").write_text(json.dumps(PLAN))  # the JSON form a later older ga wrote as spec.yaml
    assert RunDir(old).spec() == PLAN
