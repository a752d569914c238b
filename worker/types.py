"""Plain data passed between the loop, the tools and the ledger (the model's reply types: worker.model)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, computed_field
from typing_extensions import Self

# succeeded: answered after a successful tool run, or a task check passed; unverified: answered, but
# nothing backs the answer (no tool ran, or the last one failed): the reason says which
Status = Literal["succeeded", "unverified", "failed", "needs_input", "limit"]


class Record(BaseModel):
    """A typed record (read by attribute); unknown keys are kept, so what older versions wrote stays readable."""

    model_config = ConfigDict(extra="allow")


class Usage(Record):
    """Tokens and cost: one model call's, a task's, a run's (the one usage record of every part)."""

    model_config = ConfigDict(extra="ignore")

    prompt: int = 0
    completion: int = 0
    cached: int = 0
    cost: float = 0.0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def total(self) -> int:
        return self.prompt + self.completion

    def __add__(self, other: Optional[Usage]) -> Self:  # a WorkerTotals plus a Usage is a WorkerTotals
        if other is None:
            return self.model_copy()
        return self.model_copy(update={"prompt": self.prompt + other.prompt, "completion": self.completion + other.completion,
                                       "cached": self.cached + other.cached, "cost": self.cost + other.cost})

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump()

    @classmethod
    def from_dict(cls, data: Optional[dict[str, Any]]) -> "Usage":
        return cls.model_validate(data or {})


@dataclass
class ToolResult:
    output: str
    ok: bool = True
    evidence: bool = True  # a successful execution that verifies something (gate input)
    stop: Optional[Status] = None  # end the task with this status after this call
    data: dict[str, Any] = field(default_factory=dict)
