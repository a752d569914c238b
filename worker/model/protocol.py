"""The seam between the loop and a model: the `Model` protocol, the errors it raises, the hooks a governor sets.

Reply and ToolCall, what a Model returns, are in replies.py (where a reply is read); all of these are
imported from the package's entry, `worker.model`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional, Protocol

from worker.model.messages import ChatMessage, ToolSchema
from worker.model.replies import Reply

if TYPE_CHECKING:
    from worker.modelconfig import ModelConfig


class ModelError(RuntimeError):
    """The endpoint failed after retries (or cannot succeed): not the model's to fix. `status`: the HTTP status
    of the endpoint's last refusal (None when it never answered with one)."""

    def __init__(self, message: str = "", status: Optional[int] = None):
        super().__init__(message)
        self.status = status


class ContextOverflow(ModelError):
    """The endpoint refused the request as larger than the model's context window (a 400)."""


class Model(Protocol):
    """What the loop needs of a model: one request completed, and the endpoint's settings."""

    @property
    def config(self) -> Optional[ModelConfig]:
        """The models.yaml entry behind this model (its context window, price, tool mode); None for a
        stand-in that has none (bench/context.py's): the loop then keeps the configured context."""
        ...

    def chat(self, messages: list[ChatMessage], tools: list[ToolSchema]) -> Reply:
        """The reply to `messages` with `tools` offered (OpenAI schemas); ModelError when the endpoint
        fails, ContextOverflow when the request does not fit its window."""
        ...


class HookedModel(Model, Protocol):
    """A Model with the hooks a fan-out governor sets (LLMClient has both, None by default)."""

    before_request: Optional[Callable[[], None]]  # before every attempt; may block to throttle
    on_rate_limit: Optional[Callable[[float], None]]  # on every 429, with the wait the client then takes
