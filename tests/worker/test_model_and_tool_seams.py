"""The seams of one turn: every wrapper of a model shows the config of the model that serves it (the loop reads
`model.config`, never a wrapper's insides); a tool's own metadata decides whether its success backs an answer;
the tool names a tasks file may list are the registry's."""
from __future__ import annotations

from pathlib import Path

import pytest

from configs import load_settings
from orchestrator import spec
from orchestrator.governor import FailoverModel
from skilltree.explore import CountingModel
from worker import Runtime, TaskSpec, Worker
from worker.model import LLMClient, Model
from worker.model.playback import Normaliser, ReplayModel
from worker.modelconfig import ModelConfig
from worker.scripted import ScriptedServer
from worker.telemetry import TracedModel
from worker.tools import REGISTRY


@pytest.fixture
def settings(tmp_path: Path):
    return load_settings({"worker.second_chance": 0}, user_file=tmp_path / "none", project_file=tmp_path / "none")


def _config(name: str, base_url: str, **fields) -> ModelConfig:
    return ModelConfig(name=name, base_url=base_url, model="scripted", **fields)


def test_every_wrapper_shows_the_config_of_the_model_in_use(tmp_path: Path, settings) -> None:
    script = {"tasks": [{"match": ".*", "turns": [{"content": "from the backup"}]}]}
    with ScriptedServer(script) as server:
        dead = _config("primary", "http://127.0.0.1:1/v1", max_retries=0, context_window=8000)
        live = _config("backup", server.base_url, context_window=32000)
        failover = FailoverModel([("primary", LLMClient(dead)), ("backup", LLMClient(live))])
        wrappers: list[Model] = [TracedModel(failover, settings), CountingModel(failover)]
        assert [w.config for w in wrappers] == [dead, dead]
        reply = wrappers[0].chat([{"role": "user", "content": "hello"}], [])
    assert reply.content == "from the backup"
    assert failover.switches and failover.switches[0]["to"] == "backup"
    assert [w.config for w in wrappers] == [live, live]  # the model that serves the task now
    replay = ReplayModel([], task_id="t", tool_mode="native", normalise=Normaliser({}), config=live)
    assert replay.config is live


def test_the_loop_sizes_its_context_from_a_wrapped_model(tmp_path: Path, settings) -> None:
    """The context budget comes from the config of the model behind every wrapper (a failover chain here)."""
    script = {"tasks": [{"match": ".*", "turns": [{"content": "the answer is 42"}]}]}
    with ScriptedServer(script) as server:
        small = _config("small", server.base_url, context_window=6000, max_tokens=1000)
        model = FailoverModel([("small", LLMClient(small))])
        worker = Worker(TaskSpec("what is the answer?", task_id="t1", workdir=tmp_path / "w", settings=settings,
                                 history_path=tmp_path / "h.jsonl"), Runtime(model=model))
        sized = worker._context_settings([])
        result = worker.run()
    assert result.status == "unverified" and result.answer == "the answer is 42"
    assert sized.context_tokens == small.context_tokens(settings.context.context_tokens, 0)
    assert sized.context_tokens < settings.context.context_tokens


def _run(tmp_path: Path, settings, turns: list[dict]) -> tuple[str, str]:
    with ScriptedServer({"tasks": [{"match": ".*", "turns": turns}]}) as server:
        model = LLMClient(_config("scripted", server.base_url))
        worker = Worker(TaskSpec("do it", task_id="t1", workdir=tmp_path / "w", settings=settings,
                                 history_path=tmp_path / "h.jsonl"), Runtime(model=model))
        result = worker.run()
    return result.status, result.reason


def _call(name: str, **arguments) -> dict:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def test_a_checkpoint_after_a_failed_run_does_not_back_the_answer(tmp_path: Path, settings) -> None:
    status, reason = _run(tmp_path, settings, [_call("code_run", type="bash", script="exit 3"),
                                               _call("update_working_checkpoint", key_info="tried"),
                                               {"content": "it worked"}])
    assert status == "unverified" and reason.startswith("last code_run failed"), reason


def test_a_checkpoint_after_a_successful_run_keeps_the_answer_backed(tmp_path: Path, settings) -> None:
    status, reason = _run(tmp_path, settings, [_call("code_run", type="bash", script="wc -c < /etc/hostname"),
                                               _call("update_working_checkpoint", key_info="counted"),
                                               {"content": "the hostname has that many bytes"}])
    assert (status, reason) == ("succeeded", "")


def test_what_backs_no_answer_is_what_the_tools_say_it_is() -> None:
    """Bookkeeping, and reading or writing a file: neither computes an answer (issue 35)."""
    backs_nothing = {name for name, tool in REGISTRY.items() if not tool.answer_evidence}
    assert backs_nothing == {"update_working_checkpoint", "start_long_term_update", "ask_user",
                             "file_read", "file_write", "file_patch"}


def test_a_tasks_file_may_list_every_registered_tool_and_no_other() -> None:
    names = sorted(REGISTRY)
    plan = spec.from_data({"tasks": [{"id": "all", "prompt": "x", "tools": names}]})
    assert plan.tasks[0].tools == names
    with pytest.raises(spec.SpecError, match="unknown tool 'code_runn'; did you mean 'code_run'"):
        spec.from_data({"tasks": [{"id": "typo", "prompt": "x", "tools": ["code_runn"]}]})


def test_a_traced_turn_is_a_chat_span_and_a_tool_span_under_the_agent(tmp_path: Path) -> None:
    """Telemetry wraps the model (TracedModel) and the tool dispatch of one worker, without a fan-out around it."""
    from tests.worker.test_telemetry import Receiver

    receiver = Receiver()
    settings = load_settings({"telemetry.otlp_endpoint": receiver.url}, user_file=tmp_path / "none",
                             project_file=tmp_path / "none")
    try:
        status, _ = _run(tmp_path, settings, [_call("file_write", path="a.txt", content="hi"), {"content": "wrote a.txt"}])
        spans = receiver.wait_for(["invoke_agent ga", "chat scripted", "chat scripted", "execute_tool file_write"])
    finally:
        receiver.http.shutdown()
    assert status == "unverified"  # a file write backs no answer
    (agent,) = [s for s in spans if s["name"] == "invoke_agent ga"]
    assert agent["attributes"]["gen_ai.request.model"] == "scripted"
    children = receiver.children(agent)
    assert sorted(s["name"] for s in children) == ["chat scripted", "chat scripted", "execute_tool file_write"]
    chat = next(s for s in children if s["name"] == "chat scripted")
    assert chat["attributes"]["gen_ai.usage.input_tokens"] > 0
    tool = next(s for s in children if s["name"] == "execute_tool file_write")
    assert tool["attributes"]["ga.tool.ok"] is True and tool["attributes"]["ga.turn"] == 1
