"""How a call should have been written: the error a malformed call gets back shows the exact shape to send,
built from the model's own script, in the form the tool mode reads best.

- text mode: `<tool_use>{"name": ..., "arguments": {...}}</tool_use>` (worker/model/textproto.py);
- native mode: `<tool_call>{...}</tool_call>`, the form Qwen/Hermes chat templates teach and servers such as
  llama.cpp turn into native `tool_calls` (ga reads it in the text too, worker/model/replies.py).

The same call malformed twice gets the code-block form instead: the script in a fenced block, the call
without it. A model that cannot escape a script inside JSON can still write a code block.
"""
from __future__ import annotations

import json
from typing import Mapping

from worker.model.codeblocks import SCRIPT_TOOLS

MAX_SHAPED_SCRIPT = 3000  # a longer script is shown in the code-block form only: escaping it in JSON is the trouble
FENCE_OF = {"python": "python", "bash": "bash", "javascript": "javascript"}


def call_text(name: str, args: Mapping[str, object], mode: str) -> str:
    body = json.dumps({"name": name, "arguments": args}, ensure_ascii=False)
    return f"<tool_use>{body}</tool_use>" if mode == "text" else f"<tool_call>{body}</tool_call>"


def script_type(name: str, kind: str = "") -> str:
    kinds = SCRIPT_TOOLS.get(name, ("python",))
    return kind if kind in kinds else kinds[0]


def shape(name: str, script: str, kind: str, mode: str) -> str:
    """The call written right, with `script` in its JSON."""
    if len(script) > MAX_SHAPED_SCRIPT:
        return code_block_form(name, script, kind, mode)
    kind = script_type(name, kind)
    args: dict[str, object] = {"type": kind, "script": script or "..."} if name == "code_run" else {"script": script or "..."}
    return f"Send it exactly like this (the script as one JSON string, newlines written \\n):\n{call_text(name, args, mode)}"


def code_block_form(name: str, script: str, kind: str, mode: str) -> str:
    """The simpler form: the script in a fenced block, then the call without a script."""
    kind = script_type(name, kind)
    args: dict[str, object] = {"type": kind} if name == "code_run" else {}
    return (f"Write the script in a fenced code block and then the call with no script (ga takes the script from "
            f"the block):\n```{FENCE_OF.get(kind, kind)}\n{script or '...'}\n```\n{call_text(name, args, mode)}")


def is_script_tool(name: str) -> bool:
    return name in SCRIPT_TOOLS
