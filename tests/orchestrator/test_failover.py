"""Provider failover: a task whose endpoint keeps failing moves to the fallback its models.yaml entry names;
the switch is in the ledger, the tokens are accounted to the model that served them."""
from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator import fanout
from orchestrator.views.runview import load_run_view
from tests.fanout_support import answer_task, ledger, read_jsonl, start_server

pytestmark = pytest.mark.usefixtures("ray_session")


def user_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's models.yaml under a HOME of the test's own (a project models.yaml may not add models)."""
    folder = tmp_path / "home" / ".config" / "ga"
    folder.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    return folder / "models.yaml"


def test_a_failing_endpoint_fails_over_to_the_next_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    down = start_server({"faults": [{"kind": "server_error"}], "tasks": [answer_task("survey")]}, tmp_path / "down.jsonl")
    up = start_server({"tasks": [answer_task("survey", "from the backup")]}, tmp_path / "up.jsonl")
    user_models(tmp_path, monkeypatch).write_text(f"""models:
  primary: {{base_url: "{down.base_url}", model: scripted, max_retries: 1, backoff_base: 0.05, fallbacks: [backup]}}
  backup: {{base_url: "{up.base_url}", model: scripted}}
""")
    try:
        run = fanout({"name": "failover", "tasks": [{"id": "s1", "prompt": "survey one"}],
                      "defaults": {"model": "primary"}}, out=tmp_path / "runs", display="quiet")
    finally:
        down.stop()
        up.stop()
    assert run.status == "succeeded", run.results
    assert "from the backup" in run.results[0].answer
    assert len(read_jsonl(tmp_path / "down.jsonl")) == 2  # the first request and its one retry, then no more
    assert len(read_jsonl(tmp_path / "up.jsonl")) == 2  # the backup served both turns
    (switch,) = [e for e in ledger(run.run_dir) if e["event"] == "failover"]
    assert switch["task_id"] == "s1" and switch["from"] == "primary" and switch["to"] == "backup"
    assert "HTTP 500" in switch["reason"] or "500" in switch["reason"]
    by_model = load_run_view(tmp_path / "runs", run.run_id).usage_by_model()
    assert set(by_model) == {"backup"} and by_model["backup"]["prompt"] > 0


def test_without_fallbacks_the_task_fails_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    down = start_server({"faults": [{"kind": "server_error"}], "tasks": [answer_task("survey")]}, tmp_path / "down.jsonl")
    user_models(tmp_path, monkeypatch).write_text(
        f'models:\n  primary: {{base_url: "{down.base_url}", model: scripted, max_retries: 1, backoff_base: 0.05}}\n')
    try:
        run = fanout({"tasks": [{"id": "s1", "prompt": "survey one"}], "defaults": {"model": "primary"}},
                     out=tmp_path / "runs", display="quiet")
    finally:
        down.stop()
    assert run.results[0].status == "failed" and "500" in run.results[0].reason
    assert not [e for e in ledger(run.run_dir) if e["event"] == "failover"]
