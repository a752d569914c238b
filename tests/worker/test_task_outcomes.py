"""How a task ended is typed on its one record: the Worker's record is what the run keeps; a stop or a failure
kind is an enum written as its plain string; only what `fanout()` returns also reads like JSON."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from configs import load_settings
from orchestrator.records import Run, RunSummary, TaskRecord
from worker import Runtime, TaskSpec, Worker
from worker.model import LLMClient
from worker.modelconfig import resolve_model
from worker.record import Failure, Stop
from worker.scripted import ScriptedServer


def _run_against(tmp_path: Path, fault: dict) -> TaskRecord:
    """One Worker against a real scripted server whose every request meets `fault`, with one retry."""
    settings = load_settings(user_file=tmp_path / "none", project_file=tmp_path / "none")
    script = {"tasks": [{"match": ".*", "turns": [{"content": "never reached"}], "faults": [fault]}]}
    with ScriptedServer(script) as server:
        config = resolve_model(f"scripted@{server.base_url}", settings)
        model = LLMClient(config.model_copy(update={"max_retries": 1, "backoff_base": 0.01, "backoff_max": 0.02}))
        worker = Worker(TaskSpec("do the task", task_id="t1", workdir=tmp_path / "work", settings=settings,
                                 history_path=tmp_path / "t1" / "history.jsonl"), Runtime(model=model))
        return worker.run()


def test_an_endpoint_still_refusing_with_429_ends_the_task_rate_limited_not_by_its_text(tmp_path: Path) -> None:
    record = _run_against(tmp_path, {"kind": "rate_limit", "retry_after": 0.01, "rate": 1.0})
    assert isinstance(record, TaskRecord)  # the record results.jsonl keeps, as the Worker returns it
    assert record.status == "failed" and record.stop is Stop.rate_limited
    assert record.line()["stop"] == "rate_limited"


def test_another_refusal_is_a_plain_failure(tmp_path: Path) -> None:
    record = _run_against(tmp_path, {"kind": "server_error", "status": 503, "rate": 1.0})
    assert record.status == "failed" and record.stop is None and "HTTP 503" in record.reason


def test_kinds_are_written_as_their_strings_and_read_back_as_kinds() -> None:
    record = TaskRecord(task_id="a", status="failed", stop=Stop.lease_lost, error=Failure.check)
    line = json.dumps(record.line())
    assert '"error": "check"' in line and '"stop": "lease_lost"' in line
    again = TaskRecord.model_validate(json.loads(line))
    assert again.stop is Stop.lease_lost and again.error is Failure.check
    assert f"{again.stop}" == "lease_lost"  # shown as the string it stands for


def test_only_the_result_of_fanout_reads_like_json(tmp_path: Path) -> None:
    record = TaskRecord(task_id="a", status="succeeded", answer="42", usage={"prompt": 5, "completion": 2},
                        nested_usage={"runs": 1, "prompt": 1})
    with pytest.raises(TypeError):
        record["answer"]  # an internal record is read by attribute only
    assert not hasattr(record.usage, "get")
    summary = RunSummary(run_id="r", status="succeeded", exit_code=0, usage={"prompt": 5, "completion": 2})
    for run in (Run("r", tmp_path, "succeeded", 0, [record], summary),
                Run.from_public(Run("r", tmp_path, "succeeded", 0, [record], summary).public())):
        result = run.results[0]
        assert result["answer"] == result.answer == "42" and result.get("missing", "-") == "-"
        assert result["usage"]["total"] == 7 and result["nested_usage"]["runs"] == 1 and "question" not in result
        assert run.summary["usage"]["total"] == run.summary.usage.total == 7
        assert result.line() == record.line()  # the same record, and the same line on disk
