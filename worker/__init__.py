"""One isolated GenericAgent worker: the loop, the model client, the tools, context control."""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from worker.agent import Worker
    from worker.record import TaskRecord
    from worker.taskspec import Runtime, TaskSpec
    from worker.usage import Usage

__all__ = ["Runtime", "TaskRecord", "TaskSpec", "Usage", "Worker"]
# Loaded on first use: worker.agent pulls the tools (playwright, ~0.1 s) that `ga --help` and the
# light modules of this package (types, record, models, conversations) never need.
_HOMES = {"Worker": "worker.agent", "TaskSpec": "worker.taskspec", "Runtime": "worker.taskspec", "Usage": "worker.usage",
          "TaskRecord": "worker.record"}


def __getattr__(name: str) -> object:  # the names above, typed by their TYPE_CHECKING imports
    if name not in _HOMES:
        raise AttributeError(f"module 'worker' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
