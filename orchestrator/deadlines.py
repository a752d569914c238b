"""One thread that runs each registered callback once its deadline passes: the in-process executor's task
timeouts, without a waiting thread per task."""
from __future__ import annotations

import heapq
import itertools
import threading
import time
from typing import Callable, Optional


class Deadline:
    def __init__(self, when: float, action: Callable[[], None]):
        self.when, self.action, self.active = when, action, True


class Deadlines:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Deadline]] = []
        self._order = itertools.count()
        self._wake = threading.Condition()
        self._thread: Optional[threading.Thread] = None

    def add(self, seconds: float, action: Callable[[], None]) -> Deadline:
        """Run `action` (in the deadline thread) `seconds` from now, unless `cancel` comes first."""
        deadline = Deadline(time.monotonic() + seconds, action)
        with self._wake:
            heapq.heappush(self._heap, (deadline.when, next(self._order), deadline))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, daemon=True, name="ga-deadlines")
                self._thread.start()
            self._wake.notify()
        return deadline

    @staticmethod
    def cancel(deadline: Deadline) -> None:
        deadline.active = False  # dropped from the heap when its time comes

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._heap or self._heap[0][0] > time.monotonic():
                    self._wake.wait(self._heap[0][0] - time.monotonic() if self._heap else None)
                _, _, deadline = heapq.heappop(self._heap)
            if deadline.active:
                deadline.active = False
                try:
                    deadline.action()
                except Exception:  # noqa: BLE001  (one failing action must not stop the others' timeouts)
                    pass


DEADLINES = Deadlines()
