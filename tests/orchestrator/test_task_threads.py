"""The in-process executor's task threads (orchestrator/local.py): one that finished its task takes the next."""
from __future__ import annotations

import threading
import time

from orchestrator.local import TaskThreads


def run_and_wait(threads: TaskThreads, name: str, work=lambda: None) -> tuple[int, str]:
    seen: list[tuple[int, str]] = []
    done = threading.Event()

    def task() -> None:
        work()
        seen.append((threading.get_ident(), threading.current_thread().name))
        done.set()

    threads.run(task, name)
    assert done.wait(10)
    return seen[0]


def test_the_next_task_runs_in_the_idle_thread_under_its_own_name() -> None:
    threads = TaskThreads(idle=5.0)
    first, _ = run_and_wait(threads, "ga-task-a")
    time.sleep(0.2)  # the thread is idle once its task returned
    second, name = run_and_wait(threads, "ga-task-b")
    assert second == first and name == "ga-task-b"


def test_an_idle_thread_ends_after_its_wait_and_a_stuck_task_keeps_none_waiting() -> None:
    threads = TaskThreads(idle=0.2)
    first, _ = run_and_wait(threads, "ga-task-a")
    time.sleep(1.0)
    assert all(t.ident != first for t in threading.enumerate())  # it ended
    release = threading.Event()
    def stuck() -> None:
        release.wait(10)

    threads.run(stuck, "ga-task-stuck")
    try:
        _, name = run_and_wait(threads, "ga-task-c")  # not queued behind the stuck one
        assert name == "ga-task-c"
    finally:
        release.set()
