"""The atomic tools (docs/design.md §1), listed in one place: what a worker offers the model, in this order.

A tool is a `Tool` (worker/tools/base.py); what it keeps for a task is its own `ToolState`. A new tool is a
module here and a line in TOOLS.
"""
from types import MappingProxyType
from typing import Mapping

from worker.tools import ask, code, files, memory_tools, web
from worker.tools.base import FunctionTool, Tool, ToolContext, ToolState, optional_str

TOOLS: tuple[Tool, ...] = (
    ask.ASK_USER,
    code.CODE_RUN,
    files.FILE_READ,
    files.FILE_PATCH,
    files.FILE_WRITE,
    memory_tools.UPDATE_WORKING_CHECKPOINT,
    memory_tools.START_LONG_TERM_UPDATE,
    web.WEB_SCAN,
    web.WEB_EXECUTE_JS,
)
REGISTRY: Mapping[str, Tool] = MappingProxyType({tool.name: tool for tool in TOOLS})

__all__ = ["REGISTRY", "TOOLS", "FunctionTool", "Tool", "ToolContext", "ToolState", "optional_str"]
