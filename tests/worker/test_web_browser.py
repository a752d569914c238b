"""The node browser: shared by workers (and processes), isolated per worker, relaunched, stopped, or missing."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from configs import load_settings
from web_fixtures.server import goto, js, scan
from worker.tools import REGISTRY
from worker.tools.base import ToolContext
from worker.web.browser import pid_alive
from worker.web.browser_context import TABS_LOST


def browser_state(settings) -> dict:
    return json.loads((settings.home_dir / "browser" / "state.json").read_text())


def own_ctx(tmp_path: Path, settings, name: str) -> ToolContext:
    workdir = tmp_path / name
    workdir.mkdir()
    return ToolContext(f"task-{name}", workdir, settings, None)


def finish(ctx: ToolContext) -> None:
    ctx.close()


def test_workers_share_one_browser_but_not_cookies_storage_or_tabs(make_ctx, site, web_settings):
    alice, bob = make_ctx("alice"), make_ctx("bob")
    goto(alice, f"{site}/index.html")
    goto(bob, f"{site}/index.html")
    js(alice, "document.cookie = 'who=alice; path=/'; localStorage.setItem('cart', 'tomatoes'); 1", no_monitor=True)
    assert js(alice, "document.cookie", no_monitor=True).output == "value: who=alice"
    assert js(bob, "document.cookie", no_monitor=True).output == "value: "
    assert js(bob, "localStorage.getItem('cart')", no_monitor=True).output == "value: null"
    js(alice, "document.querySelector('#open-details').click()")
    deadline = time.monotonic() + 10  # the popup's target can be announced after the click's report on a busy machine
    while "t2" not in scan(alice, tabs_only=True).output and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "t2" in scan(alice, tabs_only=True).output and "t2" not in scan(bob, tabs_only=True).output
    pids = {alice.web.info.pid, bob.web.info.pid, browser_state(web_settings)["pid"]}
    assert len(pids) == 1


def test_worker_processes_on_one_node_share_the_browser(make_ctx, site, web_settings, tmp_path):
    mine = make_ctx("parent")
    goto(mine, f"{site}/index.html")
    js(mine, "document.cookie = 'who=parent; path=/'; 1", no_monitor=True)
    child = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(Path(__file__).parents[1])!r})
        from pathlib import Path
        from configs import load_settings
        from worker.tools.base import ToolContext
        from web_fixtures.server import goto, js
        settings = load_settings({{"home": {str(web_settings.home_dir)!r}}})
        ctx = ToolContext("child", Path({str(tmp_path)!r}), settings, None)
        goto(ctx, {f"{site}/details.html"!r})
        cookie = js(ctx, "document.cookie", no_monitor=True).output
        print(json.dumps({{"pid": ctx.web.info.pid, "cookie": cookie}}))
        ctx.close()
    """)
    run = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen == {"pid": browser_state(web_settings)["pid"], "cookie": "value: "}
    assert pid_alive(seen["pid"])  # the child's exit did not stop the browser we still use
    assert js(mine, "document.cookie", no_monitor=True).output == "value: who=parent"


def test_a_killed_browser_is_relaunched_and_workers_are_told_their_tabs_are_gone(tmp_path, site):
    settings = load_settings({"home": str(tmp_path / "home")})
    first, second = own_ctx(tmp_path, settings, "first"), own_ctx(tmp_path, settings, "second")
    try:
        goto(first, f"{site}/index.html")
        goto(second, f"{site}/details.html")
        old = browser_state(settings)
        os.kill(old["pid"], signal.SIGKILL)
        deadline = time.monotonic() + 10
        while pid_alive(old["pid"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        after = scan(first, tabs_only=True)
        assert after.ok and after.output.startswith(TABS_LOST)
        assert "*t1 '' about:blank" in after.output  # a fresh blank tab
        new = browser_state(settings)
        assert new["pid"] != old["pid"] and pid_alive(new["pid"]) and not Path(old["profile"]).exists()
        told = js(second, "location.href", no_monitor=True)
        assert told.output.startswith(TABS_LOST) and told.output.endswith("value: about:blank")
        goto(second, f"{site}/details.html")
        assert "Tomato care sheet" in scan(second, text_only=True).output
        assert not scan(second, tabs_only=True).output.startswith("note:")  # told once
    finally:
        finish(first)
        finish(second)


def test_the_browser_stops_with_its_last_worker_and_stale_leases_do_not_hold_it(tmp_path, site):
    settings = load_settings({"home": str(tmp_path / "home")})
    first, second = own_ctx(tmp_path, settings, "first"), own_ctx(tmp_path, settings, "second")
    assert scan(first, tabs_only=True).ok and scan(second, tabs_only=True).ok
    state = browser_state(settings)
    dead = subprocess.Popen(["true"])
    dead.wait()
    (settings.home_dir / "browser" / "leases" / f"{dead.pid}-stale").write_text("{}")  # a worker that died
    finish(first)
    assert pid_alive(state["pid"])
    finish(second)
    assert not pid_alive(state["pid"])
    assert not Path(state["profile"]).exists()
    assert not (settings.home_dir / "browser" / "state.json").exists()
    assert list((settings.home_dir / "browser" / "leases").iterdir()) == []
    finish(second)  # cleanup twice is harmless


def test_without_a_browser_both_tools_answer_one_line_and_the_others_work(tmp_path, monkeypatch):
    monkeypatch.setenv("GA_CHROMIUM", str(tmp_path / "no-such-chromium"))
    settings = load_settings({"home": str(tmp_path / "home")})
    ctx = own_ctx(tmp_path, settings, "nobrowser")
    for result in (scan(ctx), js(ctx, "1 + 1")):
        assert not result.ok and "\n" not in result.output
        assert str(tmp_path / "no-such-chromium") in result.output and "apt-get install chromium" in result.output
    written = REGISTRY["file_write"].run(ctx, REGISTRY["file_write"].args(path="notes.txt", content="still fine"))
    assert written.ok and (ctx.workdir / "notes.txt").read_text() == "still fine"
    assert not (settings.home_dir / "browser" / "state.json").exists()


@pytest.mark.parametrize("name", ["web_scan", "web_execute_js"])
def test_the_web_tools_are_registered_with_small_schemas(name):
    schema = REGISTRY[name].schema()
    assert schema["function"]["name"] == name
    assert len(json.dumps(schema)) < 900  # roughly < 250 tokens each in the prompt
