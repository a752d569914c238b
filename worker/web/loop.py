"""Playwright runs on one event-loop thread per process; callers in any thread submit coroutines to it.

The async API on a private thread works from plain threads, Ray actor threads and threads that
already run their own asyncio loop (where Playwright's sync API refuses to start), and lets every
browser call carry a timeout (a script awaiting forever must not hang the worker).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Coroutine, Optional, TypeVar

_lock = threading.Lock()
_loop: Optional[asyncio.AbstractEventLoop] = None


def _get_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None or not _loop.is_running():
            loop = asyncio.new_event_loop()
            started = threading.Event()
            loop.call_soon(started.set)
            threading.Thread(target=loop.run_forever, name="ga-web", daemon=True).start()
            started.wait()
            _loop = loop
        return _loop


Result = TypeVar("Result")


def run(coro: Coroutine[object, object, Result], timeout: Optional[float] = None) -> Result:
    """Run `coro` on the web thread and wait for its result (TimeoutError after `timeout` seconds)."""
    loop = _get_loop()
    if threading.current_thread().name == "ga-web":
        raise RuntimeError("worker.web.loop.run() called from the web thread itself; await the coroutine instead")
    future = asyncio.run_coroutine_threadsafe(coro, loop)
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise TimeoutError(f"browser call did not finish in {timeout:.0f}s") from None
