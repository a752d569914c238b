"""A task's own browser context (cookies, storage, tabs), in the task's own browser or the person's.

The public methods are synchronous and may be called from any thread; everything that touches
Playwright runs on the web thread (worker.web.loop), so the session's tab state is only ever
changed there.
"""
from __future__ import annotations

import asyncio
import atexit
import time
import weakref
from collections import deque
from typing import Awaitable, Callable, Optional, TypeVar

import structlog
from playwright.async_api import BrowserContext, Dialog, Page, ViewportSize

from worker.web import loop
from worker.web.browser import BrowserSource, quietly

log = structlog.get_logger("worker.web")
VIEWPORT: ViewportSize = {"width": 1280, "height": 800}
TABS_LOST = ("note: the browser had stopped and was restarted, so your tabs were lost;"
             " reopen pages with web_execute_js (location.href = '...').")
__all__ = ["TABS_LOST", "TabError", "WebSession", "quietly"]


Result = TypeVar("Result")


class TabError(ValueError):
    """A tab id the worker does not have; str() lists the open tabs."""


_open_sessions: "weakref.WeakSet[WebSession]" = weakref.WeakSet()


class WebSession:
    """One task's view of the browser: an isolated context, numbered tabs, one of them active."""

    def __init__(self, source: BrowserSource, script_timeout: float):
        self.source = source
        self.external = source.external  # the person's browser: its default context (their logins), our own tabs
        self.script_timeout = script_timeout
        self.context: Optional[BrowserContext] = None
        self.context_launch = 0  # the source's launch the context belongs to: a newer one means the tabs are gone
        self.tabs: dict[str, Page] = {}
        self.active = ""
        self.dialogs: list[str] = []  # dialogs answered since the last report
        self.errors: deque[tuple[float, str, str]] = deque(maxlen=50)  # (monotonic time, tab id, message): uncaught page errors
        self._next_tab = 1
        self.closed = False
        _open_sessions.add(self)

    # ---- sync API (any thread)
    def call(self, fn: Callable[..., Awaitable[Result]], *args: object, timeout: float = 120.0) -> tuple[str, Result]:
        """Make sure the browser and this context are up, then run `await fn(self, *args)` on the web thread.

        Returns (notice, result); the notice is non-empty when the browser had to be started again.
        """
        if self.closed:
            raise RuntimeError("this web session was closed")
        return loop.run(self._call(fn, args), timeout)

    def close(self) -> None:
        """Close this task's context and its browser (the person's browser only disconnects)."""
        if self.closed:
            return
        self.closed = True
        _open_sessions.discard(self)
        try:
            loop.run(self._detach(), timeout=30)
        except Exception as exc:  # the browser may already be gone; what is left of it must still go
            log.warning("web_close_failed", error=str(exc))
        self.source.stop()

    def kill(self) -> None:
        """Kill the task's browser now (the task was cancelled); safe from any thread."""
        self.source.kill()

    def processes(self) -> list[int]:
        """The pids of the task's browser (none for the person's)."""
        return self.source.processes()

    # ---- web thread
    async def _call(self, fn: Callable[..., Awaitable[Result]], args: tuple[object, ...]) -> tuple[str, Result]:
        notice = await self._attach()
        return notice, await fn(self, *args)

    async def _attach(self) -> str:
        browser = await self.source.connect()
        if self.context is not None and self.context_launch == self.source.launches:
            return ""
        lost = self.context is not None
        self.tabs.clear()
        self.active = ""
        self._next_tab = 1
        self.context_launch = self.source.launches
        if self.external:  # share the person's context (logged-in sites work); only our tabs and their popups
            self.context = browser.contexts[0] if browser.contexts else await browser.new_context()
        else:  # no downloads: a page cannot make the browser write a file anywhere
            self.context = await browser.new_context(viewport=VIEWPORT, bypass_csp=True, accept_downloads=False)
            self.context.on("page", self._adopt)
        self._register(await self.context.new_page())
        return TABS_LOST if lost else ""

    async def _detach(self) -> None:
        if self.context is not None and self.external:  # close what this task opened; the person's tabs stay
            for page in list(self.tabs.values()):
                await quietly(page.close())
        self.context = None
        await self.source.close()

    def _adopt(self, page: Page) -> None:  # an event handler returns nothing
        self._register(page)

    def _register(self, page: Page) -> str:
        for tab_id, known in self.tabs.items():
            if known is page:
                return tab_id
        tab_id = f"t{self._next_tab}"
        self._next_tab += 1
        self.tabs[tab_id] = page
        if not self.active:
            self.active = tab_id
        if self.external:  # in a shared context, a popup of our tab is ours; the person's new tabs are not
            page.on("popup", self._adopt)
        page.on("dialog", lambda dialog: self._on_dialog(tab_id, dialog))
        page.on("pageerror", lambda error: self.errors.append((time.monotonic(), tab_id, _error_text(error))))
        page.on("close", lambda _: self._forget(tab_id))
        return tab_id

    def _forget(self, tab_id: str) -> None:
        self.tabs.pop(tab_id, None)
        if self.active == tab_id:
            self.active = next(reversed(self.tabs), "")

    def _on_dialog(self, tab_id: str, dialog: Dialog) -> None:
        # Nobody can click the dialog away for the model: accept it (as a person usually would) and report it.
        self.dialogs.append(f'{dialog.type} "{dialog.message[:200]}" in {tab_id} (accepted)')
        asyncio.ensure_future(quietly(dialog.accept(dialog.default_value if dialog.type == "prompt" else None)))

    async def page(self, switch_tab_id: Optional[str] = None) -> Page:
        """The active tab, after switching to `switch_tab_id` if given (TabError for an unknown id)."""
        if switch_tab_id:
            tab_id = switch_tab_id.strip()
            tab_id = tab_id if tab_id.startswith("t") else f"t{tab_id}"
            if tab_id not in self.tabs:
                raise TabError(f"no tab '{switch_tab_id}'; open tabs: {', '.join(self.tabs) or 'none'}")
            self.active = tab_id
            await quietly(self.tabs[tab_id].bring_to_front())
        if self.active not in self.tabs:
            if not self.tabs:
                assert self.context is not None
                self._register(await self.context.new_page())
            self.active = next(reversed(self.tabs))
        return self.tabs[self.active]

    def tab_id(self, page: Page) -> str:
        return self._register(page)


def _error_text(error: object) -> str:
    message = (getattr(error, "message", None) or str(error)).strip()
    name = getattr(error, "name", None) or "Error"
    return f"{name}: {message.splitlines()[0][:300]}" if message else name


@atexit.register
def _close_all() -> None:
    """Close this process's browsers at exit (the driver would kill them; this also clears their launchers' files)."""
    for session in list(_open_sessions):
        try:
            session.close()
        except Exception:
            pass
