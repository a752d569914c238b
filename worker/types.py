"""Plain data passed between the loop, the model client and the tools."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional, Protocol

# succeeded: answered after a successful tool run, or a task check passed; unverified: answered, but
# nothing backs the answer (no tool ran, or the last one failed): the reason says which
Status = Literal["succeeded", "unverified", "failed", "needs_input", "limit"]


@dataclass
class Usage:
    prompt: int = 0
    completion: int = 0
    cached: int = 0
    cost: float = 0.0

    @property
    def total(self) -> int:
        return self.prompt + self.completion

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(self.prompt + other.prompt, self.completion + other.completion,
                     self.cached + other.cached, self.cost + other.cost)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "total": self.total}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Usage":
        return cls(**{k: data.get(k, 0) for k in ("prompt", "completion", "cached", "cost")})


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str  # the JSON text exactly as the model sent it
    problem: str = ""  # the call was written in the reply's text and could not be read: the error to send back


@dataclass
class Reply:
    content: str
    tool_calls: list[ToolCall]
    usage: Usage
    message: dict[str, Any]  # the assistant message, OpenAI format, as it goes into the history
    latency: float = 0.0
    finish_reason: str = ""  # "length": cut at max_tokens
    raw: Optional[str] = None  # the content as received, when the message above was reinterpreted from it
    notes: list[str] = field(default_factory=list)  # what the interpretation did (e.g. cut an invented result)


class Model(Protocol):
    """What the loop needs of a model client."""

    def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply: ...


class ModelError(RuntimeError):
    """The endpoint failed after retries (or cannot succeed): not the model's to fix."""


class ContextOverflow(ModelError):
    """The endpoint refused the request as larger than the model's context window (a 400)."""


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
