"""A real browser for the web tools: one Chromium per node shared over CDP, one isolated context per worker.

    session = session_for(ctx)   # lazily starts/joins the node browser; registers close_for on ctx.cleanup
    close_for(ctx)               # closes the worker's context; the browser stops with its last worker
"""
from __future__ import annotations

from typing import Any

from worker.web.browser import BrowserStartError
from worker.web.browser_context import TabError, WebSession
from worker.web.chromium import ChromiumMissing

__all__ = ["BrowserStartError", "ChromiumMissing", "TabError", "WebSession", "close_for", "session_for"]


def session_for(ctx: Any) -> WebSession:
    """The worker's browser session, opened on first use (ChromiumMissing / BrowserStartError if impossible)."""
    session = ctx.web
    if session is None or session.closed:
        session = ctx.web = WebSession(ctx.settings)
        ctx.cleanup.callback(close_for, ctx)
    return session


def close_for(ctx: Any) -> None:
    """End the worker's browser use (idempotent); the loop runs this at task end through ctx.cleanup."""
    session, ctx.web = ctx.web, None
    if session is not None:
        session.close()
