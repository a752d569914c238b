"""The model client against the scripted server over real HTTP, and model resolution."""
from __future__ import annotations

import json
import logging
import socket
import threading
import time
import traceback
from pathlib import Path

import pytest

from configs import load_settings
from configs.logs import setup_logging
from worker.model import LLMClient, ModelError
from worker.modelconfig import ModelConfig, ModelConfigError, resolve_model
from worker.scripted import ScriptedServer, scripted_server

REPO = Path(__file__).resolve().parents[2]
HELLO = REPO / "configs" / "examples" / "scripts" / "hello.yaml"
SECRET = "sk-test-SECRET123456"
TOOLS = [{"type": "function", "function": {
    "name": "code_run", "description": "Run a script.",
    "parameters": {"type": "object", "required": ["script"], "properties": {
        "script": {"type": "string"}, "type": {"enum": ["python", "bash"], "default": "python"}}}}}]
COMPUTE = {"match": "compute", "turns": [
    {"content": "running", "tool_calls": [{"name": "code_run", "arguments": {"script": "print(6*7)"}}]},
    {"content": "result:", "echo_last_tool_result": True},
]}


def config(server: ScriptedServer, **fields) -> ModelConfig:
    base = dict(name="test", base_url=server.base_url, model="scripted", request_timeout=5, max_retries=3,
                backoff_base=0.01, backoff_max=0.05)
    return ModelConfig(**{**base, **fields})


def start(task: str = "compute 6*7") -> list[dict]:
    return [{"role": "system", "content": "You are a test."}, {"role": "user", "content": task}]


def settings_without_model(tmp_path: Path):
    return load_settings(user_file=tmp_path / "none.yaml", project_file=tmp_path / "none.yaml", environ={})


def test_native_tool_calls_and_the_history_message():
    with ScriptedServer({"tasks": [COMPUTE]}) as server:
        client = LLMClient(config(server))
        messages = start()
        reply = client.chat(messages, TOOLS)
        messages += [reply.message, {"role": "tool", "tool_call_id": reply.tool_calls[0].id, "content": "42"}]
        final = client.chat(messages, TOOLS)
        sent = list(server.requests)
    assert reply.content == "running"
    assert [(c.name, json.loads(c.arguments)) for c in reply.tool_calls] == [("code_run", {"script": "print(6*7)"})]
    assert reply.message == {"role": "assistant", "content": "running", "tool_calls": [
        {"id": reply.tool_calls[0].id, "type": "function", "function": {"name": "code_run", "arguments": '{"script": "print(6*7)"}'}}]}
    assert final.content == "result:\n42" and final.tool_calls == []
    assert sent[0]["tools"] == TOOLS and sent[1]["messages"][2] == reply.message
    assert reply.latency > 0


def test_text_mode_parses_tool_use_blocks_and_keeps_request_prefixes_stable():
    script = {"tasks": [{"match": "compute", "turns": [
        {"content": "step", "tool_calls": [{"name": "code_run", "arguments": {"script": f"print({i})"}}]} for i in range(6)]}]}
    with ScriptedServer(script) as server:
        client = LLMClient(config(server, tool_mode="text", schema_resend_every=3))
        messages = start()
        replies = []
        for i in range(6):
            reply = client.chat(messages, TOOLS)
            replies.append(reply)
            messages += [reply.message, {"role": "tool", "tool_call_id": reply.tool_calls[0].id, "content": f"out {i}"}]
        sent = [body["messages"] for body in server.requests]
    assert all("tools" not in body for body in server.requests)
    assert [(r.content, r.tool_calls[0].name, r.tool_calls[0].arguments) for r in replies[:2]] == [
        ("step", "code_run", '{"script": "print(0)"}'), ("step", "code_run", '{"script": "print(1)"}')]
    assert "<tool_use>" in replies[0].message["content"] and "tool_calls" not in replies[0].message
    assert len({c.id for r in replies for c in r.tool_calls}) == 6
    # the protocol goes on the system message first, then on the newest user message every 3 requests
    assert "## Tools" in sent[0][0]["content"] and "code_run(script: string" in sent[0][0]["content"]
    assert "## Tools" not in sent[2][-1]["content"] and "## Tools" in sent[3][-1]["content"]
    # tool results became user messages; nothing the endpoint cannot take
    assert {m["role"] for m in sent[-1]} == {"system", "user", "assistant"}
    assert f'<tool_result id="{replies[0].tool_calls[0].id}">\nout 0\n</tool_result>' in sent[1][-1]["content"]
    # every request starts with the whole previous request: provider prompt caches keep hitting
    for before, after in zip(sent, sent[1:], strict=False):
        assert after[:len(before)] == before


def test_usage_cost_and_cached_tokens_come_from_the_response():
    with ScriptedServer({"tasks": [COMPUTE]}) as server:
        client = LLMClient(config(server, price_input=2.0, price_output=8.0, price_cached=0.5))
        messages = start()
        first = client.chat(messages, TOOLS)
        messages += [first.message, {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "42"}]
        second = client.chat(messages, TOOLS)
        bodies = list(server.requests)

    def size(body: dict) -> int:
        return len(json.dumps(body["tools"], sort_keys=True) + "".join(json.dumps(m, sort_keys=True) for m in body["messages"]))

    assert (first.usage.prompt, first.usage.cached) == (size(bodies[0]) // 4, 0)
    assert second.usage.prompt == size(bodies[1]) // 4
    assert 0 < second.usage.cached < second.usage.prompt
    u = second.usage
    assert u.cost == pytest.approx(((u.prompt - u.cached) * 2.0 + u.cached * 0.5 + u.completion * 8.0) / 1e6)
    assert first.usage.cost == pytest.approx((first.usage.prompt * 2.0 + first.usage.completion * 8.0) / 1e6)


def test_429_is_retried_after_retry_after_and_reported_to_the_governor_hooks():
    script = {"tasks": [{"match": ".*", "turns": [{"content": "ok"}],
                         "faults": [{"turn": 0, "kind": "rate_limit", "retry_after": 0.4, "times": 2}]}]}
    reported, throttled = [], []
    with ScriptedServer(script) as server:
        client = LLMClient(config(server))
        client.on_rate_limit = reported.append
        client.before_request = lambda: throttled.append(1)
        started = time.monotonic()
        reply = client.chat(start(), TOOLS)
        elapsed = time.monotonic() - started
        statuses = [r["status"] for r in server.records]
    assert reply.content == "ok"
    assert statuses == [429, 429, 200]
    assert reported == [0.4, 0.4] and len(throttled) == 3
    assert elapsed >= 0.7  # two Retry-After waits of 0.4 s were honoured (generous margin)


def test_retry_after_is_capped():
    script = {"tasks": [{"match": ".*", "turns": [{"content": "ok"}],
                         "faults": [{"turn": 0, "kind": "rate_limit", "retry_after": 3600}]}]}
    reported = []
    with ScriptedServer(script) as server:
        client = LLMClient(config(server, retry_after_cap=0.05))
        client.on_rate_limit = reported.append
        assert client.chat(start(), TOOLS).content == "ok"
    assert reported == [0.05]


@pytest.mark.parametrize("fault", [
    {"kind": "server_error"}, {"kind": "server_error", "status": 503}, {"kind": "empty_choices"}, {"kind": "hang", "seconds": 5},
])
def test_server_errors_empty_choices_and_hangs_are_retried(fault):
    script = {"tasks": [{"match": ".*", "turns": [{"content": "ok"}], "faults": [{"turn": 0, **fault}]}]}
    with ScriptedServer(script) as server:
        reply = LLMClient(config(server, request_timeout=0.5)).chat(start(), TOOLS)
        records = list(server.records)
    assert reply.content == "ok"
    assert [r["fault"] for r in records] == [fault["kind"], None]


def test_model_error_after_max_retries_is_one_line():
    script = {"tasks": [{"match": ".*", "turns": [{"content": "ok"}], "faults": [{"rate": 1.0, "kind": "server_error"}]}]}
    with ScriptedServer(script) as server:
        with pytest.raises(ModelError) as caught:
            LLMClient(config(server, max_retries=2)).chat(start(), TOOLS)
        count = len(server.requests)
    assert count == 3
    message = str(caught.value)
    assert "\n" not in message and "HTTP 500" in message and "gave up after 3 attempts" in message


@pytest.mark.parametrize("fault", ["unauthorized", "no_task"])
def test_errors_that_cannot_succeed_are_not_retried(fault):
    script = {"tasks": [{"match": "only this", "turns": [{"content": "ok"}], "faults": [{"turn": 0, "kind": "unauthorized"}]}]}
    with ScriptedServer(script) as server:
        with pytest.raises(ModelError) as caught:
            LLMClient(config(server)).chat(start("only this" if fault == "unauthorized" else "something else"), TOOLS)
        count = len(server.requests)
    assert count == 1
    assert ("HTTP 401" if fault == "unauthorized" else "HTTP 400") in str(caught.value)


def test_unreadable_tool_call_arguments_carry_their_problem_and_the_script_they_held():
    script = {"tasks": [{"match": ".*", "turns": [{"tool_calls": [{"name": "code_run", "arguments": '{"script": "print(1)'}]}]}]}
    with ScriptedServer(script) as server:
        native = LLMClient(config(server)).chat(start(), TOOLS)
        text = LLMClient(config(server, tool_mode="text")).chat(start(), TOOLS)
    for reply in (native, text):  # cut off inside the script: never repaired into a half script
        call = reply.tool_calls[0]
        assert (call.name, call.arguments) == ("code_run", "{}") and call.script_hint.startswith("print(1)")
        assert "not valid JSON (Unterminated string starting at char" in call.problem
    assert native.message["tool_calls"][0]["function"]["arguments"] == "{}"  # servers re-parse past arguments


def test_python_literal_and_repairable_arguments_are_read_in_both_modes():
    triple = '{"script": """\nprint(6 * 7)\n""", "type": "python", "timeout": 30}'  # the way a small model writes it
    script = {"tasks": [{"match": ".*", "turns": [{"tool_calls": [
        {"name": "code_run", "arguments": triple},
        {"name": "code_run", "arguments": "{'script': 'print(1)', 'cwd': None}"},
        {"name": "code_run", "arguments": '{"script": "print(2)",}'}]}]}]}
    with ScriptedServer(script) as server:
        native = LLMClient(config(server)).chat(start(), TOOLS)
        text = LLMClient(config(server, tool_mode="text")).chat(start(), TOOLS)
    for reply in (native, text):
        assert [json.loads(c.arguments) for c in reply.tool_calls] == [
            {"script": "\nprint(6 * 7)\n", "type": "python", "timeout": 30}, {"script": "print(1)", "cwd": None},
            {"script": "print(2)"}]
        assert not any(c.problem for c in reply.tool_calls)
    # the history shows the calls as ga read them: well-formed JSON the model can copy
    assert [json.loads(c["function"]["arguments"]) for c in native.message["tool_calls"]][0]["type"] == "python"
    assert '"""' not in text.message["content"] and text.message["content"].count("<tool_use>") == 3


def test_the_api_key_appears_in_no_error_repr_or_log(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GA_TEST_KEY", SECRET)
    log_file = tmp_path / "log.jsonl"
    setup_logging("debug", log_file)
    script = {"tasks": [
        {"match": "refuse", "turns": [{"content": "no"}], "faults": [{"turn": 0, "kind": "unauthorized"}]},
        {"match": ".*", "turns": [{"content": "ok"}], "faults": [{"rate": 1.0, "kind": "server_error"}]},
    ]}
    texts = []
    try:
        with ScriptedServer(script, log_path=tmp_path / "requests.jsonl") as server:
            cfg = config(server, api_key_env="GA_TEST_KEY", max_retries=2)
            client = LLMClient(cfg)
            for task in ("refuse", "retry until exhausted"):
                with pytest.raises(ModelError) as caught:
                    client.chat(start(task), TOOLS)
                texts += [str(caught.value), repr(caught.value), "".join(traceback.format_exception(caught.value))]
            texts += [repr(client), repr(cfg), str(cfg.model_dump()), json.dumps(list(server.requests))]
    finally:
        setup_logging("info")
        logging.shutdown()
    captured = capsys.readouterr()
    texts += [captured.out, captured.err, log_file.read_text(), (tmp_path / "requests.jsonl").read_text()]
    assert "GA_TEST_KEY" in texts[0]  # the refusal names the variable to fix...
    assert "llm.retry" in log_file.read_text()  # ...and retries were logged
    for text in texts:
        assert SECRET not in text and "SECRET123456" not in text


def test_a_missing_key_variable_is_a_config_error():
    cfg = ModelConfig(name="needs-key", base_url="http://127.0.0.1:9/v1", model="m", api_key_env="GA_TEST_UNSET_KEY")
    with pytest.raises(ModelConfigError, match="GA_TEST_UNSET_KEY, which is not set"):
        LLMClient(cfg)


def test_no_model_configured_is_one_line_listing_the_ways(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ModelConfigError) as caught:
        resolve_model(None, settings_without_model(tmp_path))
    message = str(caught.value)
    assert "\n" not in message
    for way in ("--model NAME", "GA_MODEL", "~/.config/ga/models.yaml", "OPENAI_API_KEY", "OPENAI_BASE_URL",
                "scripted:configs/examples/scripts/hello.yaml"):
        assert way in message


def test_openai_environment_variables_give_a_default_model(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:4000/v1")
    cfg = resolve_model(None, settings_without_model(tmp_path))
    assert (cfg.name, cfg.base_url, cfg.api_key_env, cfg.model) == (
        "openai", "http://127.0.0.1:4000/v1", "OPENAI_API_KEY", "gpt-4o-mini")
    shipped = resolve_model("gpt-4o-mini", settings_without_model(tmp_path))
    assert shipped.base_url == "http://127.0.0.1:4000/v1"  # ${OPENAI_BASE_URL:-...} in models.yaml
    assert SECRET not in repr(cfg) + repr(shipped)
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.setenv("OPENAI_MODEL", "gpt-4.1-nano")
    cfg = resolve_model(None, settings_without_model(tmp_path))
    assert (cfg.base_url, cfg.model) == ("https://api.openai.com/v1", "gpt-4.1-nano")


def test_ga_model_setting_and_unknown_names(tmp_path):
    settings = load_settings(user_file=tmp_path / "none.yaml", project_file=tmp_path / "none.yaml",
                             environ={"GA_MODEL": "deepseek"})
    assert resolve_model(None, settings).model == "deepseek-chat"
    with pytest.raises(ModelConfigError) as caught:
        resolve_model("deepsek", settings)
    message = str(caught.value)
    assert "\n" not in message and "did you mean 'deepseek'" in message
    for name in ("openai", "gpt-4o-mini", "deepseek", "ollama", "vllm", "scripted:FILE"):
        assert name in message


def test_project_models_yaml_tunes_entries_but_does_not_add_or_repoint_them(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models.yaml").write_text("models:\n  gpt-4o-mini:\n    temperature: 0.5\n    max_tokens: 512\n")
    settings = settings_without_model(tmp_path)
    tuned = resolve_model("gpt-4o-mini", settings)
    assert tuned.model == "gpt-4o-mini" and tuned.temperature == 0.5 and tuned.price_input == 0.15
    assert tuned.max_tokens == 512
    (tmp_path / "models.yaml").write_text("models:\n  gpt-4o-mini:\n    model: gpt-4o\n")
    with pytest.raises(ModelConfigError, match=r"^models.yaml:3: models.gpt-4o-mini.model is refused in a project"):
        resolve_model("gpt-4o-mini", settings)  # it would choose the model the user's name means (issue 22)
    (tmp_path / "models.yaml").write_text("models:\n  mine:\n    base_url: http://127.0.0.1:1234/v1\n    model: m\n")
    with pytest.raises(ModelConfigError, match=r"^models.yaml:2: models.mine is refused in a project file: a project "
                                               r"file may not add a model"):
        resolve_model("mine", settings)  # its base_url would decide where prompts go (issue 30)
    (tmp_path / "models.yaml").write_text("models:\n  gpt-4o-mini:\n    tool_mode: smoke\n")
    with pytest.raises(ModelConfigError, match=r"models.yaml:3: model 'gpt-4o-mini' field 'tool_mode'"):
        resolve_model("gpt-4o-mini", settings)


def test_scripted_file_model_runs_in_process(tmp_path):
    settings = settings_without_model(tmp_path)
    cfg = resolve_model(f"scripted:{HELLO}", settings)
    again = resolve_model(f"scripted:{HELLO}", settings)
    reply = LLMClient(cfg).chat(start("Hello"), TOOLS)
    assert cfg.base_url == again.base_url == scripted_server(HELLO).base_url
    assert "offline scripted model" in reply.content
    assert scripted_server(HELLO).requests[-1]["messages"][1]["content"] == "Hello"


def test_scripted_file_model_section_and_errors(tmp_path):
    script = tmp_path / "text.yaml"
    script.write_text("model: {tool_mode: text, price_input: 1.0}\ntasks:\n  - match: '.*'\n    turns: [{content: hi}]\n")
    cfg = resolve_model(f"scripted:{script}", settings_without_model(tmp_path))
    assert (cfg.tool_mode, cfg.price_input) == ("text", 1.0)
    with pytest.raises(ModelConfigError, match="not found"):
        resolve_model(f"scripted:{tmp_path / 'missing.yaml'}", settings_without_model(tmp_path))


def test_the_shipped_example_resolves_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = resolve_model("scripted:configs/examples/scripts/hello.yaml", settings_without_model(tmp_path))
    assert cfg.base_url == scripted_server(HELLO).base_url


def test_scripted_at_url_points_at_a_shared_server(tmp_path):
    with ScriptedServer({"tasks": [{"match": ".*", "turns": [{"content": "shared"}]}]}) as server:
        cfg = resolve_model(f"scripted@{server.base_url}", settings_without_model(tmp_path))
        replies = [LLMClient(cfg).chat(start(f"task {i}"), TOOLS).content for i in range(3)]
        count = len(server.requests)
    assert cfg.base_url == server.base_url and replies == ["shared"] * 3 and count == 3
    with pytest.raises(ModelConfigError, match="scripted@http://127.0.0.1:PORT/v1"):
        resolve_model("scripted@localhost:1", settings_without_model(tmp_path))


# ---- a broken or hostile endpoint (worker/scripted/hostile.py) -----------------------------------

NOT_A_COMPLETION = {"garbage_json": "invalid JSON", "html": "an HTML page", "empty_body": "an empty body",
                    "wrong_shape": "JSON of the wrong shape"}


@pytest.mark.parametrize("kind", list(NOT_A_COMPLETION))
def test_a_200_that_is_not_a_completion_is_retried_like_a_5xx(kind):
    script = {"tasks": [{"match": ".*", "turns": [{"content": "ok"}], "faults": [{"turn": 0, "kind": kind}]}]}
    with ScriptedServer(script) as server:
        reply = LLMClient(config(server)).chat(start(), TOOLS)
        records = list(server.records)
    assert reply.content == "ok"
    assert [r["fault"] for r in records] == [kind, None]


@pytest.mark.parametrize("kind", list(NOT_A_COMPLETION))
def test_a_200_that_is_never_a_completion_fails_with_one_line(kind):
    script = {"tasks": [{"match": ".*", "turns": [{"content": "ok"}], "faults": [{"rate": 1.0, "kind": kind}]}]}
    with ScriptedServer(script) as server:
        with pytest.raises(ModelError) as caught:
            LLMClient(config(server, max_retries=2)).chat(start(), TOOLS)
        count = len(server.requests)
    message = str(caught.value)
    assert count == 3
    assert "\n" not in message and "HTTP 200 but the body is not a chat completion" in message
    assert NOT_A_COMPLETION[kind] in message and "gave up after 3 attempts" in message


@pytest.mark.parametrize("body, said", [
    (b"[1, 2]", "JSON list, not an object"),
    (b'{"choices": []}', "'choices'"),
    (b'{"choices": [{"message": {"content": 42}}]}', "'choices.0.message.content'"),
    (b'{"choices": [{"message": {"content": "hi", "tool_calls": "call"}}]}', "'choices.0.message.tool_calls'"),
    (b'{"choices": [{"message": {"content": "hi"}}], "usage": {"prompt_tokens": "12"}}', "'usage.prompt_tokens'"),
    (b"\xff\xfe{}", "not UTF-8"),
    (b"[" * 100_000, "nested too deeply"),
])
def test_the_completion_check_names_what_the_body_is_instead(body, said):
    from worker.model.replies import NotACompletion, parse_completion

    with pytest.raises(NotACompletion) as caught:
        parse_completion(body, "application/json")
    assert said in str(caught.value) and "\n" not in str(caught.value)
    lenient = parse_completion(b'{"choices": [{"message": {"content": "hi"}, "extra": 1}]}')  # no id, usage...
    assert lenient.choices[0].message.content == "hi" and lenient.usage is None


@pytest.mark.parametrize("dribble", ["all", "body"])
def test_a_slow_loris_ends_at_request_timeout_and_is_retried_like_a_timeout(dribble):
    script = {"tasks": [{"match": ".*", "turns": [{"content": "ok"}],
                         "faults": [{"turn": 0, "kind": "slow_loris", "interval": 0.2, "dribble": dribble}]}]}
    with ScriptedServer(script) as server:
        client = LLMClient(config(server, request_timeout=1.5))
        started = time.monotonic()
        reply = client.chat(start(), TOOLS)
        elapsed = time.monotonic() - started
        records = list(server.records)
    assert reply.content == "ok"  # the retry got a normal reply
    assert [r["fault"] for r in records] == ["slow_loris", None]
    # the trickle (a byte every 0.2 s: the reply would take over a minute) was cut at 1.5 s, give or take 1 s
    assert 1.4 < elapsed < 2.5 + 0.05


def test_a_slow_loris_every_time_gives_up_after_the_attempts():
    script = {"tasks": [{"match": ".*", "turns": [{"content": "ok"}], "faults": [{"rate": 1.0, "kind": "slow_loris"}]}]}
    with ScriptedServer(script) as server:
        started = time.monotonic()
        with pytest.raises(ModelError) as caught:
            LLMClient(config(server, request_timeout=1, max_retries=1)).chat(start(), TOOLS)
        elapsed = time.monotonic() - started
    assert "no complete reply within 1s (request_timeout); gave up after 2 attempts" in str(caught.value)
    assert elapsed < 2 * 2 + 0.05  # each attempt ended at its deadline, give or take 1 s


@pytest.mark.parametrize("announce", [False, True])
def test_a_giant_reply_is_refused_without_being_held_and_not_retried(announce):
    import tracemalloc

    script = {"tasks": [{"match": ".*", "turns": [{"content": "ok"}],
                         "faults": [{"rate": 1.0, "kind": "giant_reply", "size": 200_000_000, "announce_length": announce}]}]}
    with ScriptedServer(script) as server:
        client = LLMClient(config(server, max_reply_bytes=1_000_000))
        tracemalloc.start()
        try:
            with pytest.raises(ModelError) as caught:
                client.chat(start(), TOOLS)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        count = len(server.requests)
    message = str(caught.value)
    assert count == 1
    assert "\n" not in message and "over max_reply_bytes (1,000,000;" in message
    assert ("200,000,000 bytes announced" in message) == announce
    assert peak < 3_000_000  # read in chunks up to the cap, never the 200 MB


def test_a_reply_under_the_cap_is_accepted():
    script = {"tasks": [{"match": ".*", "turns": [{"content": "y" * 50_000}]}]}
    with ScriptedServer(script) as server:
        assert LLMClient(config(server, max_reply_bytes=60_000)).chat(start(), TOOLS).content == "y" * 50_000
        with pytest.raises(ModelError, match="over max_reply_bytes"):
            LLMClient(config(server, max_reply_bytes=40_000)).chat(start(), TOOLS)


def test_a_401_echoing_a_key_of_any_shape_leaves_no_piece_of_it(tmp_path, monkeypatch, capsys):
    key = "gk_live_7Qm2Xv9Lp4Rt8Wz3Ny6Bc1Hd5Fj0Ks"  # not sk-: only the configured-key redaction can catch it
    monkeypatch.setenv("GA_TEST_KEY", key)
    log_file = tmp_path / "log.jsonl"
    setup_logging("debug", log_file)
    script = {"tasks": [{"match": ".*", "turns": [{"content": "ok"}], "faults": [{"rate": 1.0, "kind": "echo_key"}]}]}
    try:
        with ScriptedServer(script) as server:
            with pytest.raises(ModelError) as caught:
                LLMClient(config(server, api_key_env="GA_TEST_KEY")).chat(start(), TOOLS)
            count = len(server.requests)
    finally:
        setup_logging("info")
        logging.shutdown()
    message = str(caught.value)
    texts = [message, repr(caught.value), "".join(traceback.format_exception(caught.value)), log_file.read_text(),
             *capsys.readouterr()]
    assert count == 1 and "HTTP 401, the key was refused; check GA_TEST_KEY" in message and "[redacted]" in message
    pieces = {key[i:i + 6] for i in range(len(key) - 5)}
    for text in texts:
        assert not [piece for piece in pieces if piece in text]


def test_a_429_without_retry_after_reports_the_jittered_backoff_it_then_waits():
    # a server_error fault with status 429 sends no Retry-After header
    script = {"tasks": [{"match": ".*", "turns": [{"content": "ok"}],
                         "faults": [{"turn": 0, "kind": "server_error", "status": 429, "times": 2}]}]}
    reported = []
    with ScriptedServer(script) as server:
        client = LLMClient(config(server, backoff_base=0.3, backoff_max=1.0))
        client.on_rate_limit = reported.append
        started = time.monotonic()
        assert client.chat(start(), TOOLS).content == "ok"
        elapsed = time.monotonic() - started
        statuses = [r["status"] for r in server.records]
    assert statuses == [429, 429, 200]
    first, second = reported
    assert 0 <= first <= 0.3 and 0 <= second <= 0.6  # full jitter under the doubling ceiling
    assert elapsed >= first + second  # the governor heard exactly the waits the client took


def test_a_bad_base_url_is_a_config_error(tmp_path):
    with pytest.raises(ModelConfigError, match=r"base_url http://\[::1/v1: not a valid URL"):
        LLMClient(ModelConfig(name="bad", base_url="http://[::1/v1", model="m"))
    with pytest.raises(ModelConfigError, match="expected http://HOST"):
        LLMClient(ModelConfig(name="bad", base_url="ftp://host/v1", model="m"))
    with pytest.raises(ModelConfigError, match=r"not a valid URL \(Invalid IPv6 URL\); fix the URL after scripted@"):
        LLMClient(resolve_model("scripted@http://[::1", settings_without_model(tmp_path)))


def test_a_deepseek_style_reply_counts_its_cache_hits_and_keeps_finish_reason():
    """Usage as DeepSeek sends it (prompt_cache_hit_tokens, no prompt_tokens_details), dict arguments, a cut reply."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    reply = {"id": "x", "object": "chat.completion", "model": "deepseek-chat", "system_fingerprint": "fp",
             "choices": [{"index": 0, "finish_reason": "length", "logprobs": None, "message": {
                 "role": "assistant", "content": "cut", "tool_calls": [
                     {"id": "call_1", "type": "function", "function": {"name": "code_run", "arguments": {"script": "1"}}}]}}],
             "usage": {"prompt_tokens": 1000, "completion_tokens": 10, "prompt_cache_hit_tokens": 600,
                       "prompt_cache_miss_tokens": 400}}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args) -> None:
            pass

    http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    try:
        client = LLMClient(ModelConfig(name="ds", base_url=f"http://127.0.0.1:{http.server_address[1]}/v1", model="m",
                                       price_input=2.0, price_cached=0.5, price_output=8.0, max_retries=0))
        got = client.chat(start(), TOOLS)
    finally:
        http.shutdown()
        http.server_close()
    assert (got.usage.prompt, got.usage.cached, got.usage.completion) == (1000, 600, 10)
    assert got.usage.cost == pytest.approx((400 * 2.0 + 600 * 0.5 + 10 * 8.0) / 1e6)
    assert got.finish_reason == "length"
    assert [(c.id, c.name, json.loads(c.arguments)) for c in got.tool_calls] == [("call_1", "code_run", {"script": "1"})]


class StuckServer:
    """A server stopped mid-life: the kernel still accepts connections on its port, nobody ever answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.accepted: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.accepted:
            conn.close()


def test_a_stuck_server_ends_the_request_at_its_first_timeout_not_after_every_retry():
    stuck = StuckServer()
    try:
        cfg = ModelConfig(name="local", base_url=stuck.base_url, model="m", request_timeout=1.0, max_retries=5,
                          backoff_base=0.01, backoff_max=0.02)
        with pytest.raises(ModelError) as caught:
            LLMClient(cfg).chat(start(), TOOLS)
    finally:
        stuck.close()
    text = str(caught.value)
    assert "no complete reply within 1s (request_timeout), and GET /models does not answer" in text
    assert "restart it" in text and "\n" not in text
    assert len(stuck.accepted) == 2  # the one request and the probe: not six requests of request_timeout each


def test_the_proxy_variables_are_read_when_the_client_is_made(monkeypatch):
    """As the SDK's client did: a proxy set after the client was made is not used by it (and the environment is not
    read again for every request); a client made after that uses it."""
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    script = {"tasks": [{"match": ".*", "turns": [{"content": "ok"}, {"content": "ok"}]}]}
    with ScriptedServer(script) as server:
        client = LLMClient(config(server, max_retries=0))
        with socket.socket() as closed:  # a port nothing listens on: a request through it fails at once
            closed.bind(("127.0.0.1", 0))
            monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{closed.getsockname()[1]}")
            assert client.chat(start(), TOOLS).content == "ok"
            with pytest.raises(ModelError, match="connection failed"):
                LLMClient(config(server, max_retries=0)).chat(start(), TOOLS)
