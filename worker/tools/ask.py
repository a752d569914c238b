"""ask_user: a question for the person; without one present the task ends as needs_input."""
from __future__ import annotations

from pydantic import BaseModel

from worker.tools.base import FunctionTool, ToolContext
from worker.types import ToolResult


class AskArgs(BaseModel):
    question: str
    candidates: list[str] = []


def ask_user(ctx: ToolContext, args: AskArgs) -> ToolResult:
    if ctx.interactive and ctx.ask is not None:
        answer = ctx.ask(args.question, list(args.candidates))
        return ToolResult(f"user answered: {answer}", evidence=False, data={"answer": answer})
    return ToolResult(f"question recorded for the user: {args.question}; the task waits for the answer",
                      evidence=False, stop="needs_input",
                      data={"question": args.question, "candidates": list(args.candidates)})


ASK_USER = FunctionTool("ask_user", "Ask the user when you need a decision or information you cannot get yourself;"
                        " candidates: suggested answers.", AskArgs, ask_user, answer_evidence=False)
