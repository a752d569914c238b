"""A whole fan-out on real Ray with a real scripted HTTP server: run directory, accounting, reduce, memory."""
from __future__ import annotations

from pathlib import Path

import pytest

from configs import load_settings
from orchestrator import fanout
from tests.fanout_support import answer_task, ledger, read_jsonl, requests_for, result_lines, start_server
from tests.ga_support import invoke_ga

pytestmark = pytest.mark.usefixtures("ray_session")


WORDS = {"a.txt": "one two three", "b.txt": "four five", "c.txt": "six", "d.txt": "seven eight nine ten"}
COUNT = "import glob\nfor f in sorted(glob.glob('*.txt')):\n    print(f, len(open(f).read().split()), 'words')"
WORD_COUNT_SCRIPT = {"tasks": [
    {"match": "Count words", "turns": [
        {"content": "counting", "tool_calls": [{"name": "code_run", "arguments": {"type": "python", "script": COUNT}}]},
        {"content": "Counted:", "echo_last_tool_result": True}]},
    {"match": "Merge the counts", "turns": [{"content": "merged: all four files counted"}]},
]}


def run_word_count(tmp_path: Path):
    """A map over four files (one worker counts the words of each) and a reduce that merges the counts."""
    data = tmp_path / "data"
    data.mkdir()
    for name, words in WORDS.items():
        (data / name).write_text(words + "\n")
    server = start_server(WORD_COUNT_SCRIPT, tmp_path / "requests.jsonl")
    tasks_file = tmp_path / "tasks.yaml"
    tasks_file.write_text(f"""
version: 1
name: words
defaults: {{model: "scripted@{server.base_url}", max_turns: 5}}
concurrency: 2
matrix:
  template: "Count words in {{{{f}}}}"
  items: [{{f: a.txt}}, {{f: b.txt}}, {{f: c.txt}}, {{f: d.txt}}]
  inputs: ["data/{{{{f}}}}"]
  id: "{{{{f}}}}"
reduce: {{prompt: "Merge the counts.", output: merged.md}}
""")
    try:
        return fanout(tasks_file, out=tmp_path / "runs", display="quiet")
    finally:
        server.stop()


def assert_each_task_ran_once_on_its_own_input(run, ids: list[str]) -> None:
    results = result_lines(run.run_dir)
    assert sorted(r["task_id"] for r in results) == ids  # exactly once each
    by_id = {r["task_id"]: r for r in results}
    assert "a.txt 3 words" in by_id["a.txt"]["answer"] and "d.txt 4 words" in by_id["d.txt"]["answer"]
    for task_id in ids:  # each worker saw only its own input, in its own directory
        workdir = run.run_dir / "tasks" / task_id / "workdir"
        assert sorted(p.name for p in workdir.glob("*.txt")) == [task_id]
        assert (run.run_dir / "tasks" / task_id / "history.jsonl").is_file()
        assert (run.run_dir / "tasks" / task_id / "answer.md").read_text().startswith("Counted:")


def assert_usage_adds_up(run, ids: list[str], log: list[dict]) -> None:
    """Per task equals what the server's replies said, run total = tasks + reduce."""
    for task_id in ids:
        served = [r for r in requests_for(log, f"Count words in {task_id}")]
        assert len(served) == 2
    summary = run.summary
    per_task_total = sum(u.total for u in summary.per_task.values() if u is not None)
    assert per_task_total > 0
    assert summary.usage.total == per_task_total + run.reduce.usage.total
    assert sum(w.tasks for w in summary.per_worker.values()) == 4
    assert summary.tasks.model_dump() == {"total": 4, "succeeded": 4, "unverified": 0, "failed": 0, "needs_input": 0,
                                          "limit": 0, "unfinished": 0}


def test_map_reduce_run_writes_the_run_directory_and_accounts_usage(tmp_path: Path) -> None:
    run = run_word_count(tmp_path)
    # the map tasks answer after a successful code_run; the reduce answers without any tool run, backed by them
    assert run.status == "succeeded" and run.exit_code == 0
    assert [r.status for r in run.results] == ["succeeded"] * 4
    ids = ["a.txt", "b.txt", "c.txt", "d.txt"]
    assert_each_task_ran_once_on_its_own_input(run, ids)
    assert (run.run_dir / "spec.jsonl").is_file()
    assert (run.run_dir / "reduce" / "merged.md").read_text().strip() == "merged: all four files counted"
    assert run.reduce.status == "succeeded" and run.reduce.reason == "backed by its 4 succeeded input(s)"
    assert_usage_adds_up(run, ids, read_jsonl(tmp_path / "requests.jsonl"))
    events = [e["event"] for e in ledger(run.run_dir)]
    assert events[0] == "run_started" and events[-1] == "run_finished"
    assert events.count("queued") == 4 and events.count("succeeded") == 4 and events.count("unverified") == 1  # the reduce


def test_list_of_prompts_and_memory_commit(tmp_path: Path) -> None:
    """`fanout([...])` with the memory tier: a learning is committed through the store (a fact nothing
    verified waits there as a proposal under memory.admit: verified)."""
    remember = [
        {"content": "check", "tool_calls": [{"name": "code_run", "arguments": {"type": "python", "script": "print(2+2)"}}]},
        {"tool_calls": [{"name": "start_long_term_update", "arguments": {}}]},
        {"tool_calls": [{"name": "file_patch", "arguments": {
            "path": "memory/L2/facts.md", "old_content": "## Environment\n",
            "new_content": "## Environment\n- python computes 2+2 as 4 (verified with code_run)\n"}}]},
        {"content": "remembered"},
    ]
    script = {"tasks": [{"match": "remember", "turns": remember}, answer_task("plain")]}
    server = start_server(script, tmp_path / "requests.jsonl")
    try:
        run = fanout(["remember arithmetic", "plain task"], defaults={"model": f"scripted@{server.base_url}"},
                     out=tmp_path / "runs", display="quiet", settings=load_settings())
    finally:
        server.stop()
    assert run.status == "succeeded"
    from memory_shared import MemoryStore

    store = MemoryStore(load_settings().memory_root)
    from memory_shared.proposals import load_proposals

    with store.snapshot() as snap:
        assert any("2+2 as 4" in c["text"] for p in load_proposals(snap.path) for c in p.changes)
    remembered = next(r for r in run.results if r.answer == "remembered")
    assert remembered.memory_generation is not None


def test_memory_commit_false_gives_workers_no_way_to_write_memory(tmp_path: Path) -> None:
    turns = [{"tool_calls": [{"name": "start_long_term_update", "arguments": {}}]}, {"content": "tried"}]
    server = start_server({"tasks": [{"match": ".*", "turns": turns}]}, tmp_path / "requests.jsonl")
    try:
        run = fanout({"tasks": [{"prompt": "try to save"}], "memory": {"commit": False},
                      "defaults": {"model": f"scripted@{server.base_url}"}}, out=tmp_path / "runs", display="quiet")
    finally:
        server.stop()
    history = read_jsonl(Path(run.results[0].history_path))
    outputs = [t["output"] for line in history for t in line.get("tool_results", [])]
    assert any("unknown tool 'start_long_term_update'" in o for o in outputs)


def test_reduce_goes_hierarchical_when_results_exceed_the_chunk_budget(tmp_path: Path) -> None:
    long_line = "x" * 1500
    script = {"tasks": [
        {"match": "this is part \\d+ of \\d+", "turns": [{"content": "partial summary"}]},
        {"match": "Summarize all", "turns": [{"content": "final summary"}]},
        {"match": "produce", "turns": [{"content": long_line}]},
    ]}
    server = start_server(script, tmp_path / "requests.jsonl")
    prompts = [f"produce {i}" for i in range(6)]
    try:
        run = fanout(prompts, defaults={"model": f"scripted@{server.base_url}"}, concurrency=3,
                     reduce={"prompt": "Summarize all the parts.",
                             "chunk_tokens": 1000}, out=tmp_path / "runs", display="quiet")
    finally:
        server.stop()
    assert run.status == "unverified"  # every answer here is text with no tool run behind it
    assert run.reduce.levels >= 1
    partials = sorted(p.name for p in (run.run_dir / "reduce").iterdir() if p.name.startswith("reduce-1-"))
    assert len(partials) >= 2  # 6 x 1500 chars do not fit 3000 chars: at least two groups
    assert (run.run_dir / "reduce" / "answer.md").read_text().strip() == "final summary"
    log = read_jsonl(tmp_path / "requests.jsonl")
    finals = [r for r in log if "Summarize all" in str(r["body"]["messages"][1]["content"])
              and "this is part" not in str(r["body"]["messages"][1]["content"])]
    assert len(finals) == 1 and finals[0]["body"]["messages"][1]["content"].count("partial summary") == len(partials)


def test_runs_list_show_and_tail(tmp_path: Path) -> None:
    import json

    server = start_server({"tasks": [answer_task("listed")]}, tmp_path / "requests.jsonl")
    try:
        run = fanout(["listed one", "listed two"], defaults={"model": f"scripted@{server.base_url}"},
                     out=tmp_path / "runs", display="quiet")
    finally:
        server.stop()
    listed = invoke_ga("runs", "list", "--out", str(tmp_path / "runs"), "--json")
    rows = json.loads(listed.output)
    assert [(r["run_id"], r["status"], r["finished"], r["tasks"]) for r in rows] == [(run.run_id, "succeeded", 2, 2)]
    shown = invoke_ga("runs", "show", run.run_id, "--out", str(tmp_path / "runs"), "--json")
    data = json.loads(shown.output)
    assert data["summary"]["status"] == "succeeded" and len(data["results"]) == 2
    tail = invoke_ga("runs", "tail", run.run_id, "--out", str(tmp_path / "runs"), "-n", "2")
    lines = tail.output.strip().splitlines()
    assert len(lines) == 2 and "run_finished" in lines[-1] and "status succeeded" in lines[-1]
    missing = invoke_ga("runs", "show", "no-such-run", "--out", str(tmp_path / "runs"))
    assert missing.exit_code == 2 and "no run 'no-such-run'" in missing.output
