"""`ga replay`: a recorded run again with zero model calls (its scripted server stopped first), what a
change to an input or to the system prompt does to it, a fork onto a second server from turn 2, and
the recordings kept in the repository (tests/fixtures/, tests/real_model/)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from configs import load_settings
from memory_shared import MemoryStore
from orchestrator import fanout
from orchestrator.replay import replay
from tests.fanout_support import read_jsonl
from tests.ga_support import invoke_ga, run_ga
from tests.real_model_support import ALPHA_WORDS, FIXTURES, names
from worker.scripted import ScriptedServer

FIXTURE_RUNS = Path(__file__).resolve().parents[1] / "fixtures"


def code(script: str) -> dict:
    return {"name": "code_run", "arguments": {"type": "python", "script": script}}


# three turns: read the input, add its numbers, answer with what the last run printed
SCRIPT = {"tasks": [{"match": ".*", "turns": [
    {"content": "Reading the numbers.", "tool_calls": [code("print(open('data.txt').read().split())")]},
    {"content": "Adding them.", "tool_calls": [code("print(sum(map(int, open('data.txt').read().split())))")]},
    {"content": "The sum is:", "echo_last_tool_result": True}]}]}


@pytest.fixture
def settings(tmp_path, ga_home):
    return load_settings(user_file=tmp_path / "none", project_file=tmp_path / "none")


@pytest.fixture
def recorded(tmp_path, settings):
    """A two-task fan-out recorded through a scripted server that is stopped before the test goes on:
    (run directory, the server's request log)."""
    data = tmp_path / "data.txt"
    data.write_text("3 4 5\n")
    log = tmp_path / "recorded.jsonl"
    with ScriptedServer(SCRIPT, log_path=log) as server:
        spec = {"name": "sums", "allow_paths": [str(tmp_path)], "defaults": {"model": f"scripted@{server.base_url}"},
                "tasks": [{"id": f"t{i}", "prompt": f"Add the numbers in data.txt ({i}).", "inputs": [str(data)]}
                          for i in range(2)]}
        run = fanout(spec, settings=settings, out=tmp_path / "runs", display="quiet", preflight=False)
    assert run.status == "succeeded" and len(read_jsonl(log)) == 6
    return run.run_dir, log


def replay_cli(*args: str, out: Path):
    return invoke_ga("replay", *args, "--out", str(out))


def test_a_recorded_fanout_replays_identically_without_a_model(tmp_path, recorded):
    run_dir, log = recorded
    result = replay_cli(str(run_dir), out=tmp_path / "replays")
    assert result.exit_code == 0, result.output
    assert "replayed identically" in result.output
    assert len(read_jsonl(log)) == 6  # no request reached the (stopped) server, nor was one needed
    [new] = list((tmp_path / "replays").iterdir())
    summary = json.loads((new / "summary.json").read_text())
    assert summary["replay_of"] == run_dir.name and summary["identical"] is True
    assert summary["usage"]["total"] == 0 and summary["tasks"]["succeeded"] == 2
    assert [r["status"] for r in read_jsonl(new / "results.jsonl")] == ["succeeded", "succeeded"]
    assert (new / "tasks" / "t0" / "workdir" / ".ga").is_dir()  # the tools ran again, in the new run directory


def test_a_changed_input_stops_the_replay_at_the_turn_of_its_tool(tmp_path, recorded):
    run_dir, log = recorded
    (tmp_path / "data.txt").write_text("3 4 6\n")
    result = replay_cli(str(run_dir), "t0", out=tmp_path / "replays")
    assert result.exit_code == 1, result.output
    assert "task t0, turn 1: the output of code_run differs from the recording" in result.output
    shown = [line.strip() for line in result.output.splitlines()]
    assert "-['3', '4', '5']" in shown and "+['3', '4', '6']" in shown, result.output  # both sides, as a diff
    assert "turn 2" not in result.output  # stopped there
    kept = replay_cli(str(run_dir), "t0", "--keep-going", "--json", out=tmp_path / "kept")
    assert kept.exit_code == 1
    [task] = json.loads(kept.output[kept.output.index('{\n'):])["tasks"]  # after the workers' log lines, if any
    assert task["differences"] == [f"task t0, turn {n}: the output of code_run differs from the recording"
                                   for n in (1, 2)] + ["task t0, turn 4: ga asked for turn 4, the recording ends at turn 3"]
    # the recorded answer (12) is no number the changed run printed (13): ga's note asks for a turn never recorded
    assert (task["status"], task["recorded_status"], task["turns"]) == ("failed", "succeeded", 4)
    assert len(read_jsonl(log)) == 6


def test_a_changed_system_prompt_fails_naming_the_field(tmp_path, recorded, settings):
    run_dir, _ = recorded
    store = MemoryStore(settings.memory_root)
    with store.transaction(message="a new fact", author="test") as tx:
        index = (store.snapshot().path / "L1" / "index.md").read_text()
        tx.write("L1/index.md", index + "- Sums: L2/facts.md\n")
    result = replay_cli(str(run_dir), out=tmp_path / "replays")
    assert result.exit_code == 1
    assert "task t0, turn 1: the request differs at messages[0].content" in result.output
    assert "task t1, turn 1: the request differs at messages[0].content" in result.output


def test_a_fork_from_turn_2_asks_the_second_server_only_the_live_turns(tmp_path, recorded):
    run_dir, log = recorded
    second_log = tmp_path / "second.jsonl"
    with ScriptedServer(SCRIPT, log_path=second_log) as second:
        result = invoke_ga("replay", str(run_dir), "t1", "--from", "2", "--model", f"scripted@{second.base_url}",
                           "--out", str(tmp_path / "forks"))
    assert result.exit_code == 0, result.output
    asked = [r["body"] for r in read_jsonl(second_log)]
    assert len(asked) == 2  # turns 2 and 3; turn 1 came from the recording
    recorded_t1 = [r["body"] for r in read_jsonl(log) if "(1)" in r["body"]["messages"][1]["content"]]
    assert json.dumps(asked[0]) == json.dumps(recorded_t1[1])  # the recorded turn-2 request, byte for byte
    [fork] = list((tmp_path / "forks").iterdir())
    summary = json.loads((fork / "summary.json").read_text())
    assert summary["forked_from"] == f"{run_dir.name}/t1@2"
    [line] = read_jsonl(fork / "results.jsonl")
    recorded_usage = next(r for r in read_jsonl(run_dir / "results.jsonl") if r["task_id"] == "t1")["usage"]
    assert 0 < summary["usage"]["total"] == line["usage"]["total"] < recorded_usage["total"]  # live turns only
    shown = invoke_ga("runs", "show", str(fork), "t1")
    assert shown.exit_code == 0
    assert shown.output.index("turn 1 ") < shown.output.index("the recording ends here: turn 2") \
        < shown.output.index("turn 2 ")


def test_the_run_recorded_in_the_repository_replays_identically(tmp_path):
    [run_dir] = list((FIXTURE_RUNS / "replay_run").iterdir())
    result = replay_cli(str(run_dir), out=tmp_path / "replays")
    assert result.exit_code == 0, result.output
    assert "first: succeeded after 3 turn(s) · identical" in result.output


def test_a_run_of_an_earlier_ga_replays_with_its_settings_of_then(tmp_path):
    [run_dir] = [p for p in (FIXTURE_RUNS / "old_runs").iterdir() if p.is_dir()]
    result = replay_cli(str(run_dir), out=tmp_path / "replays")
    assert result.exit_code == 0, result.output
    assert "worker.second_chance 0" in " ".join(result.output.split())


def test_what_cannot_be_replayed_is_one_line(tmp_path, recorded):
    run_dir, _ = recorded
    missing = replay_cli(str(tmp_path / "nothing"), out=tmp_path / "replays")
    assert missing.exit_code != 0 and "no run" in missing.output
    beyond = invoke_ga("replay", str(run_dir), "t0", "--from", "9", "--out", str(tmp_path / "forks"))
    assert beyond.exit_code != 0 and "--from 9: task t0 has turns 1 to 3" in " ".join(beyond.output.split())
    (tmp_path / "data.txt").unlink()
    gone = replay_cli(str(run_dir), out=tmp_path / "replays")
    assert gone.exit_code != 0 and "data.txt of task t0 is gone" in " ".join(gone.output.split())
    older = tmp_path / "older.history.jsonl"  # a history from before whole requests were recorded
    older.write_text(json.dumps({"turn": 1, "messages": [], "reply": "hi"}) + "\n")
    unreadable = replay_cli(str(older), out=tmp_path / "replays")
    assert unreadable.exit_code != 0
    assert "line 1 has no 'sent'/'received' (written by a ga older than whole histories)" in \
        " ".join(unreadable.output.split())
    assert not (tmp_path / "replays").exists()  # nothing half-done


# The real-model recordings were made by the ga of 2026-11-30; where this ga builds another request from the
# same replies, the replay names the turn and field. None: replays identically.
REAL_MODEL = {
    # ga now answers a lone code block with a correction (nothing ran): it asks for a turn nobody recorded
    "qwen0.5b-text-fib": (2, "end"),
    "qwen1.5b-text-fanout-reduce": None,
    # ga now reads the fenced JSON call in the text and runs it: it asks for a turn nobody recorded
    "qwen1.5b-native-fanout-fib": (2, "end"),
    "qwen1.5b-native-fanout-squares": (2, "end"),
    "qwen1.5b-native-fanout-words": (2, "end"),
    "qwen1.5b-native-fib": (2, "end"),
    # the history line counts the tool output's chars with the real workdir path, which the fixture wrote as WORKDIR
    "qwen1.5b-native-fenced-json-rewritten-by-proxy": (2, "messages[4].content"),
    # ga now cuts the <tool_result> the model invented from the assistant message
    "qwen1.5b-text-fanout-fib": (2, "messages[2].content"),
    "qwen1.5b-text-fanout-words": (2, "messages[2].content"),
    "qwen1.5b-text-fib": (2, "messages[2].content"),
}

# Python 3.10 prints no ^^^ line under a traceback's source line (3.11's fine-grained error locations): where a
# recording made on 3.11 has a failed code_run, its re-run on 3.10 differs there first.
ON_PYTHON_310 = {"qwen1.5b-native-fenced-json-rewritten-by-proxy": (1, "code_run")}


def test_every_real_model_recording_has_an_expectation():
    assert sorted(REAL_MODEL) == names()


@pytest.mark.parametrize("name", sorted(REAL_MODEL))
def test_real_model_recordings_replay_in_their_tool_mode(tmp_path, settings, name):
    (tmp_path / "alpha.txt").write_text(ALPHA_WORDS)
    mode = "text" if "-text-" in name else "native"
    outcome = replay(str(FIXTURES / f"{name}.history.jsonl"), settings=settings, runs_dir=tmp_path / "runs",
                     tool_mode=mode, inputs=[tmp_path / "alpha.txt"])
    [task] = outcome.tasks
    expected = ON_PYTHON_310.get(name, REAL_MODEL[name]) if sys.version_info < (3, 11) else REAL_MODEL[name]
    if expected is None:
        assert outcome.identical and outcome.exit_code == 0, [d.line() for d in task.divergences]
        return
    [divergence] = task.divergences
    turn, where = expected
    assert (divergence.turn, divergence.kind if where == "end" else divergence.where) == (turn, where), divergence.line()


def test_a_history_file_replays_from_the_command_line(tmp_path):
    result = replay_cli(str(FIXTURES / "qwen1.5b-text-fanout-reduce.history.jsonl"), "--tool-mode", "text", out=tmp_path / "r")
    assert result.exit_code == 0, result.output
    assert "qwen1.5b-text-fanout-reduce: unverified after 1 turn(s) · identical" in result.output


LATE = {"tasks": [
    {"match": "^Add", "turns": SCRIPT["tasks"][0]["turns"]},
    {"match": "^Count", "turns": [
        {"content": "Counting.", "tool_calls": [code("print(len(open('data.txt').read().split()))")]},
        {"content": "Checking.", "tool_calls": [code("print(undefined_name)")]},
        {"content": "Done:", "echo_last_tool_result": True}]}]}


def test_from_last_good_forks_a_failed_task_in_its_run_from_after_its_last_good_tool_run(tmp_path, monkeypatch):
    monkeypatch.setenv("GA_WORKER__SECOND_CHANCE", "0")  # the script has no reply to a second-chance note
    (tmp_path / "data.txt").write_text("3 4 5\n")
    log = tmp_path / "requests.jsonl"
    with ScriptedServer(LATE, log_path=log) as server:
        tasks = tmp_path / "tasks.yaml"
        tasks.write_text(json.dumps({"version": 1, "name": "late", "defaults": {"model": f"scripted@{server.base_url}"},
                                     "tasks": [{"id": "add", "prompt": "Add the numbers in data.txt.", "inputs": ["data.txt"]},
                                               {"id": "count", "prompt": "Count the numbers in data.txt.",
                                                "inputs": ["data.txt"]}]}))
        first = invoke_ga("fanout", str(tasks), "--out", str(tmp_path / "runs"), "--no-preflight")
        assert first.exit_code == 1, first.output
        [run_dir] = list((tmp_path / "runs").iterdir())
        recorded = [r["body"] for r in read_jsonl(log)]
        before = json.loads((run_dir / "summary.json").read_text())
        resumed = invoke_ga("fanout", str(tasks), "--resume", run_dir.name, "--retry-failed", "--from-last-good",
                            "--out", str(tmp_path / "runs"), "--no-preflight")
    assert resumed.exit_code == 1, resumed.output  # the same script fails the same way: still unverified
    asked = [r["body"] for r in read_jsonl(log)][len(recorded):]
    assert len(asked) == 2  # turns 2 and 3 of `count` only; `add` succeeded and is left alone
    count_turn_2 = [b for b in recorded if b["messages"][1]["content"].startswith("Count")][1]
    assert json.dumps(asked[0]) == json.dumps(count_turn_2)
    after = json.loads((run_dir / "summary.json").read_text())
    assert after["forks"] == {"count": f"{run_dir.name}/count@2"}
    spent = next(r for r in read_jsonl(run_dir / "results.jsonl") if r["task_id"] == "count")["usage"]["total"]
    failed = before["per_task"]["count"]["total"]
    live = spent - failed  # the retry keeps what the failed attempt spent and adds its live turns
    assert 0 < live < failed and after["usage"]["total"] == before["usage"]["total"] + live
    assert after["per_task"]["count"]["total"] == spent and after["fork_model"] == f"scripted@{server.base_url}"
    assert (run_dir / "tasks" / ".count.attempt-1" / "history.jsonl").is_file()  # the first attempt kept aside
    shown = invoke_ga("runs", "show", str(run_dir), "count")
    assert "the recording ends here: turn 2 on ran live" in shown.output


def test_from_last_good_against_a_dead_endpoint_stops_after_the_preflight_in_one_line(tmp_path, monkeypatch):
    """The fork's live model is the one the run recorded; when its endpoint is gone (a nested run's parent model, a
    stopped server) the pre-flight says so in one line and nothing is retried or started."""
    monkeypatch.setenv("GA_WORKER__SECOND_CHANCE", "0")
    (tmp_path / "data.txt").write_text("3 4 5\n")
    with ScriptedServer(LATE) as server:
        tasks = tmp_path / "tasks.yaml"
        tasks.write_text(json.dumps({"version": 1, "name": "late", "defaults": {"model": f"scripted@{server.base_url}"},
                                     "tasks": [{"id": "count", "prompt": "Count the numbers in data.txt.",
                                                "inputs": ["data.txt"]}]}))
        first = invoke_ga("fanout", str(tasks), "--out", str(tmp_path / "runs"), "--no-preflight")
    assert first.exit_code == 1, first.output
    [run_dir] = list((tmp_path / "runs").iterdir())
    ledger = (run_dir / "ledger.jsonl").read_text()
    done = run_ga("fanout", str(tasks), "--resume", run_dir.name, "--retry-failed", "--from-last-good", "--out",
                  str(tmp_path / "runs"), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and f"endpoint {server.base_url} does not answer" in lines[0], done.stderr
    assert "--model" in lines[0] and "nothing was started" in lines[0]
    assert (run_dir / "ledger.jsonl").read_text() == ledger  # no attempt started
