"""`ga runs list`: every run under a runs directory, newest first, read from its summary (or from what its
results say so far). A run whose records cannot be read (a summary.json or results.jsonl that is not what ga
writes: torn by a full disk, edited, planted) is one line saying which file and why; the other runs show as
ever. `last` names the newest run wherever a run id is taken."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional, TypedDict

from pydantic import ValidationError

from orchestrator.ledger import RunDir, has_spec

LAST = "last"  # the newest run, wherever a run id is taken


class RunRow(TypedDict):
    """A run's line in `ga runs list` (and its --json): what its summary says, or its results so far."""

    run_id: str
    path: str
    name: str
    status: str  # a RunStatus, "running?" without a summary, "damaged"
    tasks: Optional[int]
    finished: Optional[int]
    failed: Optional[int]
    unverified: Optional[int]
    tokens: Optional[int]
    cost: Optional[float]
    started: float


class DamagedRow(RunRow):
    problem: str  # which file cannot be read, and why


@dataclass
class DamagedRun:
    run_id: str
    path: str
    problem: str  # "summary.json: ...", one line

    def line(self) -> str:
        return f"run {self.run_id}: cannot read {self.problem}; fix or remove that file"

    def row(self) -> DamagedRow:
        """Its line in `ga runs list`: the id and `damaged`, nothing else known."""
        return {"run_id": self.run_id, "path": self.path, "name": "", "status": "damaged", "tasks": None,
                "finished": None, "failed": None, "unverified": None, "tokens": None, "cost": None,
                "started": _mtime(Path(self.path)), "problem": self.problem}


def list_runs(runs_dir: Path) -> list[RunRow]:
    """Every readable run, newest first (see `scan` for the damaged ones too)."""
    return scan(runs_dir)[0]


def scan(runs_dir: Path) -> tuple[list[RunRow], list[DamagedRun]]:
    """The runs under runs_dir, newest first, and those whose records cannot be read."""
    rows: list[RunRow] = []
    damaged: list[DamagedRun] = []
    root = Path(runs_dir)
    if not root.is_dir():
        return rows, damaged
    for path in root.iterdir():
        if not has_spec(path):
            continue
        try:
            rows.append(run_row(path))
        except (OSError, ValueError) as exc:
            damaged.append(DamagedRun(path.name, str(path), _problem(exc)))
    rows.sort(key=lambda r: r["started"] or 0, reverse=True)
    damaged.sort(key=lambda d: d.run_id, reverse=True)
    return rows, damaged


def run_row(path: Path) -> RunRow:
    """One run's row; OSError or ValueError (naming the file) when its summary or results cannot be read."""
    run = RunDir(path)
    try:
        summary = run.summary()
    except (OSError, ValueError) as exc:
        raise ValueError(f"summary.json: {_problem(exc)}") from None
    try:
        results = run.results().values()
    except (OSError, ValueError) as exc:
        raise ValueError(f"results.jsonl: {_problem(exc)}") from None
    return {
        "run_id": path.name, "path": str(path), "name": summary.name if summary else "",
        "status": summary.status if summary else "running?", "tasks": summary.tasks.total if summary else None,
        "finished": len(results), "failed": sum(1 for r in results if r.status not in ("succeeded", "unverified")),
        "unverified": sum(1 for r in results if r.status == "unverified"),
        "tokens": summary.usage.total if summary else None, "cost": summary.usage.cost if summary else None,
        "started": (summary.started if summary else None) or path.stat().st_mtime,
    }


def newest_run(runs_dir: Path) -> Optional[str]:
    """The id of the newest run (readable or not) under runs_dir, by when it started."""
    rows, damaged = scan(runs_dir)
    newest = [(row["started"] or 0, row["run_id"]) for row in [*rows, *(d.row() for d in damaged)]]
    return max(newest)[1] if newest else None


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def resolve_run(runs_dir: Path, run: str) -> str:
    """`last` as the newest run's id (FileNotFoundError, one line, when there is none); any other name as given."""
    if run != LAST:
        return run
    found = newest_run(runs_dir)
    if found is None:
        raise FileNotFoundError(f"no runs in {runs_dir}, so no `last`; start one with `ga fanout FILE`")
    return found


def _problem(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        error = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(part) for part in error.get("loc", ()))
        return f"{where + ': ' if where else ''}{error.get('msg', 'not valid')}"
    text = " ".join(str(exc).split())
    return text[:200] or type(exc).__name__


def resume_command(run_path: Path, default_runs_dir: Path, tasks_file: str = "") -> str:
    """The command that resumes a run, with every flag it needs to find it again (`--out` when its runs directory
    is not the default one); `tasks_file`: the plan to resume with (a changed budget), else the run's own."""
    out = "" if Path(run_path).resolve().parent == Path(default_runs_dir).resolve() else f" --out {Path(run_path).parent}"
    return f"ga fanout {tasks_file + ' ' if tasks_file else ''}--resume {Path(run_path).name}{out}"
