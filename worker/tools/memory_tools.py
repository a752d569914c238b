"""update_working_checkpoint and start_long_term_update: working memory and the door to long-term memory."""
from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from memory_shared.layers import read_l0
from worker.tools.base import FunctionTool, ToolContext
from worker.types import ToolResult

DISTILL = Path(__file__).resolve().parents[1] / "prompts" / "distill.md"
KEY_INFO_MAX = 2000  # the anchor carries key_info every turn: keep it a note, not a document


class CheckpointArgs(BaseModel):
    key_info: str


class NoArgs(BaseModel):
    pass


def update_working_checkpoint(ctx: ToolContext, args: CheckpointArgs) -> ToolResult:
    text = args.key_info.strip()
    note = ""
    if len(text) > KEY_INFO_MAX:
        note = f"; cut to its first {KEY_INFO_MAX} chars, keep it shorter"
        text = text[:KEY_INFO_MAX]
    ctx.key_info = text
    return ToolResult(f"key_info updated ({len(text)} chars){note}", evidence=False)


UPDATE_WORKING_CHECKPOINT = FunctionTool(
    "update_working_checkpoint", "Replace your working note, shown every turn: goal, constraints, key paths and"
    " findings, progress, next step, pitfalls. Under 200 words.", CheckpointArgs, update_working_checkpoint,
    answer_evidence=False)


def start_long_term_update(ctx: ToolContext, args: NoArgs) -> ToolResult:
    view = ctx.memory
    if view is None:
        return ToolResult("this task has no memory tier; nothing can be saved", ok=False, evidence=False)
    view.enable_staging()
    rules = read_l0(view.root) if view.root is not None else ""
    instructions = DISTILL.read_text(encoding="utf-8")
    return ToolResult(f"<L0 rules>\n{rules.strip()}\n</L0 rules>\n{instructions.strip()}", evidence=False)


START_LONG_TERM_UPDATE = FunctionTool(
    "start_long_term_update", "Start saving verified, lasting knowledge to memory/; returns the rules.", NoArgs,
    start_long_term_update, answer_evidence=False)
