"""A 300-turn session through the real loop and the scripted server over HTTP."""
from __future__ import annotations

import json

from configs import load_settings
from worker import Runtime, TaskSpec, Worker
from worker.model import LLMClient
from worker.modelconfig import resolve_model
from worker.scripted import ScriptedServer

TURNS = 300


def script() -> dict:
    turns = []
    for turn in range(TURNS - 1):
        if turn == TURNS - 2:  # what backs the answer: a run that counts the files written (a write backs none)
            call = {"name": "code_run", "arguments": {"type": "bash", "script": "ls out | wc -l"}}
        elif turn == 2:
            call = {"name": "update_working_checkpoint", "arguments": {"key_info": "KEY-42: the ledger is in big.txt"}}
        elif turn % 2:
            call = {"name": "file_read", "arguments": {"path": "big.txt", "start": 1 + turn % 50, "count": 40}}
        else:
            call = {"name": "file_write", "arguments": {"path": f"out/{turn}.txt", "content": "x" * 1500}}
        turns.append({"content": f"<thinking>step {turn}: " + " ".join(f"reasoning {i}" for i in range(60)) + "</thinking>", "tool_calls": [call]})
    turns.append({"content": "finished all steps"})
    return {"tasks": [{"match": ".*", "turns": turns}]}


def test_300_turns_stay_under_budget_keep_key_info_and_never_orphan_a_tool_result(tmp_path):
    settings = load_settings({"worker.max_turns": TURNS + 5, "context.context_tokens": 6000},
                             user_file=tmp_path / "n", project_file=tmp_path / "n")
    budget = settings.context.budget_chars
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "big.txt").write_text("".join(f"line {i} " + "data " * 30 + "\n" for i in range(400)))
    log_path = tmp_path / "requests.jsonl"
    with ScriptedServer(script(), log_path=log_path) as server:
        model = LLMClient(resolve_model(f"scripted@{server.base_url}", settings))
        result = Worker(TaskSpec("run the long ledger job", task_id="long", workdir=workdir, settings=settings,
                                 history_path=tmp_path / "history.jsonl"), Runtime(model=model)).run()
    assert result.status == "succeeded", result.reason
    assert result.turns == TURNS
    requests = [json.loads(line)["body"]["messages"] for line in log_path.read_text().splitlines()]
    assert len(requests) == TURNS
    evicted = 0
    for turn, messages in enumerate(requests, start=1):
        assert len(json.dumps(messages, ensure_ascii=False)) <= budget, f"turn {turn} over budget"
        assert messages[0]["role"] == "system" and messages[1]["role"] == "user"
        called: set[str] = set()
        for message in messages:
            for tool_call in message.get("tool_calls") or []:
                called.add(tool_call["id"])
            if message["role"] == "tool":
                assert message["tool_call_id"] in called, f"turn {turn}: orphaned tool result"
        answered = {m["tool_call_id"] for m in messages if m["role"] == "tool"}
        assert called <= answered, f"turn {turn}: a tool call without its result"
        if turn > 4:
            assert "KEY-42: the ledger is in big.txt" in messages[-1]["content"]
        evicted += messages[1] != requests[0][1]  # the first user message is gone
    assert evicted > TURNS / 2  # the budget really forced eviction, and key_info survived it
