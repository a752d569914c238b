"""web_scan and web_execute_js: a real Chromium of the task's own, inside its sandbox (see worker.web).

worker.web and Playwright are imported at the first web call, not with the tools: most workers never
browse, and the import costs ~60 ms in every worker process.
"""
from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Awaitable, Callable, Optional, TypeVar

from pydantic import BaseModel, Field

from worker import sandbox
from worker.context import cut_head_tail, output_cap
from worker.paths import PathError, open_checked, resolve_read
from worker.sandbox_limits import Limits
from worker.tools.base import FunctionTool, ToolContext, ToolState, optional_str
from worker.tools.code import task_policy
from worker.types import ToolResult

if TYPE_CHECKING:  # Playwright, loaded at the first web call
    from worker.web import WebSession

PREVIEW_CHARS = 300


class WebScanArgs(BaseModel):
    tabs_only: bool = False
    switch_tab_id: Optional[str] = Field(None, json_schema_extra=optional_str)
    text_only: bool = False
    page: int = Field(1, ge=1, le=10000, description="a long page comes in parts; the first line says how many")


class WebExecuteJsArgs(BaseModel):
    script: str = Field(description="JS, run like a console line (last value, await, or return); or a .js file path")
    save_to_file: Optional[str] = Field(None, description="write the value to this file, get a preview",
                                        json_schema_extra=optional_str)
    switch_tab_id: Optional[str] = Field(None, json_schema_extra=optional_str)
    no_monitor: bool = Field(False, description="skip the change report (pure reads)")


def _web():  # unannotated: pyright infers Module("worker.web") and checks every use of it
    """worker.web, imported at the first web call."""
    from worker import web  # Playwright: ~100 modules, ~60 ms, in every worker process that never browses

    return web


def _failure(message: str) -> ToolResult:
    return ToolResult(message, ok=False, evidence=False)


class Browser(ToolState):
    """The task's browser session (worker.web): opened at the first web call, again if it died; closed at the
    task's end, and killed at once by the task's cancel, even mid-call."""

    def __init__(self, ctx: ToolContext) -> None:
        super().__init__(ctx)
        self.session: Optional[WebSession] = None

    def open(self) -> WebSession:
        """The session, opened on first use (ChromiumMissing / BrowserRefused / BrowserStartError)."""
        web = _web()

        session = self.session
        if session is None or session.closed:
            self._forget()
            session = web.WebSession(web.browser_for(self.ctx, browser_policy), float(self.ctx.settings.worker.code_timeout))
            self.session = session
            self.ctx.kill.append(session.kill)
        return session

    def close(self) -> None:
        session = self._forget()
        if session is not None:
            session.close()

    def _forget(self) -> Optional[WebSession]:
        session, self.session = self.session, None
        if session is not None and session.kill in self.ctx.kill:
            self.ctx.kill.remove(session.kill)
        return session


def browser_of(ctx: ToolContext) -> Optional[WebSession]:
    """The task's browser session if a web call opened one (and the task has not ended), else None."""
    browser = ctx.kept(Browser)
    return browser.session if browser is not None else None


Result = TypeVar("Result")


def _in_browser(ctx: ToolContext, fn: Callable[..., Awaitable[Result]], *args: object,
                timeout: float = 120.0) -> tuple[str, Result]:
    """Run `await fn(session, *args)` on the worker's browser session: (notice of lost tabs, result)."""
    return ctx.state(Browser).open().call(fn, *args, timeout=timeout)


def browser_policy(ctx: ToolContext, env: dict[str, str]) -> sandbox.Policy:
    """The sandbox of the task's browser: the one its code_run scripts get, without the model gateway (a page
    has no business calling models)."""
    return task_policy(ctx, env, None, Limits.of(ctx.settings.sandbox.limits))


def _guarded(run: Callable[[], ToolResult]) -> ToolResult:
    web = _web()

    try:
        return run()
    except web.ScriptError as exc:
        return _failure(f"error: the script threw {exc}")
    except (web.ChromiumMissing, web.BrowserRefused, web.BrowserStartError, web.TabError) as exc:
        return _failure(f"error: {exc}")
    except TimeoutError as exc:
        return _failure(f"error: {exc}")
    except web.PlaywrightError as exc:
        return _failure(f"error: browser: {str(exc).strip().splitlines()[0]}")


def web_scan(ctx: ToolContext, args: WebScanArgs) -> ToolResult:
    web = _web()

    def run() -> ToolResult:
        cap = output_cap(ctx.settings.context, "web_scan_text" if args.text_only else "web_scan_html", ctx.calls_in_turn)
        notice, result = _in_browser(ctx, web.web_scan, args.tabs_only, args.switch_tab_id, args.text_only, args.page, cap)
        head = "\n".join(filter(None, [notice, result["tabs"]]))
        if args.tabs_only:
            session = browser_of(ctx)
            return ToolResult(head, data={"tab": session.active if session is not None else ""})
        pages, number = result["pages"], result["page"]
        if number > pages:
            return _failure(f"error: no page {number}: the scan of {result['url']} has {pages} page{'s' * (pages > 1)};"
                            " call web_scan(page=1) or a smaller page number")
        stats = result["stats"]
        dropped = ", ".join(f"{stats[k]} {k}" for k in ("hidden", "offscreen", "covered") if stats[k])
        size = f"{len(result['content'])} of {result['raw']} chars" if pages == 1 else \
            f"this page {len(result['content'])} chars, all {pages} pages {result['total']} of {result['raw']}"
        summary = (f"--- {result['tab']} {result['url']} ({'text' if args.text_only else 'simplified HTML'}: {size};"
                   f" dropped: {dropped or 'nothing'}"
                   f"{'; ' + str(stats['collapsed']) + ' links/items collapsed' if stats['collapsed'] else ''})")
        paging = _paging_line(number, pages, args.text_only)
        lead = "\n".join(filter(None, [paging, head, summary]))
        body = cut_head_tail(result["content"] or "(the page shows nothing)", max(200, cap - len(lead) - 1))
        return ToolResult(f"{lead}\n{body}", data={"tab": result["tab"], "raw_chars": result["raw"], "page": number,
                                                  "pages": pages, "chars": len(result["content"]),
                                                  "total_chars": result["total"], "stats": stats})
    return _guarded(run)


WEB_SCAN = FunctionTool(
    "web_scan", "The open tabs and the active page simplified to what a person sees (hidden, covered and"
    " repeated navigation dropped; a long page comes in pages). Elements to act on carry sel=\"<css selector>\""
    " for document.querySelector in web_execute_js; a sel with ' >>> ' steps into a shadow root or frame: use $ga(sel).",
    WebScanArgs, web_scan)


def _paging_line(number: int, pages: int, text_only: bool) -> str:
    """The first line of a paged scan: where this page is and how to get the next."""
    if pages == 1:
        return ""
    more = "text_only=true, " if text_only else ""
    if number < pages:
        return f"main content: page {number} of {pages}; web_scan({more}page={number + 1}) for more"
    return f"main content: page {number} of {pages} (the last)"


def web_execute_js(ctx: ToolContext, args: WebExecuteJsArgs) -> ToolResult:
    web = _web()

    def run() -> ToolResult:
        try:
            source = _script_source(ctx, args.script)
            target = ctx.policy.check_write(args.save_to_file) if args.save_to_file else None  # worker/policy.py
        except (PathError, OSError) as exc:
            return _failure(f"error: {exc}")
        timeout = ctx.settings.worker.code_timeout + 60.0
        notice, outcome = _in_browser(ctx, web.execute, source, args.switch_tab_id, args.no_monitor, timeout=timeout)
        value = outcome.value if isinstance(outcome.value, str) else json.dumps(outcome.value, ensure_ascii=False)
        if target is not None:
            text = outcome.value if isinstance(outcome.value, str) else json.dumps(outcome.value, ensure_ascii=False, indent=2)
            try:  # checked before the browser ran: opened again without following what a script may have swapped since
                fd = open_checked(target, ctx.workdir, ctx.policy.writable[1:],
                                  os.O_WRONLY | os.O_CREAT | os.O_TRUNC, make_parents=True)
            except OSError as exc:
                return _failure(f"error: {args.save_to_file}: {exc}")
            with os.fdopen(fd, "wb") as handle:
                handle.write(text.encode("utf-8"))
            value = f"saved {len(text)} chars to {args.save_to_file}; preview: {text[:PREVIEW_CHARS]}"
        note = _network_note(ctx)
        changes = [f"{c} ({note})" if note and c.startswith("navigation failed") else c for c in outcome.changes]
        report = ("changes: " + "; ".join(changes)) if changes else ("" if args.no_monitor else "changes: none seen")
        cap = output_cap(ctx.settings.context, "web_execute_js", ctx.calls_in_turn)
        head = f"{notice}\n" if notice else ""
        body = cut_head_tail(value, max(200, cap - len(head) - len(report) - 8))
        return ToolResult(f"{head}value: {body}" + (f"\n{report}" if report else ""), data={"changes": outcome.changes})
    return _guarded(run)


WEB_EXECUTE_JS = FunctionTool(
    "web_execute_js", "Run JavaScript in the active tab (navigate with location.href='...'). Returns the value and"
    " what changed: navigation, new tabs, DOM mutations, messages, dialogs.", WebExecuteJsArgs, web_execute_js)


def _network_note(ctx: ToolContext) -> str:
    """What the task's network lets its browser reach, when that can be why a page did not load."""
    settings = ctx.settings
    network = settings.sandbox.network
    if settings.web.cdp_url or settings.sandbox.mode == "off" or network == "open":
        return ""
    if isinstance(network, list):
        return f"the browser reaches only the hosts in sandbox.network: {', '.join(network)}"
    return (f"the browser runs in the task's sandbox, whose network (sandbox.network: {network}) reaches no host;"
            " the person can list hosts in sandbox.network")


def _script_source(ctx: ToolContext, script: str) -> str:
    """The script itself, or the content of the workdir file it names."""
    text = script.strip()
    if "\n" in text or len(text) > 260 or not text:
        return script
    settings = ctx.settings.worker
    try:
        path = resolve_read(text, ctx.workdir, settings.allow_read, settings.allow_write)
    except PathError:
        if text.endswith(".js"):
            raise
        return script
    if path.is_file():
        with os.fdopen(open_checked(path, ctx.workdir, [*settings.allow_read, *settings.allow_write]), "rb") as handle:
            return handle.read().decode("utf-8")
    if text.endswith(".js") and " " not in text and "(" not in text:
        raise PathError(f"{text}: no such file in the worker's directory; write it first, or pass the JavaScript itself")
    return script
