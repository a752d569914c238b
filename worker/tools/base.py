"""What every tool is (the Tool protocol, FunctionTool) and what it runs in: the task's ToolContext, and the
ToolState each tool keeps for the task itself."""
from __future__ import annotations

import copy
import threading
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Generic, Optional, Protocol, TypeVar

from pydantic import BaseModel
from pydantic.config import JsonDict

from configs import Settings
from worker.memview import MemoryView
from worker.model.messages import ToolSchema
from worker.modelconfig import ModelConfig
from worker.policy import Environment
from worker.types import ToolResult
from worker.usage import Account

Args = TypeVar("Args", bound=BaseModel)


class ToolState:
    """What one tool keeps for one task (code_run's process groups and gateway, the browser, the workdir held
    open). The tool makes it at its first use in the task (`ctx.state(Kind)`, which calls `Kind(ctx)`: the
    task's context, its Environment in `ctx.policy`), and the loop closes it at the task's end."""

    def __init__(self, ctx: ToolContext) -> None:
        self.ctx = ctx

    def close(self) -> None:
        """Let go of what the task held (called once, at its end; the default holds nothing)."""


State = TypeVar("State", bound=ToolState)


@dataclass
class ToolContext:
    """What every tool call of one task is handed: the task (id, directory, settings, the environment its scripts
    get), its one policy (`policy`), its memory view, the person, where the loop is, cancellation, and the
    tools' own state (`state`). The loop closes it at the task's end (`close()`)."""

    task_id: str
    workdir: Path
    settings: Settings
    memory: Optional[MemoryView]  # snapshot reads, staged writes, access stats; None: no memory tier
    interactive: bool = False
    ask: Optional[Callable[[str, list[str]], str]] = None  # asks the person when interactive (taskspec.Ask)
    env: dict[str, str] = field(default_factory=dict)  # added to code_run's environment (GA_RUN_DIR, GA_DEPTH...)
    kill: list[Callable[[], object]] = field(default_factory=list)  # the loop's cancel() calls these from another thread
    cancelled: threading.Event = field(default_factory=threading.Event)  # set by the loop's cancel(), before `kill`
    account: Optional[Account] = None  # what the task spent and may spend
    model_config: Optional[ModelConfig] = None  # the task's model entry: where its gateway forwards model calls
    key_info: str = ""  # the working note (update_working_checkpoint) the loop's anchor shows every turn
    # where the loop is: staged memory changes are ordered by (seq, call_id); a turn's calls share the output caps
    seq: int = 0
    call_id: str = ""
    calls_in_turn: int = 1
    cleanup: ExitStack = field(default_factory=ExitStack)  # what closes at the task's end: the tools' states
    _states: dict[type[ToolState], ToolState] = field(default_factory=dict, init=False, repr=False)
    _policy: Optional[Environment] = field(default=None, init=False, repr=False)

    @property
    def policy(self) -> Environment:
        """The task's one policy (worker/policy.py): what every actor working for it may read, write and reach.
        Built once per task, at the first tool call that asks."""
        if self._policy is None:
            memory = self.memory
            store = memory.store.root if memory is not None and memory.store is not None else None
            run_dir = self.env.get("GA_RUN_DIR")
            self._policy = Environment.for_task(
                self.settings, self.workdir, run_dir=Path(run_dir) if run_dir else None,
                memory_roots=(store, memory.root if memory is not None else None), model=self.model_config,
                account=self.account)
        return self._policy

    def state(self, kind: type[State]) -> State:
        """The state the tool of `kind` keeps for this task: made at its first use, closed at the task's end."""
        found = self._states.get(kind)
        if found is None:
            found = self._states[kind] = kind(self)
            self.cleanup.callback(self._close_state, kind)
        assert isinstance(found, kind)
        return found

    def kept(self, kind: type[State]) -> Optional[State]:
        """The state of `kind` if a tool made one in this task (and the task has not ended), else None."""
        found = self._states.get(kind)
        return found if isinstance(found, kind) else None

    def _close_state(self, kind: type[ToolState]) -> None:
        self._states.pop(kind).close()

    def close(self) -> None:
        """Close what the tools keep for the task (each one, even if another fails); closing twice is harmless."""
        self.cleanup.close()


class Tool(Protocol):
    """What the loop needs of a tool: its name and argument model (the schema the model is offered), whether a
    successful call backs an answer, and the run itself."""

    @property
    def name(self) -> str: ...
    @property
    def args(self) -> type[BaseModel]: ...
    @property
    def answer_evidence(self) -> bool:
        """A successful call is evidence for the answer that follows it (the task then `succeeded`); False for
        bookkeeping (a checkpoint, opening long-term memory, asking the person): the status then looks at the
        last run of any other tool."""
        ...

    def run(self, ctx: ToolContext, args: BaseModel) -> ToolResult:
        """`args`: an instance of `self.args`."""
        ...

    def schema(self) -> ToolSchema: ...


@dataclass(frozen=True)
class FunctionTool(Generic[Args]):
    """A Tool made of a function; each tool module makes its own, and worker/tools/__init__.py lists them."""

    name: str
    description: str
    args: type[Args]
    function: Callable[[ToolContext, Args], ToolResult]
    answer_evidence: bool = True

    def run(self, ctx: ToolContext, args: BaseModel) -> ToolResult:
        if not isinstance(args, self.args):
            raise TypeError(f"{self.name} takes {self.args.__name__}, not {type(args).__name__}")
        return self.function(ctx, args)

    def schema(self) -> ToolSchema:
        cached = _SCHEMAS.get(self)  # building a JSON schema costs ~7 ms; a worker asks for all of them per task
        if cached is None:
            params = self.args.model_json_schema()
            params.pop("title", None)
            for prop in params.get("properties", {}).values():
                prop.pop("title", None)
            cached = _SCHEMAS[self] = {"type": "function", "function": {
                "name": self.name, "description": self.description, "parameters": params}}
        return copy.deepcopy(cached)


_SCHEMAS: dict[object, ToolSchema] = {}  # FunctionTool -> its schema


def optional_str(schema: JsonDict) -> None:
    """`json_schema_extra` for an optional string argument: plain {"type": "string"}, fewer prompt tokens than
    anyOf/null."""
    schema.pop("default", None)
    schema.pop("anyOf", None)
    schema["type"] = "string"
