"""The working-memory anchor (level 4 of context control): one line per turn, the newest of them,
the turn number, the task and key_info, appended to the user message after every tool call.
When old messages are evicted, the anchor in the newest user message carries the thread.

Under the watermark policy the turns since the last break are all in the request, so between
breaks an anchor shows only the turn's own line (and key_info); the break that evicts turns
writes the full anchor into the newest user message (`with_full_anchor`)."""
from __future__ import annotations

import json
import re
from typing import Optional

from configs.settings import ContextSettings
from worker.context.cut import cut_head_tail
from worker.model.messages import ChatMessage

TASK_CHARS = 300
KEY_INFO_CHARS = 2000
LINE_CHARS = 240
ARG_CHARS = 40
_EXIT_RE = re.compile(r"\s*exit code (-?\d+)")


class Anchor:
    """One-line turn summaries and key_info of one task.

    Per tool call: `add(turn, summarize_call(...))` (calls of one turn share a line);
    after the turn: `render(turn, key_info)` is the text of the closing user message.
    """

    def __init__(self, ctx: Optional[ContextSettings] = None, task: str = "", key_info: str = ""):
        """ctx: the task's context settings (None: the defaults' turn count, every render in full)."""
        self.turns_shown: int = ctx.anchor_turns if ctx is not None else ContextSettings().anchor_turns
        self.task, self.key_info = task, key_info
        self.deltas = ctx is not None and ctx.policy == "watermark"
        self.rendered_turn = 0  # the turn of the last render
        self._turns: list[tuple[int, list[str]]] = []

    def add(self, turn: int, summary: str) -> None:
        if self._turns and self._turns[-1][0] == turn:
            self._turns[-1][1].append(summary)
        else:
            self._turns.append((turn, [summary]))

    @property
    def lines(self) -> list[str]:
        return [turn_line(turn, parts) for turn, parts in self._turns]

    def render(self, turn: int, key_info: Optional[str] = None, full: Optional[bool] = None) -> str:
        """The anchor after `turn`: the newest `turns_shown` lines, or (deltas, unless `full`) the lines
        since the previous render."""
        self.key_info = self.key_info if key_info is None else key_info
        if self.deltas and not full:
            shown = [turn_line(t, parts) for t, parts in self._turns if t > self.rendered_turn]
            self.rendered_turn = turn
            return render_anchor(turn, shown, self.key_info, self.task)
        self.rendered_turn = turn
        lines = self.lines
        shown = lines[-self.turns_shown:] if self.turns_shown > 0 else []
        return render_anchor(turn, shown, self.key_info, self.task, omitted=len(lines) - len(shown))

    def with_full_anchor(self, messages: list[ChatMessage]) -> list[ChatMessage]:
        """`messages` with the newest user message's anchor rendered in full (the same list when the
        anchor is not in delta form or that message has none)."""
        if not self.deltas or not messages or messages[-1].get("role") != "user":
            return messages
        content = messages[-1].get("content")
        if not isinstance(content, str) or "<history>" not in content:
            return messages
        start = content.find("<history>")
        full = content[:start] + self.render(self.rendered_turn, full=True)
        return messages[:-1] + [{**messages[-1], "content": full}]


def render_anchor(turn: int, lines: list[str], key_info: str, task: str = "", omitted: int = 0) -> str:
    """`<history>` with the turn number, the task and the summary lines, then `<key_info>`."""
    header = f"[turn {turn}]" + (f" task: {_one_line(task, TASK_CHARS)}" if task else "")
    body = [header] + ([f"({omitted} earlier turns not shown)"] if omitted else []) + lines
    info = cut_head_tail(key_info.strip(), KEY_INFO_CHARS) if key_info and key_info.strip() else "(empty)"
    return "<history>\n" + "\n".join(body) + "\n</history>\n<key_info>\n" + info + "\n</key_info>"


def anchor_message(anchor_text: str, extra: str = "") -> ChatMessage:
    """The user message that closes a turn: text the tools want to add, then the anchor."""
    return {"role": "user", "content": (extra.strip() + "\n\n" if extra.strip() else "") + anchor_text}


def turn_line(turn: int, summaries: list[str]) -> str:
    """`t12 code_run(script='pip list | gre…') -> exit 0, 1.2k chars; file_read(…) -> ok, 300 chars`."""
    return _one_line(f"t{turn} " + ("; ".join(summaries) if summaries else "answered without a tool call"), LINE_CHARS)


def summarize_call(name: str, arguments: object, output: str, ok: bool = True, data: Optional[dict] = None) -> str:
    return f"{name}({format_arguments(arguments)}) -> {describe_result(output, ok, data)}"


def format_arguments(arguments: object, limit: int = ARG_CHARS, count: int = 2) -> str:
    """The first `count` arguments as key='value…', each value shortened to `limit` chars."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return _short(arguments, limit)
    if not isinstance(arguments, dict):
        return _short(json.dumps(arguments, ensure_ascii=False), limit)
    shown = [f"{k}={_short(v if isinstance(v, str) else json.dumps(v, ensure_ascii=False), limit, quote=isinstance(v, str))}"
             for k, v in list(arguments.items())[:count]]
    return ", ".join(shown) + (", …" if len(arguments) > count else "")


def describe_result(output: str, ok: bool = True, data: Optional[dict] = None) -> str:
    """`exit 0, 1.2k chars`, `exit 1: <its last line>`, `ok, 300 chars` or `error: <first line>`. A failed run
    names its error (a traceback ends with it), not its size: a small model took "exit 1, 259 chars" for a
    result and answered 259."""
    output = output or ""
    code = (data or {}).get("exit_code")
    match = _EXIT_RE.match(output)
    if code is None and match:
        code = match.group(1)
    if code is not None and str(code) != "0":
        last = next((line.strip() for line in reversed(output.splitlines()) if line.strip()), "")
        if last and not _EXIT_RE.match(last):
            return f"exit {code}: " + _one_line(last, 80)
    if code is not None:
        return f"exit {code}, {human_size(len(output))}"
    if ok:
        return f"ok, {human_size(len(output))}"
    first = next((line.strip() for line in output.splitlines() if line.strip()), "")
    return "error: " + _one_line(first, 80)


def human_size(chars: int) -> str:
    return f"{chars} chars" if chars < 1000 else f"{chars / 1000:.1f}k chars"


def _short(value: str, limit: int, quote: bool = True) -> str:
    flat = " ".join(value.split())
    flat = flat if len(flat) <= limit else flat[: limit - 1] + "…"
    return repr(flat) if quote else flat


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
