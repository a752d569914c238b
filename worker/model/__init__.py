"""The model client, behind one protocol: `Model` (complete a request -> a typed `Reply`; its config).

The entry: `from worker.model import Model, Reply, ToolCall, ModelError, ContextOverflow, LLMClient`, and the
messages and tool schemas a request carries (`ChatMessage`, `ToolSchema`: messages.py).
Everything that stands where a model client would (telemetry's TracedModel, the fan-out governor's
GovernedModel and FailoverModel, replay's ReplayModel) is a `Model`, so the loop reads `model.config`
and never looks inside a wrapper (the protocols: protocol.py). One request walks three modules here:

    client.py     LLMClient: the request (tool modes, the protocol anchors, `stop`), retries, the Reply
    transport.py  one POST, bounded in time and size (httpcore2), cut at once when its task is cancelled
    replies.py    what came back: the completion envelope, tool calls however written, the guards

and, only when they are used, streaming.py (server-sent events put back into a completion) and
textproto.py (the `<tool_use>` protocol of the text tool mode; the scripted server speaks it too).

Importing this package is cheap: LLMClient (httpcore2) loads on first use. Besides the loop,
three parts use a piece directly: the gateway forwards a script's request with transport.post, the
scripted server speaks textproto and streaming, replay reads a recorded reply with replies.interpret.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from worker.model.messages import ChatMessage, ToolSchema
from worker.model.protocol import ContextOverflow, HookedModel, Model, ModelError
from worker.model.replies import Reply, ToolCall

if TYPE_CHECKING:
    from worker.model.client import LLMClient

__all__ = ["ChatMessage", "ContextOverflow", "HookedModel", "LLMClient", "Model", "ModelError", "Reply", "ToolCall",
           "ToolSchema"]


def __getattr__(name: str) -> type[LLMClient]:
    if name == "LLMClient":  # loaded on first use: httpcore2 stays out of light imports
        return importlib.import_module("worker.model.client").LLMClient
    raise AttributeError(f"module 'worker.model' has no attribute {name!r}")
