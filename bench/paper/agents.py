"""The two agents the paper's runners drive on the same endpoint, each in a fresh workspace per task:

- `ga`: one `worker.Worker` per task, with its own memory store (or one shared by a longitudinal series);
- `reference`: the GenericAgent reference, run by its own loop from a checkout outside this repository
  (bench/paper/reference.py makes one), under bubblewrap (read-only system, its checkout writable, loopback
  network for the proxy), by the driver bench/paper/ref_driver.py. Its code is never copied here.

Both reach the model through the counting proxy (bench/paper/proxy.py) under a label per task, so their
tokens are counted the same way. Each returns an `Outcome`; the runner grades it.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Optional

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.paper.proxy import CountingProxy, Tally  # noqa: E402

REF_DRIVER = Path(__file__).with_name("ref_driver.py")


@dataclass
class Endpoint:
    base_url: str
    model: str
    tool_mode: Literal["native", "text"] = "native"
    context_window: int = 16384
    max_tokens: int = 1536
    request_timeout: float = 600.0


@dataclass
class Outcome:
    agent: str
    task_id: str
    answer: str = ""
    status: str = ""  # the agent's own word for how it ended
    turns: int = 0
    tool_calls: int = 0
    wall: float = 0.0
    tally: Tally = field(default_factory=Tally)
    workspace: Optional[Path] = None
    note: str = ""


Prepare = Callable[[Path], None]  # puts a task's input files into its workspace


def run_ga(task_id: str, prompt: str, prepare: Prepare, endpoint: Endpoint, proxy: CountingProxy, out: Path, *,
           max_turns: int, timeout: float, memory_root: Optional[Path] = None,
           check: Optional[dict[str, Any]] = None) -> Outcome:
    from configs import load_settings
    from memory_shared import MemoryStore
    from worker import Runtime, TaskSpec, Worker
    from worker.model import LLMClient
    from worker.modelconfig import ModelConfig
    from worker.taskcheck import TaskCheck

    label = f"ga-{task_id}-{time.monotonic_ns()}"
    home = out / "ga" / task_id
    shutil.rmtree(home, ignore_errors=True)
    workspace = home / "work"
    workspace.mkdir(parents=True)
    prepare(workspace)
    settings = load_settings({"worker.max_turns": max_turns, "home": str(home / "home")},
                             user_file=home / "none", project_file=home / "none")
    config = ModelConfig(name="bench", base_url=proxy.url(label), model=endpoint.model, tool_mode=endpoint.tool_mode,
                         context_window=endpoint.context_window, max_tokens=endpoint.max_tokens,
                         request_timeout=endpoint.request_timeout, max_retries=1,
                         stream=True)  # a looping reply is cut where it repeats (a small model on a CPU server)
    store = MemoryStore(memory_root or home / "memory", create=True)
    worker = Worker(TaskSpec(prompt, task_id=task_id, workdir=workspace, settings=settings,
                             history_path=home / "history.jsonl", check=TaskCheck.model_validate(check) if check else None),
                    Runtime(model=LLMClient(config), store=store))
    timer = _Deadline(timeout, worker.cancel)
    started = time.monotonic()
    try:
        record = worker.run()
    finally:
        timer.cancel()
    wall = time.monotonic() - started
    history = home / "history.jsonl"
    calls = sum(len(json.loads(line).get("tool_results") or []) for line in history.read_text().splitlines()) \
        if history.is_file() else 0
    return Outcome("ga", task_id, record.answer or "", record.status, record.turns, calls, wall, proxy.tally(label),
                   workspace, record.reason)


def run_reference(task_id: str, prompt: str, prepare: Prepare, endpoint: Endpoint, proxy: CountingProxy, out: Path, *,
                  max_turns: int, timeout: float, reference: Path, checkout: Optional[Path] = None) -> Outcome:
    """One task in a fresh copy of the reference's checkout (`checkout`: a given one, kept across tasks: the
    longitudinal series with memory on)."""
    label = f"ref-{task_id}-{time.monotonic_ns()}"
    home = out / "reference" / task_id
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    tree = checkout or home / "checkout"
    if not (tree / "agentmain.py").is_file():
        shutil.copytree(reference / "checkout", tree, symlinks=True)
    workspace = tree / "temp"
    if checkout is None or not workspace.is_dir():
        shutil.rmtree(workspace, ignore_errors=True)
        workspace.mkdir()
    prepare(workspace)
    (tree / "mykey.py").write_text(_mykey(endpoint, proxy.url(label)))
    (home / "prompt.txt").write_text(prompt)
    result = home / "result.json"
    python = reference / "venv" / "bin" / "python"
    command = [str(python), str(REF_DRIVER), str(tree), str(home / "prompt.txt"), str(result), str(max_turns)]
    env = {"PATH": f"{python.parent}:/usr/bin:/bin", "HOME": str(home), "GA_LANG": "en", "PYTHONUNBUFFERED": "1",
           "LANG": "C.UTF-8"}
    started = time.monotonic()
    note = ""
    with open(home / "driver.log", "wb") as log:
        try:
            subprocess.run(_sandboxed(command, tree, reference, home), env=env, stdout=log, stderr=subprocess.STDOUT,
                           timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            note = f"stopped at the {timeout:g}s task timeout"
    wall = time.monotonic() - started
    data = json.loads(result.read_text()) if result.is_file() else {}
    return Outcome("reference", task_id, data.get("answer", ""), data.get("exit", note or "no result"),
                   data.get("turns", 0), sum((data.get("tool_calls") or {}).values()), wall, proxy.tally(label),
                   workspace, note or data.get("exit", ""))


def _mykey(endpoint: Endpoint, url: str) -> str:
    name = "native_oai_config" if endpoint.tool_mode == "native" else "oai_config"
    cfg = {"name": "bench", "apikey": "sk-none", "apibase": url, "model": endpoint.model, "temperature": 0,
           "max_tokens": endpoint.max_tokens, "context_win": endpoint.context_window, "read_timeout": int(endpoint.request_timeout),
           "max_retries": 1, "stream": True}
    return f"{name} = {cfg!r}\n"


def _sandboxed(command: list[str], tree: Path, reference: Path, home: Path) -> list[str]:
    """The reference runs what its model writes with no sandbox of its own: bubblewrap gives it a read-only
    system, its checkout and task folder writable, a private /tmp and the host's loopback (the proxy)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SystemExit("error: bwrap is not installed: the reference is only run sandboxed (apt-get install bubblewrap)")
    return [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
            "--ro-bind", str(reference), str(reference), "--bind", str(tree), str(tree), "--bind", str(home), str(home),
            "--unshare-pid", "--die-with-parent", "--chdir", str(tree), *command]


class _Deadline:
    """Calls `stop` after `seconds` unless cancelled first."""

    def __init__(self, seconds: float, stop: Callable[[], None]):
        import threading

        self.timer = threading.Timer(seconds, stop)
        self.timer.daemon = True
        self.timer.start()

    def cancel(self) -> None:
        self.timer.cancel()


def fresh_dir(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix))


def env_note() -> str:
    return f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
