"""OpenTelemetry: a fan-out whose task fans out again from code_run exports one complete trace over real
OTLP/HTTP to a receiver on 127.0.0.1; content only when asked for, and never a secret."""
from __future__ import annotations

import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from configs import load_settings
from orchestrator import fanout
from tests.fanout_support import start_server

pytestmark = pytest.mark.usefixtures("ray_session")
SECRET = "sk-telemetry-0123456789abcdef"
EXPECTED = ["run traced", "invoke_agent ga", "chat scripted", "chat scripted", "execute_tool code_run",
            "run children", "invoke_agent ga", "chat scripted"]  # every span of the nested run below


class Receiver:
    """An OTLP/HTTP trace receiver: decodes every export into plain span dicts."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.arrived = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                request = ExportTraceServiceRequest.FromString(body)
                with receiver.arrived:
                    for resource in request.resource_spans:
                        for scope in resource.scope_spans:
                            for span in scope.spans:
                                receiver.spans.append({
                                    "name": span.name, "trace": span.trace_id.hex(), "id": span.span_id.hex(),
                                    "parent": span.parent_span_id.hex(),
                                    "attributes": {a.key: _value(a.value) for a in span.attributes}})
                    receiver.arrived.notify_all()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def wait_for(self, names: list[str], timeout: float = 120) -> list[dict[str, Any]]:
        """The spans once at least these names have arrived: a worker's export may end after its run returned
        (its flush gives up after 5 s on a busy machine and the batch goes out later)."""
        wanted = Counter(names)
        with self.arrived:
            self.arrived.wait_for(lambda: not wanted - Counter(s["name"] for s in self.spans), timeout)
            return list(self.spans)

    def children(self, span: dict[str, Any]) -> list[dict[str, Any]]:
        return [s for s in self.spans if s["parent"] == span["id"]]


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


def _nested_run(tmp_path: Path, receiver: Receiver, capture: bool) -> Any:
    sub = tmp_path / "sub.yaml"
    script = {"tasks": [
        {"match": "child", "turns": [{"content": "child done"}]},
        {"match": "parent", "turns": [
            {"content": "fanning out", "tool_calls": [{"name": "code_run", "arguments": {
                "type": "bash", "script": f"echo {SECRET} >/dev/null; ga fanout sub.yaml --json", "timeout": 300}}]},
            {"content": "Children:", "echo_last_tool_result": True}]},
    ]}
    server = start_server(script, tmp_path / "requests.jsonl")
    sub.write_text(f'version: 1\nname: children\ndefaults: {{model: "scripted@{server.base_url}"}}\n'
                   # the kid answers without a tool run: its check is what makes it (and the nested run) succeed
                   'tasks:\n  - {id: kid, prompt: "child one", check: {pattern: "child done"}}\n')
    settings = load_settings({"telemetry.otlp_endpoint": receiver.url, "telemetry.capture_content": capture},
                             user_file=tmp_path / "none", project_file=tmp_path / "none")
    try:
        # sub.yaml reaches the parent as an input: its sandboxed code_run sees its workdir, not the host's /tmp
        return fanout({"name": "traced", "tasks": [{"id": "parent", "prompt": "parent", "inputs": [str(sub)]}],
                       "allow_paths": [str(sub)],
                       "defaults": {"model": f"scripted@{server.base_url}", "timeout": 300}},
                      out=tmp_path / "runs", display="quiet", settings=settings)
    finally:
        server.stop()


def test_a_nested_fanout_arrives_as_one_complete_trace(tmp_path: Path) -> None:
    receiver = Receiver()
    run = _nested_run(tmp_path, receiver, capture=False)
    assert run.status == "succeeded", run.results
    spans = receiver.wait_for(EXPECTED)
    assert len({s["trace"] for s in spans}) == 1, "every span joins one trace"
    roots = [s for s in spans if not s["parent"]]
    assert [r["name"] for r in roots] == ["run traced"]
    (agent,) = receiver.children(roots[0])
    assert agent["name"] == "invoke_agent ga" and agent["attributes"]["gen_ai.agent.id"] == "parent"
    assert agent["attributes"]["ga.task.status"] == "succeeded"
    names = sorted(s["name"] for s in receiver.children(agent))
    assert names == ["chat scripted", "chat scripted", "execute_tool code_run"]
    chat = next(s for s in receiver.children(agent) if s["name"].startswith("chat"))
    assert chat["attributes"]["gen_ai.operation.name"] == "chat"
    assert chat["attributes"]["gen_ai.usage.input_tokens"] > 0 and chat["attributes"]["gen_ai.usage.output_tokens"] > 0
    assert chat["attributes"]["gen_ai.response.finish_reasons"] in (["tool_calls"], ["stop"])
    (tool,) = [s for s in receiver.children(agent) if s["name"] == "execute_tool code_run"]
    (nested_run,) = receiver.children(tool)  # the nested fan-out's run joined the tool call's span
    assert nested_run["name"] == "run children" and nested_run["attributes"]["ga.run.depth"] == 1
    (kid,) = receiver.children(nested_run)
    assert kid["attributes"]["gen_ai.agent.id"] == "kid"
    # a checked task's answer is checked before any note: it passed, so no second chance was spent
    assert [s["name"] for s in receiver.children(kid)] == ["chat scripted"]
    assert not any(k.startswith("gen_ai.input") or k.endswith("arguments") for s in spans for k in s["attributes"])


def test_content_is_captured_only_when_asked_and_secrets_never(tmp_path: Path) -> None:
    receiver = Receiver()
    run = _nested_run(tmp_path, receiver, capture=True)
    assert run.status == "succeeded", run.results
    receiver.wait_for(EXPECTED)
    tool = next(s for s in receiver.spans if s["name"] == "execute_tool code_run")
    assert "ga fanout" in tool["attributes"]["gen_ai.tool.call.arguments"]
    assert "child done" in tool["attributes"]["gen_ai.tool.call.result"]
    chat = next(s for s in receiver.spans if s["name"].startswith("chat"))
    assert json.loads(chat["attributes"]["gen_ai.input.messages"])[0]["role"] == "system"
    dump = json.dumps(receiver.spans)
    assert "[redacted]" in dump and SECRET not in dump and SECRET[-12:] not in dump
