"""What every tool is (the Tool protocol; FunctionTool, what `@tool` registers) and what it runs in."""
from __future__ import annotations

import copy
import threading
from contextlib import ExitStack, closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Protocol

from pydantic import BaseModel

from configs import Settings
from memory_shared import fsutil
from worker.policy import Environment
from worker.types import ToolResult

if TYPE_CHECKING:
    from worker.models import ModelConfig

Schema = dict[str, Any]  # a tool's JSON schema, as the model's API takes it


@dataclass
class ToolContext:
    """Everything a tool may touch for one task. What a tool opens for the task it registers on
    `cleanup`, which the loop closes at task end (`close()`)."""

    task_id: str
    workdir: Path
    settings: Settings
    memory: Any  # worker.memview.MemoryView: snapshot reads, staged writes, access stats
    interactive: bool = False
    ask: Optional[Callable[[str, list[str]], str]] = None  # asks the person when interactive
    key_info: str = ""
    env: dict[str, Any] = field(default_factory=dict)  # added to code_run's environment (GA_RUN_DIR, GA_DEPTH...)
    kill: list[Callable[[], object]] = field(default_factory=list)  # the loop's cancel() calls these from another thread
    cancelled: threading.Event = field(default_factory=threading.Event)  # set by the loop's cancel(), before `kill`
    account: Any = None  # worker.usage.Account: what the task spent and may spend
    model_config: Optional[ModelConfig] = None  # the task's model entry: where its gateway forwards model calls
    cleanup: ExitStack = field(default_factory=ExitStack)
    # where the loop is: staged memory changes are ordered by (seq, call_id); a turn's calls share the output caps
    seq: int = 0
    call_id: str = ""
    calls_in_turn: int = 1
    # what the tools keep for the task
    web: Any = None  # worker.web.WebSession, opened on first use
    pgids: Optional[list[int]] = None  # process groups code_run started that may still be alive
    code_runs: int = 0  # the last .ga/code_N number
    warned_unsandboxed: bool = False
    gateway: Any = None  # worker.gateway.Gateway, started by the first code_run
    workdir_folder: Optional[fsutil.Folder] = None  # the workdir held open (workdir_fd)
    environment: Optional[Environment] = None  # the task's policy, built at its first use (`policy`)

    @property
    def policy(self) -> Environment:
        """The task's one policy (worker/policy.py): what every actor working for it may read, write and reach.
        Built once per task, at the first tool call that asks."""
        if self.environment is None:
            store = getattr(getattr(self.memory, "store", None), "root", None)
            run_dir = self.env.get("GA_RUN_DIR")
            self.environment = Environment.for_task(
                self.settings, self.workdir, run_dir=Path(run_dir) if run_dir else None,
                memory_roots=(store, getattr(self.memory, "root", None)), model=self.model_config,
                account=self.account)
        return self.environment

    def workdir_fd(self) -> int:
        """The worker's directory, opened once per task: the file tools walk below it from this fd."""
        if self.workdir_folder is None:
            self.workdir_folder = self.cleanup.enter_context(closing(fsutil.Folder(self.workdir)))
        return self.workdir_folder.fd

    def close(self) -> None:
        """Run what the tools registered on `cleanup` (each one, even if another fails)."""
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

    def run(self, ctx: ToolContext, args: Any) -> ToolResult: ...
    def schema(self) -> Schema: ...


@dataclass(frozen=True)
class FunctionTool:
    """A Tool made of a function (what `@tool` registers)."""

    name: str
    description: str
    args: type[BaseModel]
    function: Callable[[ToolContext, Any], ToolResult]
    answer_evidence: bool = True

    def run(self, ctx: ToolContext, args: Any) -> ToolResult:
        return self.function(ctx, args)

    def schema(self) -> Schema:
        cached = _SCHEMAS.get(self)  # building a JSON schema costs ~7 ms; a worker asks for all of them per task
        if cached is None:
            params = self.args.model_json_schema()
            params.pop("title", None)
            for prop in params.get("properties", {}).values():
                prop.pop("title", None)
            cached = _SCHEMAS[self] = {"type": "function", "function": {
                "name": self.name, "description": self.description, "parameters": params}}
        return copy.deepcopy(cached)


_SCHEMAS: dict[FunctionTool, Schema] = {}


REGISTRY: dict[str, Tool] = {}


def tool(name: str, description: str, args: type[BaseModel], *, answer_evidence: bool = True,
         ) -> Callable[[Callable[[ToolContext, Any], ToolResult]], Callable[[ToolContext, Any], ToolResult]]:
    """Register a tool function under GenericAgent's name (answer_evidence: see Tool)."""

    def register(func: Callable[[ToolContext, Any], ToolResult]) -> Callable[[ToolContext, Any], ToolResult]:
        REGISTRY[name] = FunctionTool(name, description, args, func, answer_evidence)
        return func

    return register


def optional_str(schema: dict[str, Any]) -> None:
    """`json_schema_extra` for an optional string argument: plain {"type": "string"}, fewer prompt tokens than
    anyOf/null."""
    schema.pop("default", None)
    schema.pop("anyOf", None)
    schema["type"] = "string"
