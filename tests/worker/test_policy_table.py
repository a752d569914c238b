"""The policy table (worker/policy.py, docs/sandbox.md): every actor that works for a task, against every resource
a task must not change or read, through the real actors: real bubblewrap, real Chromium, a real `ga run` for
nested runs, the real gateway over its socket.

Rows are actors (ACTORS). Each has what it can try: `write(place, path)` (make `path` hold PLANTED: overwrite
an existing file, create a missing one), `read(place, path) -> str` (what the task got back),
`read_env(place) -> str` (what it sees of ga's environment, which holds the model key) and
`reach(place, url, network) -> str` (send a request to `url` under that `sandbox.network`); an actor that
cannot do one of these says why in `NOT_APPLICABLE`, and that cell is listed as skipped with the reason (the
completeness test holds every actor x resource to a cell or a reason).

Columns are resources (RESOURCES), in the groups of issue 30: files outside the task, ga's state, secrets, the
network, other tasks, and the controls (the task's own file, a listed host) that every actor that can reach
them must reach, so no cell passes because the actor could do nothing at all.

The Place is `ga run`'s: the working directory is the project directory (a git checkout with a virtual
environment), its runs directory holds another run and this task's run, with a steer/ folder and another task's
working directory. It is made once for the module; before each cell every resource is put back as it was.
Browsers are kept for consecutive browser cells (one per network), the nested run is one `ga run` whose script
tries every cell at once (its outcome and the files' state right after it are what its cells check).
"""
from __future__ import annotations

import asyncio
import base64
import http.server
import json
import os
import shutil
import socket
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional
from urllib.parse import quote

import pytest
import yaml

from configs import load_settings
from memory_shared import MemoryStore
from tests.ga_support import run_ga
from worker import gateway
from worker.modelconfig import ModelConfig
from worker.scripted import ScriptedServer
from worker.taskcheck import TaskCheck, run_check
from worker.tools import REGISTRY, ToolContext
from worker.tools import web as web_tools
from worker.usage import Account
from worker.web import WebSession

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
ORIGINAL = "original content\n"
PLANTED = "planted by the task\n"
SECRET = "FAKE-SECRET-policy-table"
KEY = "FAKE-MODEL-KEY-policy-table-7781"  # the model key, in ga's own environment
KEY_ENV = "GA_TABLE_KEY"
PEER_MODEL = "peer-model-of-another-task"
LISTED = ["127.0.0.1"]  # sandbox.network of the network cells that list a host: the listener's, by its IP


# ---- the servers: a listener that counts what reaches it, and the task's model, which reflects its key ----

class _Listener(http.server.BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_GET(self) -> None:  # noqa: N802
        self._answer()

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._answer()

    def _answer(self) -> None:
        _Listener.seen.append(self.path)
        body = b"<title>listener</title><p>REACHED-THE-LISTENER</p>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


class _Upstream(http.server.BaseHTTPRequestHandler):
    """The task's model endpoint: a chat completion whose text reflects the Authorization header it got, in the
    forms an endpoint might (raw, base64, hex, URL- and JSON-encoded)."""

    auth: list[str] = []

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        auth = self.headers.get("Authorization", "")
        _Upstream.auth.append(auth)
        reflected = (f"raw {auth} b64 {base64.b64encode(auth.encode()).decode()} hex {auth.encode().hex()} "
                     f"url {quote(auth)} json {json.dumps(auth)}")
        body = json.dumps({"id": "x", "object": "chat.completion", "model": "m", "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": reflected}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def serve(handler: type[http.server.BaseHTTPRequestHandler]) -> http.server.ThreadingHTTPServer:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


# ---- the place ----

@dataclass
class Place:
    root: Path  # under /var/tmp: the sandbox's private /tmp would hide a place under /tmp, and prove nothing
    listener_port: int = 0
    upstream_url: str = ""
    peer_socket: Optional[Path] = None
    pristine: dict[Path, Optional[bytes]] = field(default_factory=dict)

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def ga_home(self) -> Path:
        return self.root / "ga-home"

    @property
    def project(self) -> Path:
        return self.root / "project"

    @property
    def run_dir(self) -> Path:
        return self.project / "runs" / "run-this"

    def shown(self, path: Path) -> str:
        """The path as a model would name it: relative inside the project, absolute elsewhere."""
        return str(path.relative_to(self.project)) if path.is_relative_to(self.project) else str(path)

    def model(self) -> ModelConfig:
        return ModelConfig(name="table-model", base_url=self.upstream_url, api_key_env=KEY_ENV, model="m")

    def context(self, network: Optional[list[str]] = None) -> ToolContext:
        overrides: dict[str, Any] = {"home": str(self.ga_home)}
        if network is not None:
            overrides["sandbox.network"] = network
        settings = load_settings(overrides, environ={})
        return ToolContext(task_id="run-this", workdir=self.project, settings=settings, memory=None,
                           env={"GA_RUN_DIR": str(self.run_dir)}, model_config=self.model(), account=Account())


@dataclass(frozen=True)
class Resource:
    name: str
    group: str  # control, files outside the task, ga's state, secrets, the network, other tasks
    kind: str = "file"  # file | env (the model key in ga's environment) | net (a request to `url`)
    path: Optional[Callable[[Place], Path]] = None
    exists: bool = True  # False: a file that must not come to exist
    secret: bool = False  # reading it is refused too
    allowed: bool = False  # a control: what every actor that can try it must reach
    url: Optional[Callable[[Place], str]] = None  # kind net; unix:PATH for a socket
    network: Optional[list[str]] = None  # the task's sandbox.network in this cell (None: the default, gateway)

    def at(self, place: Place) -> Path:
        assert self.path is not None, self.name
        return self.path(place)

    def address(self, place: Place) -> str:
        assert self.url is not None, self.name
        return self.url(place)


def file(name: str, group: str, path: Callable[[Place], Path], **kind: Any) -> Resource:
    return Resource(name, group, "file", path, **kind)


RESOURCES = [
    file("the task's own file (control)", "control", lambda p: p.project / "notes.txt", allowed=True),
    file("a file outside the task", "files outside the task", lambda p: p.root / "outside" / "victim.txt"),
    file("ga.yaml (new)", "ga's state", lambda p: p.project / "ga.yaml", exists=False),
    file("models.yaml (new)", "ga's state", lambda p: p.project / "models.yaml", exists=False),
    file(".git/config", "ga's state", lambda p: p.project / ".git" / "config"),
    file(".venv: a new .pth", "ga's state",
         lambda p: p.project / ".venv" / "lib" / "python3.11" / "site-packages" / "x.pth", exists=False),
    file(".venv/pyvenv.cfg", "ga's state", lambda p: p.project / ".venv" / "pyvenv.cfg"),
    file(".venv through a link in the workdir", "ga's state", lambda p: p.project / "libs" / "y.pth", exists=False),
    file(".ga/ (code_run's outputs)", "ga's state", lambda p: p.project / ".ga" / "code_1.out"),
    file("runs/<other run>/results.jsonl", "ga's state", lambda p: p.project / "runs" / "run-other" / "results.jsonl"),
    file("runs/<other run>/summary.json", "ga's state", lambda p: p.project / "runs" / "run-other" / "summary.json"),
    file("runs/<this run>/steer/ (new)", "ga's state", lambda p: p.run_dir / "steer" / "forged.json", exists=False),
    file("GA_HOME", "ga's state", lambda p: p.ga_home / "explore" / "state.json"),
    file("the memory store", "ga's state", lambda p: p.ga_home / "memory" / "log.jsonl"),
    file("~/.config/ga/config.yaml (new)", "ga's state", lambda p: p.home / ".config" / "ga" / "config.yaml",
         exists=False),
    file("GA_HOME/sessions", "secrets", lambda p: p.ga_home / "sessions" / "old.json", secret=True),
    file("~/.ssh/id_rsa", "secrets", lambda p: p.home / ".ssh" / "id_rsa", secret=True),
    Resource("the model key (ga's environment)", "secrets", "env", secret=True),
    Resource("a loopback listener", "the network", "net", url=lambda p: f"http://127.0.0.1:{p.listener_port}/loop"),
    Resource("a listed host (control)", "the network", "net", allowed=True, network=LISTED,
             url=lambda p: f"http://127.0.0.1:{p.listener_port}/listed"),
    Resource("an unlisted host (the same listener by another name)", "the network", "net", network=LISTED,
             url=lambda p: f"http://localhost:{p.listener_port}/unlisted"),
    file("another task's workdir (same fan-out)", "other tasks",
         lambda p: p.run_dir / "tasks" / "other" / "workdir" / "result.txt"),
    Resource("another task's model gateway", "other tasks", "net", url=lambda p: f"unix:{p.peer_socket}"),
]
BY_NAME = {r.name: r for r in RESOURCES}


@pytest.fixture(scope="module")
def place() -> Iterator[Place]:
    place = Place(Path(tempfile.mkdtemp(prefix="ga-table-", dir="/var/tmp")))
    for folder in (place.home / ".ssh", place.home / ".config" / "ga", place.ga_home / "explore",
                   place.ga_home / "sessions", place.root / "outside", place.project / ".git", place.project / ".ga",
                   place.run_dir / "steer", place.run_dir / "tasks" / "other" / "workdir",
                   place.project / ".venv" / "lib" / "python3.11" / "site-packages", place.project / "runs" / "run-other"):
        folder.mkdir(parents=True, exist_ok=True)
    MemoryStore(place.ga_home / "memory", create=True)
    for resource in RESOURCES:
        if resource.path is not None and resource.exists and not resource.at(place).exists():
            resource.at(place).write_text(SECRET + "\n" if resource.secret else ORIGINAL)
    (place.project / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (place.project / "runs" / "run-other" / "ledger.jsonl").write_text("{}\n")
    (place.project / "libs").symlink_to(place.project / ".venv" / "lib" / "python3.11" / "site-packages")
    place.pristine = {r.at(place): (r.at(place).read_bytes() if r.exists else None)
                      for r in RESOURCES if r.path is not None}
    listener, upstream = serve(_Listener), serve(_Upstream)
    place.listener_port = listener.server_address[1]
    place.upstream_url = f"http://127.0.0.1:{upstream.server_address[1]}/v1"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(place.home))
        patch.setenv("GA_HOME", str(place.ga_home))
        patch.setenv(KEY_ENV, KEY)
        patch.setenv("OPENAI_API_KEY", KEY)
        patch.chdir(place.project)
        settings = load_settings({"home": str(place.ga_home)}, environ={})
        peer_model = ModelConfig(name=PEER_MODEL, base_url=place.upstream_url, model="m")
        peer = gateway.Gateway(settings, peer_model, gateway.Parent("other", place.root / "outside", settings, {},
                                                                    Account()))
        place.peer_socket = peer.socket_path
        assert PEER_MODEL in models_from(peer.socket_path)  # the other task's gateway, reachable from outside
        try:
            yield place
        finally:
            BROWSER.close()
            peer.close()
            listener.shutdown()
            upstream.shutdown()
            shutil.rmtree(place.root, ignore_errors=True)


def models_from(socket_path: Path) -> str:
    with socket.socket(socket.AF_UNIX) as connection:
        connection.settimeout(10)
        connection.connect(str(socket_path))
        connection.sendall(b"GET /v1/models HTTP/1.0\r\n\r\n")
        return connection.recv(65536).decode(errors="replace")


@pytest.fixture
def fresh(place: Place, request: pytest.FixtureRequest) -> Place:
    """Every resource as it was; what a cell planted around them gone; the browsers closed unless this is a browser
    cell (their mount points are files in the project while they run)."""
    actor = request.node.callspec.params["cell"][0]
    if actor is not BROWSER:
        BROWSER.close()
    live = BROWSER.placeholders()
    for path, content in place.pristine.items():
        if path in live:
            continue
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.is_dir():
            shutil.rmtree(path)
        if content is not None:
            path.write_bytes(content)
    for planted in ("sitecustomize.py", "json.py", ".check-env"):
        (place.project / planted).unlink(missing_ok=True)
    _Listener.seen.clear()
    _Upstream.auth.clear()
    return place


def call(ctx: ToolContext, name: str, **args: Any) -> str:
    spec = REGISTRY[name]
    return spec.run(ctx, spec.args.model_validate(args)).output


def with_context(place: Place, run: Callable[[ToolContext], str], network: Optional[list[str]] = None) -> str:
    ctx = place.context(network)
    try:
        return run(ctx)
    finally:
        ctx.close()


def reach_script(url: str) -> str:
    """A python script that tries `url` every way a script could: directly and through the sandbox's proxy (GET
    and POST), or a Unix socket (unix:PATH); it prints what it got."""
    if url.startswith("unix:"):
        return f"""
import socket
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
try:
    s.connect({url[5:]!r})
    s.sendall(b"GET /v1/models HTTP/1.0\\r\\n\\r\\n")
    print("got:", s.recv(65536).decode(errors="replace"))
except OSError as exc:
    print("refused:", exc)
"""
    return f"""
import os, urllib.request
proxy = os.environ.get("HTTP_PROXY")
os.environ.pop("NO_PROXY", None), os.environ.pop("no_proxy", None)  # loopback too, through the proxy
openers = [urllib.request.build_opener(urllib.request.ProxyHandler({{}}))]
if proxy:
    openers.append(urllib.request.build_opener(urllib.request.ProxyHandler({{"http": proxy, "https": proxy}})))
for opener in openers:
    for data in (None, b"posted"):
        try:
            print("got:", opener.open({url!r}, data=data, timeout=10).read().decode(errors="replace"))
        except Exception as exc:
            print("refused:", type(exc).__name__, str(exc)[:200])
"""


# ---- the actors ----

class CodeRun:
    """code_run's bubblewrap sandbox."""

    name = "code_run"
    not_applicable: dict[str, str] = {}

    def write(self, place: Place, path: Path) -> str:
        script = f"mkdir -p '{path.parent}' 2>/dev/null; printf '{PLANTED}' > '{path}' && echo wrote"
        return with_context(place, lambda ctx: call(ctx, "code_run", type="bash", script=script))

    def read(self, place: Place, path: Path) -> str:
        return with_context(place, lambda ctx: call(ctx, "code_run", type="bash", script=f"cat '{path}'"))

    def read_env(self, place: Place) -> str:
        script = "env; tr '\\0' '\\n' < /proc/self/environ; tr '\\0' '\\n' < /proc/1/environ"
        return with_context(place, lambda ctx: call(ctx, "code_run", type="bash", script=script))

    def reach(self, place: Place, url: str, network: Optional[list[str]]) -> str:
        return with_context(place, lambda ctx: call(ctx, "code_run", type="python", script=reach_script(url)), network)


class FileTool:
    """file_write, file_patch, file_read: in ga's own process, through the task's Environment."""

    def __init__(self, name: str):
        self.name = name
        self.write = self._write if name in ("file_write", "file_patch") else None
        self.read = self._read if name == "file_read" else None
        self.read_env = self._read_env if name == "file_read" else None
        self.reach = None
        self.not_applicable = {"net": f"{name} sends no request: a URL is a file name to it"}
        if name != "file_read":
            self.not_applicable["env"] = f"{name} returns no content, so nothing of ga's environment"

    def _write(self, place: Place, path: Path) -> str:
        def run(ctx: ToolContext) -> str:
            if self.name == "file_write":
                return call(ctx, "file_write", path=place.shown(path), content=PLANTED)
            return call(ctx, "file_patch", path=place.shown(path), old_content=ORIGINAL, new_content=PLANTED)

        said = with_context(place, run)
        assert "\n" not in said, said  # a refusal (or a success) is one line
        return said

    def _read(self, place: Place, path: Path) -> str:
        return with_context(place, lambda ctx: call(ctx, "file_read", path=place.shown(path)))

    def _read_env(self, place: Place) -> str:
        """ga's own process holds the key: its /proc/self/environ is the file to ask for."""
        return with_context(place, lambda ctx: "\n".join(call(ctx, "file_read", path=p) for p in
                                                         ("/proc/self/environ", "/proc/thread-self/environ")))


async def _goto_and_read(session: Any, url: str) -> str:
    """The browser process itself opening `url` (as ga's side of the pipe can, and a page that escaped Chromium's
    own rules could make it): what its sandbox lets it read."""
    page = await session.context.new_page()  # a tab of its own: no navigation of another cell's in the way
    try:
        await page.goto(url, timeout=30_000)
        return await page.evaluate("document.body ? document.body.innerText : ''")
    except Exception as exc:  # noqa: BLE001  (Playwright's errors: what the browser said)
        return f"error: {str(exc).splitlines()[0]}"
    finally:
        await page.close()


async def _download(session: Any, folder: str, name: str) -> str:
    """The browser process told over CDP to save a download of PLANTED as `folder/name` (the attack of issue 30:
    page JS on a DevTools port did this into ~/.config/ga): its sandbox decides where it can land."""
    page = await session.context.new_page()  # a tab of its own: no navigation of another cell's in the way
    cdp = await page.context.new_cdp_session(page)
    info = await cdp.send("Target.getTargetInfo")
    done = asyncio.get_running_loop().create_future()
    cdp.on("Browser.downloadProgress",
           lambda event: done.done() or event["state"] in ("completed", "canceled") and done.set_result(event["state"]))
    await cdp.send("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": folder, "eventsEnabled": True,
                                                   "browserContextId": info["targetInfo"]["browserContextId"]})
    await page.evaluate("""([name, text]) => { const a = document.createElement('a');
        a.href = URL.createObjectURL(new Blob([text])); a.download = name; document.body.appendChild(a); a.click(); }""",
                        [name, PLANTED])
    try:
        return "download " + await asyncio.wait_for(done, 30)
    except TimeoutError:
        return "download: no end reported"
    finally:
        await cdp.detach()
        await page.close()


class Browser:
    """The task's Chromium in its sandbox: web_execute_js (`save_to_file`, navigation), web_scan, and the browser
    process itself (a navigation and a download it is told to make over CDP). One browser per network, kept for
    consecutive browser cells."""

    name = "browser"
    not_applicable = {"another task's model gateway": "a page cannot open a Unix socket; the browser's sandbox is "
                                                       "code_run's, whose row tries the socket"}

    def __init__(self) -> None:
        self.contexts: dict[str, ToolContext] = {}

    def context(self, place: Place, network: Optional[list[str]] = None) -> ToolContext:
        key = json.dumps(network)
        if key not in self.contexts:
            self.contexts[key] = place.context(network)
        return self.contexts[key]

    def session(self, place: Place, network: Optional[list[str]] = None) -> WebSession:
        return self.context(place, network).state(web_tools.Browser).open()

    def close(self) -> None:
        for ctx in self.contexts.values():
            ctx.close()
        self.contexts.clear()

    def placeholders(self) -> set[Path]:
        found: set[Path] = set()
        for ctx in self.contexts.values():
            launch = getattr(getattr(getattr(web_tools.browser_of(ctx), "source", None), "launch", None), "placeholders", None)
            found.update(launch or ())
        return found

    def after(self, place: Place, path: Path) -> Optional[str]:
        """The file's content, None when missing or when it is the running browser's own empty mount point (it
        goes when the browser stops)."""
        if path in self.placeholders() and path.is_file() and not path.is_symlink() and path.stat().st_size == 0:
            return None
        return path.read_text() if path.exists() or path.is_symlink() else None

    def write(self, place: Place, path: Path) -> str:
        ctx = self.context(place)
        saved = call(ctx, "web_execute_js", script=json.dumps(PLANTED), save_to_file=place.shown(path))
        if path == BY_NAME["the task's own file (control)"].at(place):
            path.write_text(ORIGINAL)  # the download's turn: the file back as it was, and where it lands seen
        folder = path.parent
        before = set(os.listdir(folder)) if folder.is_dir() else set()
        _, downloaded = self.session(place).call(_download, str(folder), path.name)
        # in a writable folder Chromium saves beside a file it may not replace ("ga (1).yaml"): the task's own
        landed = sorted((set(os.listdir(folder)) if folder.is_dir() else set()) - before)
        if path == BY_NAME["the task's own file (control)"].at(place):
            assert downloaded == "download completed" and (landed or path.read_text() == PLANTED), downloaded
            path.write_text(PLANTED)  # as save_to_file left it: the table's check of the control
        return f"{saved} | {downloaded} {landed}"

    def read(self, place: Place, path: Path) -> str:
        ctx = self.context(place)
        navigated = call(ctx, "web_execute_js", script=f"location.href = {json.dumps(path.as_uri())}")
        scanned = call(ctx, "web_scan", text_only=True)
        _, opened = self.session(place).call(_goto_and_read, path.as_uri())
        return f"{navigated}\n{scanned}\n{opened}"

    def read_env(self, place: Place) -> str:
        """What every process of the browser has in its environment, read from outside (and what a page gets of
        /proc/self/environ)."""
        session = self.session(place)
        _, page = session.call(_goto_and_read, "file:///proc/self/environ")
        environ = []
        for pid in session.processes():
            try:
                environ.append(Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace").replace("\0", "\n"))
            except OSError:
                pass
        # the control: environments were read (Chromium's helpers write their titles over theirs)
        assert any("PATH=" in e for e in environ), environ
        return page + "\n".join(environ)

    def reach(self, place: Place, url: str, network: Optional[list[str]]) -> str:
        ctx = self.context(place, network)
        navigated = call(ctx, "web_execute_js", script=f"location.href = {json.dumps(url)}")
        posted = call(ctx, "web_execute_js", script=f"fetch({json.dumps(url + '-posted')}, "
                      "{method: 'POST', body: 'x', mode: 'no-cors'}).then(() => 'sent', e => 'refused: ' + e)")
        return f"{navigated}\n{call(ctx, 'web_scan', text_only=True)}\n{posted}"


# A nested run: the parent task's script (inside its sandbox) asks for nested fan-outs; ga runs them outside.
PARENT = """
import concurrent.futures, json, os
from orchestrator import fanout
PLAN = json.loads(PLAN_JSON)
out = {"write": {}, "read": {}, "env": "", "reach": {}}
def nested(spec):
    try:
        run = fanout({"retries": 0, "concurrency": 4, "defaults": {"max_turns": 4}, **spec}, display="quiet")
        return {r["task_id"]: f'{r["status"]}: {r["answer"]} {r["reason"]}' for r in run.results}
    except Exception as exc:
        return {"refused": str(exc)}
writes = nested({"tasks": [{"id": f"w{i}", "prompt": f"WRITE-{i:02d}"} for i, _ in enumerate(PLAN["write"])]
                 + [{"id": "env", "prompt": "READ-ENV"}]})
for i, (name, _) in enumerate(PLAN["write"]):
    out["write"][name] = writes.get(f"w{i}") or writes.get("refused", "no such task")
out["env"] = writes.get("env") or writes.get("refused", "")
def read(item):
    name, path = item
    return name, nested({"allow_paths": [os.path.dirname(path)],  # the spec's own rule aside: ga's
                         "tasks": [{"id": "r", "prompt": "READ-INPUT", "inputs": [path]}]})
def reach(item):
    name, url = item
    refused = nested({"tasks": [{"id": "m", "prompt": "ANSWER", "model": "scripted@" + url + "/v1"}]})
    script = nested({"tasks": [{"id": "s", "prompt": "REACH " + url}]})
    return name, f"model: {refused} script: {script}"
with concurrent.futures.ThreadPoolExecutor(4) as pool:
    out["read"] = dict(pool.map(read, PLAN["read"]))
    out["reach"] = dict(pool.map(reach, PLAN["reach"]))
with open("nested-table.json", "w") as handle:
    json.dump(out, handle)
print("nested table written")
"""


def code_run_turn(script: str, kind: str = "bash") -> dict:
    return {"content": "trying", "tool_calls": [{"name": "code_run",
                                                 "arguments": {"type": kind, "script": script, "timeout": 600}}]}


class Nested:
    """A nested fan-out from the task's code_run (orchestrator.fanout, run by ga outside the sandbox): its tasks'
    tools (writes), its `inputs` (copied by ga: reads), its tasks' environment, and the model it names (reach)."""

    name = "nested run"
    not_applicable = {
        "a listed host (control)": "a nested run reaches no host a task names: its models are the user's; its tasks' "
                                   "own network is their code_run's, the parent's sandbox.network",
        "another task's model gateway": "a nested run opens no socket a task names; its tasks' code_run is the "
                                        "code_run row",
    }

    def __init__(self) -> None:
        self.outcome: Optional[dict] = None
        self.state: dict[Path, Optional[str]] = {}
        self.own: Optional[str] = None
        self.seen: list[str] = []

    def run(self, place: Place) -> dict:
        """One real `ga run` in the project, once: its scripted model is the parent task and the nested tasks."""
        if self.outcome is not None:
            return self.outcome
        BROWSER.close()
        files = [r for r in RESOURCES if r.kind == "file"]
        nets = [r for r in RESOURCES if r.kind == "net" and r.name not in self.not_applicable]
        control = BY_NAME["the task's own file (control)"]
        # the control by its name in the nested task's own directory; the rest by where they are
        plan = {"write": [[r.name, "notes.txt" if r is control else str(r.at(place))] for r in files],
                "read": [[r.name, str(r.at(place))] for r in files if r.exists],
                "reach": [[r.name, r.address(place)] for r in nets]}
        tasks: list[dict] = [{"match": "PARENT-TASK", "turns": [
            code_run_turn(PARENT.replace("PLAN_JSON", repr(json.dumps(plan))), "python"),
            {"content": "done:", "echo_last_tool_result": True}]}]
        for i, (_, target) in enumerate(plan["write"]):
            tasks.append({"match": f"WRITE-{i:02d}", "turns": [
                code_run_turn(f"mkdir -p \"$(dirname '{target}')\"; printf '{PLANTED}' > '{target}' && echo wrote"),
                {"content": "writing", "tool_calls": [{"name": "file_write",
                                                       "arguments": {"path": target, "content": PLANTED}}]},
                {"content": "done:", "echo_last_tool_result": True}]})
        tasks.append({"match": "READ-INPUT", "turns": [code_run_turn("for f in *; do cat -- \"$f\"; done"),
                                                       {"content": "read:", "echo_last_tool_result": True}]})
        tasks.append({"match": "READ-ENV", "turns": [code_run_turn("env; tr '\\0' '\\n' < /proc/self/environ"),
                                                     {"content": "env:", "echo_last_tool_result": True}]})
        for r in nets:  # each REACH task tries its own url
            tasks.append({"match": f"REACH {r.address(place)}", "turns": [
                code_run_turn("python3 - <<'EOF'\n" + reach_script(r.address(place)) + "EOF"),
                {"content": "reached:", "echo_last_tool_result": True}]})
        tasks.append({"match": "ANSWER", "turns": [{"content": "an answer from a model the task named"}]})
        with ScriptedServer({"tasks": tasks}) as server:
            done = run_ga("run", "PARENT-TASK", "--model", f"scripted@{server.base_url}", "--json", "--no-preflight",
                          cwd=place.project, timeout=280,
                          env={"HOME": str(place.home), "GA_HOME": str(place.ga_home), KEY_ENV: KEY,
                               "OPENAI_API_KEY": KEY, "GA_MODEL": None})
        found = place.project / "nested-table.json"
        assert found.is_file(), (done.stdout[-3000:], done.stderr[-3000:])
        self.outcome = json.loads(found.read_text())
        found.unlink()
        self.state = {path: (path.read_text() if path.exists() else None) for path in place.pristine}
        own = [p for p in (place.project / "runs").rglob("notes.txt") if "w0" in p.parts]
        self.own = own[0].read_text() if own else None
        self.seen = list(_Listener.seen)
        assert self.outcome is not None
        return self.outcome

    def after(self, place: Place, path: Path) -> Optional[str]:
        if path == BY_NAME["the task's own file (control)"].at(place):
            assert self.state[path] == ORIGINAL  # the parent's file: a nested task has its own directory, not this
            return self.own  # the nested task's own notes.txt, in its own directory
        return self.state[path]

    def write(self, place: Place, path: Path) -> str:
        return str(self.run(place)["write"][self._name(place, path)])

    def read(self, place: Place, path: Path) -> str:
        return json.dumps(self.run(place)["read"].get(self._name(place, path), "not asked (the file does not exist)"))

    def read_env(self, place: Place) -> str:
        return str(self.run(place)["env"])

    def reach(self, place: Place, url: str, network: Optional[list[str]]) -> str:
        outcome = self.run(place)
        name = next(r.name for r in RESOURCES if r.url is not None and r.address(place) == url)
        _Listener.seen[:] = [s for s in self.seen]  # what reached the listener during the run
        return str(outcome["reach"][name])

    @staticmethod
    def _name(place: Place, path: Path) -> str:
        return next(r.name for r in RESOURCES if r.path is not None and r.at(place) == path)


def check_of(script: str, type: str = "bash") -> TaskCheck:  # noqa: A002  (TaskCheck's own name)
    return TaskCheck.model_validate({"script": script, "type": type})


class Check:
    """A task's check (worker/taskcheck.py): the person's script, run on what the task left. Writes: the task
    planted sitecustomize.py and json.py that write too and fake a pass, then a check that fails runs, then a bash
    check writes. Reads: what the check prints comes back in its one-line verdict."""

    name = "check"
    not_applicable: dict[str, str] = {}

    def write(self, place: Place, path: Path) -> str:
        planted = f"open({str(path)!r}, 'w').write({PLANTED!r})\nimport os\nos._exit(0)\n"
        for name in ("sitecustomize.py", "json.py"):
            (place.project / name).write_text(planted)

        def run(ctx: ToolContext) -> str:
            passed, said = run_check(check_of(script="import json\nraise SystemExit(1)", type="python"), "", ctx)
            assert not passed, f"a planted module faked the check's pass: {said}"
            return str(run_check(check_of(script=f"mkdir -p '{path.parent}'; printf '{PLANTED}' > '{path}'"), "", ctx))

        return with_context(place, run)

    def read(self, place: Place, path: Path) -> str:
        return with_context(place, lambda ctx: str(run_check(check_of(script=f"cat '{path}'; exit 1"), "", ctx)))

    def read_env(self, place: Place) -> str:
        with_context(place, lambda ctx: str(run_check(check_of(script="env > .check-env"), "", ctx)))
        return (place.project / ".check-env").read_text()

    def reach(self, place: Place, url: str, network: Optional[list[str]]) -> str:
        check = check_of(script=reach_script(url) + "raise SystemExit(1)\n", type="python")
        return with_context(place, lambda ctx: str(run_check(check, "", ctx)), network)


# The script a task's code_run sends to its gateway (OPENAI_BASE_URL): each request, and what came back.
GATEWAY_CALLS = """
import json, os, urllib.request
base = os.environ["OPENAI_BASE_URL"]
def ask(route, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + route, data=data, headers={"Content-Type": "application/json"})
    try:
        print(route, "->", urllib.request.urlopen(request, timeout=30).read().decode(errors="replace"))
    except Exception as exc:
        print(route, "-> refused:", exc, getattr(exc, "read", lambda: b"")().decode(errors="replace"))
for call in CALLS:
    ask(*call)
"""


class Gateway:
    """The task's model gateway (worker/gateway.py), asked by the task's code_run: where it relays, and what of
    the key comes back."""

    name = "gateway"
    not_applicable = {
        "file": "the gateway relays model calls and reads and writes no file; its one route that names files, a "
                "nested fan-out, is the nested run's row",
        "a listed host (control)": "the gateway relays to the user's configured models only, whatever "
                                   "sandbox.network lists (the env cell is its control: it did relay)",
        "another task's model gateway": "no route of the gateway leads to another gateway; reaching one's socket "
                                        "is the code_run row",
    }

    def calls(self, place: Place, calls: list[list[Any]]) -> str:
        script = GATEWAY_CALLS.replace("CALLS", repr(calls))
        return with_context(place, lambda ctx: call(ctx, "code_run", type="python", script=script))

    def read_env(self, place: Place) -> str:
        got = self.calls(place, [["/chat/completions", {"model": "table-model",
                                                        "messages": [{"role": "user", "content": "hi"}]}]])
        assert _Upstream.auth == [f"Bearer {KEY}"], (_Upstream.auth, got)  # the control: the key went to the model
        assert "raw Bearer " in got, got  # and the reply came back
        return got

    def reach(self, place: Place, url: str, network: Optional[list[str]]) -> str:
        """Ask for the listener every way a request to the gateway could name it: a model named by URL, a model
        only a project's models.yaml (which the task can write) defines, other routes and paths."""
        (place.project / "models.yaml").write_text(yaml.safe_dump({"models": {"planted": {
            "base_url": url + "/v1", "model": "m"}}}))
        chat = {"messages": [{"role": "user", "content": "hi"}]}
        return self.calls(place, [
            ["/chat/completions", {**chat, "model": f"scripted@{url}/v1"}],
            ["/chat/completions", {**chat, "model": url + "/v1"}],
            ["/chat/completions", {**chat, "model": "planted"}],
            ["/embeddings", {"model": "planted", "input": "x"}],
            ["/../../" + url.split("://", 1)[-1], {}],
            ["/models"]])


BROWSER = Browser()
ACTORS = [CodeRun(), FileTool("file_write"), FileTool("file_patch"), FileTool("file_read"), Nested(), Check(),
          Gateway(), BROWSER]


def operations(actor: Any, resource: Resource) -> list[str]:
    """What `actor` tries on `resource` (write, read, read_env, reach): none where it says the cell does not apply."""
    if resource.name in actor.not_applicable or resource.kind in actor.not_applicable:
        return []
    wanted = {"file": ["write", "read"], "env": ["read_env"], "net": ["reach"]}[resource.kind]
    return [op for op in wanted if getattr(actor, op, None) is not None]


def not_applicable(actor: Any, resource: Resource) -> Optional[str]:
    said = actor.not_applicable.get(resource.name) or actor.not_applicable.get(resource.kind)
    if said is None and not operations(actor, resource):
        said = f"{actor.name} cannot try this at all, and says nothing about why"  # the completeness test fails
    return said


CELLS = [(actor, resource) for actor in ACTORS for resource in RESOURCES]


def cell_id(cell: tuple) -> str:
    actor, resource = cell
    return f"{actor.name}-{resource.name}"


def test_every_cell_is_tried_or_says_why_not() -> None:
    """The table is whole: each actor x resource is tried, or the actor says why it does not apply; and each
    resource group of issue 30 is in it, with a control that some actor reaches."""
    unexplained = [cell_id(c) for c in CELLS if not operations(*c) and "says nothing" in (not_applicable(*c) or "")]
    assert not unexplained, unexplained
    for actor in ACTORS:  # an actor's reasons name resources or kinds of the table
        assert set(actor.not_applicable) <= {*BY_NAME, "file", "env", "net"}, actor.not_applicable
    groups = {r.group for r in RESOURCES}
    assert groups == {"control", "files outside the task", "ga's state", "secrets", "the network", "other tasks"}
    assert {a.name for a in ACTORS} >= {"code_run", "file_write", "browser", "nested run", "check", "gateway"}


def after_of(actor: Any, place: Place, path: Path) -> Optional[str]:
    after = getattr(actor, "after", None)
    if after is not None:
        return after(place, path)
    return path.read_text() if path.exists() or path.is_symlink() else None


PARAMS = [pytest.param(c, id=cell_id(c), marks=[pytest.mark.skip(reason=f"n/a: {not_applicable(*c)}")]
                       if not operations(*c) else []) for c in CELLS]


@pytest.mark.parametrize("cell", PARAMS)
def test_the_policy_table(fresh: Place, cell: tuple) -> None:
    place = fresh
    actor, resource = cell
    if resource.kind == "file":
        check_file(place, actor, resource)
    elif resource.kind == "env":
        got = actor.read_env(place)
        encoded = [KEY, base64.b64encode(KEY.encode()).decode(), KEY.encode().hex(),
                   base64.b64encode(f"Bearer {KEY}".encode()).decode()]
        assert got.strip(), f"{actor.name} saw no environment at all"
        assert not [form for form in encoded if form in got], f"{actor.name} saw the model key: {got[-2000:]}"
    else:
        url = resource.address(place)
        got = actor.reach(place, url, resource.network)
        reached = [s for s in _Listener.seen if s.startswith("/" + url.rsplit("/", 1)[-1])]
        if url.startswith("unix:"):
            assert PEER_MODEL not in got, f"{actor.name} reached another task's gateway: {got[-2000:]}"
        elif resource.allowed:
            assert reached, (f"{actor.name} could not reach a listed host", got[-2000:])
        else:
            assert not reached and "REACHED-THE-LISTENER" not in got, f"{actor.name} reached {url}: {got[-2000:]}"


def check_file(place: Place, actor: Any, resource: Resource) -> None:
    path = resource.at(place)
    pristine = place.pristine[path]
    before = pristine.decode() if pristine is not None else None
    if actor.write is not None and not (actor.name == "file_patch" and not resource.exists):
        said = actor.write(place, path)
        after = after_of(actor, place, path)
        if resource.allowed:
            assert after == PLANTED, said
        elif resource.exists:
            assert not path.is_symlink() and after == before, f"{actor.name} changed {path}: {said}"
        else:
            assert after is None and not path.is_symlink(), f"{actor.name} created {path}: {said}"
            assert not path.resolve().exists() or path.resolve() in BROWSER.placeholders(), \
                f"{actor.name} created {path.resolve()}: {said}"
    if actor.read is not None:
        got = actor.read(place, path)
        if resource.allowed:
            assert ORIGINAL.strip() in got or PLANTED.strip() in got, got
        elif resource.secret:
            assert SECRET not in got, f"{actor.name} read {path}: {got[-2000:]}"
