"""The agent loop end to end: real scripted server over HTTP, real tools, real memory store."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from configs import load_settings
from memory_shared.proposals import load_proposals
from worker import Runtime, TaskSpec, Worker
from worker.history import replay
from worker.model import LLMClient
from worker.modelconfig import resolve_model
from worker.scripted import ScriptedServer


def call(name: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments}


def raw_call(name: str, arguments: str) -> dict:
    return {"name": name, "arguments": arguments}


@pytest.fixture
def settings(tmp_path):
    return load_settings({"worker.max_turns": 30}, user_file=tmp_path / "none", project_file=tmp_path / "none")


def run_script(tmp_path: Path, settings, turns: list[dict], store=None, task="do the task", **worker_args):
    log_path = tmp_path / "requests.jsonl"
    script = {"tasks": [{"match": ".*", "turns": turns}]}
    with ScriptedServer(script, log_path=log_path) as server:
        model = LLMClient(resolve_model(f"scripted@{server.base_url}", settings))
        worker = Worker(TaskSpec(task, task_id="t1", workdir=tmp_path / "work", settings=settings,
                                 history_path=tmp_path / "t1" / "history.jsonl"),
                        Runtime(model=model, store=store, **worker_args))
        result = worker.run()
    requests = [json.loads(line)["body"] for line in log_path.read_text().splitlines()]
    return result, requests


def tool_messages(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def test_multi_turn_task_uses_each_tool(tmp_path, settings, store):
    turns = [
        {"tool_calls": [call("file_write", path="notes.txt", content="alpha\nbeta\n")]},
        {"tool_calls": [call("file_patch", path="notes.txt", old_content="beta", new_content="gamma")]},
        {"tool_calls": [call("file_read", path="notes.txt")]},
        {"tool_calls": [call("code_run", script="print(open('notes.txt').read().upper())", type="python")]},
        {"tool_calls": [call("update_working_checkpoint", key_info="notes.txt holds ALPHA GAMMA")]},
        {"tool_calls": [call("start_long_term_update")]},
        {"tool_calls": [call("file_patch", path="memory/L2/facts.md", old_content="## Environment",
                             new_content="## Environment\n- code_run python prints uppercase fine")]},
        {"content": "Done: ALPHA GAMMA"},
    ]
    result, requests = run_script(tmp_path, settings, turns, store=store)
    assert result.status == "succeeded", result.reason
    assert result.answer == "Done: ALPHA GAMMA"
    assert result.turns == 8
    assert (tmp_path / "work" / "notes.txt").read_text() == "alpha\ngamma\n"
    assert "ALPHA\nGAMMA" in tool_messages(requests[4])[-1]
    assert "notes.txt holds ALPHA GAMMA" in requests[5]["messages"][-1]["content"]  # key_info in the anchor
    assert result.usage.prompt > 0 and result.usage.completion > 0
    # the memory write passed the gate (evidence: the earlier code_run); a fact nothing verified waits for review
    assert result.memory_generation is not None and result.memory["proposed"] == ["L2/facts.md"]
    with store.snapshot() as snap:
        [proposal] = load_proposals(snap.path)
    assert "code_run python prints uppercase fine" in proposal.changes[0]["text"]
    assert "t1" in store.log()[-1].message
    # history: one line per turn, and replaying it gives exactly the requests the server received
    assert [r["messages"] for r in requests] == replay(Path(result.history_path))


def test_memory_write_refused_when_task_fails(tmp_path, settings, store):
    settings.worker.max_turns = 4
    turns = [
        {"tool_calls": [call("code_run", script="print('ok')", type="python")]},
        {"tool_calls": [call("start_long_term_update")]},
        {"tool_calls": [call("file_write", path="memory/L2/new.md", content="a guess")]},
        {"tool_calls": [call("code_run", script="exit 3", type="bash")]},
    ]
    head = store.head()
    result, _ = run_script(tmp_path, settings, turns, store=store)
    assert result.status == "limit"
    assert result.memory_generation is None
    assert store.head() == head


def test_memory_write_refused_without_evidence(tmp_path, settings, store):
    turns = [
        {"tool_calls": [call("start_long_term_update")]},
        {"tool_calls": [call("file_write", path="memory/L2/guess.md", content="unverified")]},
        {"content": "finished"},
    ]
    head = store.head()
    result, _ = run_script(tmp_path, settings, turns, store=store)
    # a file_write proves nothing about an answer: nothing that ran backs "finished"
    assert result.status == "unverified" and result.reason == "no run backs the answer (file_write computed nothing)"
    assert result.memory_generation is None and store.head() == head


@pytest.mark.parametrize(
    "bad_call, expected",
    [
        (raw_call("file_read", '{"path": "x.txt'), "not valid JSON"),  # cut inside a string: never repaired
        (raw_call("file_reed", '{"path": "x.txt"}'), "unknown tool 'file_reed'"),
        (raw_call("file_read", '{"path": "x.txt", "start": "first"}'), "bad arguments for file_read: start"),
    ],
)
def test_malformed_call_goes_back_to_model_and_loop_continues(tmp_path, settings, bad_call, expected):
    result, requests = run_script(tmp_path, settings, [{"tool_calls": [bad_call]}, {"content": "recovered"}])
    # answered, but no tool ran (a malformed call is not a run): nothing backs the answer
    assert result.status == "unverified" and result.answer == "recovered"
    assert result.reason == "no tool ran"
    assert expected in tool_messages(requests[1])[-1]
    if bad_call["name"] == "file_read":  # the error shows the shape to send
        assert '<tool_call>{"name": "file_read", "arguments": {"path": "..."}}</tool_call>' in tool_messages(requests[1])[-1]


def test_a_code_run_without_a_script_is_shown_the_code_block_form_and_told_again_before_an_answer(tmp_path, settings):
    result, requests = run_script(tmp_path, settings, [{"tool_calls": [raw_call("code_run", "{}")]},
                                                       {"content": "recovered"}])
    error = tool_messages(requests[1])[-1]
    assert error.startswith("error: bad arguments for code_run: script")
    assert "```python\n...\n```" in error and '{"name": "code_run", "arguments": {"type": "python"}}' in error
    # it answered without running anything after a call that could not be read: the second chance names the fix
    note = requests[2]["messages"][-1]["content"]
    assert note.startswith("[ga] Your code_run call could not be read, so nothing ran.") and "```python" in note
    assert result.status == "unverified" and result.reason == "no tool ran; after a second chance"


def test_three_malformed_calls_in_a_row_fail_the_task(tmp_path, settings):
    bad = {"tool_calls": [raw_call("file_read", "{oops")]}
    result, requests = run_script(tmp_path, settings, [bad, bad, bad, {"content": "never"}])
    assert result.status == "failed"
    assert "3 malformed tool calls in a row" in result.reason
    assert len(requests) == 3


def test_ask_user_without_a_person_goes_on_alone_then_ends_with_needs_input(tmp_path, settings):
    ask = {"tool_calls": [call("ask_user", question="Which branch?", candidates=["main", "dev"])]}
    result, requests = run_script(tmp_path, settings, [ask, ask])
    assert tool_messages(requests[1])[-1].startswith("nobody is watching this task")
    assert result.status == "needs_input"
    assert result.question == "Which branch?"


def test_a_task_asked_nothing_answers_after_being_told_nobody_is_there(tmp_path, settings):
    turns = [{"tool_calls": [call("ask_user", question="What should I do next?")]},
             {"tool_calls": [call("code_run", type="python", script="print(55)")]}, {"content": "55"}]
    result, _ = run_script(tmp_path, settings, turns)
    assert result.status == "succeeded" and result.answer == "55"


def test_ask_user_with_a_person_gets_the_answer(tmp_path, settings):
    asked = []

    def person(question, candidates):
        asked.append((question, candidates))
        return "dev"

    turns = [{"tool_calls": [call("ask_user", question="Which branch?", candidates=["main", "dev"])]},
             {"content": "using dev"}]
    result, requests = run_script(tmp_path, settings, turns, interactive=True, ask=person)
    assert result.status == "unverified" and result.reason == "no tool ran"  # asking is not a run
    assert asked == [("Which branch?", ["main", "dev"])]
    assert "dev" in tool_messages(requests[1])[-1]


def test_token_limit_stops_with_limit(tmp_path, settings):
    settings.worker.max_tokens = 50
    turns = [{"tool_calls": [call("code_run", script="print(1)", type="python")]}] * 5 + [{"content": "x"}]
    result, requests = run_script(tmp_path, settings, turns)
    assert result.status == "limit" and "token limit" in result.reason
    assert len(requests) < 6


def test_model_error_fails_the_task_with_reason(tmp_path, settings):
    script = {"tasks": [{"match": ".*", "turns": [{"content": "x"}],
                         "faults": [{"turn": 0, "kind": "unauthorized"}]}]}
    with ScriptedServer(script) as server:
        model = LLMClient(resolve_model(f"scripted@{server.base_url}", settings))
        result = Worker(TaskSpec("t", task_id="t9", workdir=tmp_path / "w", settings=settings,
                                 history_path=tmp_path / "h.jsonl"), Runtime(model=model)).run()
    assert result.status == "failed" and "model error" in result.reason
