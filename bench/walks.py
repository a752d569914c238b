"""The walks of issue 24: which of ga's modules a reader must open to follow three paths, measured by tracing.
The goals are issue 34's: 8 modules for a turn, 16 for a fan-out, 6 for a commit.

    python bench/walks.py           # each walk as a numbered list, its count beside the goal
    python bench/walks.py --json    # the same as one JSON object

The three walks, each run for real (the scripted model in its own process, over real HTTP):
  turn    one agent turn of `worker.Worker`: from the moment its request leaves for the model to the moment
          the next one does. In between the reply is read and parsed, the tool (`file_write`) runs, its
          result is cut and recorded in the history, and the next request is built. The second turn of the task
          is measured: the first also pays one-time set-up. Goal: 8.
  fanout  one `ga fanout` of one task (a `file_write`, then an answer), on the threads executor: from the call
          into the `ga` entry point of pyproject.toml (in this process) to the moment the task's line is
          written to results.jsonl. Two things on the way are steps, not descended into: the worker's run
          (`Worker.run`, shown as the module that defines Worker: the turn and commit walks are its inside)
          and the memory tier (a call into the store's package from outside shows the module it enters, not
          what that module calls inside its package: a reader follows `store.snapshot()` by its contract).
          Everything entered is printed below the walk and is in --json as "descended". The command's module is
          loaded before the window opens (by `ga fanout --help`): `ga` loads a command's module only when the
          command is asked for, and loading is not following the path (below). Goal: 16.
  commit  one memory commit: a worker that wrote `memory/L2/...` after a verified tool run ends, and its
          staged write goes through the consolidation gate into the store. The walk is the module of the ga
          code that calls into the store's package, then everything entered from that code's first call into
          the package up to the return of the call during which a new generation appears in `store.log()`.
          Goal: 6.

What counts. A module counts when a Python function defined in it runs inside the walk's window, in any
thread (the group-commit writer that makes a history line durable is on the path as much as the caller
that waits for it). For `turn`, the ga modules on the stack when the window opens count too, outermost first:
they are what the reader is in when the request leaves. The order is the order of first entry.
  - A ga module is one whose source file lies in this checkout, outside bench/, tests/ and the interpreter's
    own prefix (a .venv made inside the checkout holds the libraries, not ga): no package list
    to keep up to date, so the walks survive renames and new packages.
  - Running a module's top-level code (an import), class bodies included, is not entering it: loading is
    not following the path.
  - configs/ is listed but not counted: settings, the YAML loader, logging set-up and its structlog
    processors, version and error texts. The path reads settings as attributes and calls `log.info(...)`;
    a reader follows neither into configs/. It is listed, marked "not counted".
  - Record and type modules count: a reader opens them to learn what a Reply or a TaskRecord holds. Their
    dataclasses' generated methods (`__init__`, `__eq__`) run in the module, so they are seen entered.
Nothing else is left out: the count is the numbered lines. Each walk runs in a fresh process of its own, as
a real `ga` starts, so nothing left running by one walk shows in another.

How the windows are found, by behaviour rather than by module names: the model's requests are the sends on
a socket connected to the scripted model's port (a request starts with a send after a receive); the results
line is a `write` on a file whose name ends in results.jsonl; the commit is the store call after which
`store.log()` is longer. The entry points are only the public contracts of design §4 (`worker.Worker`,
`memory_shared.MemoryStore`, `configs.load_settings`), the `ga` entry point named in pyproject.toml, and the
commands `ga fake-llm` and `ga fanout`.
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

ROOT = Path(__file__).resolve().parents[1]
GOALS = {"turn": 8, "fanout": 16, "commit": 6}  # issue 34
NOT_COUNTED = {"configs": "configs"}  # top-level package -> the mark it gets in the list (see the docstring)
SOCKET_SENDS = {"send", "sendall", "sendmsg"}
SOCKET_RECEIVES = {"recv", "recv_into", "recvfrom", "recvfrom_into", "recvmsg"}


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


TURN_SCRIPT = [_call("file_write", path="a.txt", content="alpha\n"),
               _call("file_write", path="b.txt", content="beta\n"), {"content": "wrote a.txt and b.txt"}]
COMMIT_SCRIPT = [_call("code_run", type="python", script="open('notes.txt', 'w').write('checked')\nprint(len('checked'))"),
                 _call("start_long_term_update"),
                 _call("file_write", path="memory/L2/walks.md", content="# walks\n- notes.txt holds 'checked'\n"),
                 {"content": "saved"}]
FANOUT_SCRIPT = [_call("file_write", path="a.txt", content="alpha\n"), {"content": "wrote a.txt"}]


# ---- the tracer -------------------------------------------------------------------------------------------

@dataclass
class Event:
    kind: str          # call | request | results_line | store_enter | store_exit
    thread: int
    module: str = ""
    stack: list[str] = field(default_factory=list)  # request: the ga modules on the stack, outermost first
    token: int = -1    # store_enter/exit: the outermost store call; store_enter: its ga caller's invocation
    published: bool = False
    inside: bool = False  # a call made while the thread runs the boundary (a fan-out's Worker.run)


class Tracer:
    """A profile function for every thread: records ga calls and the few behaviours the windows are cut by."""

    def __init__(self, root: Path):
        self.root = str(root) + os.sep
        # bench/ and tests/ are not ga; nor is a virtual environment made inside the checkout (`make test`'s .venv)
        self.outside = tuple(str(root / name) + os.sep for name in ("bench", "tests")) + (
            sys.prefix + os.sep, sys.base_prefix + os.sep)
        self.events: list[Event] = []
        self.recording = False
        self.model_port: Optional[int] = None
        self.store: Any = None                       # a commit walk watches this store's log (watch_store)
        self.store_package = ""
        self._commits = 0
        self._invocation: dict[int, int] = {}        # id(frame) -> index of its latest call event
        self._open_store_calls: dict[int, int] = {}  # id(frame) of an outermost store call -> its token
        self._last_socket_op: dict[int, str] = {}    # fileno -> "send" | "recv"
        self.boundary: Any = None                    # a code object whose calls are not descended into
        self.boundary_module = ""
        self.opaque_package = ""                     # a package entered but not descended into
        self._inside: dict[int, int] = {}            # thread -> id(frame) of the boundary call it is in

    def watch_store(self, store: Any) -> None:
        """Note each outermost call into the store's package, and whether a commit appeared during it."""
        self.store, self.store_package, self._commits = store, _package(type(store).__module__), len(store.log())

    def install(self) -> None:
        threading.setprofile(self)
        sys.setprofile(self)

    def uninstall(self) -> None:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]

    def is_ga(self, frame: Any) -> bool:
        path = frame.f_code.co_filename
        return path.startswith(self.root) and not path.startswith(self.outside)

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if not self.recording:
            return
        if event == "call":
            self._on_call(frame)
        elif event == "c_call":
            self._on_c_call(frame, arg)
        elif event == "return" and self._inside.get(threading.get_ident()) == id(frame):
            del self._inside[threading.get_ident()]
        elif event == "return" and self._open_store_calls:
            token = self._open_store_calls.pop(id(frame), None)
            if token is not None:
                commits = len(self.store.log())  # the profiler does not trace itself: this adds no events
                self.events.append(Event("store_exit", threading.get_ident(), token=token,
                                         published=commits > self._commits))
                self._commits = commits

    def _on_call(self, frame: Any) -> None:
        if _loading(frame.f_code) or not self.is_ga(frame):
            return
        module = frame.f_globals.get("__name__", "")
        thread = threading.get_ident()
        self._invocation[id(frame)] = len(self.events)
        step = frame.f_code is self.boundary or self._caller_outside(frame, self.opaque_package) is not None
        if step and thread not in self._inside:
            self._inside[thread] = id(frame)  # this call is a step of the walk; what it calls is not
            if frame.f_code is self.boundary:
                module = self.boundary_module  # the step is shown as the module the reader opens for it
        inside = thread in self._inside and self._inside[thread] != id(frame)
        self.events.append(Event("call", thread, module, inside=inside))
        caller = self._caller_outside(frame, self.store_package)
        if caller is not None:
            token = len(self.events)
            self._open_store_calls[id(frame)] = token
            self.events.append(Event("store_enter", thread, caller.f_globals["__name__"],
                                     token=self._invocation.get(id(caller), -1)))

    def _caller_outside(self, frame: Any, package: str) -> Any:
        """The ga frame that called into `package` from outside it; None for a call inside it (or no package)."""
        if not package or _package(frame.f_globals.get("__name__", "")) != package:
            return None
        caller = self._ga_caller(frame)
        if caller is None or _package(caller.f_globals.get("__name__", "")) == package:
            return None
        return caller

    def _ga_caller(self, frame: Any) -> Any:
        """The nearest ga frame below this one (library frames such as contextlib's are skipped)."""
        caller = frame.f_back
        while caller is not None and not self.is_ga(caller):
            caller = caller.f_back
        return caller

    def _on_c_call(self, frame: Any, function: Any) -> None:
        name = getattr(function, "__name__", "")
        owner = getattr(function, "__self__", None)
        if name == "write" and str(getattr(owner, "name", "")).endswith("results.jsonl"):
            self.events.append(Event("results_line", threading.get_ident()))
        elif (name in SOCKET_SENDS or name in SOCKET_RECEIVES) and isinstance(owner, socket.socket):
            try:
                port = owner.getpeername()[1]
            except (OSError, IndexError, TypeError):
                return
            if port != self.model_port:
                return
            op = "send" if name in SOCKET_SENDS else "recv"
            if op == "send" and self._last_socket_op.get(owner.fileno()) != "send":
                self.events.append(Event("request", threading.get_ident(), stack=self._ga_stack(frame)))
            self._last_socket_op[owner.fileno()] = op

    def _ga_stack(self, frame: Any) -> list[str]:
        modules = []
        while frame is not None:
            if self.is_ga(frame) and not _loading(frame.f_code):
                modules.append(frame.f_globals.get("__name__", ""))
            frame = frame.f_back
        return _distinct(reversed(modules))

    def record(self, action: Callable[[], Any]) -> list[Event]:
        """Run `action` with recording on; the events it caused."""
        self.events, self._invocation, self._open_store_calls, self._last_socket_op, self._inside = [], {}, {}, {}, {}
        self.recording = True
        try:
            action()
        finally:
            self.recording = False
        return self.events


def _loading(code: Any) -> bool:
    """A module's or a class's body: code run by an import, not a function the path calls (such bodies run
    without a frame of their own locals, CO_NEWLOCALS)."""
    return not code.co_flags & inspect.CO_NEWLOCALS


def _package(module: str) -> str:
    return module.split(".")[0]


def _distinct(modules: Any) -> list[str]:
    return list(dict.fromkeys(m for m in modules if m))


def _called(events: list[Event]) -> list[str]:
    return [e.module for e in events if e.kind == "call"]


# ---- the walks --------------------------------------------------------------------------------------------

def turn_walk(events: list[Event]) -> list[str]:
    requests = [i for i, e in enumerate(events) if e.kind == "request"]
    if len(requests) < 3:
        raise SystemExit(f"walks: the turn walk saw {len(requests)} model requests, expected 3")
    start, end = requests[1], requests[2]
    return _distinct([*events[start].stack, *_called(events[start:end])])


def fanout_walk(events: list[Event]) -> tuple[list[str], list[str]]:
    """(the walk, not descending into the worker's run nor the memory tier; everything entered)."""
    end = next((i for i, e in enumerate(events) if e.kind == "results_line"), None)
    if end is None:  # written some other way than a file object's write(): the whole command is the window
        print("walks: no write to results.jsonl was seen; the fan-out walk runs to the command's end", file=sys.stderr)
    window = events[:end]
    return _distinct(_called([e for e in window if not e.inside])), _distinct(_called(window))


def commit_walk(events: list[Event]) -> list[str]:
    published = next((e.token for e in events if e.kind == "store_exit" and e.published), None)
    if published is None:
        raise SystemExit("walks: no call into the store published a generation")
    enter = events[published]
    first = next(i for i, e in enumerate(events)
                 if e.kind == "store_enter" and e.thread == enter.thread and e.token == enter.token)
    end = next(i for i, e in enumerate(events) if e.kind == "store_exit" and e.token == published)
    return _distinct([enter.module, *_called(events[first:end])])


# ---- running them -----------------------------------------------------------------------------------------

def ga_entry() -> tuple[str, str]:
    """(module, attribute) of the `ga` console script in pyproject.toml."""
    found = re.search(r'^ga\s*=\s*"([\w.]+):(\w+)"', (ROOT / "pyproject.toml").read_text(encoding="utf-8"), re.M)
    if found is None:
        raise SystemExit("walks: pyproject.toml names no `ga` console script ([project.scripts] ga = \"module:app\")")
    return found.group(1), found.group(2)


class ScriptedModel:
    """`ga fake-llm` in a process of its own: nothing of the server is in the trace."""

    def __init__(self, turns: list[dict[str, Any]], folder: Path):
        script = _write(folder / "script.yaml", json.dumps({"tasks": [{"match": ".*", "turns": turns}]}))
        module, attribute = ga_entry()
        code = f"import sys; from {module} import {attribute} as app; sys.argv[0] = 'ga'; app()"
        command = [sys.executable, "-c", code, "fake-llm", "--script", str(script), "--port", "0"]
        self.process = subprocess.Popen(command, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:(\d+)/v1", line)
        if found is None:
            self.process.kill()
            raise SystemExit(f"walks: `ga fake-llm` did not say where it listens (it printed {line!r})")
        self.url, self.port = found.group(0), int(found.group(1))

    def __enter__(self) -> "ScriptedModel":
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def _worker(folder: Path, model: ScriptedModel, store: Any) -> Any:
    from configs import load_settings
    from worker import Runtime, TaskSpec, Worker

    settings = load_settings({"worker.max_turns": 10}, user_file=folder / "no-user-config",
                             project_file=folder / "no-project-config")
    return Worker(TaskSpec("walk", task_id="walk", workdir=folder / "work", settings=settings,
                           history_path=folder / "walk" / "history.jsonl", model_name=f"scripted@{model.url}"),
                  Runtime(store=store))


def run_worker(tracer: Tracer, folder: Path, turns: list[dict[str, Any]], store: Any = None) -> list[Event]:
    with ScriptedModel(turns, folder) as model:
        worker = _worker(folder, model, store)
        tracer.model_port = model.port
        result: dict[str, Any] = {}
        events = tracer.record(lambda: result.update(done=worker.run()))
    status = getattr(result["done"], "status", "")
    if status not in ("succeeded", "unverified"):  # a file_write answers unverified: the same path
        raise SystemExit(f"walks: the scripted task ended {status!r}; the walk would not be the path")
    return events


def run_fanout(tracer: Tracer, folder: Path) -> list[Event]:
    from typer.testing import CliRunner

    from worker import Worker

    module, attribute = ga_entry()
    app = getattr(importlib.import_module(module), attribute)
    from memory_shared import MemoryStore

    tracer.boundary, tracer.boundary_module = Worker.run.__code__, Worker.__module__
    tracer.opaque_package = _package(MemoryStore.__module__)
    spec = _write(folder / "tasks.yaml", json.dumps({"version": 1, "name": "walk",
                                                      "tasks": [{"id": "one", "prompt": "write a.txt"}]}))
    args = ["fanout", str(spec), "--executor", "local", "--out", str(folder / "runs")]
    loaded = CliRunner().invoke(app, ["fanout", "--help"])  # the command's module, loaded outside the window
    if loaded.exit_code != 0:
        raise SystemExit(f"walks: `ga fanout --help` exited {loaded.exit_code}: {loaded.output.strip()[-400:]}")
    with ScriptedModel(FANOUT_SCRIPT, folder) as model:
        tracer.model_port = model.port
        outcome: dict[str, Any] = {}
        args += ["--model", f"scripted@{model.url}"]
        events = tracer.record(lambda: outcome.update(result=CliRunner().invoke(app, args)))
    result = outcome["result"]
    answered = result.exit_code == 1 and "1 unverified, 0 failed" in result.output  # a file_write backs no answer
    if result.exit_code != 0 and not answered:
        raise SystemExit(f"walks: `ga {' '.join(args)}` exited {result.exit_code}: {result.output.strip()[-400:]}")
    return events


def _quiet_logs() -> None:
    """A bare Worker logs through structlog's default (debug, to stdout); `ga fanout` sets up its own."""
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def measure(name: str) -> dict[str, list[str]]:
    """One walk, in this process: {"walk": [...]} (and for the fan-out "descended": [...])."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    _quiet_logs()
    with tempfile.TemporaryDirectory(prefix="ga-walks-") as temp:
        folder = Path(temp)
        os.environ["GA_HOME"] = str(folder / "home")  # nothing touches the user's ~/.ga
        tracer = Tracer(ROOT)
        tracer.install()
        try:
            if name == "turn":
                return {"walk": turn_walk(run_worker(tracer, folder, TURN_SCRIPT))}
            if name == "fanout":
                walk, descended = fanout_walk(run_fanout(tracer, folder))
                return {"walk": walk, "descended": descended}
            from memory_shared import MemoryStore

            store = MemoryStore(folder / "store", create=True)
            tracer.watch_store(store)
            return {"walk": commit_walk(run_worker(tracer, folder, COMMIT_SCRIPT, store=store))}
        finally:
            tracer.uninstall()


def measure_apart(name: str) -> dict[str, list[str]]:
    """One walk in a fresh process, as a real `ga` starts: nothing is left running from another walk."""
    done = subprocess.run([sys.executable, __file__, "--walk", name], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"walks: the {name} walk failed: {(done.stderr or done.stdout).strip()[-600:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def counted(modules: list[str]) -> list[str]:
    return [m for m in modules if _package(m) not in NOT_COUNTED]


def summary(name: str, measured: dict[str, list[str]]) -> dict[str, Any]:
    walk = measured["walk"]
    result = {"modules": walk, "counted": counted(walk), "count": len(counted(walk)), "goal": GOALS[name],
              "within_goal": len(counted(walk)) <= GOALS[name]}
    if "descended" in measured:
        result["descended"] = measured["descended"]
        result["descended_count"] = len(counted(measured["descended"]))
    return result


def show(name: str, walk: dict[str, Any]) -> None:
    print(f"{name}: {walk['count']} modules (goal <= {walk['goal']})")
    number = 0
    for module in walk["modules"]:
        mark = NOT_COUNTED.get(_package(module))
        if mark:
            print(f"      {module}  ({mark}: not counted)")
            continue
        number += 1
        print(f"  {number:2}. {module}")
    if "descended" in walk:
        inner = [m for m in counted(walk["descended"]) if m not in walk["modules"]]
        print(f"  not descended into (the worker's run, the memory tier's insides; {walk['descended_count']} "
              f"modules with them): {', '.join(inner)}")
    print()


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--walk", choices=list(GOALS), help=argparse.SUPPRESS)  # one walk, in this process
    options = parser.parse_args(argv)
    if options.walk:
        print(json.dumps(measure(options.walk)))
        return 0
    results = {name: summary(name, measure_apart(name)) for name in GOALS}
    if options.json:
        print(json.dumps(results, indent=2))
        return 0
    for name, walk in results.items():
        show(name, walk)
    return 0


if __name__ == "__main__":
    sys.exit(main())
