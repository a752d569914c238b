"""The model gateway: what a task's code_run reaches instead of the model endpoints, the key and ga's own state.

ga runs one per task, outside the sandbox, for the task's lifetime: an HTTP server on a Unix socket in a
directory only ga can write. In the default `sandbox.network: gateway` the sandbox has no network; its first
process relays 127.0.0.1:PORT to this socket (sandbox.Policy.forwards), and scripts see
OPENAI_BASE_URL=http://127.0.0.1:PORT/v1 with a placeholder key. Routes:

- POST /v1/chat/completions (streamed or not): forwarded to a model the user configured only (an entry of the
  shipped or the user's own models.yaml named by the request's `model`, else the task's own model; never one a
  project's models.yaml, a task or a script named), with the real key added here. Every reply's usage (or an
  estimate when it has none) is charged to the task, and once the task's limits or the run's budget are spent
  the request is refused with 402. Under a budget each call holds a bound on its spend while in flight
  (Account.reserve_call, worker/usage.py): its prompt, and `n` completions of `max_tokens` each, `max_tokens`
  cut to what the budget leaves, so concurrent calls never overshoot it by more than the endpoint's own
  miscount.
- Replies reach the script with the key masked in every form an endpoint might reflect it in: raw,
  JSON-escaped, base64 (any alignment, both alphabets), hex and URL-encoded, in a JSON reply's decoded strings
  too, and across the events of a stream (an event that could begin a key is held until the next one says).
- GET /v1/models: the models a script may name.
- POST /ga/fanout: a nested fan-out (orchestrator.fanout from inside the sandbox), run by ga itself through
  the callable the orchestrator registered (`serve_fanouts_with`): worker never imports orchestrator.
"""
from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import socketserver
import tempfile
import threading
import weakref
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

import structlog

from worker import telemetry
from worker.keymask import KeyMask, Stream
from worker.modelconfig import load_model_entries, resolve_model, user_model_files
from worker.usage import Account, Usage, cost_of

if TYPE_CHECKING:
    from worker.modelconfig import ModelConfig

# orchestrator.fanout loads this module at every `ga` start (nested runs register here), so the HTTP transport,
# which only a task's gateway needs, is imported where it is used (worker.modelconfig is loaded by every start).
PORT = 8411  # inside the sandbox's own network namespace: nothing else listens there
PLACEHOLDER_KEY = "ga-gateway"  # what scripts see as OPENAI_API_KEY: the gateway adds the real one
ENV_SOCKET = "GA_GATEWAY"  # the socket's path inside the sandbox: orchestrator.fanout posts nested runs there
FANOUT_ROUTE = "/ga/fanout"
MAX_REQUEST_BYTES = 16 * 1024 * 1024
COMPLETION_LIMITS = ("max_tokens", "max_completion_tokens")  # a request's bound on its reply, either name
NESTED_GRACE = 60.0  # seconds a cancelled nested run gets to stop its tasks and write its records
log = structlog.get_logger("worker.gateway")



_fanout: Optional[Callable[[dict[str, Any], "Parent"], dict[str, Any]]] = None


def serve_fanouts_with(run_nested: Callable[[dict[str, Any], "Parent"], dict[str, Any]]) -> None:
    """The orchestrator hands over how a nested fan-out is run: (request, parent) -> the run's public result."""
    global _fanout
    _fanout = run_nested


@dataclass
class Parent:
    """What a nested fan-out needs from the task asking for it."""

    task_id: str
    workdir: Path
    settings: Any
    env: dict[str, str]  # the task's GA_RUN_DIR, GA_PARENT_TASK, GA_DEPTH, GA_MAX_DEPTH, GA_RAY_ADDRESS, GA_MODEL
    account: Account
    cancelled: threading.Event = field(default_factory=threading.Event)  # set: the nested run must stop
    budget: tuple[Optional[int], Optional[float]] = (None, None)  # tokens, cost the gateway holds for the nested run


class Gateway:
    """One task's gateway; `close()` at task end (code_run registers it on the task's cleanup)."""

    def __init__(self, settings: Any, model: Optional[ModelConfig], parent: Parent):
        self.settings, self.model, self.parent = settings, model, parent
        self.folder = Path(tempfile.mkdtemp(prefix="ga-gateway-"))  # mode 0700: only ga reaches the socket itself
        self._remove_folder = weakref.finalize(self, shutil.rmtree, str(self.folder), True)  # at close, or exit
        self.socket_path = self.folder / "gateway.sock"
        self._configs: dict[str, ModelConfig] = {}
        self._entries: Optional[dict[str, tuple[dict, dict[str, str]]]] = None
        self._nested: dict[threading.Event, threading.Thread] = {}  # nested runs in flight: stop event, thread
        self.traceparent: Optional[str] = None  # the running code_run's span: a nested run's trace joins it
        self.server = _Server(str(self.socket_path), _Handler)
        self.server.gateway = self
        threading.Thread(target=self.server.serve_forever, daemon=True, name="ga-gateway").start()

    def cancel_nested(self, wait: float = 0.0) -> None:
        """Stop the nested runs in flight (the code_run that asked for them ended, or the task is cancelled);
        `wait` seconds at most for them to write their records and return."""
        running = list(self._nested.items())
        for event, _ in running:
            event.set()
        for _, thread in running:
            thread.join(wait)

    def close(self) -> None:
        self.cancel_nested(NESTED_GRACE)
        self.server.shutdown()
        self.server.server_close()
        self._remove_folder()

    # ---- model calls ----

    def endpoint(self, name: Any) -> Optional[ModelConfig]:
        """The configured model a request goes to: the user's models.yaml entry it names, else the task's model."""
        if isinstance(name, str) and name in self._entry_names() and name != self._own_name():
            if name not in self._configs:
                self._configs[name] = resolve_model(name, self.settings, user_model_files())
            return self._configs[name]
        return self.model

    def _own_name(self) -> str:
        return self.model.name if self.model is not None else ""

    def _entry_names(self) -> set[str]:
        return set(self._user_entries())

    def _user_entries(self) -> dict[str, tuple[dict, dict[str, str]]]:
        """The models the user configured: the shipped file and ~/.config/ga/models.yaml, never the project's
        models.yaml (a task can write it) nor anything a request names (read once a task)."""
        if self._entries is None:
            self._entries = load_model_entries(user_model_files())
        return self._entries

    def chat(self, handler: "_Handler", body: bytes) -> None:
        try:
            request = json.loads(body)
            if not isinstance(request, dict):
                raise ValueError("not a JSON object")
        except ValueError as exc:
            return handler.reply_error(400, f"the request body is not a chat completion request ({exc})")
        account = self.parent.account
        try:
            config = self.endpoint(request.get("model"))
        except ValueError as exc:  # ModelConfigError: a models.yaml entry that does not resolve
            return handler.reply_error(400, str(exc))
        if config is None:
            return handler.reply_error(503, "this task has no configured model endpoint to forward to")
        choices = request.get("n", 1)
        if not _count(choices):
            return handler.reply_error(400, f"'n' must be a whole number of choices from 1 (got {str(choices)[:40]})")
        request["model"] = config.model
        if request.get("stream"):  # usage comes in the stream's last chunk only when asked for
            options = request.get("stream_options")
            request["stream_options"] = {**(options if isinstance(options, dict) else {}), "include_usage": True}
        tokens, cost = 0, 0.0
        if account.limited:  # n completions of max_tokens each, max_tokens cut to what the budget leaves
            asked = max(_count(request.get(name)) for name in COMPLETION_LIMITS) or config.max_tokens
            prompt = len(json.dumps(request)) // 2 + 16  # 2 bytes a token (the usual is ~4), and the limit's own
            prompt_cost = cost_of(config, prompt, 0, 0)
            refusal, each = account.reserve_call(prompt, prompt_cost, asked, choices, cost_of(config, 0, 1, 0))
            if refusal:
                return handler.reply_error(402, f"refused: {refusal}; no more model calls from this task")
            for name in [n for n in COMPLETION_LIMITS if n in request] or ["max_tokens"]:
                request[name] = each
            tokens, cost = prompt + each * choices, prompt_cost + cost_of(config, 0, each * choices, 0)
        else:
            account.reserve(0, 0.0)
        try:
            self._forward(handler, config, json.dumps(request).encode())
        finally:
            account.settle(tokens, cost)

    def _forward(self, handler: "_Handler", config: Any, payload: bytes) -> None:
        from worker.model.transport import ReplyTooLarge, post

        key = os.environ.get(config.api_key_env, "") if config.api_key_env else ""
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                   "Authorization": f"Bearer {key or 'no-key'}"}
        relay = _Relay(handler, KeyMask(key))
        try:
            reply = post(config.base_url.rstrip("/") + "/chat/completions", payload, headers, config.request_timeout,
                         config.max_reply_bytes, on_events=relay.chunk)
        except ReplyTooLarge as exc:
            return relay.fail(502, f"the model's reply was refused: {exc}")
        except Exception as exc:  # noqa: BLE001  (the endpoint failed: the script gets one line, never the key)
            return relay.fail(502, f"the model endpoint failed: {type(exc).__name__}: {str(exc)[:200]}")
        if reply.status == 200:
            self.parent.account.add(reply_usage(reply.body, payload, config))
        if relay.started:
            relay.end()
        else:  # an endpoint may echo the key it was sent (a 401 page): the script never sees it
            handler.reply(reply.status, relay.mask.body(reply.body), reply.headers.get("content-type", "application/json"))

    def models(self, handler: "_Handler") -> None:
        try:
            names = sorted({self._own_name(), *self._entry_names()} - {""})
        except ValueError as exc:  # ModelConfigError: a models.yaml that does not load
            return handler.reply_error(500, str(exc))
        handler.reply(200, json.dumps({"object": "list", "data": [{"id": n, "object": "model"} for n in names]}).encode())

    # ---- nested fan-out ----

    def fanout(self, handler: "_Handler", body: bytes) -> None:
        if _fanout is None:
            return handler.reply_error(501, "nested fan-out is not available in this command")
        try:
            request = json.loads(body)
        except ValueError:
            return handler.reply_error(400, "the nested fan-out request is not JSON")
        cancelled = threading.Event()
        self._nested[cancelled] = threading.current_thread()
        account = self.parent.account
        refusal, tokens, cost = account.reserve_rest(cancelled)  # all that is left is the nested run's budget
        try:
            if refusal:
                return handler.reply_error(402, f"nested fan-out refused: {refusal}")
            with telemetry.joined(self.traceparent):
                result = _fanout(request if isinstance(request, dict) else {},
                                 replace(self.parent, cancelled=cancelled, budget=(tokens, cost)))
            account.add_run(Usage.from_dict(result.get("summary", {}).get("usage")))
        except ValueError as exc:  # FanoutError and SpecError: bad input, one line per problem
            return handler.reply_error(400, str(exc))
        except Exception as exc:  # noqa: BLE001
            log.exception("nested_fanout_crashed", task=self.parent.task_id)
            return handler.reply_error(500, f"nested fan-out failed: {type(exc).__name__}: {exc}")
        finally:
            self._nested.pop(cancelled, None)
            if not refusal:
                account.settle(tokens or 0, cost or 0.0)
        handler.reply(200, json.dumps(result).encode())


def reply_usage(body: bytes, payload: bytes, config: ModelConfig) -> Usage:
    """The usage a reply reports (JSON, or the last server-sent event that has one); ~4 chars a token if none."""
    found = None
    if body.lstrip().startswith(b"{"):
        try:
            found = json.loads(body).get("usage")
        except (ValueError, AttributeError):
            found = None
    else:
        for line in body.splitlines():
            if line.startswith(b"data:") and b'"usage"' in line:
                try:
                    found = json.loads(line[5:]).get("usage") or found
                except (ValueError, AttributeError):
                    continue
    if not isinstance(found, dict):
        found = {"prompt_tokens": len(payload) // 4, "completion_tokens": len(body) // 4}
    prompt, completion = _count(found.get("prompt_tokens")), _count(found.get("completion_tokens"))
    details = found.get("prompt_tokens_details")
    cached = min(prompt, _count(details.get("cached_tokens") if isinstance(details, dict) else 0))
    return Usage.priced(prompt, completion, cached, config)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


class _Relay:
    """Streams an event-stream reply to the script as it arrives, the key masked (the head goes with the first
    chunk; an event that might begin the key waits for the next one: keymask.Stream)."""

    def __init__(self, handler: "_Handler", mask: KeyMask):
        self.handler, self.mask, self.started = handler, mask, False
        self.stream = Stream(mask)

    def chunk(self, data: bytes) -> None:
        if not self.started:
            self.started = True
            self.handler.close_connection = True  # no length known: the end of the stream is the end of the body
            self.handler.send_response(200)
            self.handler.send_header("Content-Type", "text/event-stream")
            self.handler.send_header("Connection", "close")
            self.handler.end_headers()
        self._write(self.stream.feed(data))

    def end(self) -> None:
        self._write(self.stream.end())

    def _write(self, data: bytes) -> None:
        if data:
            self.handler.wfile.write(data)
            self.handler.wfile.flush()

    def fail(self, status: int, message: str) -> None:
        if self.started:  # cut off mid-stream: what was held goes out (masked), then the stream ends
            self.end()
        else:
            self.handler.reply_error(status, self.mask.text(message))


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    gateway: Gateway


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: a script's client reuses its connection
    wbufsize = -1  # buffered: a reply's head and body leave in one write (flushed per reply or streamed chunk)

    @property
    def gateway(self) -> Gateway:
        assert isinstance(self.server, _Server)  # the only server this handler is given
        return self.server.gateway

    def do_GET(self) -> None:  # noqa: N802
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            return self.gateway.models(self)
        self.reply_error(404, f"no route {self.path}; the gateway serves /v1/chat/completions and /v1/models")

    def do_POST(self) -> None:  # noqa: N802
        length = self.headers.get("Content-Length", "")
        if not length.isdigit() or int(length) > MAX_REQUEST_BYTES:
            self.close_connection = True
            return self.reply_error(411 if not length.isdigit() else 413, "a request needs a Content-Length up to 16 MB")
        body = self.rfile.read(int(length))
        path = self.path.split("?")[0].rstrip("/")
        if path in ("/v1/chat/completions", "/chat/completions"):
            return self.gateway.chat(self, body)
        if path == FANOUT_ROUTE:
            return self.gateway.fanout(self, body)
        self.reply_error(404, f"no route {self.path}; the gateway serves /v1/chat/completions and /v1/models")

    def reply(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
        except OSError:  # the script is gone (killed, timed out): nobody to answer
            self.close_connection = True

    def reply_error(self, status: int, message: str) -> None:
        self.reply(status, json.dumps({"error": {"message": f"ga gateway: {message}", "type": "ga_gateway"}}).encode())

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002  (the base class's name)
        pass  # requests are counted on the task; nothing to print on the driver's terminal

    def address_string(self) -> str:
        return "sandbox"


# ---- the client side (inside the sandbox): orchestrator.fanout posts a nested run here ----


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str):
        super().__init__("localhost", timeout=None)  # a nested run takes as long as it takes; code_run's timeout bounds it
        self.socket_path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.socket_path)


def post_to_gateway(route: str, payload: dict[str, Any], path: Optional[str] = None) -> tuple[int, dict[str, Any]]:
    """(status, JSON reply) of a POST to this sandbox's gateway; OSError when it cannot be reached."""
    connection = _UnixConnection(path or os.environ[ENV_SOCKET])
    try:
        body = json.dumps(payload).encode()
        connection.request("POST", route, body, {"Content-Type": "application/json", "Content-Length": str(len(body))})
        response = connection.getresponse()
        data = response.read()
    finally:
        connection.close()
    try:
        parsed = json.loads(data)
    except ValueError:
        parsed = {"error": {"message": data[:200].decode(errors="replace")}}
    return response.status, parsed if isinstance(parsed, dict) else {}
