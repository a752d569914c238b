"""What a tool run proves, for the consolidation gate: a successful code_run that computes something is evidence;
`echo`, `true`, a print of a literal and every file write are not; a web page or a file read is a source.

`backed(script, output, expect)` is the test both the gate's verification re-runs and `ga explore` apply to a
procedure's output: it must say something, and when the procedure states what it should print, hold that
text, computed: a script that spells the expected text out proves nothing.
"""
from __future__ import annotations

import hashlib
import json
import re
from typing import Optional

from memory_shared import Execution
from worker.types import ToolResult

_SHELL_TRIVIAL = re.compile(r"^(?:echo|printf|true|:|exit(?:\s+0)?|sleep\s+\S+|set\s+-\S+|cat\s*<<.*)\b.*$|^(?:true|:)$")
_PY_TRIVIAL = re.compile(r"""^(?:print\(\s*(?:[rRbBfF]?(?:'[^']*'|"[^"]*")\s*,?\s*)*\)|pass|import\s+\w+|"""
                         r"""sys\.exit\(\s*0?\s*\)|exit\(\s*0?\s*\))\s*;?$""")
_WEB_URL = re.compile(r"^--- \S+ (\S+) \(", re.M)


def is_trivial(script: str, kind: str = "python") -> bool:
    """Whether a script only says something (echo, printf, a print of literals, true, exit 0): its success
    proves nothing. A heredoc body counts as what it prints."""
    lines = []
    in_heredoc: Optional[str] = None
    for raw in script.splitlines():
        line = raw.strip()
        if in_heredoc is not None:
            if line == in_heredoc:
                in_heredoc = None
            continue
        if not line or line.startswith("#") or line.startswith("#!"):
            continue
        heredoc = re.search(r"<<-?\s*['\"]?(\w+)['\"]?", line)
        if heredoc and kind != "python":
            in_heredoc = heredoc.group(1)
        lines.append(line)
    if not lines:
        return True
    pattern = _PY_TRIVIAL if kind == "python" else _SHELL_TRIVIAL
    statements = [part.strip() for line in lines for part in (line.split(";") if kind != "python" else [line])]
    return all(not s or pattern.match(s) for s in statements)


def backed(script: str, output: str, expect: str = "") -> bool:
    """Whether `output` backs the claim: it says something, and holds `expect` (if given), which the script
    does not spell out itself."""
    if not output.strip():
        return False
    if not expect:
        return True
    return expect in output and expect not in script


def execution_of(seq: int, call_id: str, tool: str, arguments: str, result: ToolResult) -> Execution:
    """The gate's record of one tool run: evidence only for a successful code_run that is not trivial."""
    args = _args(arguments)
    evidence = False
    code = result.data.get("exit_code")
    exit_code = code if isinstance(code, int) else None
    if tool == "code_run" and result.ok and result.evidence:
        evidence = not is_trivial(str(args.get("script", "")), str(args.get("type", "python")))
    source = None
    if result.ok and tool == "web_scan":
        found = _WEB_URL.search(result.output)
        source = {"url": found.group(1)} if found else None
    elif result.ok and tool == "file_read" and args.get("path") and not str(args["path"]).startswith("memory/"):
        source = {"file": str(args["path"])}
    digest = hashlib.sha256(result.output.encode("utf-8", "replace")).hexdigest()
    return Execution(seq, call_id, tool, result.ok, evidence, exit_code=exit_code, output_sha256=digest, source=source)


def _args(arguments: str) -> dict[str, object]:
    try:
        value = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}
