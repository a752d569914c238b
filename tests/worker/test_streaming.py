"""Streaming: the scripted server speaks server-sent events; a streamed reply, tool calls assembled from their
deltas, equals the non-streamed reply to the same script; `ga run` streams (a client without on_text, as
fan-out workers use, does not)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from configs import load_settings
from tests.ga_support import run_ga
from worker.model import LLMClient
from worker.model.streaming import StreamAssembler, completion_events
from worker.modelconfig import resolve_model
from worker.scripted import ScriptedServer

ROOT = Path(__file__).resolve().parents[2]
LONG = "The answer, after reading both files, is that the service listens on port 8123 and logs to /var/log/svc."
SCRIPT = {"tasks": [{"match": "stream", "turns": [
    {"content": "Reading both files first.", "tool_calls": [
        {"name": "file_read", "arguments": {"path": "a.txt", "start": 1, "count": 40}},
        {"name": "code_run", "arguments": {"type": "python", "script": "print('x' * 300)\nprint({'deep': [1, 2, 3], 'port': 8123})"}}]},
    {"content": LONG}]}]}


def _reply(server: ScriptedServer, tmp_path: Path, streamed: bool, mode: str) -> tuple[object, list[str]]:
    settings = load_settings(user_file=tmp_path / "n", project_file=tmp_path / "n")
    config = resolve_model(f"scripted@{server.base_url}", settings).model_copy(update={"tool_mode": mode})
    client, pieces = LLMClient(config), []
    if streamed:
        client.on_text = pieces.append
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "stream it"}]
    tools = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in ("file_read", "code_run")]
    return client.chat(messages, tools), pieces


@pytest.mark.parametrize("mode", ["native", "text"])
def test_a_streamed_reply_equals_the_plain_one(tmp_path: Path, mode: str) -> None:
    with ScriptedServer(SCRIPT) as server:
        plain, _ = _reply(server, tmp_path, streamed=False, mode=mode)
        streamed, pieces = _reply(server, tmp_path, streamed=True, mode=mode)
        bodies = [r for r in server.requests]
    assert bodies[0].get("stream") is None and bodies[1]["stream"] is True
    assert bodies[1]["stream_options"] == {"include_usage": True}
    assert len(pieces) > 1 and "".join(pieces) == streamed.message["content"]
    assert streamed.content == plain.content
    if mode == "text":  # call ids are made up by the client in text mode
        assert streamed.message == plain.message
    assert [(c.name, json.loads(c.arguments)) for c in streamed.tool_calls] == \
           [(c.name, json.loads(c.arguments)) for c in plain.tool_calls] != []
    if mode == "native":
        assert [c.id for c in streamed.tool_calls] == [c.id for c in plain.tool_calls]
    # the same tokens (the server's prompt cache makes the second request's input cached)
    assert (streamed.usage.prompt, streamed.usage.completion) == (plain.usage.prompt, plain.usage.completion)
    assert streamed.usage.prompt > 0 and streamed.usage.cached == streamed.usage.prompt


def test_the_assembler_takes_chunks_cut_anywhere() -> None:
    completion = {"id": "c1", "created": 1, "model": "m", "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": "héllo wörld " * 5, "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "code_run", "arguments": json.dumps({"script": "é" * 40})}},
            {"id": "t2", "type": "function", "function": {"name": "file_read", "arguments": "{\"path\": \"a\"}"}}]}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
    wire = b": keep-alive\n\n" + b"".join(b"data: " + json.dumps(e).encode() + b"\n\n"
                                          for e in completion_events(completion, include_usage=True)) + b"data: [DONE]\n\n"
    for size in (1, 7, 4096):
        pieces: list[str] = []
        assembler = StreamAssembler(pieces.append)
        for i in range(0, len(wire), size):
            assembler.feed(wire[i:i + size])
        rebuilt = json.loads(assembler.completion())
        assert rebuilt["choices"][0]["message"] == completion["choices"][0]["message"]
        assert rebuilt["choices"][0]["finish_reason"] == "tool_calls" and rebuilt["usage"] == completion["usage"]
        assert "".join(pieces) == completion["choices"][0]["message"]["content"]


def test_ga_run_streams_its_turns_on_a_terminal_and_prints_only_the_answer_piped(tmp_path: Path) -> None:
    import io
    import sys

    import pexpect

    from tests.ga_support import ga_env

    log = tmp_path / "requests.jsonl"
    (tmp_path / "a.txt").write_text("alpha\n" * 10)
    with ScriptedServer(SCRIPT, log_path=log) as server:
        child = pexpect.spawn(sys.executable, ["-m", "cli", "run", "stream it", "--model", f"scripted@{server.base_url}"],
                              cwd=str(tmp_path), env=ga_env({"GA_HOME": str(tmp_path / "home")}), encoding="utf-8",
                              timeout=120, dimensions=(24, 80))
        child.logfile_read = screen = io.StringIO()
        child.expect_exact("Reading both files first.")  # a turn's text, drawn as it streams
        child.expect(pexpect.EOF)
        child.close()
        piped = run_ga("run", "stream it", "--model", f"scripted@{server.base_url}", cwd=tmp_path,
                       env={"GA_HOME": str(tmp_path / "home")}, timeout=120)
    assert child.exitstatus == 0, screen.getvalue()[-2000:]
    assert " ".join(screen.getvalue().split()).count(" ".join(LONG.split())) == 1  # streamed, not printed again
    bodies = [json.loads(line)["body"] for line in log.read_text().splitlines()]
    assert [b.get("stream") for b in bodies[:2]] == [True, True]
    assert piped.returncode == 0, piped.stderr[-2000:]
    assert piped.stdout.strip() == LONG.strip()  # piped: the answer alone, nothing drawn


def test_a_streamed_reply_that_loops_is_cut_where_it_repeats(tmp_path: Path) -> None:
    loop = "I will now print the number.\n" * 400  # 11,600 chars: the loop a small model ran to max_tokens
    script = {"tasks": [{"match": ".*", "turns": [{"content": loop}]}]}
    settings = load_settings(user_file=tmp_path / "n", project_file=tmp_path / "n")
    with ScriptedServer(script) as server:
        config = resolve_model(f"scripted@{server.base_url}", settings).model_copy(update={"stream": True})
        reply = LLMClient(config).chat([{"role": "user", "content": "count"}], [])
        body = server.requests[0]
    assert body["stream"] is True  # a worker's client streams when its model says so (no on_text needed)
    assert reply.finish_reason == "repetition"
    assert 200 <= len(reply.content) <= 1200  # cut a few hundred chars in, not read to the end
    assert reply.problem().startswith("your reply was discarded: the line 'I will now print the number.' repeated")
