"""Test support for the web tools: the fixture site on 127.0.0.1 and worker contexts, each with its own browser.

Test modules import the fixtures they use: `from web_fixtures.server import site, web_settings, make_ctx`.
The site is on the host's loopback, which a task's browser reaches only when `sandbox.network` lists it:
web_settings list 127.0.0.1 (the browser then goes through the egress proxy, as a task's would).
"""
from __future__ import annotations

import functools
import http.server
import json
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Iterator

import pytest

from configs import load_settings
from worker.tools.base import ToolContext
from worker.tools.web import WebExecuteJsArgs, WebScanArgs, browser_of, web_execute_js, web_scan
from worker.types import ToolResult
from worker.web import WebSession

ROOT = Path(__file__).parent
SITE_NETWORK = {"sandbox.network": ["127.0.0.1"]}  # the fixture site's host: what a test's sandbox.network lists


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Static files, plus /slow?ms=N: a JSON answer after N milliseconds (a slow API)."""

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        if url.path != "/slow":
            return super().do_GET()
        delay = int(urllib.parse.parse_qs(url.query).get("ms", ["500"])[0])
        time.sleep(delay / 1000)
        body = json.dumps({"count": 3, "delay_ms": delay}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def serve(directory: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_port}"


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    server, url = serve(ROOT)
    yield url
    server.shutdown()


@pytest.fixture(scope="module")
def web_settings(tmp_path_factory):
    return load_settings({"home": str(tmp_path_factory.mktemp("web-home")), **SITE_NETWORK})


@pytest.fixture
def make_ctx(tmp_path, web_settings):
    """A factory of task contexts (each starts its own browser at its first web call); their cleanup runs at the
    end of the test."""
    made: list[ToolContext] = []

    def make(name: str = "w", settings=None) -> ToolContext:
        workdir = tmp_path / f"{name}-{len(made)}"
        workdir.mkdir()
        ctx = ToolContext(f"task-{name}", workdir, settings or web_settings, None)
        made.append(ctx)
        return ctx

    yield make
    for ctx in made:
        ctx.close()


def js(ctx: ToolContext, script: str, **options) -> ToolResult:
    return web_execute_js(ctx, WebExecuteJsArgs(script=script, **options))


def scan(ctx: ToolContext, **options) -> ToolResult:
    return web_scan(ctx, WebScanArgs(**options))


def session(ctx: ToolContext) -> WebSession:
    """The task's browser session, which a web call of the test has opened."""
    opened = browser_of(ctx)
    assert opened is not None, f"{ctx.task_id}: no web call opened a browser"
    return opened


def goto(ctx: ToolContext, url: str) -> ToolResult:
    result = js(ctx, f"location.href = {url!r}")
    assert result.ok and "navigated to" in result.output, result.output
    return result
