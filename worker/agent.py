"""The agent loop: ask the model, run every tool call in order, feed results back, keep context dense."""
from __future__ import annotations

import functools
import json
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Callable, Optional, TypeVar

import structlog
from pydantic import ValidationError

from configs.settings import ContextSettings
from memory_shared import Execution
from memory_shared.usererrors import validation_line
from worker import answers, context, prompt, telemetry
from worker.distill import Ran
from worker.evidence import execution_of
from worker.history import History, ToolResultLine
from worker.model import ChatMessage, ContextOverflow, LLMClient, Model, ModelError, Reply, ToolCall, ToolSchema
from worker.model.transport import Abort
from worker.modelconfig import resolve_model
from worker.record import Stop, TaskRecord
from worker.taskcheck import run_check
from worker.taskmemory import MemorySession
from worker.taskspec import Runtime, TaskSpec
from worker.tools import REGISTRY, Tool, ToolContext
from worker.types import Status, ToolResult
from worker.usage import Account, Usage

log = structlog.get_logger("worker")
MAX_MALFORMED_IN_A_ROW = 3


class Worker:
    """One GenericAgent task: its own directory, history, pinned memory snapshot, model and tools. Built from
    the task and what serves it (worker/taskspec.py)."""

    def __init__(self, spec: TaskSpec, runtime: Optional[Runtime] = None):
        runtime = runtime or Runtime()
        self.spec, self.runtime = spec, runtime
        self.task, self.task_id, self.settings, self.env = spec.prompt, spec.task_id, spec.settings, runtime.env
        self.workdir = Path(spec.workdir)
        self.history = History(spec.history_path)
        model = runtime.model or LLMClient(resolve_model(spec.model_name, spec.settings))
        self.model = telemetry.traced_model(model, self.settings)
        self._run_tool = telemetry.traced_tool_calls(self._dispatch, self.settings)
        self._run_task = telemetry.traced_agent(self._run, self)
        self.tools: dict[str, Tool] = {name: REGISTRY[name] for name in (spec.tools or REGISTRY)}
        limits = self.settings.worker
        self.account = Account(_lowest(limits.max_tokens, spec.budget_tokens), _lowest(limits.max_cost, spec.budget_cost))
        self._cancelled = threading.Event()
        self._notes: list[str] = []  # a person's notes for the next request (tell), guarded by _notes_lock
        self._notes_lock = threading.Lock()
        self._abort = Abort()  # cuts the model request in flight when the task is cancelled
        self._kill: list[Callable[[], object]] = [self._abort]  # code_run adds a killer per running process group
        self._executions: list[Execution] = []  # every tool run, in order: the consolidation gate's evidence
        self._ran: list[Ran] = []  # the same runs with their arguments: what ga distils a task from (worker/distill.py)
        self._last_run: Optional[tuple[str, bool, str]] = None  # (tool, ok, output) of the last run backing an answer
        self._unread: Optional[ToolCall] = None  # the last malformed call, until a well-formed one runs
        self._second_chances = 0  # notes sent instead of taking an answer (worker.second_chance)

    @property
    def usage(self) -> Usage:
        """The task's own model calls and its scripts' calls through the gateway (not its nested runs)."""
        return self.account.usage

    def tell(self, text: str) -> None:
        """A note from the person, added to the next request (safe from any thread)."""
        with self._notes_lock:
            self._notes.append(text)

    def cancel(self) -> None:
        """Stop at the next step, cut the model request in flight and kill running code_run process groups (safe
        from any thread)."""
        self._cancelled.set()
        for kill in list(self._kill):
            kill()

    def run(self) -> TaskRecord:
        """The task from start to end (an `invoke_agent` span around it when telemetry is on)."""
        return self._run_task()

    def _run(self) -> TaskRecord:
        spec, runtime = self.spec, self.runtime
        self.workdir.mkdir(parents=True, exist_ok=True)
        with MemorySession(runtime.store, self.task_id, self.settings.memory.archive_keep_months,
                           commit_key=spec.commit_key, settings=self.settings,
                           model=self.model.config.name if self.model.config is not None else "") as memory:
            self._ctx = ToolContext(self.task_id, self.workdir, self.settings, memory.view, runtime.interactive,
                                    runtime.ask, env=dict(self.env), kill=self._kill, cancelled=self._cancelled,
                                    account=self.account, model_config=self.model.config)
            with closing(self._ctx), self._abort:
                result = self._loop(memory)
            result.memory_generation = memory.finish(result, self._executions, self._ran, self.task)
            result.memory = memory.outcome
        log.info("task_done", task=self.task_id, status=result.status, turns=result.turns, tokens=result.usage.total)
        return result

    def _loop(self, memory: MemorySession) -> TaskRecord:
        messages = self.spec.messages or [{"role": "system", "content": prompt.build_system_prompt(memory.l1_text)},
                                    {"role": "user", "content": prompt.build_first_user_message(self.task)}]
        schemas = _schemas(tuple(self.tools))
        cfg = self._context_settings(schemas)
        too_small = self._window_too_small(messages, schemas, cfg)
        if too_small:
            return self._result("failed", "", 0, too_small)
        anchor = context.Anchor(cfg, task=self.task)
        malformed = 0
        corrected = False  # the last reply was not an answer and got a correction
        for turn in range(1, self.settings.worker.max_turns + 1):
            if self._cancelled.is_set():
                return self._result("failed", "", turn - 1, "cancelled", stop=Stop.cancelled)
            messages = self._with_notes(messages)
            request = context.maintain(messages, turn, cfg, anchor)
            try:
                request, reply, cfg = self._ask(messages, request, schemas, turn, cfg, anchor)
            except ContextOverflow as exc:
                return self._result("failed", "", turn, f"the request does not fit the model's context window {exc}; "
                                    f"set (or lower) context_window for {_model_name(self.model)} in models.yaml")
            except ModelError as exc:
                if self._cancelled.is_set():  # the cancel cut the request
                    return self._result("failed", "", turn - 1, "cancelled", stop=Stop.cancelled)
                return self._result("failed", "", turn, f"model error: {exc}",
                                    stop=Stop.rate_limited if exc.status == 429 else None)
            self.account.add(reply.usage)
            messages = request + [reply.message]
            problem = reply.problem()
            if problem:
                malformed += 1
                self.history.record(turn, request, reply, [{"error": problem}])
                if malformed >= MAX_MALFORMED_IN_A_ROW:
                    return self._result("failed", "", turn, f"{malformed} malformed replies in a row; last: {problem}")
                anchor.add(turn, f"reply discarded: {problem}")
                messages[-1] = {"role": "assistant", "content": _shortened(reply)}
                messages.append({"role": "user", "content": f"error: {problem}\n\n{anchor.render(turn, self._ctx.key_info)}"})
                continue
            if not reply.tool_calls:
                self.history.record(turn, request, reply, [])
                correction = answers.not_an_answer(reply.content, self._mode, again=corrected)
                corrected = bool(correction)
                if correction:  # an empty or parroted reply, or a code block that ran nowhere: corrected like a bad call
                    malformed += 1
                    if malformed >= MAX_MALFORMED_IN_A_ROW:
                        return self._result("failed", "", turn, f"{malformed} replies in a row were not answers; "
                                            f"last: {_one_line(reply.content) or '(empty)'}")
                    messages.append({"role": "user", "content": correction})
                    continue
                verdict = run_check(self.spec.check, reply.content, self._ctx) if self.spec.check is not None else None
                chance = self._second_chances < self.settings.worker.second_chance
                backing = answers.Backing(self._last_run, self._unread, verdict, reply.content, "code_run" in self.tools)
                note = answers.second_chance_note(backing, self._mode) if chance else ""
                if not note:
                    return self._answered(reply.content, turn, verdict)
                self._second_chances += 1
                messages.append({"role": "user", "content": note})
                continue
            corrected = False
            done, malformed = self._run_calls(reply.tool_calls, turn, messages, anchor, malformed)
            self.history.record(turn, request, reply, [_summary(c, r) for c, r in done])
            if self._cancelled.is_set():
                return self._result("failed", "", turn, "cancelled", stop=Stop.cancelled)
            ended = self._ended_by(done[-1][1], malformed, turn)
            if ended is not None:
                return ended
            messages.append({"role": "user", "content": anchor.render(turn, self._ctx.key_info)})
        return self._result("limit", "", self.settings.worker.max_turns, "max turns reached")

    def _run_calls(self, calls: list[ToolCall], turn: int, messages: list[ChatMessage], anchor: context.Anchor,
                   malformed: int) -> tuple[list[tuple[ToolCall, ToolResult]], int]:
        """Run a turn's tool calls in order, each result added to `messages`, until one stops the task or
        too many in a row are malformed. Returns what ran and the malformed-in-a-row count."""
        done: list[tuple[ToolCall, ToolResult]] = []
        most = self.settings.worker.max_tool_calls_per_reply
        calls, refused = calls[:most], calls[most:]
        self._ctx.calls_in_turn = len(calls)  # the turn's calls share the output caps
        for call in calls:
            if self._cancelled.is_set():  # a timeout or cancel: not one more call starts
                break
            result, well_formed = self._run_tool(call, turn)
            malformed = 0 if well_formed else malformed + 1
            self._unread = None if well_formed else call
            if well_formed and self.tools[call.name].answer_evidence:
                self._last_run = (call.name, result.ok, result.output)
            done.append((call, result))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result.output})
            anchor.add(turn, context.summarize_call(call.name, call.arguments, result.output, result.ok))
            self._notify(turn, call, result)
            if result.stop or malformed >= MAX_MALFORMED_IN_A_ROW:
                break
        messages += _skipped(calls[len(done):], "not run: the task stopped")
        if refused:  # one line says why; the other refused calls point to it
            messages += _skipped(refused[:1], f"not run: a reply may carry at most {most} tool calls; this and the "
                                              f"{len(refused) - 1} after it were not run: send what is still needed "
                                              "in the next reply")
            messages += _skipped(refused[1:], "not run: over the per-reply limit")
        return done, malformed

    def _ended_by(self, last: ToolResult, malformed: int, turn: int) -> Optional[TaskRecord]:
        """The task's result if the turn's calls end it (a stop, malformed calls, a spending limit), else None."""
        if last.stop:
            asked, said = last.data.get("question"), last.data.get("reason")
            question = asked if isinstance(asked, str) else None
            reason = said if isinstance(said, str) and said else "waiting for the user"
            return self._result(last.stop, question or "", turn, reason, question)
        if malformed >= MAX_MALFORMED_IN_A_ROW:
            return self._result("failed", "", turn, f"{malformed} malformed tool calls in a row; last: {last.output}")
        if limit := self._over_limit():
            return self._result("limit", "", turn, limit)
        return None

    def _context_settings(self, schemas: list[ToolSchema]) -> ContextSettings:
        """context settings whose budget fits the model's window (models.yaml context_window, less its
        max_tokens and the tool schemas sent with every request) when the window is known."""
        cfg = self.settings.context
        config = self.model.config
        if config is None:
            return cfg
        overhead = self._schemas_chars(schemas) // max(1, cfg.chars_per_token)
        tokens = config.context_tokens(cfg.context_tokens, overhead)
        return cfg if tokens == cfg.context_tokens else cfg.model_copy(update={"context_tokens": tokens})

    def _window_too_small(self, messages: list[ChatMessage], schemas: list[ToolSchema], cfg: ContextSettings) -> str:
        """One line when the model's known context window cannot hold the first request (the system prompt, the task
        and the tool schemas, which are never cut) and a reply of max_tokens; "" otherwise."""
        config = self.model.config
        if config is None or not config.context_window:
            return ""
        per = max(1, cfg.chars_per_token)
        prompt = context.serialized_size(messages) // per
        tools = self._schemas_chars(schemas) // per
        if prompt + tools + config.max_tokens <= config.context_window:
            return ""
        return (f"context_window {config.context_window:,} of {_model_name(self.model)} cannot hold the first request: "
                f"about {prompt:,} tokens of system prompt and task, {tools:,} of tool schemas and {config.max_tokens:,} "
                "for the reply (max_tokens); raise context_window (the server's -c per slot) or lower max_tokens in "
                "models.yaml")

    def _schemas_chars(self, schemas: list[ToolSchema]) -> int:
        """len(json.dumps(schemas)), measured once per tool set for the schemas every task of a process shares."""
        names = tuple(self.tools)
        return _schemas_chars(names) if schemas is _schemas(names) else len(json.dumps(schemas))

    def _ask(self, messages: list[ChatMessage], request: list[ChatMessage], schemas: list[ToolSchema],
             turn: int, cfg: ContextSettings, anchor: context.Anchor) -> tuple[list[ChatMessage], Reply, ContextSettings]:
        """One request; a context overflow is answered once by trimming to half the refused request's
        size (kept for the rest of the task), then raised."""
        try:
            return request, self.model.chat(request, schemas), cfg
        except ContextOverflow as exc:
            tokens = max(1, context.serialized_size(request) // max(1, cfg.chars_per_token) // 2)
            cfg = cfg.model_copy(update={"context_tokens": min(cfg.context_tokens, tokens)})
            log.warning("context_overflow", task=self.task_id, turn=turn, trimmed_to=cfg.context_tokens, error=str(exc)[:200])
            request = context.maintain(messages, turn, cfg, anchor)
            try:
                return request, self.model.chat(request, schemas), cfg
            except ContextOverflow as again:
                raise ContextOverflow(f"even trimmed to {cfg.context_tokens:,} tokens ({again})") from None

    def _answered(self, answer: str, turn: int, verdict: Optional[tuple[bool, str]]) -> TaskRecord:
        """The model answered: succeeded when its last tool run succeeded and printed what the answer says; with a
        check, the check's verdict."""
        status, reason = self._backing(answer)
        if verdict is None:
            return self._result(status, answer, turn, reason)
        passed, detail = verdict
        log.info("task_check", task=self.task_id, passed=passed, detail=detail)
        if not passed:
            return self._result("failed", answer, turn, f"check failed: {detail}", check={"passed": False, "detail": detail})
        return self._result("succeeded", answer, turn, "", check={"passed": True, "detail": detail})

    def _backing(self, answer: str) -> tuple[Status, str]:
        if self._last_run is None:
            ran = sorted({e.tool for e in self._executions if e.evidence or e.tool.startswith("file_")})  # not bookkeeping
            if not ran:
                return "unverified", answers.NOTHING_RAN
            return "unverified", f"no run backs the answer ({', '.join(ran)} computed nothing)"
        name, ok, output = self._last_run
        misread = answers.unbacked_numbers(answer, output) if ok else []
        if misread:
            return "unverified", f"the answer's {', '.join(misread)} is not among the numbers the last {name} printed"
        if ok:
            return "succeeded", ""
        return "unverified", f"last {name} failed: {answers.failure_line(output)}"

    @property
    def _mode(self) -> str:
        """The tool mode the model reads calls in (the shapes the loop shows it follow it)."""
        return self.model.config.tool_mode if self.model.config is not None else "native"
    def _with_notes(self, messages: list[ChatMessage]) -> list[ChatMessage]:
        """Notes told since the last request, put at the head of the newest user message, before its anchor
        (that message is not sent yet, so the cached prefix stays whole)."""
        with self._notes_lock:
            notes, self._notes = self._notes, []
        if not notes:
            return messages
        text = "\n\n".join(f"<note from the person>\n{note}\n</note>" for note in notes)
        last = messages[-1]
        if last.get("role") == "user" and isinstance(last.get("content"), str):
            return messages[:-1] + [{**last, "content": f"{text}\n\n{last.get('content')}"}]
        return messages + [{"role": "user", "content": text}]

    def _dispatch(self, call: ToolCall, turn: int) -> tuple[ToolResult, bool]:
        """Run one tool call. The bool says whether the call itself was well formed."""
        if call.problem:
            return self._malformed(call, call.problem), False
        tool = self.tools.get(call.name)
        if tool is None:
            return ToolResult(f"error: unknown tool '{call.name}'; use one of: {', '.join(self.tools)}", ok=False), False
        try:
            args = tool.args.model_validate(json.loads(call.arguments or "{}", strict=False))
        except json.JSONDecodeError as exc:
            return self._malformed(call, f"arguments of {call.name} are not valid JSON ({exc.msg} at char {exc.pos})"), False
        except ValidationError as exc:
            problems = validation_line(exc, top="arguments", every=True, quote=False)
            return self._malformed(call, f"bad arguments for {call.name}: {problems}"), False
        seq = len(self._executions) + 1
        self._ctx.seq, self._ctx.call_id = seq, call.id
        if self.runtime.on_tool_start:
            self.runtime.on_tool_start({"task_id": self.task_id, "turn": turn, "tool": call.name})
        started = time.monotonic()
        try:
            result = tool.run(self._ctx, args)
        except Exception as exc:  # a tool bug must not kill the task; the model sees it and may route around it
            log.exception("tool_crashed", tool=call.name, task=self.task_id)
            result = ToolResult(f"error: {call.name} failed: {type(exc).__name__}: {exc}", ok=False)
        self._executions.append(execution_of(seq, call.id, call.name, call.arguments, result))
        self._ran.append(Ran(call.name, args.model_dump(), result.ok, result.output if call.name == "code_run" else ""))
        log.debug("tool", task=self.task_id, tool=call.name, ok=result.ok, seconds=round(time.monotonic() - started, 3))
        return result, True

    def _malformed(self, call: ToolCall, reason: str) -> ToolResult:
        """The error a malformed call gets: the shape to send, simpler when the same tool was malformed just before."""
        again = self._unread is not None and self._unread.name == call.name
        tool = self.tools.get(call.name)
        text = answers.call_error(call, reason, self._mode, again, tool.args if tool is not None else None)
        return ToolResult(text, ok=False)

    def _over_limit(self) -> str:
        """The task's limits hold for its subtree: its own calls and what the fan-outs its code_run started spent."""
        limits, spent = self.settings.worker, self.account.spent()
        if limits.max_tokens and spent.total >= limits.max_tokens:
            return f"token limit {limits.max_tokens} reached"
        if limits.max_cost and spent.cost >= limits.max_cost:
            return f"cost limit {limits.max_cost} reached"
        return ""

    def _notify(self, turn: int, call: ToolCall, result: ToolResult) -> None:
        if self.runtime.on_turn:
            self.runtime.on_turn({"task_id": self.task_id, "turn": turn, "tool": call.name, "arguments": call.arguments[:120],
                          "ok": result.ok, "result_chars": len(result.output), "tokens": self.account.spent().total})

    def _result(self, status: Status, answer: str, turns: int, reason: str = "", question: Optional[str] = None,
                check: Optional[dict[str, object]] = None, stop: Optional[Stop] = None) -> TaskRecord:
        if self._second_chances:
            reason = f"{reason}; after a second chance" if reason else "after a second chance"
        return TaskRecord(task_id=self.task_id, status=status, answer=answer, turns=turns, usage=self.usage,
                          history_path=str(self.history.path), reason=reason, question=question, check=check,
                          stop=stop)


@functools.lru_cache(maxsize=64)
def _schemas(names: tuple[str, ...]) -> list[ToolSchema]:
    """The tool schemas sent with every request, built once per tool set and shared by the workers of a process
    (read-only: the model client encodes them once per list, worker/model/client.py)."""
    return [REGISTRY[name].schema() for name in names]


@functools.lru_cache(maxsize=64)
def _schemas_chars(names: tuple[str, ...]) -> int:
    return len(json.dumps(_schemas(names)))


Limit = TypeVar("Limit", int, float)


def _lowest(limit: Optional[Limit], budget: Optional[Limit]) -> Optional[Limit]:
    return min((x for x in (limit or None, budget) if x is not None), default=None)


def _skipped(calls: list[ToolCall], why: str) -> list[ChatMessage]:
    """Results for calls not run (after a stop, or past the per-reply limit), so no assistant tool_call is left
    without its result."""
    return [{"role": "tool", "tool_call_id": c.id, "content": why} for c in calls]


def _summary(call: ToolCall, result: ToolResult) -> ToolResultLine:
    return {"id": call.id, "name": call.name, "ok": result.ok, "output": result.output}


def _shortened(reply: Reply, limit: int = 400) -> str:
    text = reply.raw if reply.raw is not None else reply.content
    return text if len(text) <= limit else f"{text[:limit]}\n[... {len(text) - limit} chars of repeated output dropped ...]"


def _one_line(text: str, limit: int = 80) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[:limit] + "…"


def _model_name(model: Model) -> str:
    return f"model '{model.config.name}'" if model.config is not None else "this model"
