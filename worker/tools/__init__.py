"""The atomic tools. Importing this package registers them all in REGISTRY."""
from worker.tools import ask, code, files, memory_tools, web  # noqa: F401  (registration)
from worker.tools.base import REGISTRY, FunctionTool, Schema, Tool, ToolContext, optional_str, tool

__all__ = ["REGISTRY", "FunctionTool", "Schema", "Tool", "ToolContext", "optional_str", "tool"]
