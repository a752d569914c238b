"""Plain data passed between the loop, the tools and the ledger (the model's reply types: worker.model)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, computed_field

# succeeded: answered after a successful tool run, or a task check passed; unverified: answered, but
# nothing backs the answer (no tool ran, or the last one failed): the reason says which
Status = Literal["succeeded", "unverified", "failed", "needs_input", "limit"]


class Record(BaseModel):
    """A typed record that also reads like the JSON object it is written as (`r["status"]`, `r.get("usage")`):
    scripts written against `orchestrator.fanout()`'s results (a parent agent's code_run) index them so."""

    model_config = ConfigDict(extra="allow")

    def __getitem__(self, key: str) -> Any:
        try:
            return getattr(self, key)
        except AttributeError:
            raise KeyError(key) from None

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key, default)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and getattr(self, key, None) is not None

    def __eq__(self, other: object) -> bool:
        if isinstance(other, dict):
            return self.model_dump() == other
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]  (mutable, like the dict it stands for)


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

    def __add__(self, other: Optional["Usage"]) -> "Usage":
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


@dataclass
class WorkerResult:
    task_id: str
    status: Status
    answer: str
    turns: int
    usage: Usage
    history_path: Path
    reason: str = ""
    question: Optional[str] = None
    memory_generation: Optional[int] = None  # the commit made by the consolidation gate, if any
    check: Optional[dict[str, Any]] = None  # the task-level check: {"passed": bool, "detail": str}

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["usage"] = self.usage.to_dict()
        data["history_path"] = str(self.history_path)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "WorkerResult":
        data = dict(data)
        data["usage"] = Usage.from_dict(data["usage"])
        data["history_path"] = Path(data["history_path"])
        return cls(**data)
