"""What the loop says to a model about a reply it cannot take as it is (worker/agent.py).

- A reply that is not an answer gets a short correction, as a malformed call does: an empty reply, a word
  parroted from the system prompt's rule line ("Done", "Blocked"), a copy of ga's own marks in the history
  (an unreadable call's marker, a "[ga]" note), a call to a tool that does not exist, or a lone code block
  that ran nowhere.
- A malformed call gets its error with the exact shape to send, built from the model's own script; the same
  tool malformed again in a row gets the simpler code-block form (worker/model/callshape.py).
- The second chance (`worker.second_chance`): a note that names the fix: the failed run's error line (with what
  the common ones need: a NameError, a missing module or command or file, a SyntaxError), the code-block
  form after a call that could not be read, the whole call for a script the answer holds in a block that ran
  nowhere, the run's own output for a number it never printed, or that the task's check refused the answer. It
  never asks the model to repeat itself and never quotes a check (a pattern would hand over the answer).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from pydantic import BaseModel

from worker.context.compress import PLACEHOLDER
from worker.model import ToolCall
from worker.model.callshape import call_text, code_block_form, is_script_tool, shape
from worker.model.codeblocks import blocks, script_from_blocks
from worker.model.replies import UNREADABLE_MARK, invented_call

NOTHING_RAN = "no tool ran"  # the reason of an answer no tool run backs, when no tool ran at all
# words of the system prompt's rule line that small models send back as their whole answer
PARROTS = {"done", "ask_user", "ask user", "call ask_user", "the answer", "the answer itself", "final answer"}
BLOCKED = {"blocked", "unclear", "blocked or unclear", "blocked or unclear ask_user", "i am blocked", "i m blocked"}
# sentences of ga's own notes, named once so that a copy of one without its "[ga]" is still recognised
EMPTY_REPLY = "Your reply was empty."
ANSWER_OR_CALL = "Reply with the final answer itself, or call a tool."
NOTHING_RAN_YET = "Nothing ran yet."
RAN_NOWHERE = "The script in your reply's code block ran nowhere."
# what ga itself writes into a history: a reply made only of these says nothing (small models copy them; live on
# SOP-20 row 14 the 1.5B model answered with the plan note's first sentence alone)
GA_MARKS = re.compile("|".join([re.escape(UNREADABLE_MARK).replace(re.escape("{name}"), r"[\w-]+"),
                                r"\[ga\][^\n]*", r"\[turn \d+\][^\n]*", re.escape(PLACEHOLDER),
                                *map(re.escape, (EMPTY_REPLY, ANSWER_OR_CALL, NOTHING_RAN_YET, RAN_NOWHERE))]))
LONE_BLOCK_WORDS = 30  # a code block with at most this many other characters is "a lone code block"
NUMBER = re.compile(r"(?<![\w.])-?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.,])-?\d+(?:\.\d+)?(?![\w])")
RUN_STATUS = re.compile(r"^exit code -?\d+\n")  # code_run's first line: its exit code is no number it printed
# the fix a failed script's error line most often needs, in one clause: small models told only "fix the script"
# change nothing (the live 1.5B fib task: `print(fibonacci(10))`, a NameError, then the same answer)
FIXES = [
    (re.compile(r"NameError: name '(\w+)' is not defined"),
     "each code_run is a new process, so define or import `{0}` in the same script"),
    (re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'"),
     "`{0}` is not installed here: use the standard library, or install it first"),
    (re.compile(r"^(?:SyntaxError|IndentationError)\b"),
     "the script is not valid Python as sent: write it plainly in a fenced python block"),
    (re.compile(r"FileNotFoundError: .*?'([^']+)'"), "`{0}` is not there: list the working directory first"),
    (re.compile(r"\b([\w.-]+): (?:command )?not found\b"), "`{0}` is not installed here: do it another way"),
]


def not_an_answer(text: str, mode: str, again: bool = False) -> str:
    """The correction for a reply that carries no call and is no answer, or "". `again`: the reply before was
    corrected too; this one then also shows how a call is written (never the same words a second time)."""
    stripped = (text or "").strip()
    run_a_script = f"write the script in a fenced block and then {call_text('code_run', {'type': 'python'}, mode)}"
    example = f" For example, to run a script, {run_a_script}." if again else ""
    if not stripped:
        return f"[ga] {EMPTY_REPLY} {ANSWER_OR_CALL}{example}"
    if not re.sub(r"[\W_]+", "", GA_MARKS.sub("", stripped)):
        return f'[ga] "{_short(stripped)}" repeats a note ga wrote, and is not an answer. {ANSWER_OR_CALL}{example}'
    words = " ".join(re.sub(r"[^\w\s]", " ", stripped.lower()).split())
    if words in BLOCKED:
        return (f'[ga] "{_short(stripped)}" is not an answer. If something stops you, call ask_user with your '
                f"question; otherwise take the next step with a tool (the last result says what to change).{example}")
    if words in PARROTS:
        return (f'[ga] "{_short(stripped)}" is not an answer. Reply with the result itself (the value, text or '
                f"change the task asks for), or call a tool to get it.{example}")
    invented = invented_call(stripped)
    if invented:
        return (f"[ga] You have no tool named {_short(invented)}, so nothing ran. To compute the answer, {run_a_script}. "
                "If that JSON is itself your answer, say so in a sentence with it.")
    found = blocks(stripped)
    if len(found) == 1 and len(re.sub(r"```.*?```", "", stripped, flags=re.S).strip()) <= LONE_BLOCK_WORDS:
        kind, code = found[0]
        tool = "web_execute_js" if kind == "javascript" else "code_run"
        return (f"[ga] Your reply is a code block and no tool call: nothing ran. To run it, add the call line: "
                f"{call_text(tool, {'type': kind} if tool == 'code_run' else {}, mode)} after the block. If the code "
                "itself is your answer, say so in a sentence with it.")
    return ""


def call_error(call: ToolCall, reason: str, mode: str, again: bool, args_model: Optional[type[BaseModel]]) -> str:
    """The error for a malformed call: why, and the shape to send (the code-block form when `again`)."""
    if is_script_tool(call.name):
        fix = (code_block_form(call.name, call.script_hint, call.kind, mode) if again or not call.script_hint
               else shape(call.name, call.script_hint, call.kind, mode))
        return f"error: {reason}. {fix}"
    if args_model is not None:
        return f"error: {reason}. Send it like this: {call_text(call.name, placeholder_args(args_model), mode)}"
    return f"error: {reason}"


def placeholder_args(model: type[BaseModel]) -> dict[str, str]:
    return {name: "..." for name, info in model.model_fields.items() if info.is_required()}


@dataclass
class Backing:
    """What the loop knows when an answer comes: the last run that backs answers, the last call it could not read
    since, and the check's verdict on this answer (None: the task has no check)."""

    last_run: Optional[tuple[str, bool, str]]  # (tool, ok, output)
    unread: Optional[ToolCall]
    verdict: Optional[tuple[bool, str]]
    reply: str = ""  # the answer itself (its code blocks ran nowhere)
    can_run: bool = True  # code_run is among the task's tools


def second_chance_note(backing: Backing, mode: str) -> str:
    """The note sent once instead of taking an answer, or "" when the answer is taken as it is."""
    refused = backing.verdict is not None and not backing.verdict[0]
    if backing.verdict is not None and backing.verdict[0]:
        return ""
    head = "[ga] This task is checked and the check did not accept that answer. " if refused else "[ga] "
    if backing.unread is not None and is_script_tool(backing.unread.name):
        call = backing.unread
        return (f"{head}Your {call.name} call could not be read, so nothing ran. "
                + code_block_form(call.name, call.script_hint, call.kind, mode))
    last = backing.last_run
    block = script_from_blocks("code_run", backing.reply) if backing.can_run else None  # a script that ran nowhere
    misread = unbacked_numbers(backing.reply, last[2]) if last is not None and last[1] and not refused else []
    if last is not None and misread:
        return (f"{head}Your answer says {', '.join(misread)}, a number your last {last[0]} did not print (its output: "
                f"{_short(RUN_STATUS.sub('', last[2], count=1), 120)}). Answer from what the run printed, or run what "
                "computes your answer.")
    if last is not None and last[0] == "code_run" and not last[1]:
        line = failure_line(last[2])
        fix = next((f"; {hint.format(*found.groups())}" for pattern, hint in FIXES
                    if (found := pattern.search(line))), "")
        failed = f"{head}Your last code_run failed: {line}{fix}."
        if block is None:
            return f"{failed} Fix the script and run it again, then answer from the run that succeeds."
        return f"{failed} {_run_the_block(block, mode)}\nThen answer from the run that succeeds."
    if last is None and block is not None:  # a plan with its script in a block, and no call (held-out CSV sum, regex)
        return (f"{head}{NOTHING_RAN_YET} {_run_the_block(block, mode)}\nThen answer from its output (if the code "
                "itself is what the task asks for, say so).")
    if refused and last is None:
        return f"{head}Nothing you ran backs it: run a script that computes the answer, then reply with its result."
    if refused:
        return f"{head}Reply with the result your run produced, or run what computes it and reply with that."
    return ""


def _run_the_block(block: tuple[str, str], mode: str) -> str:
    """The block's script shown as the whole call: small models copy a call, they seldom add one to a block."""
    kind, script = block
    return f"{RAN_NOWHERE} {shape('code_run', script, kind, mode)}"


def unbacked_numbers(answer: str, output: str) -> list[str]:
    """The numbers of an answer when none of them is among the numbers its run printed (and it printed some):
    a misread (the live 1.5B model ran `wc -w`, saw 24, answered 25). [] when one matches or either has none."""
    said = NUMBER.findall(answer or "")
    printed = {_value(n) for n in NUMBER.findall(RUN_STATUS.sub("", output or "", count=1))}
    if not said or not printed or any(_value(n) in printed for n in said):
        return []
    return list(dict.fromkeys(said))


def _value(number: str) -> float:
    return float(number.replace(",", ""))


def failure_line(output: str, limit: int = 160) -> str:
    """The line that says why a tool run failed: the last one (a traceback's error), after the status."""
    lines = [line.strip() for line in (output or "").splitlines() if line.strip()]
    if not lines:
        return "(no output)"
    text = lines[-1]
    return text if len(text) <= limit else text[:limit] + "…"


def _short(text: str, limit: int = 40) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"
