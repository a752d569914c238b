"""code_run under real bubblewrap, driven by the scripted model over HTTP: what a script can and cannot touch.

Probes a careless or hostile script would try: chmod + append on files of its pinned memory snapshot,
a write into GA_HOME, reading ~/.ssh, rewriting the store's HEAD. Sandboxed, all fail and the store is
unchanged; with `sandbox: off` they succeed (the store's own `verify` is what catches that).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from configs import load_settings
from memory_shared import MemoryStore
from skilltree.verify import Artifact, rerun
from worker import Runtime, TaskSpec, Worker
from worker.model import LLMClient
from worker.modelconfig import resolve_model
from worker.scripted import ScriptedServer

ROOT = Path(__file__).resolve().parents[2]
SECRET = "FAKE-PRIVATE-KEY-do-not-leak"
PROBES = """set +e
facts="$GA_MEMORY/L2/facts.md"
chmod u+w "$facts"; echo "chmod=$?"
echo TAMPERED >> "$facts"; echo "append=$?"
echo planted > "$GA_HOME/planted.txt"; echo "gahome=$?"
cat "$HOME/.ssh/id_ed25519"; echo "ssh=$?"
echo 7 > "$GA_MEMORY/../../HEAD"; echo "head=$?"
echo done > in_workdir.txt; echo "workdir=$?"
echo private > /tmp/ga-sandbox-probe.txt; echo "tmp=$?"
exit 0
"""


@pytest.fixture
def fake_home(monkeypatch):
    """A home directory outside /tmp (so the private /tmp cannot be what hides it) with a fake ~/.ssh key."""
    home = Path(tempfile.mkdtemp(prefix="ga-home-", dir="/var/tmp"))
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519").write_text(SECRET + "\n")
    monkeypatch.setenv("HOME", str(home))
    yield home
    shutil.rmtree(home, ignore_errors=True)


def settings_for(tmp_path: Path, **overrides):
    return load_settings(overrides, user_file=tmp_path / "none", project_file=tmp_path / "none")


def run_worker(tmp_path: Path, settings, turns: list[dict], store=None):
    script = {"tasks": [{"match": ".*", "turns": turns}]}
    with ScriptedServer(script, log_path=tmp_path / "requests.jsonl") as server:
        model = LLMClient(resolve_model(f"scripted@{server.base_url}", settings))
        worker = Worker(TaskSpec("probe the sandbox", task_id="t1", workdir=tmp_path / "work", settings=settings,
                                 history_path=tmp_path / "t1" / "history.jsonl"), Runtime(model=model, store=store))
        return worker.run()


def code_run_then_echo(script: str, kind: str = "bash") -> list[dict]:
    return [{"content": "probing", "tool_calls": [{"name": "code_run", "arguments": {"type": kind, "script": script}}]},
            {"content": "Probe:", "echo_last_tool_result": True}]


def store_state(root: Path) -> dict[str, tuple[str, int]]:
    """path -> (sha256, mode) of every published file: the generations, HEAD and the log."""
    state = {}
    published = [Path(folder, name) for folder, _, names in os.walk(root / "generations", followlinks=True)
                 for name in names]  # through the folders generations share (rglob does not follow them)
    for path in sorted([*published, root / "HEAD", root / "log.jsonl"]):
        if path.is_file():
            state[str(path.relative_to(root))] = (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mode)
    return state


def probe_results(answer: str) -> dict[str, int]:
    return {k: int(v) for k, v in (line.split("=", 1) for line in answer.splitlines()
                                   if "=" in line and line.split("=", 1)[1].isdigit())}


@pytest.mark.usefixtures("ray_session")
def test_probes_from_a_fanout_task_all_fail_and_the_store_is_unchanged(tmp_path, ga_home):
    """The unattended path (ga fanout, ga explore): the whole memory tier is read-only to the script."""
    from orchestrator import fanout

    settings = settings_for(tmp_path)
    MemoryStore(settings.memory_root, create=True)
    before = store_state(settings.memory_root)
    script = {"tasks": [{"match": ".*", "turns": code_run_then_echo(PROBES)}]}
    with ScriptedServer(script, log_path=tmp_path / "requests.jsonl") as server:
        run = fanout({"tasks": [{"id": "prober", "prompt": "probe"}], "defaults": {"model": f"scripted@{server.base_url}"}},
                     out=tmp_path / "runs", settings=settings, display="quiet")
    answer = run.results[0].answer
    codes = probe_results(answer)
    assert codes["chmod"] != 0 and codes["append"] != 0 and codes["gahome"] != 0 and codes["head"] != 0, answer
    assert codes["workdir"] == 0 and codes["tmp"] == 0, answer
    assert "Read-only file system" in answer
    assert store_state(settings.memory_root) == before
    assert not (ga_home / "planted.txt").exists()
    assert not Path("/tmp/ga-sandbox-probe.txt").exists()  # the script's /tmp was its own


def test_probes_from_a_cluster_less_task_fail_and_published_generations_are_unchanged(tmp_path, ga_home, fake_home):
    """ga run / chat / reflect / schedule: the whole store is read-only to the script, as on a fan-out."""
    settings = settings_for(tmp_path)
    assert settings.sandbox.mode == "bwrap" and settings.home_dir == ga_home
    store = MemoryStore(settings.memory_root, create=True)
    before = store_state(settings.memory_root)
    result = run_worker(tmp_path, settings, code_run_then_echo(PROBES), store=store)
    assert result.status == "succeeded", result.reason
    codes = probe_results(result.answer)
    assert codes["chmod"] != 0 and codes["append"] != 0, result.answer
    assert codes["gahome"] != 0 and codes["ssh"] != 0, result.answer
    assert codes["workdir"] == 0 and codes["tmp"] == 0, result.answer  # what it may write still works
    assert SECRET not in result.answer
    assert SECRET not in (tmp_path / "t1" / "history.jsonl").read_text()
    assert codes["head"] != 0, result.answer
    assert store_state(settings.memory_root) == before
    assert not (ga_home / "planted.txt").exists()
    assert (tmp_path / "work" / "in_workdir.txt").read_text() == "done\n"
    assert not Path("/tmp/ga-sandbox-probe.txt").exists()


def test_the_same_probes_with_sandbox_off_change_the_store(tmp_path, ga_home, fake_home):
    settings = settings_for(tmp_path, **{"sandbox.mode": "off"})
    store = MemoryStore(settings.memory_root, create=True)
    before = store_state(settings.memory_root)
    try:
        result = run_worker(tmp_path, settings, code_run_then_echo(PROBES), store=store)
    finally:
        Path("/tmp/ga-sandbox-probe.txt").unlink(missing_ok=True)
    codes = probe_results(result.answer)
    assert codes == {"chmod": 0, "append": 0, "gahome": 0, "ssh": 0, "head": 0, "workdir": 0, "tmp": 0}, result.answer
    assert SECRET in result.answer
    after = store_state(settings.memory_root)
    changed = {path for path in before if before[path] != after.get(path)}
    assert "HEAD" in changed and any(path.endswith("L2/facts.md") for path in changed), changed
    assert (settings.memory_root / "HEAD").read_text().strip() == "7"
    assert (ga_home / "planted.txt").read_text() == "planted\n"


def test_protected_paths_inside_the_workdir_stay_read_only(tmp_path, fake_home):
    extra = tmp_path / "shared-out"
    extra.mkdir()
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    (work / ".git" / "config").write_text("[core]\n")
    (fake_home / ".aws").mkdir()
    (fake_home / ".aws" / "credentials").write_text(SECRET)
    script = (f'set +e\necho hook >> .git/config; echo "git=$?"\necho x > {extra}/out.txt; echo "extra=$?"\n'
              'ls "$HOME/.aws"; cat "$HOME/.aws/credentials"; echo "aws=$?"\nexit 0\n')
    settings = settings_for(tmp_path, **{"sandbox.writable": [str(extra)]})
    result = run_worker(tmp_path, settings, code_run_then_echo(script))
    codes = probe_results(result.answer)
    assert codes["git"] != 0 and codes["extra"] == 0 and codes["aws"] != 0, result.answer
    assert (work / ".git" / "config").read_text() == "[core]\n"
    assert (extra / "out.txt").read_text() == "x\n"
    assert SECRET not in result.answer


@pytest.mark.parametrize("network, reachable", [(True, True), (False, False)])
def test_network_is_shared_unless_the_policy_turns_it_off(tmp_path, network, reachable):
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    script = ("import socket\ntry:\n    socket.create_connection(('127.0.0.1', %d), timeout=5).close()\n"
              "    print('net=0')\nexcept OSError as exc:\n    print(exc)\n    print('net=1')\n" % port)
    try:
        result = run_worker(tmp_path, settings_for(tmp_path, **{"sandbox.network": network}),
                            code_run_then_echo(script, "python"))
    finally:
        listener.close()
    assert (probe_results(result.answer)["net"] == 0) is reachable, result.answer


def test_missing_bubblewrap_fails_the_task_with_one_line(tmp_path):
    """`ga run` with the bwrap path pointing nowhere: the task fails and the script never runs."""
    work = tmp_path / "work"
    work.mkdir()
    script = {"tasks": [{"match": ".*", "turns": [
        {"content": "try", "tool_calls": [{"name": "code_run", "arguments": {"type": "bash", "script": "touch ran.txt"}}]},
        {"content": "it ran anyway"}]}]}
    with ScriptedServer(script, log_path=tmp_path / "requests.jsonl") as server:
        env = {**os.environ, "GA_SANDBOX__BWRAP": "/nonexistent/bwrap", "PYTHONPATH": str(ROOT)}
        done = subprocess.run([sys.executable, "-m", "cli", "run", "probe", "--model",
                               f"scripted@{server.base_url}", "--json"], cwd=work, env=env, capture_output=True,
                              text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "failed" and result["turns"] == 1
    reason = result["reason"]
    assert "\n" not in reason and "bubblewrap not found ('/nonexistent/bwrap')" in reason
    assert "apt-get install bubblewrap" in reason and "sandbox: {mode: off}" in reason
    assert not (work / "ran.txt").exists() and not list(work.glob(".ga/code_*"))


def test_sandbox_off_is_logged_as_a_warning(tmp_path, capsys):
    result = run_worker(tmp_path, settings_for(tmp_path, **{"sandbox.mode": "off"}), code_run_then_echo("echo hi"))
    assert result.status == "succeeded"
    captured = capsys.readouterr()
    assert "sandbox_off" in captured.out + captured.err


def test_exploration_reruns_have_no_network(tmp_path):
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    text = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=5).close()\nprint('reached')\n"
    script = Artifact("check.py", text, True)
    try:
        sandboxed = rerun(script, [script], timeout=30)
        unsandboxed = rerun(script, [script], timeout=30, sandbox=load_settings({"sandbox.mode": "off"}).sandbox)
    finally:
        listener.close()
    assert sandboxed[0] != 0 and "reached" not in sandboxed[1]
    assert unsandboxed == (0, "reached\n")


def test_scripts_run_when_the_interpreter_lives_under_tmp(tmp_path: Path) -> None:
    """A virtualenv (or checkout) under /tmp: the sandbox's private /tmp must not hide the interpreter."""
    import subprocess
    import sys

    venv = tmp_path / "venv"  # tmp_path is under /tmp
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True)
    (tmp_path / "work").mkdir()
    probe = ("from pathlib import Path\nfrom configs import load_settings\nfrom worker.tools import REGISTRY, ToolContext\n"
             f"ctx = ToolContext(task_id='t', workdir=Path({str(tmp_path / 'work')!r}), settings=load_settings(), "
             "memory=None)\n"
             "spec = REGISTRY['code_run']\n"
             "print(spec.run(ctx, spec.args.model_validate({'script': 'import sys; print(sys.prefix)', 'type': 'python'})).output)")
    # --system-site-packages reaches the base interpreter's packages, not those of a venv this test runs in
    import site

    path = os.pathsep.join([str(Path(__file__).resolve().parents[2]), *site.getsitepackages()])
    done = subprocess.run([str(venv / "bin" / "python"), "-c", probe], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": path})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "exit code 0" in done.stdout and str(venv) in done.stdout, done.stdout


def test_a_forward_is_the_only_way_out_of_a_sandbox_without_network() -> None:
    """Policy.forwards: a loopback port inside the sandbox leads to one Unix socket outside; nothing else is reachable."""
    import threading

    from worker import sandbox

    folder = Path(tempfile.mkdtemp(prefix="ga-forward-"))
    path = folder / "upstream.sock"
    upstream = socket.socket(socket.AF_UNIX)
    upstream.bind(str(path))
    upstream.listen()
    outside = socket.create_server(("127.0.0.1", 0))  # on the host's loopback: must stay out of reach

    def answer() -> None:
        conn, _ = upstream.accept()
        conn.sendall(b"upstream says " + conn.recv(64))
        conn.close()

    threading.Thread(target=answer, daemon=True).start()
    script = ("import socket\ns = socket.create_connection(('127.0.0.1', 8400), timeout=5)\ns.sendall(b'hello')\n"
              "s.shutdown(socket.SHUT_WR)\nprint(s.recv(64).decode())\ntry:\n"
              f"    socket.create_connection(('127.0.0.1', {outside.getsockname()[1]}), timeout=5)\n    print('host=0')\n"
              "except OSError:\n    print('host=1')\nraise SystemExit(3)\n")
    argv = sandbox.wrap([sys.executable, "-c", script], sandbox.Policy(network=False, forwards=((8400, path),)),
                        "bwrap", Path("/"))
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    finally:
        outside.close()
        upstream.close()
        shutil.rmtree(folder, ignore_errors=True)
    assert done.returncode == 3, done.stderr  # the script's own exit status comes through the launcher
    assert done.stdout.splitlines() == ["upstream says hello", "host=1"], done.stdout
