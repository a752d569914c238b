"""The model client: one OpenAI-compatible chat endpoint behind the loop's `Model` protocol.

Retries are ours (the SDK's are off): 408/409/429/5xx, connection errors, timeouts and replies
without choices are retried with exponential backoff and full jitter, a Retry-After header wins
(capped by retry_after_cap). A fan-out governor can set `before_request()` (called before every
attempt, may block to throttle) and `on_rate_limit(retry_after)` (called on every 429).
Anything else (400, 401, 403, 404...) or exhausted retries raises ModelError. The key never leaves
the SDK: errors and logs are redacted.

Tool modes: `native` sends `tools=` and reads `message.tool_calls`; `text` rewrites the history to
the `<tool_use>` protocol (worker/llm_text.py) and anchors the tool protocol block on the system
message at the first request and on the newest user message every `schema_resend_every` requests
(or when no anchored message is left). An anchored message keeps its block in every later request,
so successive requests share their prefix and provider prompt caches hit.
"""
from __future__ import annotations

import email.utils
import json
import os
import random
import threading
import time
from typing import Any, Callable, Optional

import openai
import structlog
from openai.types.chat import ChatCompletion

from configs.logs import redact_text
from worker.llm_text import new_call_id, parse_tool_uses, protocol_block, to_text_messages
from worker.models import ModelConfig, ModelConfigError
from worker.types import ModelError, Reply, ToolCall, Usage

RETRY_STATUS = {408, 409, 429} | set(range(500, 600))
MAX_ANCHORS = 8
log = structlog.get_logger("ga.llm")


class _NoChoices(Exception):
    pass


class LLMClient:
    """Implements worker.types.Model for one configured endpoint."""

    def __init__(self, config: ModelConfig):
        self.config = config
        self._key = os.environ.get(config.api_key_env, "") if config.api_key_env else ""
        if config.api_key_env and not self._key:
            raise ModelConfigError(
                f"model '{config.name}' reads its API key from {config.api_key_env}, which is not set; "
                f"export {config.api_key_env}=... or choose another model with --model"
            )
        self._sdk = _sdk_client(config.base_url, self._key or "no-key", config.request_timeout)
        self.before_request: Optional[Callable[[], None]] = None
        self.on_rate_limit: Optional[Callable[[float], None]] = None
        self.requests = 0
        self._anchors: dict[tuple[str, str], str] = {}  # (role, content) -> protocol block appended to it
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LLMClient(name={self.config.name!r}, base_url={self.config.base_url!r}, model={self.config.model!r})"

    def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        request = self._request(messages, tools)
        started = time.monotonic()
        response = self._send(request)
        latency = time.monotonic() - started
        reply = self._reply(response, request, latency)
        log.debug("llm.reply", model=self.config.name, latency=round(latency, 3), tool_calls=len(reply.tool_calls),
                  prompt=reply.usage.prompt, completion=reply.usage.completion, cached=reply.usage.cached)
        return reply

    # ---- request ------------------------------------------------------------------------------

    def _request(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        cfg = self.config
        with self._lock:
            self.requests += 1
            count = self.requests
        request: dict[str, Any] = {"model": cfg.model, "temperature": cfg.temperature, "max_tokens": cfg.max_tokens}
        if cfg.tool_mode == "native":
            request["messages"] = messages
            if tools:
                request["tools"] = tools
        else:
            request["messages"] = self._with_protocol(to_text_messages(messages), tools, count) if tools else to_text_messages(messages)
        return request

    def _with_protocol(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], count: int) -> list[dict[str, Any]]:
        block = protocol_block(tools)
        keys = [(m["role"], m["content"]) if isinstance(m.get("content"), str) else None for m in messages]
        with self._lock:
            present = any(key in self._anchors for key in keys if key)
            resend = count == 1 or (count - 1) % max(1, self.config.schema_resend_every) == 0
            if not present or resend:
                target = self._anchor_target(messages, first=not self._anchors)
                if target is not None and keys[target]:
                    self._anchors[keys[target]] = block
                    while len(self._anchors) > MAX_ANCHORS:
                        self._anchors.pop(next(iter(self._anchors)))
            anchors = dict(self._anchors)
        return [
            {**m, "content": f"{m['content']}\n\n{anchors[key]}"} if key in anchors else m
            for m, key in zip(messages, keys)
        ]

    @staticmethod
    def _anchor_target(messages: list[dict[str, Any]], first: bool) -> Optional[int]:
        roles = ["system", "user"] if first else ["user"]
        for role in roles:
            indices = [i for i, m in enumerate(messages) if m["role"] == role and isinstance(m.get("content"), str)]
            if indices:
                return indices[0] if role == "system" else indices[-1]
        return None

    # ---- sending with retries -----------------------------------------------------------------

    def _send(self, request: dict[str, Any]) -> Any:
        cfg = self.config
        attempts = cfg.max_retries + 1
        for attempt in range(attempts):
            if self.before_request:
                self.before_request()
            retry_after: Optional[float] = None
            try:
                # post(), not chat.completions.create(): the request is already a plain JSON dict, and the
                # SDK's typed-params transform costs ~7 ms of CPU per request (16 workers on 2 cores feel it)
                response = self._sdk.post("/chat/completions", body=request, cast_to=ChatCompletion)
                if not getattr(response, "choices", None) or response.choices[0].message is None:
                    raise _NoChoices()
                return response
            except openai.APIStatusError as exc:
                if exc.status_code not in RETRY_STATUS:
                    raise ModelError(self._clean(self._status_text(exc))) from None
                problem = self._status_text(exc)
                retry_after = _retry_after(exc.response.headers)
                if retry_after is not None:
                    retry_after = min(retry_after, cfg.retry_after_cap)
                if exc.status_code == 429 and self.on_rate_limit:
                    self.on_rate_limit(retry_after if retry_after is not None else self._backoff(attempt))
            except openai.APITimeoutError:
                problem = f"no reply within {cfg.request_timeout:g}s"
            except openai.APIConnectionError as exc:
                problem = f"connection failed ({exc.__cause__ or exc})"
            except openai.APIResponseValidationError as exc:
                problem = f"unreadable reply ({exc.message})"
            except _NoChoices:
                problem = "the reply had no choices"
            if attempt + 1 == attempts:
                raise ModelError(self._clean(
                    f"model '{cfg.name}' at {cfg.base_url}: {problem}; gave up after {attempts} attempts")) from None
            delay = retry_after if retry_after is not None else self._backoff(attempt)
            log.warning("llm.retry", model=cfg.name, attempt=attempt + 1, delay=round(delay, 3), problem=self._clean(problem))
            time.sleep(delay)
        raise AssertionError("unreachable")

    def _backoff(self, attempt: int) -> float:
        return random.uniform(0, min(self.config.backoff_max, self.config.backoff_base * 2 ** attempt))

    def _status_text(self, exc: openai.APIStatusError) -> str:
        cfg = self.config
        detail = str(exc.message)[:300]
        if exc.status_code in (401, 403):
            where = f"check {cfg.api_key_env}" if cfg.api_key_env else "this endpoint wants a key: set api_key_env in models.yaml"
            return f"model '{cfg.name}' at {cfg.base_url}: HTTP {exc.status_code}, the key was refused; {where} ({detail})"
        return f"model '{cfg.name}' at {cfg.base_url}: HTTP {exc.status_code} ({detail})"

    def _clean(self, text: str) -> str:
        text = " ".join(str(text).split())
        if self._key:
            text = text.replace(self._key, "[redacted]")
        return redact_text(text)

    # ---- reply --------------------------------------------------------------------------------

    def _reply(self, response: Any, request: dict[str, Any], latency: float) -> Reply:
        msg = response.choices[0].message
        content = msg.content or ""
        if self.config.tool_mode == "text":
            text, parsed = parse_tool_uses(content)
            calls = [ToolCall(new_call_id(), name, args) for name, args in parsed]
            message: dict[str, Any] = {"role": "assistant", "content": content}
            return Reply(text, calls, self._usage(response, request, content), message, latency)
        calls = []
        for call in msg.tool_calls or []:
            func = getattr(call, "function", None)
            if func is None:
                continue
            args = func.arguments
            calls.append(ToolCall(call.id or new_call_id(), func.name or "", args if isinstance(args, str) else _json(args)))
        message = {"role": "assistant", "content": content if content or not calls else None}
        if calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls
            ]
        return Reply(content, calls, self._usage(response, request, content + "".join(c.arguments for c in calls)), message, latency)

    def _usage(self, response: Any, request: dict[str, Any], reply_text: str) -> Usage:
        usage = getattr(response, "usage", None)
        if usage is None:  # some local servers omit usage: estimate at ~4 chars per token
            prompt = len(_json(request["messages"])) // 4
            completion = len(reply_text) // 4
            cached = 0
        else:
            prompt, completion = usage.prompt_tokens or 0, usage.completion_tokens or 0
            details = getattr(usage, "prompt_tokens_details", None)
            cached = getattr(details, "cached_tokens", None) or (usage.model_extra or {}).get("prompt_cache_hit_tokens") or 0
        return Usage(prompt, completion, cached, self.config.cost(prompt, completion, cached))


_SDK_CLIENTS: dict[tuple[str, str, float], openai.OpenAI] = {}
_SDK_LOCK = threading.Lock()


def _sdk_client(base_url: str, key: str, timeout: float) -> openai.OpenAI:
    """One SDK client per endpoint and key per process: building one loads the CA bundle (~0.1 s of CPU),
    which a worker process running many short tasks (fan-out) would otherwise pay per task. Thread-safe."""
    with _SDK_LOCK:
        client = _SDK_CLIENTS.get((base_url, key, timeout))
        if client is None:
            client = _SDK_CLIENTS[(base_url, key, timeout)] = openai.OpenAI(
                base_url=base_url, api_key=key, max_retries=0, timeout=timeout)
        return client


def _retry_after(headers: Any) -> Optional[float]:
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


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
