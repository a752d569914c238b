"""Plain data passed between the loop, the tools and the ledger (the model's reply types: worker.model;
tokens and cost: worker.usage)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict

# succeeded: answered after a successful tool run, or a task check passed; unverified: answered, but
# nothing backs the answer (no tool ran, or the last one failed): the reason says which
Status = Literal["succeeded", "unverified", "failed", "needs_input", "limit"]


class Record(BaseModel):
    """A typed record (read by attribute); unknown keys are kept, so what older versions wrote stays readable."""

    model_config = ConfigDict(extra="allow")


@dataclass
class ToolResult:
    output: str
    ok: bool = True
    # a successful execution that verifies something (gate input): only code_run says so, when its script exited 0
    # (worker.evidence then leaves out echo and true); a file write, a read or a page scan never is
    evidence: bool = False
    stop: Optional[Status] = None  # end the task with this status after this call
    data: dict[str, object] = field(default_factory=dict)
