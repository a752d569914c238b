"""What a task's record alone does not say of how it ended, read back from its files: whether the model asked for
any tool in the exchange the record ends (an answer given without one answers a question; one given after tools
is a claim they must back), and the records of the workers its fan-outs ran. orchestrator/exitcodes.py judges with these.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from memory_shared.fsutil import Unsafe
from orchestrator.ledger import read_jsonl
from orchestrator.records import TaskRecord
from orchestrator.views.runlist import list_runs
from orchestrator.views.runview import runs_of_session
from worker.history import read_text


def asked_for_tools(history_path: Optional[str | Path], turns: Optional[int] = None) -> bool:
    """Whether any of the last `turns` turns of the history (every turn: None) asked for a tool, or had its reply
    refused (a malformed call is an attempt too). No readable history: True, as if it did (an answer is taken as
    a question only on evidence)."""
    if not history_path:
        return True
    try:
        lines = read_text(Path(history_path)).splitlines()
    except (OSError, Unsafe):
        return True
    records = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "received" in record:
            records.append(record)
    if turns is not None:
        records = records[-turns:] if turns > 0 else []
    return any((record.get("received") or {}).get("tool_calls") or record.get("tool_results") for record in records)


def session_workers(runs_dir: Path, session_id: str, since: float) -> list[TaskRecord]:
    """The task records of the fan-outs a `ga run`/`ga chat` session started since `since` (one exchange's)."""
    return [record for row in runs_of_session(runs_dir, session_id) if (row["started"] or 0) >= since
            for record in _results(Path(row["path"]))]


def task_workers(task_dir: Optional[str | Path]) -> list[TaskRecord]:
    """The task records of the fan-outs a fan-out's task started from its code_run (its folder's runs/)."""
    if not task_dir:
        return []
    return [record for row in list_runs(Path(task_dir) / "runs") for record in _results(Path(row["path"]))]


def _results(run_path: Path) -> list[TaskRecord]:
    found = []
    for line in read_jsonl(run_path / "results.jsonl"):
        try:
            found.append(TaskRecord.model_validate(line))
        except ValueError:
            continue
    return found
