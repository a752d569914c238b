"""The map loop: a queue of tasks fed to the leased actors; retries, timeouts, budget, pause and Ctrl-C.

Everything a task goes through is written to the ledger as it happens; a finished task goes to
results.jsonl exactly once (RunDir.add_result). Tasks that did not finish (interrupted, paused,
skipped for the budget) are left for `--resume`.
"""
from __future__ import annotations

import signal
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Callable, Generic, Optional, ParamSpec, Union

import structlog

from configs import Settings
from memory_shared.fsutil import atomic_write_text
from orchestrator.actor import CANCEL_GRACE
from orchestrator.executor import Member, Pool, Slot, TaskProgress, TicketT, WorkerError, WorkerLost
from orchestrator.ledger import QUEUED_BATCH, RunDir
from orchestrator.records import ActorInfo, Job, NestedUsage, RunStop, TaskRecord, Usage, WorkerTotals
from orchestrator.spec import PlannedTask
from orchestrator.steer import interrupt_note, stop_requested
from worker.record import Failure, Stop

if TYPE_CHECKING:
    from orchestrator.views.progress import Display

log = structlog.get_logger("ga.fanout")
Params = ParamSpec("Params")
SignalHandler = Union[Callable[[int, Optional[FrameType]], object], int, None]  # what signal.signal takes back
HOUSEKEEPING_EVERY = 1.0
WAIT = 0.5  # seconds the loop waits for a task to finish before it looks at the rest (a stop, housekeeping)
KILL_MARGIN = CANCEL_GRACE + 20.0  # past its timeout + this, the driver kills the actor itself
INTERRUPT_WAIT = 15.0  # seconds running tasks get to stop after Ctrl-C
RATE_LIMIT_REQUEUES = 5
SKIPPED_BECAUSE = {RunStop.budget: "budget spent", RunStop.paused: "run paused",  # why a stopped run did not
                   RunStop.interrupted: "interrupted"}  # start a task (its "skipped" ledger line)


@dataclass
class Inflight:
    slot: Slot
    member: Member  # the actor the task was sent to (the slot may point at a replacement by now)
    task: PlannedTask
    attempt: int
    started: float
    deadline: Optional[float]
    killed_for_timeout: bool = False
    seen_running: bool = False

@dataclass
class MapOutcome:
    stop: Optional[RunStop] = None  # None: every task ran
    unfinished: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    per_worker: dict[str, WorkerTotals] = field(default_factory=dict)


class MapLoop(Generic[TicketT]):
    def __init__(self, pool: Pool[TicketT], run: RunDir, make_job: Callable[[PlannedTask, int], Job], *,
                 retries: int, timeout_of: Callable[[PlannedTask], Optional[float]],
                 budget_tokens: Optional[int] = None, budget_cost: Optional[float] = None,
                 spent: Optional[Usage] = None, display: Optional[Display] = None,
                 record: Optional[Callable[[TaskRecord], bool]] = None, done_before: int = 0,
                 failed_before: int = 0, cancel: Optional[threading.Event] = None, carve: bool = False,
                 announce: bool = False):
        """announce: write each task's "queued" ledger line, QUEUED_BATCH at a time ahead of the tasks that start
        (the run's map: 100,000 lines written before the first task kept it waiting)."""
        self.pool, self.run, self.make_job = pool, run, make_job
        self.record = record or run.add_result  # writes a finished task exactly once; False if already there
        self.done, self.failed = done_before, failed_before
        self.unverified = 0  # answered, not backed by a tool run or check (counted in `failed` too)
        self.done_ids: set[str] = set()
        self.retries, self.timeout_of = retries, timeout_of
        self.budget_tokens, self.budget_cost = budget_tokens, budget_cost
        # carve: a nested run's budget is what its parent held for it, so the tasks running at once get disjoint
        # shares of it (a share back when its task ends), never each the whole rest
        self.carve = carve
        self.granted: dict[str, tuple[Optional[int], Optional[float]]] = {}
        self.display = display
        self.outcome = MapOutcome(usage=spent or Usage())
        self.attempts: dict[str, int] = {}
        self.requeues: dict[str, int] = {}
        self.live_tokens: dict[str, int] = {}  # task id -> tokens it spent so far (housekeeping's look)
        self.live_total = 0  # their sum, kept as they change: a task's start does not add them all up
        self.progress: dict[int, TaskProgress] = {}  # slot -> what its task is doing
        self.interrupts = 0
        self.cancel = cancel  # set: the run stops as on Ctrl-C (a nested run's code_run ended)
        self.free: deque[Slot] = deque(slot for slot in pool.slots if not slot.busy)  # idle, ready for a task
        self.parked: list[Slot] = []  # idle slots of a retiring or dead worker, until a fresh one takes them
        self.announce = announce
        self.unannounced: deque[str] = deque()  # ids whose "queued" line is not written yet, in the order they start
        self.started_once: set[str] = set()  # ids of the tasks started at least once (their line is written)
        self.announced = 0  # "queued" lines written

    # ---- the loop ----

    def run_all(self, tasks: list[PlannedTask]) -> MapOutcome:
        pending: deque[PlannedTask] = deque(tasks)
        if self.announce:
            self.unannounced.extend(task.id for task in tasks)
        inflight: dict[TicketT, Inflight] = {}
        previous = _install_sigterm()
        last_housekeeping = 0.0
        interrupt_deadline = None
        began = time.time()  # a stop request older than this was for an earlier run of this directory
        batched, self.run.batched = self.run.batched, True  # durable within a window, not waited for (RunDir.sync)
        try:
            while pending or inflight:
                try:
                    self.run.sync(wait=False)  # no task of the map depends on another's lines; the end waits
                    if self.outcome.stop is None:
                        self._start_free(pending, inflight)
                        self._announce(QUEUED_BATCH)  # the rest, a batch a pass, while the first tasks run
                    if not inflight:
                        break
                    if self.cancel is not None and self.cancel.is_set() and interrupt_deadline is None:
                        interrupt_deadline = self._interrupt(inflight, "the code_run that started this run ended")
                    if interrupt_deadline and time.monotonic() > interrupt_deadline:
                        self._abandon(inflight)
                        break
                    for ref in self.pool.completed(WAIT):
                        item = inflight.pop(ref, None)
                        if item is not None:  # None: a task abandoned by an earlier loop on this pool, ended late
                            self._collect(ref, item, pending)
                            self.free.append(item.slot)
                    if time.monotonic() - last_housekeeping >= HOUSEKEEPING_EVERY:
                        last_housekeeping = time.monotonic()
                        self._housekeeping(inflight)
                        if stop_requested(self.run.path, began):  # `ga runs stop`, also when SIGINT is ignored
                            note = interrupt_note(self.run.path)  # the request is taken (and removed)
                            if interrupt_deadline is not None:  # asked again: as a second Ctrl-C
                                self._abandon(inflight)
                                break
                            interrupt_deadline = self._interrupt(inflight, note)
                except KeyboardInterrupt:
                    self.interrupts += 1
                    if self.interrupts > 1:
                        self._abandon(inflight)
                        break
                    interrupt_deadline = self._interrupt(inflight, interrupt_note(self.run.path))
        finally:
            self.run.batched = batched
            self.run.sync()
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
        skipped = [task.id for task in pending if task.id not in self.done_ids]
        if skipped:
            reason = SKIPPED_BECAUSE[self.outcome.stop] if self.outcome.stop else "not started"
            self.run.ledger_many("skipped", skipped, reason=reason)
            self.outcome.unfinished.extend(skipped)
        self.progress.clear()
        self._show()
        return self.outcome

    def _interrupt(self, inflight: dict[TicketT, Inflight], note: str) -> float:
        """Stop the run: no new task starts, running ones are cancelled; the deadline to wait for them."""
        self._stop(RunStop.interrupted, note)
        for item in inflight.values():
            _quiet(self.pool.send, item.member, "cancel", item.task.id, "interrupted")
        return time.monotonic() + INTERRUPT_WAIT

    def _start_free(self, pending: deque, inflight: dict[TicketT, Inflight]) -> None:
        """A task for each idle slot, as long as there are tasks (the idle slots are a list: nothing here looks at
        the busy ones)."""
        if self.parked:
            ready = [slot for slot in self.parked if not (slot.member.retiring or slot.member.dead)]
            self.parked = [slot for slot in self.parked if slot not in ready]
            self.free.extend(ready)
        self._announce(len(self.started_once) + len(self.free) - self.announced)  # new tasks start in that order
        while pending and self.free and self.outcome.stop is None:
            slot = self.free.popleft()
            if slot.busy:
                continue  # already given a task (a slot is only ever listed idle once it is)
            if slot.member.retiring or slot.member.dead:
                self.parked.append(slot)
                continue
            if self._budget_spent():
                self.free.appendleft(slot)
                self._stop(RunStop.budget, "budget spent: no new tasks start")
                return
            share = self._budget_left(ways=max(1, min(1 + len(self.free), len(pending))))  # this slot, the idle ones
            if self.carve and self.granted and (share[0] == 0 or share[1] == 0.0):
                self.free.appendleft(slot)
                return  # the running tasks hold it all: the next starts when one ends
            task = pending.popleft()
            self.started_once.add(task.id)
            attempt = self.attempts.get(task.id, 0) + 1
            self.attempts[task.id] = attempt
            timeout = self.timeout_of(task)
            job = self.make_job(task, attempt)
            job.lease = self.pool.lease_for_job()
            job.budget_tokens, job.budget_cost = share
            if self.carve:  # the share binds the task's own model calls too, not only its gateway's
                self.granted[task.id] = share
                job.settings = _within(job.settings, share)
            ref = self.pool.submit(slot, job)
            slot.busy = task.id
            now = time.monotonic()
            inflight[ref] = Inflight(slot, slot.member, task, attempt, now, now + timeout + KILL_MARGIN if timeout else None)
            self.run.ledger("started", task.id, attempt=attempt, worker=slot.index, actor=slot.uid)

    def _announce(self, count: int) -> None:
        """The "queued" lines of the next `count` tasks not announced yet, in batches of QUEUED_BATCH."""
        ids = [self.unannounced.popleft() for _ in range(min(max(0, count), len(self.unannounced)))]
        if ids:
            self.run.ledger_many("queued", ids)
            self.announced += len(ids)

    def _budget_spent(self) -> bool:
        usage = self.outcome.usage
        tokens = usage.total + self.live_total
        if self.budget_tokens and tokens >= self.budget_tokens:
            return True
        return bool(self.budget_cost and usage.cost >= self.budget_cost)

    def _budget_left(self, ways: int = 1) -> tuple[Optional[int], Optional[float]]:
        """What the run's budget leaves a task starting now (its gateway refuses past it); None: no budget. Carved:
        what no running task holds, shared among the `ways` tasks that may start now."""
        usage = self.outcome.usage
        if self.carve:
            held_tokens = sum(t for t, _ in self.granted.values() if t is not None)
            held_cost = sum(c for _, c in self.granted.values() if c is not None)
            return (max(0, self.budget_tokens - usage.total - held_tokens) // ways if self.budget_tokens else None,
                    max(0.0, self.budget_cost - usage.cost - held_cost) / ways if self.budget_cost else None)
        tokens = usage.total + self.live_total
        return (max(0, self.budget_tokens - tokens) if self.budget_tokens else None,
                max(0.0, self.budget_cost - usage.cost) if self.budget_cost else None)

    def _stop(self, reason: RunStop, note: str) -> None:
        if self.outcome.stop is None:
            self.outcome.stop = reason
            self.run.ledger(reason, note=note)
            self.run.event("run_stopping", reason=reason, note=note)
            log.warning("fanout.stopping", run=self.run.run_id, reason=reason, note=note)
            if self.display:
                self.display.update(note=note)

    # ---- results ----

    def _collect(self, ref: TicketT, item: Inflight, pending: deque) -> None:
        task, slot = item.task, item.slot
        self.live_total -= self.live_tokens.pop(task.id, 0)
        self.granted.pop(task.id, None)
        self.progress.pop(slot.index, None)
        try:
            record: TaskRecord = self.pool.result(ref)
        except WorkerLost as exc:
            slot.busy = None
            self.pool.replace(item.member)
            if item.killed_for_timeout:
                self._finish(_lost(task, item, f"timeout after {self.timeout_of(task):g}s; its worker was killed"),
                             slot.index)
            elif self.outcome.stop == RunStop.interrupted:
                self._unfinished(task, "interrupted", "worker died while stopping")
            else:
                self._retry_or_fail(task, item, f"worker died: {_first_line(exc)}", pending)
            return
        except WorkerError as exc:
            slot.busy = None
            self._retry_or_fail(task, item, f"worker error: {_first_line(exc)}", pending)
            return
        slot.busy = None
        self._note_events(record, item)
        if (record.actor and record.actor.tainted) or item.member.retiring:
            self.pool.retire(item.member)
        if record.stop and self._stopped(record, item, pending):
            return
        if record.error == Failure.setup:
            self._retry_or_fail(task, item, record.reason or "worker setup failed", pending)
        elif record.error == Failure.check and item.attempt <= self.retries and self.outcome.stop != RunStop.interrupted:
            self.outcome.usage += record.usage
            self.run.ledger("retried", task.id, attempt=item.attempt, reason=record.reason or "check failed")
            pending.appendleft(task)
        else:
            self._finish(record, slot.index)

    def _note_events(self, record: TaskRecord, item: Inflight) -> None:
        """The model switches and the steering notes of the attempt go to the ledger."""
        for switch in record.failovers or []:
            self.run.ledger("failover", item.task.id, attempt=item.attempt, **switch)
        for event in record.steering or []:
            self.run.ledger(event["event"], item.task.id, attempt=item.attempt,
                            **{k: v for k, v in event.items() if k != "event"})

    def _stopped(self, record: TaskRecord, item: Inflight, pending: deque) -> bool:
        """A task that did not finish: left for --resume, paused with the run, or sent again. False when the stop
        ends the task instead (a timeout, or sent again too often): it is then recorded like any result."""
        task, stop = item.task, record.stop
        requeue = stop in (Stop.lease_lost, Stop.rate_limited) and self.requeues.get(task.id, 0) < RATE_LIMIT_REQUEUES
        if stop not in (Stop.stopped, Stop.cancelled, Stop.paused) and not requeue:
            return False
        self.outcome.usage += record.usage  # tokens spent count against the budget all the same
        if stop == Stop.stopped:
            self._unfinished(task, "stopped", record.reason)
        elif stop == Stop.cancelled:
            self._unfinished(task, "interrupted", record.reason)
        elif stop == Stop.paused:
            pending.appendleft(task)
            self.attempts[task.id] = item.attempt - 1
            self.run.ledger("paused", task.id, reason=record.reason)
            self._stop(RunStop.paused, "the model endpoint keeps refusing (rate limit/quota): run paused, resume later")
        else:  # lease_lost: the actor took this (live) driver for dead, its renewals came late (a stalled
            # machine): send it again first; rate_limited: to the back of the queue
            self.requeues[task.id] = self.requeues.get(task.id, 0) + 1
            self.attempts[task.id] = item.attempt - 1
            if stop == Stop.lease_lost:
                pending.appendleft(task)
            else:
                pending.append(task)
            self.run.ledger("requeued", task.id, reason=record.reason)
        return True

    def _retry_or_fail(self, task: PlannedTask, item: Inflight, reason: str, pending: deque) -> None:
        if item.attempt <= self.retries and self.outcome.stop != RunStop.interrupted:
            self.run.ledger("retried", task.id, attempt=item.attempt, reason=reason)
            log.warning("fanout.retry", task=task.id, attempt=item.attempt, reason=reason)
            pending.appendleft(task)
        else:
            self._finish(_lost(task, item, f"{reason} (after {item.attempt} attempts)"), item.slot.index)

    def _unfinished(self, task: PlannedTask, event: str, reason: str) -> None:
        self.run.ledger(event, task.id, reason=reason)
        self.outcome.unfinished.append(task.id)

    def _finish(self, record: TaskRecord, slot_index: int) -> None:
        if record.files:
            folder = Path(str(record.task_dir))
            folder.mkdir(parents=True, exist_ok=True)
            for name, text in record.files.items():
                atomic_write_text(folder / name, text)
            record.files = None
        if record.nested_usage is not None and not record.nested_usage.runs:
            record.nested_usage = None  # the usual case: no nested fan-out, nothing to say on every results line
        total = record.usage + record.nested_usage if record.nested_usage else record.usage
        record.usage_with_nested = total if record.nested_usage else None  # TaskRecord.spent: usage without it
        self.run.pack(record)
        if not self.record(record):
            return
        self.done_ids.add(record.task_id)
        self.done += 1
        self.failed += record.status != "succeeded"
        self.unverified += record.status == "unverified"
        self.outcome.usage += total
        stats = self.outcome.per_worker.get(f"worker-{slot_index}") or WorkerTotals()
        stats = stats + total
        stats.tasks += 1
        self.outcome.per_worker[f"worker-{slot_index}"] = stats

    # ---- while waiting ----

    def _housekeeping(self, inflight: dict[TicketT, Inflight]) -> None:
        now = time.monotonic()
        for item in inflight.values():
            if item.deadline and now > item.deadline and not item.killed_for_timeout:
                item.killed_for_timeout = True
                self.run.ledger("timeout_kill", item.task.id, reason="the worker did not stop after its timeout")
                _quiet(self.pool.kill, item.member)
        members = {id(item.member): item.member for item in inflight.values()}
        by_task = {item.task.id: item for item in inflight.values()}
        if members:
            for _member, running in self.pool.progress(list(members.values()), 0.2):
                for task_id, info in running.items():
                    item = by_task.get(task_id)
                    if item is None or info.get("attempt") != item.attempt:
                        continue
                    tokens = info.get("tokens", 0)
                    self.live_total += tokens - self.live_tokens.get(task_id, 0)
                    self.live_tokens[task_id] = tokens
                    shown = self.progress[item.slot.index] = info.copy()
                    shown["slot"] = item.slot.index
                    if not item.seen_running:
                        item.seen_running = True
                        self.run.ledger("running", task_id, attempt=item.attempt, pid=info.get("pid"),
                                        actor=item.member.uid)
        self._show()

    def _show(self) -> None:
        if self.display:
            usage = self.outcome.usage
            self.display.update(done=self.done, failed=self.failed, unverified=self.unverified,
                                running=[self.progress[k] for k in sorted(self.progress)],
                                tokens=usage.total + self.live_total, cost=usage.cost)

    def _abandon(self, inflight: dict[TicketT, Inflight]) -> None:
        for item in inflight.values():
            _quiet(self.pool.kill, item.member)
            self._unfinished(item.task, "interrupted", "abandoned")
        inflight.clear()


def _lost(task: PlannedTask, item: Inflight, reason: str) -> TaskRecord:
    """The record of a task whose worker is gone: failed, nothing spent that the driver knows of."""
    return TaskRecord(task_id=task.id, status="failed", attempt=item.attempt, reason=reason, finished=time.time(),
                      nested_usage=NestedUsage(), actor=ActorInfo(uid=item.member.uid))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return next((line.strip() for line in text if line.strip()), type(exc).__name__)[:300]


def _within(settings: Settings, share: tuple[Optional[int], Optional[float]]) -> Settings:
    """A copy of a job's settings whose task limits are no more than `share` (tokens, cost; None: no bound)."""
    worker = settings.worker
    tokens, cost = share
    update: dict[str, float] = {}
    if tokens is not None:
        update["max_tokens"] = max(1, min(tokens, worker.max_tokens or tokens))
    if cost is not None:
        update["max_cost"] = max(1e-9, min(cost, worker.max_cost or cost))
    return settings.model_copy(update={"worker": worker.model_copy(update=update)})


def _quiet(call: Callable[Params, object], *args: Params.args, **kwargs: Params.kwargs) -> None:
    try:
        call(*args, **kwargs)
    except Exception:  # noqa: BLE001  (the actor is gone already)
        pass


def _install_sigterm() -> SignalHandler:
    """SIGTERM stops a run like Ctrl-C (ledger written, resumable). Only possible on the main thread. The handler
    it replaced, to put back (None when it could not)."""
    def handler(signum: int, frame: Optional[FrameType]) -> None:
        raise KeyboardInterrupt

    try:
        return signal.signal(signal.SIGTERM, handler)
    except ValueError:
        return None
