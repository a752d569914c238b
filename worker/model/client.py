"""The model client: one OpenAI-compatible chat endpoint behind the loop's `Model` protocol.

Sending (worker/model/transport.py) is bounded: `request_timeout` covers the whole exchange (connect,
headers and body together, so an endpoint trickling bytes ends on time) and a reply over
`max_reply_bytes` is refused without being held. Retries (a loop of the client's own): 408/409/429/5xx,
connection failures, timeouts and a 200 whose body is not a chat completion (HTML, invalid JSON,
empty, the wrong shape) are retried with exponential backoff and full jitter. A timeout is retried only
when the endpoint still answers `GET /models` within PROBE_TIMEOUT: a stopped or stuck server (one that
accepts connections and never replies) ends the request at the first timeout, not after every attempt; a Retry-After header
wins (capped by retry_after_cap). A fan-out governor can set `before_request()` (called before every
attempt, may block to throttle) and `on_rate_limit(retry_after)` (called on every 429 with the wait
this client then takes). Anything else (400, 401, 403, 404, a reply over the cap...) or exhausted
retries raises ModelError, one line. The key is sent only in the Authorization header: every error
text is redacted whole (the configured key and anything shaped like one) before it is cut.

Tool modes: `native` sends `tools=` and reads `message.tool_calls`; `text` rewrites the history to
the `<tool_use>` protocol (worker/model/textproto.py) and anchors the tool protocol block on the system
message at the first request and on the newest user message every `schema_resend_every` requests
(or when no anchored message is left). An anchored message keeps its block in every later request,
so successive requests share their prefix and provider prompt caches hit.

With `stream: true` in models.yaml every request streams, and a reply that starts repeating itself is cut
where it does (worker/model/streaming.py's watch, worker/model/replies.py's `repetition`): the loop then
discards it as it would a whole one, minutes earlier on a slow local server.
"""
from __future__ import annotations

import email.utils
import json
import random
import re
import threading
import time
from typing import Callable, Optional, TypedDict

import httpcore2
import structlog
from typing_extensions import Required

from configs.logs import redact_text
from worker.model.messages import ChatMessage, ToolSchema
from worker.model.protocol import ContextOverflow, ModelError
from worker.model.replies import (
    Completion,
    NotACompletion,
    Reply,
    ToolCall,
    interpret,
    is_context_overflow,
    new_call_id,
    parse_completion,
    repetition,
    tool_parameters,
)
from worker.model.streaming import StreamAssembler, StreamCut
from worker.model.textproto import protocol_block, to_text_messages
from worker.model.transport import BadURL, ReplyTooLarge, RequestAborted, answers, post, proxy_for
from worker.modelconfig import ModelConfig
from worker.usage import Usage

RETRY_STATUS = {408, 409, 429} | set(range(500, 600))
MAX_ANCHORS = 8
PROBE_TIMEOUT = 15.0  # seconds the endpoint gets to answer GET /models after a request timed out
TEXT_MODE_STOP = ("<tool_result",)  # a text-mode model writing this is inventing a result
log = structlog.get_logger("ga.llm")


class Request(TypedDict, total=False):
    """A chat completion request's body, its keys in the order they are sent."""

    model: Required[str]
    temperature: Required[float]
    max_tokens: Required[int]
    stream: bool
    stream_options: dict[str, bool]
    stop: list[str]
    messages: list[ChatMessage]
    tools: list[ToolSchema]


class _Retry(Exception):
    """An attempt failed in a way another attempt may not; `delay`: the wait the endpoint asked for; `status`:
    the HTTP status it answered with, if any."""

    def __init__(self, problem: str, delay: Optional[float] = None, status: Optional[int] = None):
        super().__init__(problem)
        self.problem, self.delay, self.status = problem, delay, status


class LLMClient:
    """A worker.model.Model for one configured endpoint (a HookedModel: a governor may set its hooks)."""

    def __init__(self, config: ModelConfig):
        self.config = config
        self._key = config.api_key()
        self._url = config.chat_url()
        self._headers = {"Content-Type": "application/json", "Accept": "application/json",
                         "Authorization": f"Bearer {self._key or 'no-key'}"}
        try:  # read once per client, as the SDK's client did: the environment is read ~16 times per look
            self._proxy: Optional[str] = proxy_for(self._url)
        except ValueError:
            self._proxy = None  # a bad URL: the first request says what is wrong with it
        self.before_request: Optional[Callable[[], None]] = None
        self.on_rate_limit: Optional[Callable[[float], None]] = None
        self.on_text: Optional[Callable[[str], None]] = None  # set: stream, and hand it the text as it arrives
        self.requests = 0
        self._anchors: dict[tuple[str, str], str] = {}  # (role, content) -> protocol block appended to it
        self._tools_json: Optional[tuple[list[ToolSchema], bytes]] = None  # (tools list, its encoding)
        self._tool_parameters: Optional[tuple[list[ToolSchema], dict[str, list[str]]]] = None  # (tools, theirs)
        self._stop_refused = False  # the server rejected `stop`: requests go without it
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LLMClient(name={self.config.name!r}, base_url={self.config.base_url!r}, model={self.config.model!r})"

    def chat(self, messages: list[ChatMessage], tools: list[ToolSchema]) -> Reply:
        request = self._request(messages, tools)
        started = time.monotonic()
        response = self._send_interpreting_refusals(request)
        latency = time.monotonic() - started
        reply = self._reply(response, request, latency, self._parameters(tools))
        log.debug("llm.reply", model=self.config.name, latency=round(latency, 3), tool_calls=len(reply.tool_calls),
                  prompt=reply.usage.prompt, completion=reply.usage.completion, cached=reply.usage.cached)
        return reply

    # ---- request ------------------------------------------------------------------------------

    def _request(self, messages: list[ChatMessage], tools: list[ToolSchema]) -> Request:
        cfg = self.config
        with self._lock:
            self.requests += 1
            count = self.requests
        request: Request = {"model": cfg.model, "temperature": cfg.temperature, "max_tokens": cfg.max_tokens}
        if self.on_text is not None or cfg.stream:
            request.update(stream=True, stream_options={"include_usage": True})
        if self._stops(tools):
            request["stop"] = list(TEXT_MODE_STOP)
        if cfg.tool_mode == "native":
            request["messages"] = messages
            if tools:
                request["tools"] = tools
        else:
            request["messages"] = self._with_protocol(to_text_messages(messages), tools, count) if tools else to_text_messages(messages)
        return request

    def _with_protocol(self, messages: list[ChatMessage], tools: list[ToolSchema], count: int) -> list[ChatMessage]:
        block = protocol_block(tools)
        keys = [_text_key(m) for m in messages]
        with self._lock:
            present = any(key in self._anchors for key in keys if key)
            resend = count == 1 or (count - 1) % max(1, self.config.schema_resend_every) == 0
            if not present or resend:
                target = self._anchor_target(messages, first=not self._anchors)
                key = keys[target] if target is not None else None
                if key:
                    self._anchors[key] = block
                    while len(self._anchors) > MAX_ANCHORS:
                        self._anchors.pop(next(iter(self._anchors)))
            anchors = dict(self._anchors)
        return [
            {**m, "content": f"{key[1]}\n\n{anchors[key]}"} if key in anchors else m
            for m, key in zip(messages, keys, strict=True)
        ]

    @staticmethod
    def _anchor_target(messages: list[ChatMessage], first: bool) -> Optional[int]:
        roles = ["system", "user"] if first else ["user"]
        for role in roles:
            indices = [i for i, m in enumerate(messages) if m["role"] == role and isinstance(m.get("content"), str)]
            if indices:
                return indices[0] if role == "system" else indices[-1]
        return None

    def _stops(self, tools: list[ToolSchema]) -> bool:
        """Text mode: the server stops where the model starts writing a tool result itself (the reply is
        cut there anyway, see worker/model/replies.py; stopping early saves the invented tokens)."""
        return self.config.tool_mode == "text" and bool(tools) and self.config.stop_sequences and not self._stop_refused

    def _send_interpreting_refusals(self, request: Request) -> Completion:
        """_send, with two refusals told apart: a context overflow (ContextOverflow, the loop trims and
        retries) and a server that rejects `stop` (sent again without it, and never again)."""
        try:
            return self._send(request)
        except ModelError as exc:
            text = str(exc)
            if "stop" in request and exc.status == 400 and re.search(r"\bstop\b", text, re.I):
                self._stop_refused = True
                log.warning("llm.stop_unsupported", model=self.config.name)
                without = request.copy()
                del without["stop"]
                return self._send(without)
            if is_context_overflow(text):
                raise ContextOverflow(text) from None
            raise

    # ---- sending with retries -----------------------------------------------------------------

    def _send(self, request: Request) -> Completion:
        """The attempts of one request, each after the wait the last one earned (Retry-After, else full jitter).
        A loop of its own: tenacity's machinery cost ~0.1 ms of CPU per request among hundreds of threads."""
        cfg = self.config
        payload = self._encode(request)
        attempts = cfg.max_retries + 1
        attempt = 1
        while True:
            if self.before_request:
                self.before_request()
            try:
                return self._attempt(payload, attempt)
            except _Retry as exc:
                if attempt >= attempts:
                    raise ModelError(self._clean(
                        f"model '{cfg.name}' at {cfg.base_url}: {exc.problem}; gave up after {attempts} attempts"),
                        exc.status) from None
                delay = self._backoff(attempt) if exc.delay is None else exc.delay
                log.warning("llm.retry", model=cfg.name, attempt=attempt, delay=round(delay, 3),
                            problem=self._clean(exc.problem))
                time.sleep(delay)
                attempt += 1

    def _backoff(self, attempt: int) -> float:
        """Full jitter under a ceiling that doubles from backoff_base with each failed attempt, up to backoff_max."""
        cfg = self.config
        return random.uniform(0, min(cfg.backoff_max, cfg.backoff_base * 2.0 ** min(attempt - 1, 64)))

    def _encode(self, request: Request) -> bytes:
        """Compact UTF-8 JSON; the tool schemas (the same list every request of a task) are encoded once."""
        tools = request.get("tools")
        if tools is None:
            return _dumps(request)
        with self._lock:
            if self._tools_json is None or self._tools_json[0] is not tools:
                self._tools_json = (tools, _dumps(tools))
            encoded = self._tools_json[1]
        rest = _dumps({k: v for k, v in request.items() if k != "tools"})
        return rest[:-1] + b',"tools":' + encoded + b"}"

    def _parameters(self, tools: list[ToolSchema]) -> dict[str, list[str]]:
        """tool_parameters of the tool list, worked out once per list (the same list every request of a task)."""
        with self._lock:
            if self._tool_parameters is None or self._tool_parameters[0] is not tools:
                self._tool_parameters = (tools, tool_parameters(tools))
            return self._tool_parameters[1]

    def _attempt(self, payload: bytes, attempt: int) -> Completion:
        """One request: the completion, or _Retry (worth another try), or ModelError (not worth one)."""
        cfg = self.config
        stream = None
        if self.on_text is not None or cfg.stream:
            stream = StreamAssembler(self.on_text, watch=lambda text: repetition(text) is not None)
        try:
            reply = post(self._url, payload, self._headers, cfg.request_timeout, cfg.max_reply_bytes,
                         stream.feed if stream else None, self._proxy)
        except StreamCut:
            assert stream is not None  # only a stream's watch raises it
            log.warning("llm.runaway_cut", model=cfg.name, chars=stream.chars)
            return parse_completion(stream.completion(finish="repetition"), "application/json")
        except BadURL as exc:
            raise ModelError(self._clean(cfg.url_problem(exc))) from None
        except RequestAborted as exc:
            raise ModelError(f"model '{cfg.name}': {exc}") from None
        except ReplyTooLarge as exc:
            size = f"{exc.announced:,} bytes announced" if exc.announced else "more was coming"
            raise ModelError(self._clean(
                f"model '{cfg.name}' at {cfg.base_url}: the reply is over max_reply_bytes ({exc.limit:,}; {size}); "
                "refused unread. Raise max_reply_bytes in models.yaml if this endpoint really sends that much")) from None
        except httpcore2.TimeoutException:
            problem = f"no complete reply within {cfg.request_timeout:g}s (request_timeout)"
            probe = min(PROBE_TIMEOUT, cfg.request_timeout)
            if not answers(cfg.base_url.rstrip("/") + "/models", self._headers, probe):
                raise ModelError(self._clean(  # another attempt would wait as long again for nothing
                    f"model '{cfg.name}' at {cfg.base_url}: {problem}, and GET /models does not answer within "
                    f"{probe:g}s either: the server is stopped or stuck; restart it")) from None
            raise _Retry(problem) from None
        except (httpcore2.NetworkError, httpcore2.ProtocolError, httpcore2.ProxyError, OSError) as exc:
            raise _Retry(f"connection failed ({self._clean(str(exc)) or type(exc).__name__})") from None
        if reply.status in RETRY_STATUS:
            delay = _retry_after(reply.headers)
            delay = None if delay is None else min(delay, cfg.retry_after_cap)
            if reply.status == 429:
                delay = self._backoff(attempt) if delay is None else delay  # the hook hears the wait this client takes
                if self.on_rate_limit:
                    self.on_rate_limit(delay)
            raise _Retry(self._status_text(reply.status, reply.body), delay, reply.status)
        if not 200 <= reply.status < 300:
            raise ModelError(self._status_text(reply.status, reply.body, reply.headers.get("location")), reply.status)
        if stream is not None and stream.events:  # streamed: the assembled reply (a server may ignore `stream`)
            reply.body = stream.completion()
        try:
            return parse_completion(reply.body, reply.headers.get("content-type", ""))
        except NotACompletion as exc:
            raise _Retry(f"HTTP {reply.status} but the body is not a chat completion: {exc}") from None

    def _status_text(self, status: int, body: bytes, location: Optional[str] = None) -> str:
        """One line for an HTTP error; the endpoint's words are redacted whole, and only then cut."""
        cfg = self.config
        detail = _cut(self._clean(_error_message(body)), 300)
        detail = f" ({detail})" if detail else ""
        where = f"model '{cfg.name}' at {cfg.base_url}: HTTP {status}"
        if status in (401, 403):
            fix = f"check {cfg.api_key_env}" if cfg.api_key_env else "this endpoint wants a key: set api_key_env in models.yaml"
            return f"{where}, the key was refused; {fix}{detail}"
        if 300 <= status < 400:
            return f"{where}, redirected to {self._clean(location or '?')}; set base_url to the final address{detail}"
        return f"{where}{detail}"

    def _clean(self, text: str) -> str:
        """One line with the configured key (raw or JSON-escaped) and anything shaped like a key masked."""
        text = " ".join(str(text).split())
        if self._key:
            for form in {self._key, json.dumps(self._key)[1:-1]}:
                text = text.replace(form, "[redacted]")
        return redact_text(text)

    # ---- reply --------------------------------------------------------------------------------

    def _reply(self, response: Completion, request: Request, latency: float, known: dict[str, list[str]]) -> Reply:
        """Tool calls however they arrive (worker/model/replies.py); the usage counts what was received."""
        choice = response.choices[0]
        msg = choice.message
        content = msg.content or ""
        native = []
        for call in (msg.tool_calls or []) if self.config.tool_mode == "native" else []:
            func = getattr(call, "function", None)
            if func is None:
                continue
            args = func.arguments
            native.append(ToolCall(call.id or new_call_id(), func.name or "", args if isinstance(args, str) else _json(args)))
        read = interpret(content, native, self.config.tool_mode, known)
        usage = self._usage(response, request, content + "".join(c.arguments for c in native))
        return Reply(read.text, read.calls, usage, read.message, latency, finish_reason=getattr(choice, "finish_reason", None) or "",
                     raw=read.raw, notes=read.notes)

    def _usage(self, response: Completion, request: Request, reply_text: str) -> Usage:
        usage = getattr(response, "usage", None)
        if usage is None:  # some local servers omit usage: estimate at ~4 chars per token
            prompt = len(_json(request.get("messages", []))) // 4
            completion = len(reply_text) // 4
            cached = 0
        else:
            prompt, completion = usage.prompt_tokens or 0, usage.completion_tokens or 0
            details = getattr(usage, "prompt_tokens_details", None)
            cached = getattr(details, "cached_tokens", None) or getattr(usage, "prompt_cache_hit_tokens", None) or 0
        return Usage.priced(prompt, completion, cached, self.config)


def _text_key(message: ChatMessage) -> Optional[tuple[str, str]]:
    """(role, content) of a message whose content is text: what a protocol anchor is kept under."""
    content = message.get("content")
    return (message["role"], content) if isinstance(content, str) else None


def _dumps(value: object) -> bytes:
    """Compact UTF-8 as the SDK sent it; a lone surrogate (undecodable tool output) becomes "?", not a crash."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace")



def _retry_after(headers: dict[str, str]) -> Optional[float]:
    """Seconds from `retry-after-ms` or `Retry-After` (seconds or an HTTP date); None if absent."""
    try:
        if headers.get("retry-after-ms"):
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
        value = headers.get("retry-after")
        if not value:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _error_message(body: bytes) -> str:
    """What an error body says: its `error.message` (OpenAI style) or `message`, else the text itself."""
    text = body.decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return text
    error = data.get("error", data) if isinstance(data, dict) else data
    message = error.get("message") if isinstance(error, dict) else error
    return text if message is None else str(message)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
