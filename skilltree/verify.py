"""One exploration task's report, read from its workdir, and the checks that decide whether it is verified.

Outcomes:
- failed      no report.md in the workdir, or its front matter is missing or invalid: nothing is committed.
- unverified  a valid report, but a check below failed: the report alone is committed.
- verified    every check passed: SOP, files, L1 line, tree node and report are committed together.

"verified" is never the model's word alone. All of these must hold:
1. the task succeeded (the fan-out result's status is `succeeded`);
2. the report says `verified: true`;
3. execution evidence: the task's history holds at least one code_run that exited 0 ("No Execution,
   No Memory");
4. the report names at least one artifact, and each is a plain relative path to a regular UTF-8 text
   file inside the workdir (no symlink, no `..`, at most MAX_ARTIFACT_BYTES);
5. every script artifact (.py, .sh) exits 0 when re-run with no arguments, within the timeout, in a
   fresh temporary directory holding only the named artifacts and a minimal environment (no secrets,
   HOME inside it), inside code_run's sandbox with the network off (worker/rerun.py). So the files
   that get stored are enough on their own, and a script that only passed with extra arguments or
   leftovers of the task's session is caught;
6. the script does something: one that only says something (`echo`, `true`, a print of a literal:
   worker.evidence) is no evidence, and its re-run must print something. The same holds for check 3: a
   code_run of `echo` is not an execution that verifies.
Check 5 needs a script among the artifacts: a task that names only data or notes is unverified, since
nothing it left can be run to show the skill works.

A task that succeeded and wrote no report.md (small models seldom write its front matter) gets one from ga
when the caller hands the planned report (`planned`): its artifact is the script of the task's last code_run that
exited 0 and computed something, and check 2 is ga's, not the model's. Checks 1 and 3 to 6 apply as to any
report, so such a skill is still filed only when that script alone, re-run, does something.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Optional

import structlog
import yaml
from pydantic import ValidationError

from configs.settings import SandboxSettings
from memory_shared import fsutil
from memory_shared.jsontypes import JSONObject
from memory_shared.usererrors import validation_line
from skilltree.reports import ExplorationReport, split_front_matter
from worker.evidence import backed, is_trivial
from worker.rerun import RERUN_TIMEOUT, SCRIPT_RUNNERS
from worker.rerun import rerun as rerun_files

REPORT_FILE = "report.md"
RAN_SCRIPT = "ran"  # the artifact of a report ga writes from the task's run: ran.py or ran.sh
REQUIRED = ("title", "category", "skill", "verified", "artifacts")
MAX_ARTIFACT_BYTES = 64_000
MAX_REPORT_BYTES = 1_000_000  # report.md is read up to this (the task wrote it: not followed, never a FIFO)
MAX_ARTIFACTS = 20
SAFE_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")

Outcome = Literal["failed", "unverified", "verified"]
log = structlog.get_logger("skilltree.verify")


@dataclass
class Artifact:
    rel: str               # path inside the workdir
    text: str
    script: bool
    exit_code: Optional[int] = None
    output: str = ""       # tail of the re-run's output


@dataclass
class Collected:
    task_id: str
    outcome: Outcome
    report: Optional[ExplorationReport] = None
    problems: list[str] = field(default_factory=list)   # why failed or unverified
    checks: list[str] = field(default_factory=list)     # what passed
    artifacts: list[Artifact] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)   # ids of the code_run calls that exited 0

    def summary(self) -> dict[str, object]:
        return {"outcome": self.outcome, "problems": self.problems, "checks": self.checks,
                "evidence": self.evidence,
                "artifacts": [{"path": a.rel, "script": a.script, "exit_code": a.exit_code} for a in self.artifacts]}


def read_task_report(workdir: Path) -> ExplorationReport:
    """report.md of a workdir with its required keys; ValueError (one line) when absent or invalid."""
    path = Path(workdir) / REPORT_FILE
    if not path.is_file() or path.is_symlink():
        raise ValueError(f"no {REPORT_FILE} in the task's directory")
    try:
        data, body = split_front_matter(fsutil.read_file(path, MAX_REPORT_BYTES).decode("utf-8"))
    except (ValueError, yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ValueError(f"{REPORT_FILE}: {' '.join(str(exc).split())[:200]}") from None
    missing = [key for key in REQUIRED if key not in data]
    if missing:
        raise ValueError(f"{REPORT_FILE}: front matter lacks {', '.join(missing)}")
    if not isinstance(data["verified"], bool):
        raise ValueError(f"{REPORT_FILE}: 'verified' must be true or false")
    if not isinstance(data["artifacts"], list) or not all(isinstance(a, str) for a in data["artifacts"]):
        raise ValueError(f"{REPORT_FILE}: 'artifacts' must be a list of file names")
    data.pop("score_vector", None)  # the cycle's own values replace what the model wrote
    data.pop("predicted", None)
    try:
        return ExplorationReport.model_validate({**data, "path": str(path), "body": body})
    except ValidationError as exc:
        raise ValueError(f"{REPORT_FILE}: {validation_line(exc)}") from None


def computing_runs(history_path: Optional[Path]) -> list[tuple[str, str, str]]:
    """(call id, type, script) of each code_run of a task's history that exited 0 and computed something
    (worker.evidence: `echo`, `true` or a print of a literal proves nothing)."""
    runs: list[tuple[str, str, str]] = []
    if not history_path or not Path(history_path).is_file():
        return runs
    with open(history_path, encoding="utf-8") as handle:
        for line in handle:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            scripts = _scripts_of(record)
            for result in record.get("tool_results") or []:
                if result.get("name") == "code_run" and result.get("ok") is True:
                    kind, script = scripts.get(str(result.get("id")), ("python", ""))
                    if not is_trivial(script, kind):
                        runs.append((str(result.get("id")), kind, script))
    return runs


def report_from_run(planned: ExplorationReport,
                    runs: list[tuple[str, str, str]]) -> Optional[tuple[ExplorationReport, Artifact]]:
    """The report ga writes for a task that wrote none: the planned one, naming the script of the task's last
    computing code_run (`runs`, from computing_runs) as its artifact; None when there is none."""
    if not runs:
        return None
    _, kind, script = runs[-1]
    name = RAN_SCRIPT + (".sh" if kind in ("bash", "sh", "shell") else ".py")
    body = (f"ga wrote this report: the task wrote no {REPORT_FILE}. `{name}` is the script of its last code_run "
            "that exited 0, re-run alone to verify it.")
    report = planned.model_copy(update={"verified": True, "artifacts": [name], "body": body, "path": None})
    return report, Artifact(name, script if script.endswith("\n") else script + "\n", True)


def _scripts_of(record: JSONObject) -> dict[str, tuple[str, str]]:
    """call id -> (type, script) of the code_run calls of one history turn (a line as the file holds it)."""
    found: dict[str, tuple[str, str]] = {}
    received = record.get("received") or {}
    for call in received.get("tool_calls") or [] if isinstance(received, dict) else []:
        function = call.get("function") or {}
        if function.get("name") != "code_run":
            continue
        try:
            args = json.loads(function.get("arguments") or "{}")
        except (json.JSONDecodeError, TypeError):
            args = {}
        if isinstance(args, dict):
            found[str(call.get("id"))] = (str(args.get("type", "python")), str(args.get("script", "")))
    return found


def _artifact(workdir: Path, rel: str) -> Artifact:
    parts = rel.strip().split("/")
    if not parts or not all(SAFE_PART.match(p) for p in parts):
        raise ValueError(f"artifact {rel!r}: not a plain relative path inside the task's directory")
    path = workdir.joinpath(*parts)
    for n in range(1, len(parts) + 1):
        if workdir.joinpath(*parts[:n]).is_symlink():
            raise ValueError(f"artifact {rel!r}: a symlink; name the file itself")
    if not path.is_file():
        raise ValueError(f"artifact {rel!r}: no such file in the task's directory")
    if path.stat().st_size > MAX_ARTIFACT_BYTES:
        raise ValueError(f"artifact {rel!r}: over {MAX_ARTIFACT_BYTES} bytes")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"artifact {rel!r}: not a UTF-8 text file") from None
    return Artifact("/".join(parts), text, Path(rel).suffix in SCRIPT_RUNNERS)


def rerun(script: Artifact, files: list[Artifact], timeout: float = RERUN_TIMEOUT,
          sandbox: Optional[SandboxSettings] = None) -> tuple[int, str]:
    """Run `script` with no arguments in a fresh directory holding only `files` (worker/rerun.py)."""
    return rerun_files(script.rel, {item.rel: item.text for item in files}, timeout, sandbox)


def collect(task_id: str, workdir: Path, status: str, history_path: Optional[Path], *, reason: str = "",
            timeout: float = RERUN_TIMEOUT, sandbox: Optional[SandboxSettings] = None,
            planned: Optional[ExplorationReport] = None) -> Collected:
    """Read the task's report (or, for a task that succeeded without one, write it from the run when `planned` is
    given) and run every check of the module doc."""
    workdir = Path(workdir)
    runs = computing_runs(history_path)  # read once: the evidence, and the script of a report ga writes
    ran: Optional[Artifact] = None
    try:
        report = read_task_report(workdir)
    except (ValueError, OSError) as exc:
        absent = not os.path.lexists(workdir / REPORT_FILE)  # a report the model wrote wrong is its own, kept failed
        derived = report_from_run(planned, runs) if planned and absent and status == "succeeded" else None
        if derived is None:
            return Collected(task_id, "failed", problems=[str(exc)])
        report, ran = derived
    found = Collected(task_id, "unverified", report=report)
    problems, checks = found.problems, found.checks
    if status == "succeeded":
        checks.append("task succeeded")
    else:
        problems.append(f"task ended '{status}'" + (f": {reason}" if reason else ""))
    if ran is not None:
        checks.append(f"no {REPORT_FILE}: ga wrote the report from the task's last run")
    elif report.verified:
        checks.append("report says verified")
    else:
        problems.append("the report says it is not verified")
    found.evidence = [call_id for call_id, _, _ in runs]
    if found.evidence:
        checks.append(f"{len(found.evidence)} code_run call(s) exited 0")
    else:
        problems.append("no code_run exited 0 in the task's history (No Execution, No Memory)")
    names = [] if ran else [a for a in dict.fromkeys(report.artifacts) if a.strip() and a.strip() != REPORT_FILE]
    if ran is not None:
        found.artifacts.append(ran)
    elif not names:
        problems.append("the report names no artifact")
    elif len(names) > MAX_ARTIFACTS:
        problems.append(f"the report names {len(names)} artifacts; at most {MAX_ARTIFACTS}")
        names = []
    for name in names:
        try:
            found.artifacts.append(_artifact(workdir, name))
        except (ValueError, OSError) as exc:
            problems.append(str(exc))
    scripts = [a for a in found.artifacts if a.script]
    if found.artifacts and not scripts:
        problems.append("no script among the artifacts: nothing can be re-run to show the skill works")
    if not problems:  # re-run only what could still be verified: a failed task's scripts are not run
        for script in scripts:
            kind = "bash" if script.rel.endswith(".sh") else "python"
            if is_trivial(script.text, kind):
                problems.append(f"{script.rel} only prints what it spells out (echo, true, a literal): it proves nothing")
                continue
            script.exit_code, script.output = rerun(script, found.artifacts, timeout, sandbox)
            if script.exit_code == 0 and backed(script.text, script.output):
                checks.append(f"re-ran {script.rel}: exit 0")
            elif script.exit_code == 0:
                problems.append(f"re-ran {script.rel}: exit 0 but it printed nothing")
            else:
                last = script.output.strip().splitlines()[-1:] or [""]
                problems.append(f"re-ran {script.rel}: exit {script.exit_code} ({last[0][:160]})")
    if not problems:
        found.outcome = "verified"
    return found
