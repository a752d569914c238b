"""What a Worker is built from (docs/design.md §4): the task (`TaskSpec`) and what serves it (`Runtime`).

    worker = Worker(TaskSpec(prompt, task_id=..., workdir=..., settings=..., history_path=...),
                    Runtime(model=..., store=..., env=..., on_turn=...))

Every caller builds these two: the fan-out's actor (orchestrator/actor.py: a `Job` becomes them; `ga replay`
and exploration run through it), `ga run` and `ga chat` (worker/conversations.py), reflect and schedule (through
`ga run`'s path). A TaskSpec is plain data a run could write down; a Runtime holds live objects (the model
client, the store handle, the hooks a caller is told through).
"""
from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

from configs import Settings
from memory_shared import StoreHandle
from worker.model.messages import ChatMessage
from worker.taskcheck import TaskCheck

if TYPE_CHECKING:  # the model client's package loads its reply parsing; a TaskSpec is built where none is needed
    from worker.model import Model

Ask = Callable[[str, list[str]], str]  # (question, candidate answers) -> the person's answer
Hook = Callable[[dict], None]  # told about a turn or a tool call: {"task_id", "turn", "tool", ...}


@dataclass(frozen=True)
class TaskSpec:
    """One task: its prompt and identity, where it works and records, its settings (their `worker` limits bind
    it), and what a run gives it besides: the tools it may use, the check that decides it, what the run's budget
    leaves it, its memory commit's key, the conversation it continues."""

    prompt: str
    _: KW_ONLY
    task_id: str
    workdir: Path
    settings: Settings
    history_path: Path
    model_name: Optional[str] = None  # the model to build a client for when the Runtime brings none
    tools: Optional[tuple[str, ...]] = None  # None: every tool, in the registry's order
    check: Optional[TaskCheck] = None  # a tasks file's `check`: it decides succeeded or failed
    commit_key: Optional[str] = None  # (run, task, attempt) of a fan-out task: its memory commit is made once
    budget_tokens: Optional[int] = None  # what the run's budget leaves this task (its gateway refuses past it)
    budget_cost: Optional[float] = None
    messages: Optional[list[ChatMessage]] = None  # a session's follow-up: the conversation so far and the new message


@dataclass
class Runtime:
    """What serves a task: its model client (None: one for `TaskSpec.model_name`), the memory store (None: no
    memory tier), the environment its code_run scripts get besides the sandbox's own (GA_RUN_DIR, GA_DEPTH,
    GA_SESSION, GA_MODEL...), the person when one is there (`interactive`, `ask`), and the hooks: `on_tool_start`
    before each well-formed call, `on_turn` after it."""

    model: Optional[Model] = None
    store: Optional[StoreHandle] = None
    env: dict[str, str] = field(default_factory=dict)
    interactive: bool = False
    ask: Optional[Ask] = None
    on_turn: Optional[Hook] = None
    on_tool_start: Optional[Hook] = None
