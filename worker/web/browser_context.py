"""A worker's own browser context (cookies, storage, tabs) inside the node's shared Chromium.

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
from pathlib import Path
from typing import Any, Awaitable, Callable, Optional

import structlog
from playwright.async_api import Browser, BrowserContext, Dialog, Page, Playwright, ViewportSize, async_playwright
from playwright.async_api import Error as PlaywrightError

from worker.web import loop
from worker.web.browser import BrowserInfo, ExternalBrowser, NodeBrowser
from worker.web.chromium import find_chromium

log = structlog.get_logger("worker.web")
VIEWPORT: ViewportSize = {"width": 1280, "height": 800}
TABS_LOST = ("note: the browser had stopped and was restarted, so your tabs were lost;"
             " reopen pages with web_execute_js (location.href = '...').")


class TabError(ValueError):
    """A tab id the worker does not have; str() lists the open tabs."""


class _Connection:
    """This process's CDP connection to one node browser (web thread only)."""

    def __init__(self) -> None:
        self.browser: Optional[Browser] = None
        self.launch_id = ""
        self.serial = 0  # bumped on every (re)connect: contexts of an older connection are gone
        self.users: set[int] = set()

    async def connect(self, info: BrowserInfo) -> Browser:
        if self.browser and self.launch_id == info.launch_id and self.browser.is_connected():
            return self.browser
        if self.browser:
            await quietly(self.browser.close())  # a stale connection to a browser that died
        self.browser = await (await _driver()).chromium.connect_over_cdp(info.ws, timeout=20000)
        self.launch_id = info.launch_id
        self.serial += 1
        return self.browser

    async def shutdown(self) -> None:
        if self.browser:
            await quietly(self.browser.close())  # only disconnects: the browser belongs to the node
        self.browser = None


_playwright: Optional[Playwright] = None


async def _driver() -> Playwright:
    """The process's Playwright driver, kept for the life of the process (starting it costs about a second)."""
    global _playwright
    if _playwright is None:
        _playwright = await async_playwright().start()
    return _playwright


_connections: dict[str, _Connection] = {}
_open_sessions: "weakref.WeakSet[WebSession]" = weakref.WeakSet()


class WebSession:
    """One worker's view of the browser: an isolated context, numbered tabs, one of them active."""

    def __init__(self, settings: Any):
        self.external = bool(settings.web.cdp_url)
        if self.external:  # the person's browser: its default context (their logins), this worker's own tabs
            self.node: Any = ExternalBrowser(settings.web.cdp_url)
            self.key = settings.web.cdp_url
        else:
            binary = find_chromium(settings.web.chromium)  # ChromiumMissing: the tools answer with its message
            self.node = NodeBrowser(Path(settings.home_dir) / "browser", binary, settings.web.headless)
            self.key = str(self.node.root.resolve())
        self.script_timeout = float(settings.worker.code_timeout)
        self.info, self.lease = self.node.acquire()
        self.context: Optional[BrowserContext] = None
        self.context_serial: tuple[int, int] = (0, 0)
        self.tabs: dict[str, Page] = {}
        self.active = ""
        self.dialogs: list[str] = []  # dialogs answered since the last report
        self.errors: deque[tuple[float, str, str]] = deque(maxlen=50)  # (monotonic time, tab id, message): uncaught page errors
        self._next_tab = 1
        self.closed = False
        _open_sessions.add(self)

    # ---- sync API (any thread)
    def call(self, fn: Callable[..., Awaitable[Any]], *args: Any, timeout: float = 120.0) -> tuple[str, Any]:
        """Make sure the browser and this context are up, then run `await fn(self, *args)` on the web thread.

        Returns (notice, result); the notice is non-empty when the browser had to be relaunched.
        """
        if self.closed:
            raise RuntimeError("this web session was closed")
        info = self.node.current()
        if info is None:
            info = self.node.ensure()  # relaunch (or pick up another worker's relaunch)
        self.info = info
        return loop.run(self._call(info, fn, args), timeout)

    def close(self) -> None:
        """Close this worker's context; the node browser stops when its last worker is gone."""
        if self.closed:
            return
        self.closed = True
        _open_sessions.discard(self)
        try:
            loop.run(self._detach(), timeout=30)
        except Exception as exc:  # the browser may already be gone; the lease must still be released
            log.warning("web_close_failed", error=str(exc))
        self.node.release(self.lease)

    # ---- web thread
    async def _call(self, info: BrowserInfo, fn: Callable[..., Awaitable[Any]], args: tuple) -> tuple[str, Any]:
        notice = await self._attach(info)
        return notice, await fn(self, *args)

    async def _attach(self, info: BrowserInfo) -> str:
        conn = _connections.setdefault(self.key, _Connection())
        browser = await conn.connect(info)
        conn.users.add(id(self))
        if self.context is not None and self.context_serial == (id(conn), conn.serial):
            return ""
        lost = self.context is not None
        self.tabs.clear()
        self.active = ""
        self._next_tab = 1
        self.context_serial = (id(conn), conn.serial)
        if self.external:  # share the person's context (logged-in sites work); only our tabs and their popups
            self.context = browser.contexts[0] if browser.contexts else await browser.new_context()
        else:
            self.context = await browser.new_context(viewport=VIEWPORT, bypass_csp=True)
            self.context.on("page", self._adopt)
        self._register(await self.context.new_page())
        return TABS_LOST if lost else ""

    async def _detach(self) -> None:
        if self.context is not None:
            if self.external:  # close what this worker opened; the person's tabs and browser stay
                for page in list(self.tabs.values()):
                    await quietly(page.close())
            else:
                await quietly(self.context.close())
            self.context = None
        conn = _connections.get(self.key)
        if conn:
            conn.users.discard(id(self))
            if not conn.users:
                del _connections[self.key]
                await conn.shutdown()

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


async def quietly(awaitable: Awaitable[Any]) -> None:
    try:
        await awaitable
    except (PlaywrightError, asyncio.CancelledError, ConnectionError):
        pass


def _error_text(error: Any) -> str:
    message = (getattr(error, "message", None) or str(error)).strip()
    name = getattr(error, "name", None) or "Error"
    return f"{name}: {message.splitlines()[0][:300]}" if message else name


@atexit.register
def _close_all() -> None:
    """Release this process's leases at exit so the node browser is not kept alive by a dead worker."""
    for session in list(_open_sessions):
        try:
            session.close()
        except Exception:
            pass
