"""Scripts written in a reply's fenced code blocks, for the tools that run a script.

Small models put a script in a ```python block and then call `code_run` with the `script` argument missing,
empty, or written so it cannot be read. As GenericAgent does, the script then comes from the reply's last
fenced block of the right language: python or bash for `code_run` (its `type` follows the block's language
when the call names none), javascript for `web_execute_js`.

`recovered_script` digs the script out of a call that could not be read at all, to show the model its own
script in the shape it should have sent (worker/model/callshape.py); it is never run from there.
"""
from __future__ import annotations

import re
from typing import Optional

FENCED = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)\n?[ \t]*```", re.S)
LANGUAGES = {  # a block's language tag -> the script type it holds
    "python": "python", "py": "python", "python3": "python",
    "bash": "bash", "sh": "bash", "shell": "bash", "console": "bash", "zsh": "bash",
    "javascript": "javascript", "js": "javascript",
}
SCRIPT_TOOLS = {"code_run": ("python", "bash"), "web_execute_js": ("javascript",)}  # tool -> the types it runs
SCRIPT_VALUE = re.compile(
    r"""["']?script["']?\s*:\s*(?P<q>\"\"\"|'''|"|'|`)(?P<body>.*?)(?:(?<!\\)(?P=q)|\Z)""", re.S)


def blocks(text: str) -> list[tuple[str, str]]:
    """(script type, code) of each fenced block of a known language in `text`, in order."""
    found = []
    for match in FENCED.finditer(text or ""):
        kind = LANGUAGES.get(match.group(1).lower())
        if kind and match.group(2).strip():
            found.append((kind, match.group(2).strip("\n")))
    return found


def script_from_blocks(tool: str, text: str, wanted: Optional[str] = None) -> Optional[tuple[str, str]]:
    """(type, script) from the last block in `text` that `tool` can run (of type `wanted` when the call names
    one), or None."""
    kinds = SCRIPT_TOOLS.get(tool, ())
    if wanted in kinds:
        kinds = (wanted,)
    usable = [(kind, code) for kind, code in blocks(text) if kind in kinds]
    return usable[-1] if usable else None


def needs_script(tool: str, args: Optional[dict[str, object]]) -> bool:
    """Whether a call to a script tool came without a script it can run (missing, empty, not text)."""
    if tool not in SCRIPT_TOOLS:
        return False
    script = (args or {}).get("script", (args or {}).get("code"))
    return not isinstance(script, str) or not script.strip()


def with_script(tool: str, args: Optional[dict[str, object]], text: str) -> Optional[dict[str, object]]:
    """`args` with the script taken from a fenced block in `text`, or None when there is none to take."""
    args = dict(args or {})
    given = args.get("type")
    wanted = given if isinstance(given, str) else None
    found = script_from_blocks(tool, text, _type_alias(wanted))
    if found is None:
        return None
    kind, code = found
    args.pop("code", None)
    args["script"] = code
    if tool == "code_run" and not wanted:
        args["type"] = kind
    return args


def recovered_script(broken: str) -> str:
    """The script an unreadable call carries, as well as it can be read (quotes of any kind, escapes
    undone where they are JSON's); "" when there is none."""
    match = SCRIPT_VALUE.search(broken or "")
    if not match:
        return ""
    body = match.group("body")
    if match.group("q") in ('"', "'"):
        body = body.replace("\\n", "\n").replace("\\t", "\t").replace('\\"', '"').replace("\\'", "'").replace("\\\\", "\\")
    return body.strip("\n")


def _type_alias(kind: Optional[str]) -> Optional[str]:
    return LANGUAGES.get(kind.lower()) if kind else None
