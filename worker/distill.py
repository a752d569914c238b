"""ga's own distillation of a task that succeeded (docs/design.md §3): the paper's trajectory → SOP → script,
triggered by the memory system itself, without waiting for the model to call start_long_term_update.

The run behind the answer is the task's last code_run, when it succeeded and computes something
(worker.evidence). From it ga takes:
- the script: what the run executed, or, when it ran a file the task wrote (`python3 count.py`, `bash go.sh`),
  that file as the task's last whole file_write left it;
- the claim: the longest line of the run's output that the answer repeats, else the longest number they
  share, and never text the script spells out itself.

It then stages three writes: the script at `L3/scripts/distilled/<name>.py` (or `.sh`), an SOP at
`L3/distilled/<name>.md` that names it with `expect:` the claim, and one L1 pointer line saying how to run it.
They pass the same verification and gate as the model's own writes (worker/taskmemory.py): ga re-runs the
script in a fresh sandbox with the network off, and the procedure is verified only when that output holds
the claim; what does not verify is dropped, not proposed (a script that read the task's files cannot re-run
without them), so ga's distillation leaves no review work behind. Provenance, `memory.admit` and the
bounds apply as to any task's commit.

Nothing is distilled when the task took fewer than three turns (reusing a stored procedure takes two: run it,
answer; so there is nothing to gain, and one-off calls do not fill the index), when the task staged L1 or L3
itself (the model's own distillation wins), when the run was a stored procedure (its script names $GA_MEMORY or
memory/), when memory already has a procedure of that name, or when the answer reports nothing the run printed.
When L1 has no room left, the SOP and script are kept without the pointer (L1 lists L3/ as a whole). The
distillation asks the model nothing: it costs no tokens, and a small model that never calls
start_long_term_update still learns.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import date
from pathlib import PurePosixPath
from typing import Callable, Optional, Sequence

from memory_shared import check_l1, format_sop
from memory_shared.errors import L1TooLarge
from memory_shared.gate import StagedChange
from memory_shared.layers import L1_INDEX
from worker.evidence import is_trivial

FOLDER = "L3/distilled"
SCRIPTS = "L3/scripts/distilled"
RUNS = ("code_run", "web_scan", "web_execute_js")  # the tools whose runs back an answer
CALL_ID = "ga-distill"  # the call id of ga's own staged writes (the commit message names it)
MIN_TURNS = 3  # a stored procedure's reuse takes two (run it, answer): a task done in two has nothing to gain
MAX_TASK_CHARS = 600
MAX_DESCRIPTION = 64
MAX_CLAIM = 200
MAX_SCRIPT_CHARS = 64_000
_RUNS_FILE = re.compile(r"^(?:python3?|bash|sh)\s+(?:\./)?([A-Za-z0-9_][A-Za-z0-9_./-]*\.(?:py|sh))$")
_NUMBER = re.compile(r"-?\d+(?:[.,]\d+)*")
# words that say nothing of what a task is about (how to do it included), left out of its name
_STOP = frozenset("the a an of to in on at is are be was what which how many much and or with for it its this that "
                  "these those here there every each all please me my your you answer only just then give tell "
                  "using use by from as do does find print show compute calculate work out write run script python code "
                  "result".split())


@dataclass(frozen=True)
class Ran:
    """One well-formed tool call that ran: its validated arguments and what came back."""
    tool: str
    arguments: dict[str, object]
    ok: bool
    output: str


@dataclass
class Distillation:
    """The procedure ga stages for a task: the script, the SOP naming it, the L1 pointer."""
    name: str
    script_path: str
    sop_path: str
    claim: str
    files: dict[str, str] = field(default_factory=dict)  # memory path -> text (the script, the SOP)
    pointer: str = ""

    def changes(self, l1_now: Optional[str], seq: int, l1_bound: tuple[int, int]) -> list[StagedChange]:
        """The staged writes, after every tool run of the task (`seq`), so the run that backs them comes first. The
        pointer is left out when L1 has no room for it (`l1_bound`: lines, chars): the SOP is still listed under L3/,
        and a full index would otherwise hold the whole commit for review."""
        index = (l1_now or "")
        if index and not index.endswith("\n"):
            index += "\n"
        writes = list(self.files.items())
        try:
            check_l1(index + self.pointer + "\n", *l1_bound)
            writes.append((L1_INDEX, index + self.pointer + "\n"))
        except L1TooLarge:
            self.pointer = ""
        return [StagedChange(seq=seq, call_id=CALL_ID, op="write", path=path, text=text) for path, text in writes]


def distil(task: str, answer: str, ran: Sequence[Ran], *, turns: int, today: date,
           exists: Callable[[str], bool]) -> tuple[Optional[Distillation], str]:
    """(the procedure to stage, "") for a task that succeeded, or (None, why not) (module doc)."""
    if turns < MIN_TURNS:
        return None, f"it took {turns} turn(s): running a stored procedure would cost as many"
    at = max((i for i, r in enumerate(ran) if r.tool in RUNS), default=-1)
    if at < 0 or ran[at].tool != "code_run":
        return None, "no code_run backs the answer"
    last = ran[at]
    raw, kind = str(last.arguments.get("script", "")), str(last.arguments.get("type", "python"))
    if not last.ok or is_trivial(raw, kind):
        return None, "the last code_run failed or computes nothing"
    if reads_memory(raw):
        return None, "the run was a stored procedure"
    script, kind, why = _script_of(raw, kind, ran[:at])
    if not script:
        return None, why
    if reads_memory(script) or is_trivial(script, kind):
        return None, "the script it ran is a stored procedure or computes nothing"
    claim = claimed(answer, last.output, script)
    if not claim:
        return None, "the answer reports nothing that the run printed (and the script does not spell out)"
    name = slug(task)
    suffix = ".py" if kind == "python" else ".sh"
    script_path, sop_path = f"{SCRIPTS}/{name}{suffix}", f"{FOLDER}/{name}.md"
    if exists(script_path) or exists(sop_path):
        return None, f"memory has {sop_path} already"
    runner = "python3" if kind == "python" else "bash"
    description = _description(task)
    command = f'{runner} "$GA_MEMORY/{script_path}"'
    done = Distillation(name, script_path, sop_path, claim)
    done.files = {script_path: script if script.endswith("\n") else script + "\n",
                  sop_path: _sop(name, description, task, today, script_path, command, claim)}
    done.pointer = f"- {description}: {sop_path} (a verified script: {command})"
    return done, ""


def claimed(answer: str, output: str, script: str) -> str:
    """What the run printed that the answer reports and the script does not spell out: its longest such line,
    else its longest such number; "" when there is none."""
    printed = output.split("\n", 1)[1] if output.startswith("exit code") else output  # code_run's status line
    lines = [line.strip() for line in printed.splitlines()]
    found = [line for line in lines if line and len(line) <= MAX_CLAIM and line in answer and line not in script]
    if found:
        return max(found, key=len)
    shown = set(_NUMBER.findall(printed))
    numbers = [n for n in _NUMBER.findall(answer) if n in shown and n not in script]
    return max(numbers, key=len, default="")


def slug(task: str) -> str:
    """A file name for the task's family: its first words that carry meaning, without numbers (so the same task
    with other values has the same name)."""
    words = [w for w in re.findall(r"[a-z]+", task.lower()) if len(w) > 1 and w not in _STOP][:6]
    name = "-".join(words)[:60].strip("-")
    return name or "task-" + hashlib.sha256(task.encode("utf-8")).hexdigest()[:8]


def _script_of(script: str, kind: str, before: Sequence[Ran]) -> tuple[str, str, str]:
    """(the script's text, python or bash, "") or ("", "", why not): a run of a file the task wrote is that file."""
    found = _RUNS_FILE.match(script.strip()) if kind == "bash" else None
    if found is None:
        return (script, kind, "") if len(script) <= MAX_SCRIPT_CHARS else ("", "", "the script is too long to keep")
    target = _clean(found.group(1))
    for step in reversed(before):
        if step.tool in ("file_write", "file_patch") and _clean(str(step.arguments.get("path", ""))) == target:
            whole = step.tool == "file_write" and step.ok and step.arguments.get("mode", "overwrite") == "overwrite"
            text = str(step.arguments.get("content", ""))
            if not whole or len(text) > MAX_SCRIPT_CHARS:
                return "", "", f"{target} was not written in one piece by file_write"
            return text, "python" if target.endswith(".py") else "bash", ""
    return "", "", f"{target} was not written by the task's file_write"


def _clean(path: str) -> str:
    return PurePosixPath(path.strip()).as_posix().removeprefix("./")


def reads_memory(script: str) -> bool:
    """Whether a script names memory: $GA_MEMORY or memory/ (a stored procedure's run)."""
    return "GA_MEMORY" in script or "memory/" in script


def _description(task: str) -> str:
    line = " ".join(task.split())
    if len(line) <= MAX_DESCRIPTION:
        return line.rstrip(".:")
    return line[:MAX_DESCRIPTION].rsplit(" ", 1)[0].rstrip(".,:;") + "…"


def _sop(name: str, description: str, task: str, today: date, script_path: str, command: str, claim: str) -> str:
    """The SOP's text depends only on what was distilled (the provenance record names the task), so two tasks that
    distil the same procedure at once write the same text, which merges instead of conflicting."""
    task_text = " ".join(task.split())
    if len(task_text) > MAX_TASK_CHARS:
        task_text = task_text[:MAX_TASK_CHARS] + "…"
    front = {"name": name, "category": "distilled", "description": description, "created": today.isoformat(),
             "evidence": f"a task's answer was backed by a code_run of this script, which printed {claim!r}",
             "scripts": [script_path], "expect": claim, "distilled_by": "ga"}
    body = ("Distilled by ga from a task that succeeded with this script's run behind its answer (the provenance "
            "names it).\n\n"
            f"## Task\n{task_text}\n\n"
            f"## Steps\n1. Run `{command}` with code_run (type bash): for that task it printed `{claim}`.\n"
            f"2. When the new task's values differ, read the script (memory/{script_path}), write a copy with "
            "the new values to the working directory and run the copy.\n\n"
            "## Verification\nga re-ran the script with no arguments in a fresh sandbox, network off, and its output "
            f"held `{claim}` (`ga memory show --provenance {script_path}`).\n")
    return format_sop(front, body)
