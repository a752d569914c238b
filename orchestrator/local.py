"""The in-process executor: a run's workers are threads of the `ga fanout` process itself.

The work is waiting (model HTTP calls; code_run is a sandboxed subprocess already), so threads do it
at a fraction of the cost of worker processes: nothing to start, no second copy of the imports, one
process to watch. Same ledger, results, governor (one per endpoint in this process), memory store,
timeouts, retries, steering and resume as on Ray. What it gives up against processes:
- a thread cannot be killed: a task past its timeout is cancelled (it stops at its next step, its
  code_run process groups are killed, the model call has its own timeout); one that still does not
  stop is abandoned (the slot gets a fresh worker, the thread runs on until the process ends);
- a crash of the process (segfault in an extension, out of memory) ends the run, not one task:
  `--resume` picks it up, as after a kill of the driver;
- every task shares the process's memory and CPU (no per-worker isolation beyond its own workdir,
  history and sandboxed code_run).
`ga runs tell/stop` reach a task through files in the run directory (orchestrator/mailbox.py).
"""
from __future__ import annotations

import functools
import threading
import uuid
from concurrent.futures import FIRST_COMPLETED, Future
from concurrent.futures import wait as wait_futures
from pathlib import Path
from typing import Any, Optional

from orchestrator import reaper
from orchestrator.executor import Member, Slot, SlotPool, WorkerError, WorkerLost
from orchestrator.records import Job, TaskRecord

TASK_THREAD = "ga-task-"


class LocalExecutor:
    kind = "local"

    def __init__(self) -> None:
        self.info: dict[str, Any] = {"address": None, "node_id": None, "started": True}
        reaper.ensure()  # code_run's process groups go when this process dies, even by kill -9
        _quiet_worker_logs()

    def pool(self, run_id: str, size: int, fanout_settings: Any, run_path: Path) -> "LocalPool":
        return LocalPool(run_id, size, run_path)

    def governor(self, key: str, fanout_settings: Any) -> Any:
        from orchestrator.governor import local_governor

        return local_governor(key, fanout_settings)

    def memory_mode(self, settings: Any) -> dict[str, Optional[str]]:
        return {"mode": "store", "service": None, "replica": None}  # one machine: the store itself


@functools.lru_cache(maxsize=1)  # once per process
def _quiet_worker_logs() -> None:
    """Workers' debug and info lines stay off the driver's stderr, as on Ray (where they stay in Ray's worker
    logs): they would break into the live view and into the output a parent's code_run reads. Warnings and
    errors still show; the ledger and events.jsonl keep what the run did."""
    import structlog

    from orchestrator.actor import WORKER_THREAD

    def drop(logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
        if method in ("debug", "info") and threading.current_thread().name.startswith((WORKER_THREAD, TASK_THREAD)):
            raise structlog.DropEvent
        return event

    processors = list(structlog.get_config()["processors"])
    structlog.configure(processors=[drop, *processors])


class LocalPool(SlotPool):
    """`size` in-process workers, one slot each; the pool interface of orchestrator/executor.py."""

    def __init__(self, run_id: str, size: int, run_path: Path):
        self.run_id = run_id
        self.stores: dict[str, Any] = {}  # one MemoryStore per root, shared by every worker of the run
        self.members = [self._member() for _ in range(size)]
        self.slots = [Slot(i, member) for i, member in enumerate(self.members)]
        self._futures: dict[str, list[Future]] = {}  # member uid -> its tasks' futures
        self._lock = threading.Lock()
        from orchestrator.mailbox import Mailbox

        self.mailbox = Mailbox(run_path, self._steer)
        self.mailbox.start()

    def _member(self) -> Member:
        from orchestrator.actor import WorkerActor

        uid = f"t-{uuid.uuid4().hex[:8]}"
        actor = WorkerActor(uid, 1, in_process=True)
        actor.stores = self.stores
        return Member(uid, actor)

    # ---- the pool interface ----

    def submit(self, slot: Slot, job: Job) -> Future:
        future: Future = Future()
        member = slot.member
        with self._lock:
            self._futures.setdefault(member.uid, []).append(future)

        def run() -> None:
            try:
                record = member.handle.run_task(job)
            except BaseException as exc:  # noqa: BLE001  (reported as the call's error)
                self._settle(future, error=WorkerError(f"{type(exc).__name__}: {exc}"))
            else:
                self._settle(future, record=record)
            with self._lock:
                futures = self._futures.get(member.uid, [])
                if future in futures:
                    futures.remove(future)

        threading.Thread(target=run, daemon=True, name=f"{TASK_THREAD}{job.task_id}"[:60]).start()
        return future

    def _settle(self, future: Future, record: Optional[TaskRecord] = None,
                error: Optional[BaseException] = None) -> None:
        with self._lock:  # a killed worker's future is settled already: its late result is dropped
            if future.done():
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(record)

    def wait(self, futures: list[Future], timeout: float) -> list[Future]:
        done, _ = wait_futures(futures, timeout=timeout, return_when=FIRST_COMPLETED)
        return list(done)

    def result(self, future: Future) -> TaskRecord:
        return future.result()

    def send(self, member: Member, method: str, *args: Any) -> None:
        getattr(member.handle, method)(*args)

    def progress(self, members: list[Member], timeout: float) -> list[tuple[Member, dict[str, Any]]]:
        return [(m, m.handle.progress()) for m in members]

    def kill(self, member: Member) -> None:
        """A thread cannot be killed: cancel its tasks (their code_run processes are killed) and settle them
        as lost now; a thread that still runs is abandoned."""
        member.handle.cancel(None, "killed by the driver")
        with self._lock:
            futures = list(self._futures.pop(member.uid, []))
        for future in futures:
            self._settle(future, error=WorkerLost("its worker thread did not stop and was abandoned"))

    def _successor(self, member: Member) -> Member:
        return self._member()  # the old thread, if it still runs, is abandoned (see kill)

    def lease_for_job(self) -> Optional[dict[str, Any]]:
        return None  # the driver is this process: nothing to watch

    def close(self) -> None:
        """Tasks still running (an abandoned run) are cancelled; the steering mailbox closes."""
        self.mailbox.stop()
        for slot in self.slots:
            if slot.busy:
                slot.member.handle.cancel(None, "the run ended")

    # ---- steering ----

    def _steer(self, request: dict[str, Any]) -> dict[str, Any]:
        """{"op": "tell" or "stop_task", "task_id", "text"}: the actor method of that name, on the task's worker."""
        op, task_id = request.get("op"), request.get("task_id")
        if op not in ("tell", "stop_task"):
            return {"ok": False, "error": f"unknown request {op!r}"}
        for member in self.members:
            if task_id in member.handle.tasks:
                return {"ok": bool(getattr(member.handle, op)(task_id, str(request.get("text", ""))))}
        return {"ok": False, "gone": True}
