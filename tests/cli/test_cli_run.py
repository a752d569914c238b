"""`ga run` as a user runs it: a real process, the offline scripted model, exit codes (what it prints where:
test_output_discipline.py)."""
from __future__ import annotations

import json
from pathlib import Path

from tests.fanout_support import answer_task, start_server
from tests.ga_support import run_ga

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "configs" / "examples" / "scripts" / "hello.yaml"
NO_MODEL = {"OPENAI_API_KEY": None, "GA_MODEL": None}  # no model but the one a test names


def test_run_computes_with_a_tool_and_prints_json(tmp_path):
    done = run_ga("run", "what is 6*7?", "--model", f"scripted:{HELLO}", "--json", cwd=tmp_path, env=NO_MODEL)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "succeeded"
    assert "42" in result["answer"]  # echoed from the real code_run output
    history = Path(result["history_path"])
    assert history.is_file() and len(history.read_text().splitlines()) == 2
    assert history.is_relative_to(tmp_path / "runs")


def test_run_without_a_model_is_a_one_line_error_with_exit_2(tmp_path):
    done = run_ga("run", "Hello", cwd=tmp_path, env=NO_MODEL)
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "scripted:" in lines[0] and "OPENAI_API_KEY" in lines[0]


def test_run_that_fails_exits_1(tmp_path):
    script = tmp_path / "fail.yaml"
    script.write_text("tasks:\n  - match: '.*'\n    turns:\n"
                      "      - tool_calls: [{name: file_read, arguments: '{broken'}]\n" * 1
                      + "      - tool_calls: [{name: file_read, arguments: '{broken'}]\n" * 2)
    done = run_ga("run", "anything", "--model", f"scripted:{script}", "--json", cwd=tmp_path, env=NO_MODEL)
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["status"] == "failed"


def test_run_bad_workdir_exits_2(tmp_path):
    done = run_ga("run", "x", "--model", f"scripted:{HELLO}", "--workdir", str(tmp_path / "nope"),
                  cwd=tmp_path, env=NO_MODEL)
    assert done.returncode == 2 and "--workdir" in done.stderr


def _free_port() -> int:
    import socket

    with socket.socket() as probe:  # bound, then closed: nothing listens there afterwards
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_run_against_a_dead_endpoint_is_one_line_at_once_and_starts_nothing(tmp_path):
    url = f"http://127.0.0.1:{_free_port()}/v1"
    done = run_ga("run", "Hello", "--model", f"scripted@{url}", cwd=tmp_path, env=NO_MODEL)
    assert done.returncode == 2, done.stdout
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and f"endpoint {url} does not answer" in lines[0] and "--no-preflight" in lines[0]
    assert not (tmp_path / "runs").exists()  # no session, no run directory


def test_run_no_preflight_as_the_error_suggests(tmp_path):
    server = start_server({"tasks": [answer_task("Hello", "hi")]}, tmp_path / "requests.jsonl")
    try:
        done = run_ga("run", "Hello", "--model", f"scripted@{server.base_url}", "--no-preflight", "--json",
                      cwd=tmp_path, env=NO_MODEL)
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "succeeded"


def test_ga_model_wins_over_a_continued_sessions_model(tmp_path):
    first = start_server({"tasks": [answer_task("Hello", "hi")]}, tmp_path / "first.jsonl")
    # turn = the assistant messages already sent: the follow-up's turns are 2 and 3 of the conversation
    follow_up = {"match": "Hello", "turns": [{"content": "-"}, {"content": "-"}, *answer_task("", "hi again")["turns"]]}
    second = start_server({"tasks": [follow_up]}, tmp_path / "second.jsonl")
    try:
        started = run_ga("run", "Hello", "--model", f"scripted@{first.base_url}", "--json", cwd=tmp_path, env=NO_MODEL)
        assert started.returncode == 0, started.stderr
        session = json.loads(started.stdout)["task_id"]  # the session id
        went_on = run_ga("run", "--continue", session, "again", "--json", cwd=tmp_path,
                         env={**NO_MODEL, "GA_MODEL": f"scripted@{second.base_url}"})
        assert went_on.returncode == 0, went_on.stderr
    finally:
        first.stop()
        second.stop()
    assert json.loads(went_on.stdout)["answer"].strip().endswith("hi again")
    assert len((tmp_path / "second.jsonl").read_text().splitlines()) == 2  # both turns of the follow-up went there
