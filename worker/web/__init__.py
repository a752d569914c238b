"""A real browser for the web tools: each task its own Chromium, inside the task's sandbox, over a pipe.

    session = WebSession(browser_for(ctx, policy_of), script_timeout)  # which browser the task gets (below)
    session.close()                                                      # its context and browser go

The task's session is the web tools' own state (worker/tools/web.py's `Browser`): opened at the first web call,
closed at the task's end.

Which browser: with `web.cdp_url` the person's own (an opt-in of their config, warned once); with
`sandbox.mode: off` Chromium as it is (warned once); otherwise Chromium in the task's sandbox, the policy
`policy_of(ctx, env)` returns (the one code_run's scripts get), or a one-line refusal where it cannot be.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Union

import structlog
from playwright.async_api import Error as PlaywrightError

from worker import sandbox
from worker.web import launch
from worker.web.browser import BrowserStartError, ExternalBrowser, TaskBrowser
from worker.web.browser_context import TabError, WebSession
from worker.web.chromium import ChromiumMissing, find_chromium
from worker.web.execjs import ScriptError, execute
from worker.web.launch import BrowserRefused
from worker.web.scan import web_scan

if TYPE_CHECKING:
    from worker.tools.base import ToolContext

__all__ = ["BrowserRefused", "BrowserStartError", "ChromiumMissing", "PlaywrightError", "ScriptError", "TabError", "WebSession",
           "browser_for", "execute", "web_scan"]
log = structlog.get_logger("worker.web")
PolicyOf = Callable[["ToolContext", dict[str, str]], sandbox.Policy]
_warned: set[str] = set()


def browser_for(ctx: ToolContext, policy_of: PolicyOf) -> Union[TaskBrowser, ExternalBrowser]:
    settings = ctx.settings
    if settings.web.cdp_url:
        _warn_once("web_own_browser", "the web tools drive your own browser (web.cdp_url): outside any sandbox, "
                   "with every login of its profile")
        return ExternalBrowser(settings.web.cdp_url)
    binary = find_chromium(settings.web.chromium)
    if settings.sandbox.mode == "off":
        _warn_once("web_unsandboxed", "the browser runs unsandboxed (sandbox.mode: off): pages it opens can reach "
                   "every host, and file:// every file this user can read")
        return TaskBrowser(launch.unsandboxed(binary, settings))
    if settings.sandbox.network == "open":
        _warn_once("web_network_open", "the browser shares the host's network (sandbox.network: open): pages can "
                   "reach anything, loopback services included")
    policy = policy_of(ctx, {**launch.browser_env(), **{k: str(v) for k, v in ctx.env.items()}})  # GA_RUN_DIR...
    return TaskBrowser(launch.sandboxed(binary, policy, settings, ctx.workdir.resolve()))


def _warn_once(event: str, note: str) -> None:
    if event not in _warned:  # once a process: a fan-out's tasks would repeat it
        _warned.add(event)
        log.warning(event, note=note)
