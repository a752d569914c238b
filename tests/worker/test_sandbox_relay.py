"""The gateway relay started from outside (worker/sandbox_relay.py): real bubblewrap, the real relay host.

A held sandbox's forwards listen before its command runs, lead to their socket and nowhere else, and no relay
process lives inside the sandbox; a sandbox whose relays cannot start (its network is the host's) never runs its
command; a relay ends with its sandbox.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from worker import sandbox, sandbox_relay

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
# What the script sees: the forward's answer, whether the host's loopback is reachable, the sandbox's processes.
SCRIPT = """import os, socket, sys
s = socket.create_connection(('127.0.0.1', 8400), timeout=5)
s.sendall(b'hello')
s.shutdown(socket.SHUT_WR)
print(s.recv(64).decode())
try:
    socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=5)
    print('host=0')
except OSError:
    print('host=1')
print('processes=%d' % len([p for p in os.listdir('/proc') if p.isdigit()]))
raise SystemExit(3)
"""


def wait_for(check, seconds: float = 10.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(0.05)
    return check()


def host_children() -> list[int]:
    proc = sandbox_relay.relay_host()._proc
    if proc is None:
        return []
    try:
        return [int(pid) for pid in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()]
    except OSError:
        return []


@pytest.fixture
def upstream():
    """A Unix socket that answers one connection with what it was sent, its path with a space."""
    folder = Path(tempfile.mkdtemp(prefix="ga relay-"))  # a space in the path: the request is JSON, not words
    path = folder / "upstream.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()

    def answer() -> None:
        conn, _ = server.accept()
        conn.sendall(b"upstream says " + conn.recv(64))
        conn.close()

    threading.Thread(target=answer, daemon=True).start()
    yield path
    server.close()
    shutil.rmtree(folder, ignore_errors=True)


def start_held(command: list[str], policy: sandbox.Policy) -> tuple[subprocess.Popen, sandbox_relay.Hold]:
    hold = sandbox_relay.Hold()
    argv = sandbox.wrap(command, policy, "bwrap", Path("/"), relay_outside=hold.bwrap_args)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                            pass_fds=hold.child_fds)
    return proc, hold


def test_a_held_sandbox_reaches_its_forward_only_and_has_no_relay_inside(upstream: Path) -> None:
    assert sandbox_relay.usable("bwrap", True), "the relay host cannot join a sandbox on this machine"
    outside = socket.create_server(("127.0.0.1", 0))  # on the host's loopback: must stay out of reach
    try:
        proc, hold = start_held([sys.executable, "-c", SCRIPT, str(outside.getsockname()[1])],
                                sandbox.Policy(network=False, forwards=((8400, upstream),)))
        try:
            assert hold.release(((8400, upstream),)) is None
        finally:
            hold.close()
        out, err = proc.communicate(timeout=60)
    finally:
        outside.close()
    assert proc.returncode == 3, err  # the script's own exit status, as without forwards
    # bubblewrap's init and the script: the launcher's relay would be a third
    assert out.splitlines() == ["upstream says hello", "host=1", "processes=2"], out + err


def test_a_sandbox_whose_relays_cannot_start_never_runs_its_command(tmp_path: Path, upstream: Path) -> None:
    """The host's own network (no --unshare-net): the relay host refuses to bind there, and the command stays held
    until the sandbox is killed."""
    marker = tmp_path / "ran"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc, hold = start_held(["/bin/sh", "-c", f"touch {marker}"],
                            sandbox.Policy(network=True, writable=(tmp_path,), forwards=((port, upstream),)))
    try:
        problem = hold.release(((port, upstream),))
        assert problem and "no network namespace of its own" in problem, problem
        assert hold.holding
        proc.kill()
        proc.wait(timeout=30)
    finally:
        hold.close()
    assert not marker.exists(), "the command ran without its relays"
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()  # nothing bound on the host's loopback


def test_a_relay_ends_with_its_sandbox(upstream: Path) -> None:
    proc, hold = start_held(["/bin/sh", "-c", "echo started; exec sleep 60"],
                            sandbox.Policy(network=False, forwards=((8400, upstream),)))
    try:
        assert hold.release(((8400, upstream),)) is None
    finally:
        hold.close()
    assert proc.stdout and proc.stdout.readline() == "started\n"  # killed only once it runs (see below)
    relays = host_children()
    assert relays, "no relay under the relay host"
    # bubblewrap dies, its sandbox with it (--die-with-parent; bubblewrap 0.8 itself misses a parent that dies
    # while it sets the sandbox up, hence the wait above)
    proc.kill()
    proc.wait(timeout=30)
    assert wait_for(lambda: not any(os.path.exists(f"/proc/{pid}") for pid in relays)), "a relay outlived its sandbox"


def test_a_gateway_code_run_reaches_its_gateway_with_no_relay_inside(tmp_path: Path) -> None:
    """code_run's default network: the gateway's port answers the script's first connect, and the sandbox holds
    bubblewrap's init, bash and the script's python only (the launcher's relay would be one more)."""
    from configs import load_settings
    from worker.tools import REGISTRY, ToolContext

    settings = load_settings({"sandbox.network": "gateway"}, user_file=tmp_path / "none",
                             project_file=tmp_path / "none")
    ctx = ToolContext(task_id="relay", workdir=tmp_path, settings=settings, memory=None, model_config=None)
    script = ("python3 -c \"import os, urllib.request\n"
              "print(urllib.request.urlopen('http://127.0.0.1:8411/v1/models', timeout=10).status)\n"
              "print('processes=%d' % len([p for p in os.listdir('/proc') if p.isdigit()]))\"")
    spec = REGISTRY["code_run"]
    try:
        result = spec.run(ctx, spec.args.model_validate({"type": "bash", "script": script}))
    finally:
        ctx.close()
    assert result.ok, result.output
    assert result.output.splitlines()[1:] == ["200", "processes=3"], result.output
