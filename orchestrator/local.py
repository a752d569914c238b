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
`ga runs tell/stop` (another process) reach a task through files in the run directory (Mailbox, below): they
write `steer/<id>.json`; the driver's Mailbox thread answers each with `steer/<id>.reply` and removes the
request; the asker reads the reply and removes it. Files, not a socket: they work wherever the run directory
is shared (a nested run's driver in a code_run sandbox with its own network namespace included) and need no
cleanup beyond the run directory.
"""
from __future__ import annotations

import json
import queue
import threading
import time
import uuid
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, TypedDict

import structlog

from configs.logs import in_context
from memory_shared import StoreHandle
from memory_shared.fsutil import atomic_write_text
from memory_shared.jsontypes import JSONObject
from orchestrator import reaper
from orchestrator.actor import WorkerActor
from orchestrator.executor import (
    ClusterInfo,
    Member,
    MemoryPlacement,
    Slot,
    SlotPool,
    TaskProgress,
    WorkerError,
    WorkerLost,
    drain,
)
from orchestrator.governor import Governor, local_governor
from orchestrator.records import Job, TaskRecord

if TYPE_CHECKING:
    from configs import Settings
    from configs.settings import FanoutSettings

TASK_THREAD = "ga-task-"
POLL = 0.1  # seconds between looks at the mailbox (the driver) and for the reply (the asker)
REPLY_WAIT = 10.0  # an asker gives up after this long without a reply (the driver is stuck or gone)


class LocalExecutor:
    """The Executor of orchestrator/executor.py, in this process."""

    kind = "local"

    def __init__(self) -> None:
        self.info: ClusterInfo = {"address": None, "node_id": None, "started": True}
        reaper.ensure()  # code_run's process groups go when this process dies, even by kill -9

    def pool(self, run_id: str, size: int, fanout_settings: FanoutSettings, run_path: Path) -> LocalPool:
        return LocalPool(run_id, size, run_path)

    def governor(self, key: str, fanout_settings: FanoutSettings) -> Governor:
        return local_governor(key, fanout_settings)

    def memory_mode(self, settings: Settings) -> MemoryPlacement:
        return MemoryPlacement("store")  # one machine: the store itself


class LocalPool(SlotPool):
    """`size` in-process workers, one slot each: the Pool of orchestrator/executor.py, its tickets Futures."""

    def __init__(self, run_id: str, size: int, run_path: Path):
        self.run_id = run_id
        self.stores: dict[str, StoreHandle] = {}  # one MemoryStore per root, shared by every worker of the run
        self.members = [self._member() for _ in range(size)]
        self.slots = [Slot(i, member) for i, member in enumerate(self.members)]
        self._futures: dict[str, list[Future[TaskRecord]]] = {}  # member uid -> its tasks' futures
        self._done: queue.SimpleQueue[Future[TaskRecord]] = queue.SimpleQueue()  # settled, for `completed`
        self._lock = threading.Lock()
        self.mailbox = Mailbox(run_path, self._steer)
        self.mailbox.start()

    def _member(self) -> Member:
        uid = f"t-{uuid.uuid4().hex[:8]}"
        actor = WorkerActor(uid, 1, in_process=True)
        actor.stores = self.stores
        return Member(uid, actor)

    # ---- the Pool protocol (orchestrator/executor.py) ----

    def submit(self, slot: Slot, job: Job) -> Future[TaskRecord]:
        future: Future[TaskRecord] = Future()
        member = slot.member
        with self._lock:
            self._futures.setdefault(member.uid, []).append(future)

        def run() -> None:
            try:
                with structlog.contextvars.bound_contextvars(task=job.task_id):  # its info lines: off stderr, in ga.log
                    record = _actor(member).run_task(job)
            except BaseException as exc:  # noqa: BLE001  (reported as the call's error)
                self._settle(future, WorkerError(f"{type(exc).__name__}: {exc}"))
            else:
                self._settle(future, record)
            with self._lock:
                futures = self._futures.get(member.uid, [])
                if future in futures:
                    futures.remove(future)

        threading.Thread(target=in_context(run), daemon=True, name=f"{TASK_THREAD}{job.task_id}"[:60]).start()
        return future

    def _settle(self, future: Future[TaskRecord], outcome: TaskRecord | BaseException) -> None:
        with self._lock:  # a killed worker's future is settled already: its late result is dropped
            if future.done():
                return
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)
        self._done.put(future)

    def completed(self, timeout: float) -> list[Future[TaskRecord]]:
        return drain(self._done, timeout)

    def result(self, future: Future[TaskRecord]) -> TaskRecord:
        return future.result()

    def send(self, member: Member, method: str, *args: object) -> None:
        getattr(_actor(member), method)(*args)

    def progress(self, members: list[Member], timeout: float) -> list[tuple[Member, dict[str, TaskProgress]]]:
        return [(m, _actor(m).progress()) for m in members]

    def kill(self, member: Member) -> None:
        """A thread cannot be killed: cancel its tasks (their code_run processes are killed) and settle them
        as lost now; a thread that still runs is abandoned."""
        _actor(member).cancel(None, "killed by the driver")
        with self._lock:
            futures = list(self._futures.pop(member.uid, []))
        for future in futures:
            self._settle(future, WorkerLost("its worker thread did not stop and was abandoned"))

    def _successor(self, member: Member) -> Member:
        return self._member()  # the old thread, if it still runs, is abandoned (see kill)

    def lease_for_job(self) -> None:
        return None  # the driver is this process: nothing to watch

    def close(self) -> None:
        """Tasks still running (an abandoned run) are cancelled; the steering mailbox closes."""
        self.mailbox.stop()
        for slot in self.slots:
            if slot.busy:
                _actor(slot.member).cancel(None, "the run ended")

    # ---- steering ----

    def _steer(self, request: JSONObject) -> SteerReply:
        """{"op": "tell" or "stop_task", "task_id", "text"}: the actor method of that name, on the task's worker."""
        op, task_id = request.get("op"), request.get("task_id")
        if op not in ("tell", "stop_task"):
            return {"ok": False, "error": f"unknown request {op!r}"}
        for member in self.members:
            actor = _actor(member)
            if task_id in actor.tasks:
                return {"ok": bool(getattr(actor, op)(task_id, str(request.get("text", ""))))}
        return {"ok": False, "gone": True}


def _actor(member: Member) -> WorkerActor:
    """A member's handle, which a LocalPool's members hold."""
    actor = member.handle
    assert isinstance(actor, WorkerActor), f"{member.uid} is not an in-process worker"
    return actor


# ---- steering, as files in the run directory ----


class SteerRequest(TypedDict):
    op: str  # "tell" or "stop_task"
    task_id: str
    text: str


class SteerReply(TypedDict, total=False):
    ok: bool
    error: str
    gone: bool  # the task is not running in this run now


def _folder(run_path: Path) -> Path:
    return Path(run_path) / "steer"


class Mailbox:
    """The driver's side: a thread answering requests with `handle(request) -> reply`."""

    def __init__(self, run_path: Path, handle: Callable[[JSONObject], SteerReply]):
        self.folder, self.handle = _folder(run_path), handle
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._serve, daemon=True, name="ga-steer-mailbox")
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2 * POLL + 1)

    def _serve(self) -> None:
        while not self._stop.wait(POLL):
            if not self.folder.is_dir():
                continue
            for path in sorted(self.folder.glob("*.json")):
                try:
                    request = json.loads(path.read_text(encoding="utf-8"))
                    reply: SteerReply = (self.handle(request) if isinstance(request, dict)
                                         else {"ok": False, "error": "bad request"})
                except (OSError, ValueError) as exc:
                    reply = {"ok": False, "error": f"unreadable request: {exc}"}
                except Exception as exc:  # noqa: BLE001  (one odd request must not end steering for the run)
                    reply = {"ok": False, "error": f"bad request: {type(exc).__name__}"}
                atomic_write_text(path.with_suffix(".reply"), json.dumps(reply))
                path.unlink(missing_ok=True)


def ask(run_path: Path, request: SteerRequest, wait: float = REPLY_WAIT) -> Optional[JSONObject]:
    """Send one request to the run's driver; its reply, or None when none came within `wait` seconds."""
    folder = _folder(run_path)
    folder.mkdir(exist_ok=True)
    name = uuid.uuid4().hex
    atomic_write_text(folder / f"{name}.json", json.dumps(request))
    reply_path = folder / f"{name}.reply"
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if reply_path.is_file():
            try:
                return json.loads(reply_path.read_text(encoding="utf-8"))
            finally:
                reply_path.unlink(missing_ok=True)
        time.sleep(POLL / 2)
    (folder / f"{name}.json").unlink(missing_ok=True)  # not answered: do not leave it for later
    return None
