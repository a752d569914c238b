"""`ga runs tail`: a run's ledger events, one line each, and with `follow` the new ones until the run ends."""
from __future__ import annotations

import time

from rich.console import Console

from memory_shared.jsontypes import JSONObject
from orchestrator.ledger import RunDir, read_jsonl
from orchestrator.views.columns import Paragraph
from orchestrator.views.runview import driver_holds, readable_spec

TAIL_FIELDS = ("attempt", "worker", "step", "status", "exit_code", "tasks", "todo", "workers", "executor", "from",
               "to", "levels", "reused", "text", "reason", "note")  # in this order; the rest is in ledger.jsonl


def print_events(console: Console, run: RunDir, lines: int, follow: bool) -> None:
    """The latest `lines` events; with `follow`, every later one while a driver holds the run."""
    ledger = run.path / "ledger.jsonl"
    width = max([len(t.get("id", "")) for t in readable_spec(run).get("tasks") or []] + [len("run")])
    records = list(read_jsonl(ledger))
    for record in records[-lines:] if lines > 0 else []:
        show(console, event_line(record, width))
    seen = len(records)
    while follow and not any(r["event"] == "run_finished" for r in records[-1:]) and driver_holds(run.path):
        time.sleep(0.5)
        records = list(read_jsonl(ledger))
        for record in records[seen:]:
            show(console, event_line(record, width))
        seen = len(records)


def show(console: Console, line: str) -> None:
    """One event: on a terminal broken between its parts and words; elsewhere one line, for grep and scripts."""
    if console.is_terminal:
        console.print(Paragraph(line))
    else:
        console.print(line, highlight=False, markup=False, soft_wrap=True)


def event_line(record: JSONObject, task_width: int = 12) -> str:
    """'15:29:01  s1    started       attempt 1 · worker 0': one ledger event for a person."""
    stamp = time.strftime("%H:%M:%S", time.localtime(record.get("time", 0)))
    fields = []
    for key in TAIL_FIELDS:
        value = record.get(key)
        if value in (None, "") or isinstance(value, (dict, list)) or (key == "reason" and value == record["event"]):
            continue
        text = " ".join(str(value).split())
        fields.append(text if key in ("reason", "note", "text") else f"{key} {text}")
    task = record.get("task_id") or "run"
    return f"{stamp}  {task:<{task_width}}  {record['event']:<14}  {' · '.join(fields)}".rstrip()
