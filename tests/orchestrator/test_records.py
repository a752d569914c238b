"""The run directory's formats: the shipped JSON Schemas are the records' own, a run written by a real
`ga fanout` (real Ray, the scripted server over HTTP) matches them, and a run directory written
before the records were typed (tests/fixtures/old_runs) is still shown, reported and resumed."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from cli import app
from orchestrator import fanout
from orchestrator.records import SCHEMA_DIR, SCHEMAS, schema_of
from tests.fanout_support import answer_task, read_jsonl, start_server

ROOT = Path(__file__).resolve().parents[2]
OLD_RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "old_runs"
OLD_RUN_ID = "20261201-000817-oldrun-5b8a"  # written by the code of 3a72b77, before orchestrator/records.py


def _validator(name: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(schema)


def _problems(run_dir: Path) -> list[str]:
    """Every line and file of the run directory that does not match its schema, as 'file: problem'."""
    found = []
    files = {"task_record": read_jsonl(run_dir / "results.jsonl"), "ledger_event": read_jsonl(run_dir / "ledger.jsonl"),
             "run_summary": [json.loads((run_dir / "summary.json").read_text())],
             "reduce_result": [json.loads((run_dir / "reduce" / "result.json").read_text())]}
    for name, items in files.items():
        validator = _validator(name)
        found += [f"{name}: {error.message}" for item in items for error in validator.iter_errors(item)]
    return found


def test_the_shipped_schemas_are_what_the_records_generate() -> None:
    shipped = sorted(p.name for p in SCHEMA_DIR.glob("*.schema.json"))
    assert shipped == sorted(f"{name}.schema.json" for name in SCHEMAS)
    for name, model in SCHEMAS.items():
        on_disk = json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8"))
        assert on_disk == schema_of(model), f"schemas/{name}.schema.json is stale: run python schemas/regenerate.py"


def test_a_run_written_by_ga_fanout_matches_the_schemas(tmp_path: Path, ray_session: dict) -> None:
    script = {"tasks": [answer_task("Say alpha", "alpha"), {"match": "Say beta", "turns": [{"content": "beta"}]},
                        {"match": "Loop gamma", "turns": [{"content": "again", "tool_calls": [
                            {"name": "code_run", "arguments": {"type": "python", "script": "print(1)"}}]}]},
                        {"match": "Merge", "turns": [{"content": "merged"}]}]}
    server = start_server(script, tmp_path / "requests.jsonl")
    (tmp_path / "tasks.yaml").write_text(json.dumps({
        "name": "typed", "defaults": {"model": f"scripted@{server.base_url}", "max_turns": 4},
        "tasks": [{"id": "alpha", "prompt": "Say alpha"}, {"id": "beta", "prompt": "Say beta"},
                  {"id": "gamma", "prompt": "Loop gamma", "max_turns": 1}],
        "reduce": {"prompt": "Merge the answers."}}))
    try:
        done = subprocess.run([sys.executable, "-m", "cli", "fanout", "tasks.yaml", "--address", ray_session["address"],
                               "--out", "runs", "--json"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    finally:
        server.stop()
    assert done.returncode == 1, done.stderr  # gamma hit its turn limit
    printed = json.loads(done.stdout)
    [run_dir] = list((tmp_path / "runs").iterdir())
    assert {r["id"]: r["status"] for r in printed["results"]} == {"alpha": "succeeded", "beta": "unverified",
                                                                   "gamma": "limit"}
    events = {e["event"] for e in read_jsonl(run_dir / "ledger.jsonl")}
    assert {"run_started", "queued", "started", "succeeded", "reduce_result", "reduce_finished", "run_finished"} <= events
    assert _problems(run_dir) == []
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["usage"]["total"] == summary["usage"]["prompt"] + summary["usage"]["completion"] > 0


def test_a_run_written_before_the_records_matches_the_schemas() -> None:
    assert _problems(OLD_RUNS / OLD_RUN_ID) == []


def test_an_old_run_directory_is_shown_reported_and_resumed(tmp_path: Path, ray_session: dict) -> None:
    runs = tmp_path / "runs"
    shutil.copytree(OLD_RUNS / OLD_RUN_ID, runs / OLD_RUN_ID)
    old_summary = json.loads((runs / OLD_RUN_ID / "summary.json").read_text())

    shown = CliRunner().invoke(app, ["runs", "show", OLD_RUN_ID, "--out", str(runs), "--json"])
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.output)
    assert data["summary"]["status"] == "failed" and data["summary"]["usage"]["total"] == 7452
    assert {r["task_id"]: r["status"] for r in data["results"]} == {"alpha": "succeeded", "beta": "unverified",
                                                                   "gamma": "limit"}
    table = CliRunner().invoke(app, ["runs", "show", OLD_RUN_ID, "--out", str(runs)])
    assert table.exit_code == 0 and "max turns reached" in table.output, table.output
    listed = CliRunner().invoke(app, ["runs", "list", "--out", str(runs), "--json"])
    assert listed.exit_code == 0 and json.loads(listed.output)[0]["tokens"] == 7452, listed.output

    reported = CliRunner().invoke(app, ["runs", "report", OLD_RUN_ID, "--runs-dir", str(runs), "--out", str(tmp_path)])
    assert reported.exit_code == 0, reported.output
    report = (tmp_path / "report.md").read_text()
    assert "alpha" in report and "gamma" in report and "7,452 tokens" in report

    # resumed: every task and the reduce are recorded, so nothing runs (the model's server is long gone)
    tasks_file = tmp_path / "tasks.yaml"
    shutil.copy(OLD_RUNS / "tasks.yaml", tasks_file)
    again = fanout(tasks_file, resume=OLD_RUN_ID, out=runs, display="quiet", preflight=False)
    assert again.status == "failed" and [r.task_id for r in again.results] == ["alpha", "beta", "gamma"]
    assert again.reduce is not None and again.reduce.reused == ["reduce"] and again.reduce.answer == "merged: alpha and beta"
    assert again.summary.started == old_summary["started"] and again.summary.usage.total == 7452
    assert _problems(runs / OLD_RUN_ID) == []  # what the resume appended matches too


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_a_record_reads_its_own_line_back(name: str) -> None:
    """Each schema's required keys are what its model needs: an empty object names them."""
    model = SCHEMAS[name]
    required = set(schema_of(model).get("required", []))
    with pytest.raises(ValueError) as caught:
        model.model_validate({})
    missing = {".".join(str(p) for p in error["loc"]) for error in caught.value.errors()}
    assert missing and missing <= required
