"""web.cdp_url: the web tools in the person's own Chromium (started with --remote-debugging-port): the
worker sees the person's logins, works in its own tabs, and leaves the person's tabs and browser alone. It is
the person's opt-in: their config, the environment or a flag, never a project file a task could write; and it
is said once, as a warning."""
from __future__ import annotations

import asyncio
import http.server
import subprocess
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest
import structlog

from configs import ConfigError, load_settings
from web_fixtures.server import goto, js, scan
from worker.tools.base import ToolContext
from worker.web.chromium import CLOSED_NETWORK_FLAGS, find_chromium


class _Site(http.server.BaseHTTPRequestHandler):
    """/login sets a session cookie (as a person's log-in would); /whoami shows who the cookie says."""

    def do_GET(self) -> None:
        cookie = self.headers.get("Cookie", "")
        body = f"<title>{self.path}</title><p id=who>{cookie or 'nobody'}</p>".encode()
        self.send_response(200)
        if self.path == "/login":
            self.send_header("Set-Cookie", "session=alice; Path=/")
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture()
def site() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Site)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture()
def persons_browser(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen]]:
    """A Chromium the person started with a remote-debugging port, with their own profile."""
    profile = tmp_path / "profile"
    proc = subprocess.Popen([str(find_chromium(None)), "--headless", *CLOSED_NETWORK_FLAGS, f"--user-data-dir={profile}",
                             "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    port_file = profile / "DevToolsActivePort"
    deadline = time.monotonic() + 30
    while not (port_file.is_file() and port_file.read_text().strip()):
        assert time.monotonic() < deadline and proc.poll() is None, "chromium gave no DevTools port"
        time.sleep(0.1)
    yield f"http://127.0.0.1:{port_file.read_text().split()[0]}", proc
    proc.kill()
    proc.wait()


async def _persons_tabs(cdp_url: str, site: str, login: bool) -> list[str]:
    """What the person does and sees in their browser (a separate CDP client): log in, list tab URLs."""
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.connect_over_cdp(cdp_url)
        context = browser.contexts[0]
        if login:
            page = await context.new_page()
            await page.goto(f"{site}/login")
        urls = [page.url for page in context.pages]
        await browser.close()  # disconnects; the browser stays
        return urls


def test_a_worker_in_the_persons_browser_uses_their_login_and_only_its_own_tabs(tmp_path: Path, site: str,
                                                                                 persons_browser, monkeypatch) -> None:
    from worker import web

    monkeypatch.setattr(web, "_warned", set())  # as in a fresh process
    cdp_url, proc = persons_browser
    asyncio.run(_persons_tabs(cdp_url, site, login=True))
    settings = load_settings({"home": str(tmp_path / "home"), "web.cdp_url": cdp_url},
                             user_file=tmp_path / "n", project_file=tmp_path / "n")
    (tmp_path / "work").mkdir()
    ctx = ToolContext("task-w", tmp_path / "work", settings, None)
    with structlog.testing.capture_logs() as logs:
        goto(ctx, f"{site}/whoami")
        again = ToolContext("task-again", tmp_path / "work", settings, None)
        assert js(again, "1", no_monitor=True).ok
        again.close()
    warned = [entry for entry in logs if entry["event"] == "web_own_browser"]
    assert len(warned) == 1 and warned[0]["log_level"] == "warning", logs  # once a process, not once a task
    seen = js(ctx, "document.getElementById('who').textContent")
    assert seen.ok and "session=alice" in seen.output  # the person's logged-in session
    tabs = scan(ctx, tabs_only=True)
    assert "/whoami" in tabs.output and "/login" not in tabs.output  # the person's tab is not the worker's
    ctx.close()
    after = asyncio.run(_persons_tabs(cdp_url, site, login=False))
    assert any(url.endswith("/login") for url in after)  # the person's tab is still there
    assert not any(url.endswith("/whoami") for url in after)  # the worker closed its own
    assert proc.poll() is None  # and the browser still runs
    assert not (tmp_path / "home" / "browser").exists()  # no browser of ours was launched


@pytest.mark.parametrize("key", ["cdp_url: http://127.0.0.1:9222", "chromium: ./planted-chromium"])
def test_a_project_file_cannot_choose_the_browser(tmp_path: Path, key: str) -> None:
    project = tmp_path / "ga.yaml"
    project.write_text(f"web: {{{key}}}\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(user_file=tmp_path / "none.yaml", project_file=project, environ={})
    name = "web." + key.split(":")[0]
    assert str(caught.value).startswith(f"{project}:1: {name} is refused in a project file"), caught.value
    assert "~/.config/ga/config.yaml" in str(caught.value) and "\n" not in str(caught.value)
    user = tmp_path / "user.yaml"
    user.write_text(f"web: {{{key}}}\n")  # the person's own config may
    assert load_settings(user_file=user, project_file=tmp_path / "none.yaml", environ={}).web.model_dump(
        exclude_none=True).keys() >= {name.split(".")[1]}
