"""The gateway relay: listen on loopback ports of a sandbox's own network namespace and relay each connection to
a Unix socket outside. Two ways to run it.

    python -I -S sandbox_launch.py --host
    python -I -S sandbox_launch.py PORT=SOCKET [PORT=SOCKET ...] -- COMMAND...

The relay host (`--host`, worker/sandbox_relay.py starts one per ga process, outside any sandbox): a JSON line
`[PID, [[PORT, SOCKET], ...]]` on stdin asks for the relays of the sandbox whose first process is PID, which bubblewrap
holds before it execs the command (--block-fd). A forked child joins that process's network namespace (and
its user namespace, when bubblewrap made one), binds the ports, answers `ok` (or `error: ...`) on stdout, and
relays until PID ends: ga then lets the command run. No interpreter starts per sandbox, and the relay is in
no sandbox's process tree, so bubblewrap's init never waits for it. A PID whose network namespace is the
host's own is refused: the ports are bound nowhere but in a sandbox.

As the sandbox's first process (where the host cannot join a sandbox: `sandbox_relay.usable`), under `--unshare-net` the sandbox has its own loopback and nothing else: a port listened on here is the only
way out, and it leads to one socket ga serves (the model gateway, an egress proxy). The listeners are bound
before the command starts; a forked child relays, and this process execs the command, so the command's exit
status and signals are the sandbox's as without forwards. The relay ends when the command does: it watches
for its parent (the command, after the exec) to go, because bubblewrap's init waits for every child before it
ends the sandbox, so a relay left waiting on its listeners would keep a sandbox alive whose command a reaper
killed after ga itself died.
Built-in modules and two small extension ones (select, ctypes: under 1 ms each, measured), started with -I -S: a
bare interpreter start-up is nearly its whole cost. json (~8 ms more) is loaded by the host alone.
"""
import _signal  # pyright: ignore[reportMissingImports]  # a built-in module typeshed has no stubs for
import _socket
import _thread
import ctypes
import os
import select
import sys
import time

CHUNK = 65536
WATCH_SECONDS = 0.5  # how often the relay looks whether the command is still its parent


def main(argv: list) -> None:
    split = argv.index("--")
    forwards = _listen(argv[:split])
    command = os.getpid()
    if os.fork() == 0:
        _relay_while(forwards, command)
    for listener, _ in forwards:
        listener.close()
    for name in ("SIGPIPE", "SIGXFSZ"):  # Python ignores these, and an ignored signal stays ignored across exec
        _signal.signal(getattr(_signal, name), _signal.SIG_DFL)
    os.execvp(argv[split + 1], argv[split + 1:])


def _listen(specs: list) -> list:
    """(listener, socket path) for each PORT=SOCKET, bound on this network namespace's loopback."""
    forwards = []
    for spec in specs:
        port, _, path = spec.partition("=")
        listener = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
        listener.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", int(port)))
        listener.listen(64)
        forwards.append((listener, path))
    return forwards


def _relay_while(forwards: list, command: int) -> None:
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the script's output file stays the script's
        os.dup2(null, fd)
    for listener, path in forwards:
        _thread.start_new_thread(_accept, (listener, path))
    while os.getppid() == command:  # once the command is gone this process is re-parented
        time.sleep(WATCH_SECONDS)
    os._exit(0)


def _accept(listener: _socket.socket, path: str) -> None:
    while True:
        # the C socket's accept, missing from typeshed: a file descriptor (socket.py is not imported)
        fd, _ = listener._accept()  # pyright: ignore[reportAttributeAccessIssue]
        client = _socket.socket(fileno=fd)
        # a reply relayed in two writes (head, body) must not wait for the client's delayed ACK (Nagle: ~40 ms)
        client.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
        _thread.start_new_thread(_connect, (client, path))


def _connect(client: _socket.socket, path: str) -> None:
    upstream = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        upstream.close()
        return
    done = _thread.allocate_lock()
    done.acquire()
    _thread.start_new_thread(_pipe, (upstream, client, done))
    _pipe(client, upstream, None)
    done.acquire()
    client.close()
    upstream.close()


def _pipe(source: _socket.socket, target: _socket.socket, done) -> None:
    try:
        while True:
            data = source.recv(CHUNK)
            if not data:
                break
            target.sendall(data)
    except OSError:
        pass
    try:
        target.shutdown(_socket.SHUT_WR)
    except OSError:
        pass
    if done is not None:
        done.release()


def host() -> None:
    """The relay host's loop: one request a line on stdin, one answer a line on stdout, until stdin ends."""
    import json  # here, outside any sandbox, once: ~8 ms a sandbox's first process (main) does not pay

    setns = _setns_function()
    _signal.signal(_signal.SIGCHLD, _signal.SIG_IGN)  # the relays' children are reaped by the kernel
    pending = b""
    while True:
        while b"\n" not in pending:
            chunk = os.read(0, 4096)
            if not chunk:
                return
            pending += chunk
        line, _, pending = pending.partition(b"\n")
        try:
            request = json.loads(line)
        except ValueError:
            os.write(1, b"error: the relay host's request is no JSON\n")
            continue
        os.write(1, _start_relay(request, setns, select.poll).encode() + b"\n")


def _start_relay(request: list, setns, poll) -> str:
    """Fork the relay of one sandbox; its answer once its ports listen (or why they cannot)."""
    readable, writable = os.pipe()
    if os.fork() == 0:
        try:
            os.close(readable)
            _relay_in(request, setns, poll, writable)
        finally:
            os._exit(1)  # whatever happens, never back into the host's loop
    os.close(writable)
    answer = b""
    while not answer.endswith(b"\n"):
        chunk = os.read(readable, 4096)
        if not chunk:
            break
        answer += chunk
    os.close(readable)
    return answer.decode().strip() or "error: the relay ended before it listened"


def _relay_in(request: list, setns, poll, answer: int) -> None:
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):  # the host's pipes stay the host's: its end of input is ga's
        os.dup2(null, fd)
    try:
        pid, forwards = int(request[0]), [(int(port), str(path)) for port, path in request[1]]
        alive = os.pidfd_open(pid)
        namespaces = []
        for kind in ("user", "net"):
            theirs, ours = f"/proc/{pid}/ns/{kind}", f"/proc/self/ns/{kind}"
            if os.stat(theirs).st_ino != os.stat(ours).st_ino:
                namespaces.append(os.open(theirs, os.O_RDONLY))
            elif kind == "net":
                raise OSError(f"process {pid} has no network namespace of its own")
        probe = poll()
        probe.register(alive, 1)  # POLLIN: the process ended (its pid may be another's by now)
        if probe.poll(0):
            raise OSError(f"process {pid} ended")
        for fd in namespaces:  # the user namespace first: it holds the rights on the network one
            setns(fd)
            os.close(fd)
        listeners = _listen([f"{port}={path}" for port, path in forwards])
    except (OSError, ValueError, IndexError, TypeError) as exc:
        os.write(answer, f"error: {exc}\n".encode())
        os._exit(1)
    os.write(answer, b"ok\n")
    os.close(answer)
    for listener, path in listeners:
        _thread.start_new_thread(_accept, (listener, path))
    probe.poll()  # until the sandbox's first process ends
    os._exit(0)


def _setns_function():
    """setns(2): os.setns from Python 3.12, libc's through ctypes before (loaded once, in the host only)."""
    if hasattr(os, "setns"):
        return lambda fd: os.setns(fd, 0)  # pyright: ignore[reportAttributeAccessIssue]  (3.12+)
    libc = ctypes.CDLL(None, use_errno=True)

    def setns(fd: int) -> None:
        if libc.setns(fd, 0) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"setns: {os.strerror(error)}")
    return setns


if __name__ == "__main__":
    if sys.argv[1:] == ["--host"]:
        host()
    else:
        main(sys.argv[1:])
