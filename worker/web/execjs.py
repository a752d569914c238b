"""web_execute_js's browser half: run a script in the active tab, return its value and what it changed."""
from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Optional

from playwright.async_api import CDPSession, Page, Request, Response
from playwright.async_api import Error as PlaywrightError

from memory_shared.jsontypes import JSONObject
from worker.web.browser_context import WebSession, quietly
from worker.web.scan import page_title

SETTLE_MIN, SETTLE_QUIET, SETTLE_MAX = 0.3, 0.25, 3.0  # seconds: how long to watch for effects of the script
NAVIGATION_TIMEOUT = 15000  # ms to wait for a page the script navigated to
GONE = ("context was destroyed", "navigated or closed", "target closed", "has been closed", "cannot find context")


class ScriptError(Exception):
    """The script threw (or did not parse, or timed out); str() is the one-line JavaScript error."""


@dataclass
class Outcome:
    value: object = None  # the JSON value the script gave
    changes: list[str] = field(default_factory=list)


@lru_cache(maxsize=2)
def _js(name: str) -> str:
    return Path(__file__).with_name(name).read_text(encoding="utf-8")


async def execute(session: WebSession, script: str, switch_tab_id: Optional[str], no_monitor: bool) -> Outcome:
    page = await session.page(switch_tab_id)
    tab_id, started = session.active, time.monotonic()
    if no_monitor:
        outcome = Outcome(await run_script(page, script, session.script_timeout))
        outcome.changes += _drain_dialogs(session)
        return outcome
    before_url, before_title, before_tabs = page.url, await page_title(page), set(session.tabs)
    watch = _Watch(page)
    try:
        await quietly(page.evaluate(_js("monitor.js")))
        outcome = Outcome()
        try:
            outcome.value = await run_script(page, script, session.script_timeout)
        except _Gone:
            watch.urls.append(page.url)
        report = await _settle(page, watch)
    finally:
        watch.stop()
    outcome.changes = await _describe(session, page, tab_id, before_url, before_title, before_tabs, watch, report, started)
    return outcome


class _Watch:
    """What the page loads while the script's effects play out: main-frame navigations (with their HTTP
    status or network failure) and fetch/XHR requests still in flight (settling waits for them)."""

    def __init__(self, page: Page):
        self.page, self.urls, self.status, self.failure = page, [], 0, ""
        self.pending: set[Request] = set()
        page.on("request", self._request)  # one call per event: Page.on's overloads want the event's literal name
        page.on("response", self._response)
        page.on("requestfailed", self._failed)
        page.on("requestfinished", self._finished)

    def _main(self, request: Request) -> bool:
        return request.is_navigation_request() and request.frame == self.page.main_frame

    def _ours(self, request: Request) -> bool:
        """A main-frame navigation that started while this watch ran (a late event of an earlier one is not)."""
        return self._main(request) and request.url in self.urls

    def _request(self, request: Request) -> None:
        if self._main(request):
            self.urls.append(request.url)
        elif request.resource_type in ("fetch", "xhr"):
            self.pending.add(request)

    def _response(self, response: Response) -> None:
        if self._ours(response.request):
            self.status = response.status

    def _finished(self, request: Request) -> None:
        self.pending.discard(request)

    def _failed(self, request: Request) -> None:
        self.pending.discard(request)
        if self._ours(request):
            self.failure = f"{request.failure or 'failed'} loading {request.url}"

    def stop(self) -> None:
        self.page.remove_listener("request", self._request)
        self.page.remove_listener("response", self._response)
        self.page.remove_listener("requestfailed", self._failed)
        self.page.remove_listener("requestfinished", self._finished)


class _Gone(Exception):
    """The script's document went away while it ran (it navigated or closed the tab)."""


async def run_script(page: Page, script: str, timeout: float) -> object:
    """Evaluate like a console: the last expression's value, top-level await, or a function body with `return`."""
    cdp = await page.context.new_cdp_session(page)
    try:
        result = await _evaluate(cdp, script, timeout, repl=True)
        if "exceptionDetails" in result and "Illegal return statement" in _exception_text(result):
            result = await _evaluate(cdp, f"(async () => {{\n{script}\n}})()", timeout, repl=False)
        if "exceptionDetails" in result:
            raise ScriptError(_exception_text(result))
        return await _json_safe(cdp, result["result"])
    except PlaywrightError as exc:
        text = str(exc)
        if any(marker in text.lower() for marker in GONE):
            raise _Gone() from None
        if "Internal error" in text:  # Runtime.evaluate's own timeout terminated a busy script
            raise ScriptError(f"the script ran longer than {timeout:.0f}s and was stopped") from None
        raise
    finally:
        await quietly(cdp.send("Runtime.releaseObjectGroup", {"objectGroup": "ga"}))
        await quietly(cdp.detach())


async def _evaluate(cdp: CDPSession, expression: str, timeout: float, repl: bool) -> JSONObject:
    """Runtime.evaluate's result, as the browser sent it."""
    params = {"expression": expression, "replMode": repl, "awaitPromise": True, "userGesture": True,
              "objectGroup": "ga", "timeout": int(timeout * 1000), "allowUnsafeEvalBlockedByCSP": True}
    try:
        return await asyncio.wait_for(cdp.send("Runtime.evaluate", params), timeout + 1)
    except asyncio.TimeoutError:
        raise ScriptError(f"the script did not finish in {timeout:.0f}s (a promise that never settles?)") from None


def _exception_text(result: JSONObject) -> str:
    details = result["exceptionDetails"]
    exception = details.get("exception") or {}
    text = exception.get("description") or (json.dumps(exception["value"]) if "value" in exception else "") \
        or details.get("text", "error")
    first = text.strip().splitlines()[0] if text.strip() else "error"
    where = f" (line {details['lineNumber']})" if details.get("lineNumber") else ""  # 0-based, after one wrapper line
    return f"{first}{where}"[:500]


async def _json_safe(cdp: CDPSession, remote: JSONObject) -> object:
    if "value" in remote:
        return remote["value"]
    if "unserializableValue" in remote:
        return remote["unserializableValue"]
    if remote.get("type") == "undefined" or "objectId" not in remote:
        return None
    converted = await cdp.send("Runtime.callFunctionOn", {"functionDeclaration": _js("jsonsafe.js"), "objectId": remote["objectId"],
                                                          "returnByValue": True, "objectGroup": "ga"})
    if "exceptionDetails" in converted:
        return remote.get("description", "[unserializable value]")
    return converted["result"].get("value")


async def _settle(page: Page, watch: _Watch) -> Optional[JSONObject]:
    """Watch the page until the script's effects calm down (no DOM change for a moment, no fetch in flight);
    the monitor's report, or None if the page was replaced or closed."""
    start = time.monotonic()
    while time.monotonic() - start < SETTLE_MAX:
        if page.is_closed():
            return None
        if watch.urls:
            try:
                await page.wait_for_load_state("load", timeout=NAVIGATION_TIMEOUT)
            except PlaywrightError:
                pass
            return None
        try:
            quiet = await page.evaluate("() => window.__gaMon ? (performance.now() - window.__gaMon.last) / 1000 : -1")
        except PlaywrightError:
            await asyncio.sleep(0.05)
            continue
        if quiet < 0:  # the monitor is gone: a new document replaced the old one
            watch.urls.append(page.url)
            return None
        if time.monotonic() - start >= SETTLE_MIN and quiet >= SETTLE_QUIET and not watch.pending:
            break
        await asyncio.sleep(0.05)
    try:
        return await page.evaluate("() => { const m = window.__gaMon; if (!m) return null; m.obs.disconnect();"
                                   " delete window.__gaMon; return {count: m.count, messages: m.messages}; }")
    except PlaywrightError:
        return None


async def _describe(session: WebSession, page: Page, tab_id: str, before_url: str, before_title: str,
                    before_tabs: set[str], watch: _Watch, report: Optional[JSONObject],
                    started: float) -> list[str]:
    changes: list[str] = []
    if page.is_closed():
        changes.append(f"tab {tab_id} closed; the active tab is now {session.active or 'none'}")
    else:
        url, title = page.url, await page_title(page)
        navigated = bool(watch.urls) or report is None
        if watch.failure:
            changes.append(f"navigation failed: {watch.failure}")
        elif navigated:
            status = f", HTTP {watch.status}" if watch.status >= 400 else ""
            changes.append(f"navigated to {url} (title {title[:100]!r}{status})")
        elif url != before_url:
            changes.append(f"URL changed to {url} without a page load")
        if title != before_title and not navigated:
            changes.append(f"title changed to {title[:100]!r}")
    new_tabs = [t for t in session.tabs if t not in before_tabs]
    for new_id in new_tabs:
        tab = session.tabs[new_id]
        try:
            await tab.wait_for_load_state("domcontentloaded", timeout=5000)
        except PlaywrightError:
            pass
        changes.append(f"new tab {new_id} {(await page_title(tab))[:80]!r} {tab.url}")
    if new_tabs:
        session.active = new_tabs[-1]  # as in a browser, the tab a click opened is in front
        changes[-1] += " (now the active tab)"
    if report is not None:
        if report["count"]:
            changes.append(f"{report['count']} DOM mutations")
        changes += [f"message appeared: {text!r}" for text in report["messages"]]
    changes += _drain_dialogs(session)
    changes += [f"uncaught error in {where}: {message}" for at, where, message in session.errors if at >= started]
    return changes


def _drain_dialogs(session: WebSession) -> list[str]:
    dialogs = [f"dialog {text}" for text in session.dialogs]
    session.dialogs.clear()
    return dialogs
