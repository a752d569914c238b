"""The gateway relay started from outside the sandbox, with it rather than after it.

One relay host per ga process (worker/sandbox_launch.py --host, started at the first sandbox with forwards)
joins each such sandbox's network namespace while bubblewrap holds the command (`Hold`: --info-fd tells the
sandbox's first process, --block-fd holds it before the exec), binds the forwarded ports there and answers;
only then does the command start. So no interpreter starts inside the sandbox, and a script's first connect
to the gateway finds its port listening. `usable` tries it once a process with a real sandbox; where the
kernel or a container refuses to join a namespace, the launcher runs inside the sandbox as before.
"""
from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Optional

import structlog

from worker import sandbox

log = structlog.get_logger("worker.sandbox")
PROBE_PORT = 47011  # any port: the probe's sandbox has a loopback of its own


class Hold:
    """The pipes of one sandbox's start: bubblewrap writes its first process's pid on one and waits on the other
    before it execs the command. `release` after the sandbox's Popen; `close` in any case, and after a failed
    release only once the sandbox is dead (a closed hold lets the command run)."""

    def __init__(self) -> None:
        self._info_read, self.info_write = os.pipe()
        self.block_read, self._block_write = os.pipe()
        self._open = {self._info_read, self.info_write, self.block_read, self._block_write}
        self.holding = True  # the command waits: closing the hold now would let it run unrelayed

    @property
    def bwrap_args(self) -> tuple[str, ...]:
        return ("--info-fd", str(self.info_write), "--block-fd", str(self.block_read))

    @property
    def child_fds(self) -> tuple[int, int]:
        return self.info_write, self.block_read

    def release(self, forwards: tuple[tuple[int, Path], ...]) -> Optional[str]:
        """The relays listening in the sandbox, the command let go: None; else why not (the command has not run:
        kill the sandbox, then `close`). A sandbox that ended before it started (bubblewrap refused its argv)
        is None too: its exit status and message are code_run's result."""
        self._close(self.info_write, self.block_read)  # bubblewrap's ends: its pipes end with it now
        info = _read_all(self._info_read)
        if not info:
            self.holding = False  # bubblewrap ended: there is nothing to hold
            return None
        try:
            pid = int(json.loads(info)["child-pid"])
        except (ValueError, KeyError, TypeError):
            return f"bubblewrap's --info-fd said {info[:80]!r}, no child-pid"
        answer = relay_host().relay(pid, forwards)
        if answer != "ok":
            return answer
        self.holding = False
        try:
            os.write(self._block_write, b"1")
        except BrokenPipeError:  # killed meanwhile (a cancel): its end is gone, and so is the command
            pass
        return None

    def close(self) -> None:
        self._close(*self._open)

    def _close(self, *fds: int) -> None:
        for fd in fds:
            if fd in self._open:  # never twice: the number may be another file's by then
                self._open.discard(fd)
                os.close(fd)


class RelayHost:
    """The process's relay host: a request a line in, an answer a line out (worker/sandbox_launch.py)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: Optional[subprocess.Popen] = None

    def relay(self, pid: int, forwards: tuple[tuple[int, Path], ...]) -> str:
        """`ok` once the relays of the sandbox whose first process is `pid` listen, else `error: ...`."""
        line = json.dumps([pid, [[port, str(path)] for port, path in forwards]]) + "\n"  # a path may hold spaces
        with self._lock:
            for _ in range(2):  # a host that died (killed by hand) is started again, once
                proc = self._running()
                assert proc.stdin and proc.stdout
                try:
                    proc.stdin.write(line.encode())
                    proc.stdin.flush()
                    answer = proc.stdout.readline().decode().strip()
                except OSError:
                    answer = ""
                if answer:
                    return answer
                self._proc = None
            return "error: the gateway's relay host ended"

    def _running(self) -> subprocess.Popen:
        if self._proc is None or self._proc.poll() is not None:
            # its own session: a Ctrl-C on ga's terminal is ga's to handle; it ends when its input does (ga ends)
            self._proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", sandbox.launcher_source(), "--host"],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
        return self._proc


_HOST = RelayHost()


def relay_host() -> RelayHost:
    return _HOST


@functools.lru_cache(maxsize=8)
def usable(bwrap: str, proc: bool) -> bool:
    """Whether the relay host can serve a sandbox here: one real sandbox started the way code_run starts one
    (once per binary for the process's life)."""
    hold = Hold()
    argv = sandbox.wrap(["true"], sandbox.Policy(network=False), bwrap, Path("/"), proc=proc,
                        relay_outside=hold.bwrap_args)
    try:
        started = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   pass_fds=hold.child_fds)
    except OSError as exc:
        hold.close()
        log.info("gateway_relay_inside", reason=str(exc)[:160])
        return False
    problem = hold.release(((PROBE_PORT, Path("/nonexistent")),))
    if problem:
        started.kill()
    hold.close()
    try:
        _, stderr = started.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        started.kill()
        started.wait()
        problem, stderr = problem or "timed out", b""
    if problem or started.returncode != 0:
        log.info("gateway_relay_inside", reason=(problem or stderr.decode(errors="replace").strip())[:160],
                 note="the relay host cannot join a sandbox here: each sandbox starts its own relay")
        return False
    return True


def _read_all(fd: int) -> str:
    data = b""
    while chunk := os.read(fd, 4096):
        data += chunk
    return data.decode(errors="replace")
