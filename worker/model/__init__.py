"""The model client, behind one protocol: `Model` (complete a request -> a typed `Reply`; its config).

The entry: `from worker.model import Model, Reply, ToolCall, ModelError, ContextOverflow, LLMClient`.
Everything that stands where a model client would (telemetry's TracedModel, the fan-out governor's
GovernedModel and FailoverModel, replay's ReplayModel) is a `Model`, so the loop reads `model.config`
and never looks inside a wrapper. One request walks three modules here:

    client.py     LLMClient: the request (tool modes, the protocol anchors, `stop`), retries, the Reply
    transport.py  one POST, bounded in time and size (httpcore2)
    replies.py    what came back: the completion envelope, tool calls however written, the guards

and, only when they are used, streaming.py (server-sent events put back into a completion) and
textproto.py (the `<tool_use>` protocol of the text tool mode; the scripted server speaks it too).

Importing this package is cheap: LLMClient (httpcore2, tenacity) loads on first use.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Callable, Optional, Protocol

from worker.model.replies import Reply, ToolCall

if TYPE_CHECKING:
    from worker.model.client import LLMClient
    from worker.models import ModelConfig

__all__ = ["ContextOverflow", "HookedModel", "LLMClient", "Model", "ModelError", "Reply", "ToolCall"]


class ModelError(RuntimeError):
    """The endpoint failed after retries (or cannot succeed): not the model's to fix."""


class ContextOverflow(ModelError):
    """The endpoint refused the request as larger than the model's context window (a 400)."""


class Model(Protocol):
    """What the loop needs of a model: one request completed, and the endpoint's settings."""

    @property
    def config(self) -> Optional[ModelConfig]:
        """The models.yaml entry behind this model (its context window, price, tool mode); None for a
        stand-in that has none (bench/context.py's): the loop then keeps the configured context."""
        ...

    def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        """The reply to `messages` with `tools` offered (OpenAI schemas); ModelError when the endpoint
        fails, ContextOverflow when the request does not fit its window."""
        ...


class HookedModel(Model, Protocol):
    """A Model with the hooks a fan-out governor sets (LLMClient has both, None by default)."""

    before_request: Optional[Callable[[], None]]  # before every attempt; may block to throttle
    on_rate_limit: Optional[Callable[[float], None]]  # on every 429, with the wait the client then takes


def __getattr__(name: str) -> Any:
    if name == "LLMClient":  # loaded on first use: httpcore2 and tenacity stay out of light imports
        return importlib.import_module("worker.model.client").LLMClient
    raise AttributeError(f"module 'worker.model' has no attribute {name!r}")
