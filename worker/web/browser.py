"""The browser behind a task's web session: its own Chromium (TaskBrowser), or the person's (ExternalBrowser).

A TaskBrowser is started by Playwright from a Launch (worker/web/launch.py): inside the task's sandbox, over
a pipe, started at the task's first web call and stopped at its end; one that died is started again at the
next call (`launches` counts, so the session knows its tabs are gone). An ExternalBrowser is joined over CDP
(web.cdp_url), never started, restarted or stopped. Both are used on the web thread only (worker.web.loop),
except kill(), which any thread may call.
"""
from __future__ import annotations

import asyncio
from typing import Awaitable, Optional, Protocol

import structlog
from playwright.async_api import Browser, Playwright, async_playwright
from playwright.async_api import Error as PlaywrightError

from worker.web.launch import Launch

log = structlog.get_logger("worker.web")
START_TIMEOUT = 60.0  # a cold Chromium on a loaded 2-core machine takes a few seconds
CLOSE_TIMEOUT = 10.0
STOP_WAIT = 5.0  # seconds a stopped browser's processes get to be gone


class BrowserStartError(RuntimeError):
    """The browser did not come up; str() is one line with its last words."""


_playwright: Optional[Playwright] = None


async def driver() -> Playwright:
    """The process's Playwright driver, kept for the life of the process (starting it costs about a second)."""
    global _playwright
    if _playwright is None:
        _playwright = await async_playwright().start()
    return _playwright


class BrowserSource(Protocol):
    """What a WebSession needs of the browser behind it."""

    external: bool  # the person's browser: its default context, only our own tabs
    launches: int  # how many times connect() started or joined it: a newer one means the tabs are gone

    async def connect(self) -> Browser: ...
    async def close(self) -> None: ...
    def stop(self) -> None: ...
    def kill(self) -> None: ...
    def processes(self) -> list[int]: ...


class TaskBrowser:
    """One task's own Chromium, started from `launch` on first use and again if it died."""

    external = False

    def __init__(self, launch: Launch) -> None:
        self.launch = launch
        self.browser: Optional[Browser] = None
        self.launches = 0
        self.running: dict[int, str] = {}

    async def connect(self) -> Browser:
        # is_connected() stays True until Playwright's loop reads the pipe's end, so a browser killed a moment
        # ago would look alive: its first process (bubblewrap's, or Chromium's) must be running too
        if self.browser is not None and self.browser.is_connected() and self.launch.pid() is not None:
            return self.browser
        if self.browser is not None:  # it died: whatever is left of it goes before a new one starts
            self.launch.kill()
        launch = self.launch
        try:
            self.browser = await (await driver()).chromium.launch(
                executable_path=str(launch.executable), args=launch.args, env=dict(launch.env), headless=launch.headless,
                timeout=START_TIMEOUT * 1000, handle_sigint=False, handle_sigterm=False, handle_sighup=False)
        except PlaywrightError as exc:
            self.browser = None
            launch.kill()
            raise BrowserStartError(start_failure(str(exc), launch.sandboxed)) from None
        self.launches += 1
        return self.browser

    async def close(self) -> None:
        self.running = self.launch.snapshot()  # its processes may still be ending after Playwright's close
        if self.browser is not None:
            await quietly(asyncio.wait_for(self.browser.close(), CLOSE_TIMEOUT))
        self.browser = None

    def stop(self) -> None:
        """After close(): nothing of the browser is left, nor its launcher's files."""
        self.launch.kill(self.running, wait=STOP_WAIT)
        self.launch.remove()

    def kill(self) -> None:
        self.launch.kill()

    def processes(self) -> list[int]:
        return self.launch.processes()


class ExternalBrowser:
    """The person's own browser, started with --remote-debugging-port (web.cdp_url): joined, never launched."""

    external = True

    def __init__(self, url: str) -> None:
        self.url = url
        self.browser: Optional[Browser] = None
        self.launches = 0

    async def connect(self) -> Browser:
        if self.browser is not None and self.browser.is_connected():
            return self.browser
        self.browser = await (await driver()).chromium.connect_over_cdp(self.url, timeout=20000)
        self.launches += 1
        return self.browser

    async def close(self) -> None:
        if self.browser is not None:
            await quietly(self.browser.close())  # only disconnects: the browser is the person's
        self.browser = None

    def stop(self) -> None:
        pass

    def kill(self) -> None:
        pass

    def processes(self) -> list[int]:
        return []


def start_failure(error: str, sandboxed: bool) -> str:
    """One line from Playwright's launch error: its first line and the browser's last words."""
    lines = [line.strip() for line in error.splitlines() if line.strip()]
    said = [line for line in lines if line.startswith("[pid=")]
    last = said[-1].split("] ", 2)[-1] if said else (lines[-1] if lines else "no output")
    where = " in the task's sandbox" if sandboxed else ""
    head = lines[0].removeprefix("BrowserType.launch: ") if lines else "no output"
    return f"the browser did not start{where}: {head[:200]}" + (f" (its last words: {last[:200]})" if said else "")


async def quietly(awaitable: Awaitable[object]) -> None:
    try:
        await awaitable
    except (PlaywrightError, asyncio.CancelledError, asyncio.TimeoutError, ConnectionError):
        pass
