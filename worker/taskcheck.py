"""A task-level check: what decides a task succeeded when the tasks file says how to tell.

`check: {script: "...", type: bash, timeout: 60, pattern: "..."}` (either or both):
- `pattern`: a regular expression searched in the answer (multi-line mode);
- `script`: run in the task's working directory through code_run (so sandboxed like the model's own
  scripts), with the answer in the environment variable GA_ANSWER; it passes when it exits 0. It runs
  isolated from what the task left there: python with -I, a clean environment (the sandbox's allow-list,
  GA_ANSWER, PYTHONSAFEPATH), nothing of the task's directory on an import path.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

if TYPE_CHECKING:
    from worker.tools import ToolContext

class TaskCheck(BaseModel):
    model_config = ConfigDict(extra="forbid")

    script: Optional[str] = Field(None, min_length=1)
    type: Literal["bash", "python"] = "bash"
    timeout: int = Field(60, ge=1, le=600)
    pattern: Optional[str] = Field(None, min_length=1)

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: Optional[str]) -> Optional[str]:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a valid regular expression ({exc})") from None
        return value

    @model_validator(mode="after")
    def _something(self) -> "TaskCheck":
        if self.script is None and self.pattern is None:
            raise ValueError("a check needs 'script' (exits 0 when the task is done) and/or 'pattern' (found in the answer)")
        return self

    def demand(self, limit: int = 200) -> str:
        """What the check asks for, in one line for the model."""
        parts = [f"the answer must match /{self.pattern}/"] if self.pattern else []
        if self.script:
            script = " ".join(self.script.split())
            parts.append(f"this {self.type} script must exit 0: {script if len(script) <= limit else script[:limit] + '…'}")
        return "; ".join(parts)


def run_check(check: TaskCheck, answer: str, ctx: "ToolContext") -> tuple[bool, str]:
    """(passed, one line saying what was checked or why it failed)."""
    from worker.tools.code import CodeRunArgs, run_script  # here: the tools, +15 modules at every `ga` start

    done: list[str] = []
    if check.pattern is not None:
        if not re.search(check.pattern, answer or "", re.M):
            return False, f"the answer does not match /{check.pattern}/"
        done.append(f"the answer matches /{check.pattern}/")
    if check.script is not None:
        result = run_script(ctx, CodeRunArgs(script=check.script, type=check.type, timeout=check.timeout, cwd=None),
                            check_answer=answer or "")
        if not result.ok:
            return False, f"the check script failed: {_last_line(result.output)}"
        done.append("the check script exited 0")
    return True, "; ".join(done)


def _last_line(output: str, limit: int = 200) -> str:
    lines = [line.strip() for line in (output or "").splitlines() if line.strip()]
    if not lines:
        return "(no output)"
    first, last = lines[0], lines[-1]
    text = last if first == last else f"{first}: {last}"
    return text if len(text) <= limit else text[:limit] + "…"
