"""Budget stops, and fan-out from inside a task's code_run: nested run, usage attributed, depth limit."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from configs import load_settings
from orchestrator import fanout
from tests.fanout_support import answer_task, ledger, result_lines, start_server

pytestmark = pytest.mark.usefixtures("ray_session")


def test_budget_stops_new_tasks_and_the_summary_says_so(tmp_path: Path) -> None:
    server = start_server({"tasks": [answer_task("spend")]}, tmp_path / "requests.jsonl")
    spec = {"tasks": [{"id": f"s{i}", "prompt": f"spend {i}"} for i in range(4)], "concurrency": 1,
            "budget": {"tokens": 1}, "defaults": {"model": f"scripted@{server.base_url}"}}
    try:
        stopped = fanout(spec, out=tmp_path / "runs", display="quiet")
        assert stopped.status == "budget_spent" and stopped.exit_code == 1
        assert [r["task_id"] for r in stopped.results] == ["s0"]  # the first ran, then the budget was gone
        assert stopped.summary["tasks"]["unfinished"] == 3
        assert "budget spent" in stopped.summary["stop_note"] and "3 task(s) not started" in stopped.summary["stop_note"]
        resumed = fanout({**spec, "budget": {"tokens": 10_000_000}}, resume=stopped.run_id, out=tmp_path / "runs",
                         display="quiet")
    finally:
        server.stop()
    assert resumed.status == "succeeded"
    assert sorted(r["task_id"] for r in result_lines(stopped.run_dir)) == ["s0", "s1", "s2", "s3"]
    assert resumed.summary["usage"]["total"] > stopped.summary["usage"]["total"]  # the run's total carries over


@pytest.mark.parametrize("executor", ["ray", "local"])
def test_nested_fanout_from_code_run_is_attributed_to_the_parent_and_depth_limited(tmp_path: Path, executor: str) -> None:
    """On Ray the nested run attaches to the parent's cluster; in-process, it runs in the script's own process."""
    sub = tmp_path / "sub.yaml"
    grandchild = ("from orchestrator import fanout\ntry:\n    fanout(['grandchild'])\n"
                  "except Exception as exc:\n    print('refused:', exc)")
    script = {"tasks": [
        {"match": "child alpha", "turns": [
            {"content": "going deeper", "tool_calls": [{"name": "code_run", "arguments": {"type": "python", "script": grandchild}}]},
            {"content": "Deeper:", "echo_last_tool_result": True}]},
        {"match": "child beta", "turns": [  # a tool run backs the answer, so the nested run succeeds (exit 0)
            {"content": "checking", "tool_calls": [{"name": "code_run", "arguments": {"type": "bash", "script": "echo beta"}}]},
            {"content": "beta done"}]},
        {"match": "parent", "turns": [
            {"content": "fanning out", "tool_calls": [{"name": "code_run", "arguments": {
                "type": "bash", "script": "ga fanout sub.yaml --json", "timeout": 300}}]},
            {"content": "Children:", "echo_last_tool_result": True}]},
    ]}
    server = start_server(script, tmp_path / "requests.jsonl")
    sub.write_text(f'version: 1\nname: children\ndefaults: {{model: "scripted@{server.base_url}"}}\n'
                   'tasks:\n  - {id: alpha, prompt: "child alpha"}\n  - {id: beta, prompt: "child beta"}\n')
    try:
        # the sub tasks file reaches the parent as an input: its sandboxed code_run sees its workdir, not /tmp
        run = fanout({"tasks": [{"id": "parent", "prompt": "parent", "inputs": [str(sub)]}], "max_depth": 1,
                      "allow_paths": [str(sub)],
                      "defaults": {"model": f"scripted@{server.base_url}", "timeout": 300}},
                     out=tmp_path / "runs", display="quiet", settings=load_settings({"fanout.executor": executor}))
    finally:
        server.stop()
    assert run.status == "succeeded", run.results
    parent = run.results[0]
    output = parent["answer"]
    compact = json.loads(output[output.index("{"):])  # the compact JSON the nested `ga fanout --json` printed
    assert compact["status"] == "succeeded" and [r["id"] for r in compact["results"]] == ["alpha", "beta"]
    alpha = compact["results"][0]["answer"]
    assert "refused: nested fan-out refused: depth 2 exceeds max_depth 1" in alpha

    nested_dirs = list((run.run_dir / "tasks" / "parent" / "runs").iterdir())
    assert len(nested_dirs) == 1 and Path(compact["run_dir"]) == nested_dirs[0]
    nested_summary = json.loads((nested_dirs[0] / "summary.json").read_text())
    assert nested_summary["depth"] == 1 and nested_summary["parent_task"] == "parent"
    opened = [e for e in ledger(nested_dirs[0]) + ledger(run.run_dir) if e["event"] == "run_started"]
    assert [e["executor"] for e in opened] == [executor, executor]
    assert nested_summary["usage"]["total"] > 0
    assert parent["nested_usage"]["runs"] == 1
    assert parent["usage_with_nested"]["total"] == parent["usage"]["total"] + nested_summary["usage"]["total"]
    assert run.summary["usage"]["total"] == parent["usage_with_nested"]["total"]
