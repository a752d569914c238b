"""A task's own browser: separate from every other task's, inside the task's sandbox, started again when it died,
gone (processes and files) at the task's end or cancel, refused in one line where it cannot be sandboxed."""
from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from configs import load_settings
from web_fixtures.server import SITE_NETWORK, goto, js, scan, session
from worker.tools import REGISTRY
from worker.tools.base import ToolContext
from worker.tools.web import browser_of
from worker.web.browser_context import TABS_LOST

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


def own_ctx(tmp_path: Path, settings, name: str) -> ToolContext:
    workdir = tmp_path / name
    workdir.mkdir()
    return ToolContext(f"task-{name}", workdir, settings, None)


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def wait_until(predicate, seconds: float = 15) -> bool:
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.05)
    return bool(predicate())


def test_each_task_has_its_own_browser_cookies_storage_and_tabs(make_ctx, site):
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
    mine, theirs = session(alice).processes(), session(bob).processes()
    assert mine and theirs and not set(mine) & set(theirs)


def test_the_browser_runs_in_bubblewrap_over_a_pipe_with_its_profile_in_the_sandboxs_tmp(make_ctx):
    ctx = make_ctx("boxed")
    assert js(ctx, "1 + 1", no_monitor=True).output == "value: 2"
    first, *rest = session(ctx).processes()
    assert cmdline(first).startswith(shutil.which("bwrap") or "bwrap") and "--unshare-net" in cmdline(first)
    browsers = [pid for pid in rest if "--user-data-dir=" in cmdline(pid)]
    assert browsers, [cmdline(pid)[:200] for pid in rest]
    for pid in browsers:
        line = cmdline(pid)
        assert "--user-data-dir=/tmp/ga-profile" in line and "--remote-debugging-port" not in line
    assert not Path("/tmp/ga-profile").exists()  # the host's /tmp: the profile is in the sandbox's own


def listening_sockets(pid: int) -> list[str]:
    """The TCP sockets process `pid` listens on, as local addresses (hex, from its network namespace's tables)."""
    owned = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            owned.add(target[8:-1])
    found = []
    for table in ("tcp", "tcp6"):
        try:
            rows = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] == "0A" and fields[9] in owned:  # LISTEN
                found.append(fields[1])
    return found


def my_browsers() -> list[int]:
    """The Chromium processes below this test process (however they were started)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int(Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], list(children.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return [pid for pid in found if "--user-data-dir=" in cmdline(pid)]


def test_the_browser_listens_on_no_tcp_port(tmp_path):
    ctx = own_ctx(tmp_path, load_settings({"home": str(tmp_path / "home")}), "quiet")  # the default network
    try:
        assert js(ctx, "document.body.innerHTML = '<p>up</p>'; 1", no_monitor=True).ok
        browsers = my_browsers()
        assert browsers
        assert {pid: listening_sockets(pid) for pid in browsers if listening_sockets(pid)} == {}
    finally:
        ctx.close()


def test_with_a_host_list_only_the_relay_to_the_egress_proxy_listens(make_ctx, site):
    from worker import egress

    ctx = make_ctx("relayed")
    goto(ctx, f"{site}/index.html")
    browsers = my_browsers()
    assert browsers
    relay = f"0100007F:{egress.PORT:04X}"  # 127.0.0.1:3128 in the sandbox's own network namespace
    assert {pid: listening_sockets(pid) for pid in browsers if set(listening_sockets(pid)) - {relay}} == {}


async def _file_text(session, url: str) -> str:
    page = await session.context.new_page()  # a tab of its own: an error page of the last one cannot interrupt it
    try:
        await page.goto(url)
        return await page.inner_text("body")
    except Exception as exc:  # a file the sandbox does not have: Chromium's error, as the tool would see it
        return f"failed: {exc}"
    finally:
        await page.close()


def test_the_browser_sees_files_as_the_tasks_sandbox_does(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("FAKE_KEY_browser_view\n")
    monkeypatch.setenv("HOME", str(home))  # whose secrets the sandbox hides
    settings = load_settings({"home": str(tmp_path / "ga-home")})
    (settings.home_dir / "sessions").mkdir(parents=True)
    (settings.home_dir / "sessions" / "old.json").write_text('{"task": "FAKE_SESSION_browser_view"}')
    ctx = own_ctx(tmp_path, settings, "files")
    (ctx.workdir / "notes.txt").write_text("the task's own notes")
    try:
        assert js(ctx, "1", no_monitor=True).ok
        seen = {name: session(ctx).call(_file_text, f"file://{path}")[1] for name, path in [
            ("key", home / ".ssh" / "id_rsa"), ("session", settings.home_dir / "sessions" / "old.json"),
            ("notes", ctx.workdir / "notes.txt")]}
    finally:
        ctx.close()
    assert "FAKE_KEY" not in seen["key"] and "FAKE_SESSION" not in seen["session"], seen
    assert seen["notes"] == "the task's own notes"


@pytest.mark.parametrize(("network", "reached"), [("open", True), ("off", False)])
def test_the_network_modes_reach_the_host_or_nothing(tmp_path, site, network, reached):
    ctx = own_ctx(tmp_path, load_settings({"home": str(tmp_path / "home"), "sandbox.network": network}), network)
    try:
        result = js(ctx, f"location.href = '{site}/details.html'")
        assert ("navigated to" in result.output) is reached, result.output
        assert ("Tomato care sheet" in scan(ctx, text_only=True).output) is reached
    finally:
        ctx.close()


def test_a_killed_browser_is_started_again_and_the_task_is_told_its_tabs_are_gone(tmp_path, site):
    ctx = own_ctx(tmp_path, load_settings({"home": str(tmp_path / "home"), **SITE_NETWORK}), "crash")
    try:
        goto(ctx, f"{site}/index.html")
        old = session(ctx).processes()
        main = next(pid for pid in old if "--user-data-dir=" in cmdline(pid) and "--type=" not in cmdline(pid))
        os.kill(main, signal.SIGKILL)  # the browser crashes (its sandbox ends with it)
        assert wait_until(lambda: not any(alive(pid) for pid in old)), "the crashed browser's sandbox lived on"
        after = scan(ctx, tabs_only=True)
        assert after.ok and after.output.startswith(TABS_LOST)
        assert "*t1 '' about:blank" in after.output  # a fresh blank tab
        assert session(ctx).processes() and not set(session(ctx).processes()) & set(old)
        goto(ctx, f"{site}/details.html")
        assert "Tomato care sheet" in scan(ctx, text_only=True).output
        assert not scan(ctx, tabs_only=True).output.startswith("note:")  # told once
    finally:
        ctx.close()


def test_at_the_tasks_end_nothing_of_its_browser_is_left(tmp_path):
    settings = load_settings({"home": str(tmp_path / "home")})
    ctx = own_ctx(tmp_path, settings, "ending")
    assert js(ctx, "1", no_monitor=True).ok
    pids = session(ctx).processes()
    launcher = session(ctx).source.launch.folder
    assert pids and launcher.is_dir()
    assert (ctx.workdir / "ga.yaml").exists()  # bubblewrap's mount point while the browser runs
    ctx.close()
    assert [cmdline(pid)[:300] for pid in pids if alive(pid)] == []
    assert not launcher.exists()
    assert sorted(p.name for p in ctx.workdir.iterdir()) == []  # the empty mount points went with it
    ctx.close()  # cleanup twice is harmless


def test_a_cancelled_task_loses_its_browser_at_once(tmp_path):
    ctx = own_ctx(tmp_path, load_settings({"home": str(tmp_path / "home")}), "cancelled")
    try:
        assert js(ctx, "1", no_monitor=True).ok
        pids = session(ctx).processes()
        for kill in list(ctx.kill):  # what the loop's cancel() does from another thread
            kill()
        assert wait_until(lambda: not any(alive(pid) for pid in pids)), "a browser outlived its task's cancel"
    finally:
        ctx.close()


def test_where_the_sandbox_cannot_be_built_the_web_tools_refuse_in_one_line(tmp_path):
    refused = load_settings({"home": str(tmp_path / "home"), "sandbox.bwrap": str(tmp_path / "no-bwrap")})
    ctx = own_ctx(tmp_path, refused, "nobox")
    for result in (scan(ctx), js(ctx, "1 + 1")):
        assert not result.ok and "\n" not in result.output, result.output
        assert result.output.startswith("error: the web tools refused: no sandbox: bubblewrap not found")
    assert browser_of(ctx) is None
    windowed = own_ctx(tmp_path, load_settings({"home": str(tmp_path / "home"), "web.headless": False}), "windowed")
    result = js(windowed, "1")
    assert not result.ok and "web.headless: false needs a display" in result.output and "\n" not in result.output
    off = own_ctx(tmp_path, load_settings({"home": str(tmp_path / "home"), "sandbox.mode": "off"}), "off")
    try:  # the person turned the sandbox off: the browser runs as it is
        assert js(off, "1 + 1", no_monitor=True).output == "value: 2"
        assert not any(cmdline(pid).startswith(shutil.which("bwrap") or "bwrap") for pid in session(off).processes())
    finally:
        off.close()


def test_without_a_browser_both_tools_answer_one_line_and_the_others_work(tmp_path, monkeypatch):
    monkeypatch.setenv("GA_CHROMIUM", str(tmp_path / "no-such-chromium"))
    settings = load_settings({"home": str(tmp_path / "home")})
    ctx = own_ctx(tmp_path, settings, "nobrowser")
    for result in (scan(ctx), js(ctx, "1 + 1")):
        assert not result.ok and "\n" not in result.output
        assert str(tmp_path / "no-such-chromium") in result.output and "apt-get install chromium" in result.output
    written = REGISTRY["file_write"].run(ctx, REGISTRY["file_write"].args(path="notes.txt", content="still fine"))
    assert written.ok and (ctx.workdir / "notes.txt").read_text() == "still fine"


@pytest.mark.parametrize("name", ["web_scan", "web_execute_js"])
def test_the_web_tools_are_registered_with_small_schemas(name):
    schema = REGISTRY[name].schema()
    assert schema["function"]["name"] == name
    assert len(json.dumps(schema)) < 900  # roughly < 250 tokens each in the prompt
