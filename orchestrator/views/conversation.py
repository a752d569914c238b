"""`ga runs show RUN TASK` and `ga sessions show ID`: one conversation in the terminal, turn by turn."""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console, Group
from rich.panel import Panel
from rich.text import Text

from memory_shared.jsontypes import JSONObject
from orchestrator.ledger import read_jsonl
from orchestrator.views.columns import Paragraph
from orchestrator.views.runview import RunView, Turn, conversation, first_user_message
from worker.context import cut_head_tail

if TYPE_CHECKING:
    from worker.sessionfiles import Session

SHOWN_CHARS = 1200  # of each tool result and argument; the full size is printed beside it


def print_conversation(console: Console, view: RunView, task_id: str) -> None:
    task = view.task(task_id)
    path = view.history_path(task_id)
    usage = task.usage
    console.print(Text.assemble((f"{task_id}", "bold"), f"  {task.status}", f" · {task.turns} turns",
                                f" · {usage.get('total', 0):,} tokens ({usage.get('cached', 0):,} cached)",
                                f" · ${usage.get('cost', 0):.4f} · {task.seconds:.1f}s · {task.model}"))
    for number, attempt in enumerate(task.attempts, start=1):
        end = f"{attempt.end - attempt.start:.1f}s" if attempt.end else "running"
        why = f": {attempt.reason}" if attempt.reason else ""
        console.print(Text(f"attempt {number} on slot {attempt.slot}: {attempt.status} after {end}{why}"
                           + (" (killed after its timeout)" if attempt.killed else ""), style="dim"))
    task_text = first_user_message(path)
    if task_text:
        console.print(Panel(Text(cut_head_tail(task_text, SHOWN_CHARS)), title="task", title_align="left", border_style="blue"))
    attempts = view.conversation(task_id)
    live_from = _live_from(view.summary, task_id)
    if not attempts:
        console.print(Text(f"no turns recorded yet ({path})", style="yellow"))
    for number, turns in enumerate(attempts, start=1):
        if len(attempts) > 1:
            console.rule(f"attempt {number}")
        for turn in turns:
            if turn.turn == live_from and number == len(attempts):
                model = view.summary.get("fork_model")
                console.rule(f"the recording ends here: turn {live_from} on ran live" + (f" on {model}" if model else ""))
            console.print(_turn_panel(turn))
    if task.answer or task.reason:
        border = {"succeeded": "green", "unverified": "yellow"}.get(task.status, "red")
        console.print(Panel(Text(task.answer or task.reason), title="answer" if task.answer else "reason",
                            title_align="left", border_style=border))


def print_session(console: Console, session: Session) -> None:
    """A `ga run`/`ga chat` session (worker.sessionfiles.Session): each exchange, what the person asked and the
    turns that answered it; then the way to go on."""
    usage = session.usage or {}
    console.print(Paragraph(Text.assemble(
        (session.id, "bold"), f" · {session.status or 'no reply yet'}",
        f" · {session.exchanges} exchange{'s' if session.exchanges != 1 else ''}",
        f" · {session.turns} turns · {usage.get('total', 0):,} tokens",
        f" · ${usage.get('cost', 0) or 0:.4f} · {session.model or 'default model'}")))
    console.print(Text(f"directory: {session.workdir}", style="dim"))
    asked = _asked(session.history_path, session.first_task)
    exchanges = conversation(session.history_path) if session.history_path.is_file() else []
    if not exchanges:
        console.print(Panel(Text(cut_head_tail(session.first_task, SHOWN_CHARS)), title="you", title_align="left",
                            border_style="blue"))
        console.print(Text("no reply recorded yet", style="yellow"))
    for number, turns in enumerate(exchanges):
        question = asked[number] if number < len(asked) else ""
        console.print(Panel(Text(cut_head_tail(question, SHOWN_CHARS)), title="you", title_align="left",
                            border_style="blue"))
        for turn in turns:
            console.print(_turn_panel(turn))
    console.print(Text(f"go on: ga chat --resume {session.id}\n   or: ga run --continue {session.id} \"…\""))


def _asked(history: Path, first_task: str) -> list[str]:
    """What the person wrote at the start of each exchange: the first task, then each follow-up (the user message
    that ends the first request of an exchange; an exchange starts at turn 1)."""
    asked = []
    for record in read_jsonl(history):
        if record.get("turn") != 1 or "received" not in record:
            continue
        if not asked:
            asked.append(first_task)
            continue
        users = [m for m in record.get("sent") or [] if m.get("role") == "user"]
        asked.append(_text(users[-1].get("content")) if users else "")
    return asked


def _text(content: object) -> str:
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def _live_from(summary: JSONObject, task_id: str) -> int:
    """A forked task's first live turn (`forked_from` or `forks`: RUN/TASK@TURN, orchestrator/replay.py); else 0."""
    for origin in [summary.get("forked_from"), *(summary.get("forks") or {}).values()]:
        where, _, turn = str(origin or "").rpartition("@")
        if where.endswith(f"/{task_id}") and turn.isdigit():
            return int(turn)
    return 0


def _turn_panel(turn: Turn) -> Panel:
    parts: list[Text] = []
    if turn.text.strip():
        parts.append(Text(turn.text.strip()))
    for call in turn.calls:
        parts.append(Text.assemble(("→ ", "cyan"), (call.name, "bold cyan"), " ", _arguments(call.arguments)))
        parts.append(Text(f"← {'ok' if call.ok else 'error'}, {len(call.output):,} chars", style="dim"))
        parts.append(Text(cut_head_tail(call.output, SHOWN_CHARS).rstrip(), style="" if call.ok else "red"))
    usage = turn.usage
    subtitle = (f"{usage.get('prompt', 0):,} in ({usage.get('cached', 0):,} cached) · {usage.get('completion', 0):,} out"
                f" · {turn.seconds:.2f}s")
    return Panel(Group(*parts) if parts else Text("(empty reply)", style="dim"), title=f"turn {turn.turn}",
                 title_align="left", subtitle=subtitle, subtitle_align="right")


def _arguments(arguments: str) -> str:
    try:
        value = json.loads(arguments)
    except ValueError:
        return cut_head_tail(arguments, SHOWN_CHARS)
    if isinstance(value, dict):
        return cut_head_tail(", ".join(f"{k}={v!r}" if not isinstance(v, str) or "\n" not in v else f"{k}=\n{v}"
                                       for k, v in value.items()), SHOWN_CHARS)
    return cut_head_tail(arguments, SHOWN_CHARS)
