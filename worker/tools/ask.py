"""ask_user: a question for the person. Without one present, the first question of a task is answered with a
note to go on alone; a second one ends the task as needs_input."""
from __future__ import annotations

from pydantic import BaseModel

from worker.tools.base import FunctionTool, ToolContext, ToolState
from worker.types import ToolResult

# A small model asks "What should I do next?" of a task it could do (issue 35): one reply that nobody will
# answer costs a turn, and a task that truly needs a person still ends needs_input at its next question.
NOBODY_HERE = ("nobody is watching this task, so no one will answer. Go on with the task as it is written: where"
               " it can be read two ways, take the likelier and say which in your answer. Ask again only if the"
               " task cannot be done at all without the answer.")


class AskArgs(BaseModel):
    question: str
    candidates: list[str] = []


class Asked(ToolState):
    """Whether this task was already told that nobody will answer."""

    told = False


def ask_user(ctx: ToolContext, args: AskArgs) -> ToolResult:
    if ctx.interactive and ctx.ask is not None:
        answer = ctx.ask(args.question, list(args.candidates))
        return ToolResult(f"user answered: {answer}", evidence=False, data={"answer": answer})
    asked = ctx.state(Asked)
    if not asked.told:
        asked.told = True
        return ToolResult(NOBODY_HERE, evidence=False)
    return ToolResult(f"question recorded for the user: {args.question}; the task waits for the answer",
                      evidence=False, stop="needs_input",
                      data={"question": args.question, "candidates": list(args.candidates)})


ASK_USER = FunctionTool("ask_user", "Ask the user when you need a decision or information you cannot get yourself;"
                        " candidates: suggested answers.", AskArgs, ask_user, answer_evidence=False)
