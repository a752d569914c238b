"""Stop a long-running loop cleanly on SIGINT/SIGTERM: the first signal asks, a second one insists."""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from types import FrameType
from typing import Iterator, Optional

import structlog

log = structlog.get_logger("ga.stop")


@contextmanager
def stop_on_signals(signals: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)) -> Iterator[threading.Event]:
    """Yield an Event set by the first signal (the loop finishes its current step and exits); a second
    signal raises KeyboardInterrupt at once. Outside the main thread no handler is installed."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handle(signum: int, _frame: Optional[FrameType]) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        log.info("stopping", signal=signal.Signals(signum).name, hint="finishing the current step; again to abort")
        stop.set()

    previous = {sig: signal.signal(sig, handle) for sig in signals}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
