"""Steering a running fan-out: tell a task something it missed, or stop it (resumable), without stopping the
run. `ga runs tell/stop` and a parent agent's code_run (`from orchestrator import tell, stop`, passing the run's
directory, e.g. `run.run_dir` of a nested fan-out) use these.

On Ray, delivery goes through Ray, so it works on a cluster: the run's ledger names its cluster and the
actor running the task; the pool manager (a named actor) hands out that actor's handle. With the
in-process executor (the ledger's run_started says `executor: local`) a request file in the run
directory reaches the driver (orchestrator/local.py, Mailbox). The actor records each steering event with the
task, and the driver writes it to the ledger when the task's result comes back. Stopping a whole run
interrupts its driver as Ctrl-C does (same machine).
"""
from __future__ import annotations

import os
import signal
import stat
import time
from pathlib import Path
from typing import Optional

from configs import load_settings
from memory_shared.fsutil import atomic_write_text
from memory_shared.jsontypes import JSONObject
from orchestrator.ledger import RunDir, driver_holds, read_jsonl

ATTEMPT_ENDS = {"succeeded", "failed", "needs_input", "limit", "unverified", "retried", "requeued", "paused",
                "stopped", "interrupted"}
STOP_REQUEST = "stop-request"  # in the run directory: `ga runs stop` asks the driver to stop (SIGINT too)
STOP_REQUEST_FRESH = 60.0  # seconds; an older file is a leftover, not this interrupt's cause


class SteerError(ValueError):
    """The run or task cannot be steered now; str() is one line saying why."""


def tell(run: str, task_id: str, message: str, runs_dir: Optional[Path] = None) -> None:
    """Deliver `message` into the running task's next request (recorded in its history and the ledger)."""
    if not message.strip():
        raise SteerError("the message is empty; say what the task should know")
    if not _call(run, task_id, runs_dir, "tell", message):
        raise SteerError(f"task '{task_id}' is stopping or finished: the message was not delivered; "
                         f"see `ga runs show {Path(run).name} {task_id}`")


def stop(run: str, task_id: Optional[str] = None, runs_dir: Optional[Path] = None) -> None:
    """Stop one running task (it ends `stopped`, its processes killed, and `--resume` runs it again), or, with
    no task, the whole run (as Ctrl-C would)."""
    if task_id is not None:
        if not _call(run, task_id, runs_dir, "stop_task", "`ga runs stop`"):
            raise SteerError(f"task '{task_id}' finished before it could be stopped")
        return
    path = _run_dir(run, runs_dir).path
    pid = (path / ".lock").read_text().strip() if (path / ".lock").is_file() else ""
    if not driver_holds(path) or not pid.isdigit():
        raise SteerError(f"run {path.name} is not running; nothing to stop")
    atomic_write_text(path / STOP_REQUEST, "ga runs stop\n")  # the driver then says who stopped it, not "Ctrl-C"
    try:
        os.kill(int(pid), signal.SIGINT)
    except ProcessLookupError:
        (path / STOP_REQUEST).unlink(missing_ok=True)
        raise SteerError(f"run {path.name}: its driver (pid {pid}) runs on another machine; stop it there") from None


def stop_requested(run_dir: Path, since: float) -> bool:
    """Whether `ga runs stop` asked this run to stop since `since` (a request file written after it): the driver
    looks every second, so a run whose process ignores SIGINT (started with `&` from a script) stops all the same."""
    try:
        found = (run_dir / STOP_REQUEST).lstat()
    except OSError:
        return False
    return stat.S_ISREG(found.st_mode) and found.st_mtime >= since - 1 and time.time() - found.st_mtime < STOP_REQUEST_FRESH


def interrupt_note(run_dir: Path) -> str:
    """What the driver says when interrupted: `ga runs stop` (it left a fresh request file) or Ctrl-C/SIGTERM."""
    request = run_dir / STOP_REQUEST
    try:
        found = request.lstat()  # a symlink or anything else planted there is no request
        fresh = stat.S_ISREG(found.st_mode) and time.time() - found.st_mtime < STOP_REQUEST_FRESH
        request.unlink()
    except OSError:
        fresh = False
    if fresh:
        return "stopped by `ga runs stop`: stopping running tasks (`ga runs stop` again or Ctrl-C to abandon them)"
    return "Ctrl-C: stopping running tasks (Ctrl-C again to abandon them)"


def _run_dir(run: str, runs_dir: Optional[Path]) -> RunDir:
    """The run by id (under runs_dir, default fanout.runs_dir) or by its directory's path."""
    try:
        return RunDir.existing(Path(runs_dir or load_settings().fanout.runs_dir), run)
    except FileNotFoundError as exc:
        raise SteerError(str(exc)) from None


def _call(run: str, task_id: str, runs_dir: Optional[Path], method: str, text: str) -> bool:
    """tell(task_id, text) or stop_task(task_id, text) on the worker running the task; its answer."""
    run_dir = _run_dir(run, runs_dir)
    records = list(read_jsonl(run_dir.path / "ledger.jsonl"))
    opened = next((r for r in reversed(records) if r["event"] in ("run_started", "run_resumed")), {})
    uid = _running_uid(run_dir, records, task_id)
    if opened.get("executor") == "local":
        from orchestrator.local import ask  # here: +83 modules at every `ga` start (orchestrator loads this)

        reply = ask(run_dir.path, {"op": method, "task_id": task_id, "text": text})
        if reply is None:
            raise SteerError(f"run {run_dir.run_id}: its driver did not answer; is it stuck? (`ga runs show "
                             f"{run_dir.run_id}`)")
        if reply.get("gone"):
            raise SteerError(f"task '{task_id}': it is not running now; the run will retry or record it")
        return bool(reply.get("ok"))
    from orchestrator import pool  # Ray (optional): only a run on Ray is steered through it

    address = opened.get("address")
    try:
        handle = pool.leased_actor(address, uid)
    except (pool.ClusterError, ValueError) as exc:
        raise SteerError(f"cannot reach the run's cluster at {address}: {exc}") from None
    if handle is None:
        raise SteerError(f"task '{task_id}': its worker ({uid}) is gone; the run will retry or record it")
    return bool(pool.call(handle, method, task_id, text))


def _running_uid(run_dir: RunDir, records: list[JSONObject], task_id: str) -> str:
    """The worker running `task_id` now, from the ledger; SteerError when none is."""
    if not driver_holds(run_dir.path):
        raise SteerError(f"run {run_dir.run_id} is not running; `ga fanout --resume {run_dir.run_id}` continues it")
    uid = None
    for record in records:
        if record.get("task_id") != task_id:
            continue
        if record["event"] in ("started", "running"):
            uid = record.get("actor") or uid
        elif record["event"] in ATTEMPT_ENDS:
            uid = None
    if uid is None:
        known = {r.get("task_id") for r in records if r.get("task_id")}
        what = "is not running now" if task_id in known else "is not a task of this run"
        raise SteerError(f"task '{task_id}' {what}; see `ga runs show {run_dir.run_id}`")
    return uid
