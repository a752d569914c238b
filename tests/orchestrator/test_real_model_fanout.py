"""The recorded 3-task fan-out + reduce of a real small model, replayed on real Ray through the
scripted server, plus a task whose check fails: what the run reports now."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator import fanout
from orchestrator.driver import run_status
from orchestrator.records import ReduceResult
from tests.fanout_support import ledger, read_jsonl, result_lines, start_server
from tests.real_model_support import ALPHA_WORDS, task_of, turns_of

pytestmark = pytest.mark.usefixtures("ray_session")
REDUCE = "qwen1.5b-text-fanout-reduce"


def test_recorded_fanout_reports_unverified_apart_and_retries_a_failed_check(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("GA_WORKER__SECOND_CHANCE", "0")  # recorded without it: a note would ask for an unrecorded reply
    (tmp_path / "alpha.txt").write_text(ALPHA_WORDS)
    script = {"tasks": [  # the reduce first: its prompt quotes the map answers
        {"match": "List each task's reported number", "turns": turns_of(REDUCE)},
        {"match": "Write fib.py", "turns": [{"content": "fib.py prints 55."}]},
        {"match": "10th Fibonacci", "turns": turns_of("qwen1.5b-native-fanout-fib")},
        {"match": "sum of the squares", "turns": turns_of("qwen1.5b-native-fanout-squares")},
        {"match": "Count the words in alpha.txt", "turns": turns_of("qwen1.5b-native-fanout-words")},
    ]}
    server = start_server(script, tmp_path / "requests.jsonl")
    tasks = [{"id": "fib", "prompt": task_of("qwen1.5b-native-fanout-fib")},
             {"id": "squares", "prompt": task_of("qwen1.5b-native-fanout-squares")},
             {"id": "words", "prompt": task_of("qwen1.5b-native-fanout-words"), "inputs": ["alpha.txt"]},
             {"id": "fibfile", "prompt": "Write fib.py that prints the Fibonacci number 10.",
              "check": {"script": 'test "$(python3 fib.py)" = 55'}}]
    (tmp_path / "tasks.yaml").write_text(json.dumps({
        "version": 1, "name": "realmodel", "retries": 1, "concurrency": 2,
        "defaults": {"model": f"scripted@{server.base_url}", "max_turns": 5}, "tasks": tasks,
        "reduce": {"prompt": json.loads((Path(__file__).parents[1] / "real_model" / f"{REDUCE}.history.jsonl")
                                        .read_text().splitlines()[0])["sent"][1]["content"].split("\n\n")[0]}}))
    try:
        run = fanout(tmp_path / "tasks.yaml", out=tmp_path / "runs", display="quiet")
    finally:
        server.stop()

    by_id = {r["task_id"]: r for r in result_lines(run.run_dir)}
    assert {k: v["status"] for k, v in by_id.items()} == {
        "fib": "unverified", "squares": "succeeded", "words": "succeeded", "fibfile": "failed"}
    assert by_id["fib"]["reason"] == "last code_run failed: NameError: name 'fibonacci' is not defined"
    assert "2870" in by_id["squares"]["answer"]
    assert "7" in by_id["words"]["answer"]  # `python -c ...` with no type ran as the shell command it is
    assert by_id["fibfile"]["reason"].startswith("check failed: the check script failed: exit code 1")
    assert by_id["fibfile"]["attempt"] == 2
    assert [e["task_id"] for e in ledger(run.run_dir) if e["event"] == "retried"] == ["fibfile"]

    assert run.reduce.status == "unverified" and run.reduce.reason == "no tool ran"
    reduce_prompt = [r["body"]["messages"][1]["content"] for r in read_jsonl(tmp_path / "requests.jsonl")
                     if "List each task's reported number" in r["body"]["messages"][1]["content"]][0]
    assert "### fib (unverified)" in reduce_prompt and "(reason: last code_run failed: NameError" in reduce_prompt
    assert "### fibfile (failed)" in reduce_prompt and "### squares (succeeded)" in reduce_prompt

    summary = json.loads((run.run_dir / "summary.json").read_text())
    assert summary["tasks"] == {"total": 4, "succeeded": 2, "unverified": 1, "failed": 1, "needs_input": 0,
                                "limit": 0, "unfinished": 0}
    assert (run.status, run.exit_code) == ("failed", 1)

    from cli.work import print_run

    print_run(run)
    shown = capsys.readouterr().out
    assert "2/4 succeeded, 1 unverified, 1 failed, 0 unfinished" in shown
    assert "reduce (unverified)" in shown


def test_run_status_and_exit_code() -> None:
    counts = {"succeeded": 2, "unverified": 1, "failed": 0}
    assert run_status({"succeeded": 3}, 3, None) == ("succeeded", 0)
    assert run_status({"succeeded": 3}, 3, ReduceResult(status="unverified")) == ("unverified", 1)
    assert run_status(counts, 3, ReduceResult(status="succeeded")) == ("unverified", 1)
    assert run_status({**counts, "unverified": 0, "failed": 1}, 3, None) == ("failed", 1)
    assert run_status({"succeeded": 3}, 3, ReduceResult(status="failed")) == ("failed", 1)
