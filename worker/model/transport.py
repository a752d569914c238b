"""One POST to a model endpoint, bounded in time and size: the transport under worker/model/client.py.

A request's every socket operation (connect, TLS, each write and each read) waits at most until that
request's deadline, so an endpoint that sends one byte a second still ends by it. The body is read in
chunks and refused once it passes `max_bytes`, so it is never held whole.

Direct connections speak HTTP/1.1 on plain keep-alive sockets (one idle list per endpoint, shared by all
threads): with hundreds of workers in one process, httpcore2's pool cost more CPU than everything else a
request does (bench/fanout.py). Through a proxy the request goes through httpcore2, which speaks CONNECT.
Failures are httpcore2's exception classes either way, so callers catch one set.
"""
from __future__ import annotations

import collections
import functools
import itertools
import math
import os
import select
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Callable, Iterable, Optional

import httpcore2

_local = threading.local()
_POOLS: dict[tuple[str, int], httpcore2.ConnectionPool] = {}
_POOLS_LOCK = threading.Lock()
# A pool looks at every connection it holds for each request it starts and ends: with hundreds of workers in one
# process one pool cost more CPU than the requests. Each thread uses one of SHARDS pools, so each holds few.
SHARDS = 32
_next_shard = itertools.count()
_PROXY_VARIABLES = ("http_proxy", "https_proxy", "no_proxy", "all_proxy")
_PROXIES: dict[tuple, str] = {}  # (the proxy variables, scheme, host) -> the proxy for it
KEEPALIVE_EXPIRY = 5.0  # seconds an idle connection is kept
MAX_IDLE = 1024  # idle connections kept per endpoint
MAX_HEAD = 64 * 1024  # bytes of status line and headers (and of a chunk-size line) before the reply is refused
_RECV = 64 * 1024
_IDLE: dict[tuple[str, str, int], collections.deque] = {}  # (scheme, host, port) -> idle _Connection, newest last
_IDLE_LOCK = threading.Lock()


class ReplyTooLarge(Exception):
    """The reply's body is over the cap; `announced` is its Content-Length when the server sent one."""

    def __init__(self, limit: int, announced: Optional[int] = None):
        super().__init__(f"reply over {limit} bytes")
        self.limit, self.announced = limit, announced


class BadURL(ValueError):
    """The endpoint URL cannot be requested; str() says why."""


class RequestAborted(Exception):
    """The thread's Abort was called: its request was cut (or never sent)."""


class Abort:
    """Cuts a thread's model requests from any thread, for a task cancelled mid-reply: without it a cancel waits
    for the reply in flight, up to request_timeout. Calling it shuts the socket of the request in flight, so its
    wait ends at once and the server sees the client go (llama.cpp stops generating); every later request of
    the thread is refused unsent. `with abort:` makes it the thread's. Direct connections only: a request through
    a proxy runs to its deadline."""

    def __init__(self) -> None:
        self.cut = threading.Event()
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._outer: list[Optional["Abort"]] = []

    def __call__(self) -> None:
        self.cut.set()
        with self._lock:
            for sock in self._sockets:
                _shut(sock)

    def __enter__(self) -> "Abort":
        self._outer.append(getattr(_local, "abort", None))
        _local.abort = self
        return self

    def __exit__(self, *_exc: object) -> None:
        _local.abort = self._outer.pop()

    def hold(self, sock: socket.socket) -> None:
        with self._lock:
            if self.cut.is_set():
                raise RequestAborted("the request was cut: its task was cancelled")
            self._sockets.add(sock)

    def release(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(sock)


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


@dataclass
class HttpReply:
    status: int
    headers: dict[str, str]  # lower-case names
    body: bytes


def check_url(url: str) -> None:
    """BadURL unless `url` is an http(s) URL with a host and a valid port."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise BadURL(f"not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadURL("expected http://HOST[:PORT]/... or https://...")
    if port == 0:
        raise BadURL("port 0 cannot be reached")


def post(url: str, payload: bytes, headers: dict[str, str], timeout: float, max_bytes: int,
         on_events: Optional[Callable[[bytes], None]] = None, proxy: Optional[str] = None) -> HttpReply:
    """POST `payload`; the reply (any status) within `timeout` seconds in all, or httpcore2.TimeoutException;
    ReplyTooLarge past `max_bytes`; httpcore2's NetworkError/ProtocolError/ProxyError when the link fails.
    A 200 that streams server-sent events is also handed to `on_events` chunk by chunk as it arrives.
    proxy: the proxy for `url` as `proxy_for` gave it when the caller was made ("" none; None: look now)."""
    endpoint, target = _endpoint(url)
    if proxy is None:
        proxy = proxy_for(url)
    if proxy:
        return _post_through_proxy(url, payload, headers, timeout, max_bytes, on_events)
    deadline = time.monotonic() + timeout
    head = _request_head(endpoint, target, tuple(headers.items()), len(payload))
    connection = _idle_connection(endpoint)
    if connection is not None:
        try:
            return connection.exchange(head, payload, deadline, max_bytes, on_events)
        except _StaleConnection:
            pass  # the server closed it while it was idle, before reading a byte of this request: a fresh one
    connection = _Connection.open(endpoint, deadline)
    try:
        return connection.exchange(head, payload, deadline, max_bytes, on_events)
    except _StaleConnection:
        raise httpcore2.RemoteProtocolError("the server closed the connection without replying") from None


@functools.lru_cache(maxsize=256)
def _endpoint(url: str) -> tuple[tuple[str, str, int], str]:
    """((scheme, host, port), the request target) of a URL check_url accepts, once per URL; BadURL otherwise."""
    check_url(url)
    parts = urllib.parse.urlsplit(url)
    scheme, host = parts.scheme, parts.hostname or ""
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return (scheme, host, parts.port or (443 if scheme == "https" else 80)), target


def answers(url: str, headers: dict[str, str], timeout: float) -> bool:
    """Whether a GET of `url` gets any HTTP reply within about `timeout` seconds (each socket wait is bounded):
    the probe that tells a slow server from a stopped or stuck one after a request timed out."""
    try:
        check_url(url)
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout) as reply:
            reply.read(65536)
        return True
    except urllib.error.HTTPError:
        return True  # it answered, with an error status
    except (OSError, ValueError, BadURL):
        return False


def _request_head(endpoint: tuple[str, str, int], target: str, headers: tuple[tuple[str, str], ...],
                  length: int) -> bytes:
    before, after = _head_around_length(endpoint, target, headers)
    return b"%s%d%s" % (before, length, after)


@functools.lru_cache(maxsize=256)
def _head_around_length(endpoint: tuple[str, str, int], target: str,
                        headers: tuple[tuple[str, str], ...]) -> tuple[bytes, bytes]:
    """The request head before and after the Content-Length value: the same for every request of a client."""
    scheme, host, port = endpoint
    default_port = 443 if scheme == "https" else 80
    authority = host if port == default_port else f"{host}:{port}"
    if ":" in host:
        authority = f"[{host}]" if port == default_port else f"[{host}]:{port}"
    lines = [f"POST {target} HTTP/1.1", f"Host: {authority}"]
    rest = [f"{name}: {value}" for name, value in headers if name.lower() not in ("host", "content-length")]
    if any("\r" in line or "\n" in line for line in lines + rest):  # never says which: it may be the key
        raise httpcore2.LocalProtocolError("a request header contains a line break")
    try:
        return (("\r\n".join(lines) + "\r\nContent-Length: ").encode("latin-1"),
                "".join(f"\r\n{line}" for line in rest).encode("latin-1") + b"\r\n\r\n")
    except UnicodeEncodeError:
        raise httpcore2.LocalProtocolError("a request header is not Latin-1 text") from None


def _idle_connection(endpoint: tuple[str, str, int]) -> Optional["_Connection"]:
    """The newest idle connection to `endpoint` still open, or None; those the server closed, or idle past
    KEEPALIVE_EXPIRY, are closed here."""
    while True:
        with _IDLE_LOCK:
            idle = _IDLE.get(endpoint)
            found = idle.pop() if idle else None
        if found is None or (found.used >= time.monotonic() - KEEPALIVE_EXPIRY and found.quiet()):
            return found
        found.close()


def _keep(connection: "_Connection") -> None:
    """Back to the idle list; the oldest past KEEPALIVE_EXPIRY, or past MAX_IDLE, are closed."""
    now = connection.used = time.monotonic()
    closing = []
    with _IDLE_LOCK:
        idle = _IDLE.setdefault(connection.endpoint, collections.deque())
        idle.append(connection)
        while idle and (len(idle) > MAX_IDLE or idle[0].used < now - KEEPALIVE_EXPIRY):
            closing.append(idle.popleft())
    for old in closing:
        old.close()


class _StaleConnection(Exception):
    """A kept-alive connection the server had closed: nothing of the reply came back."""


class _Connection:
    """One HTTP/1.1 connection; every socket operation waits at most until the request's deadline."""

    def __init__(self, sock: socket.socket, endpoint: tuple[str, str, int]):
        self.sock, self.endpoint = sock, endpoint
        self.tls = isinstance(sock, ssl.SSLSocket)
        self.buffer = bytearray()
        self.used = 0.0
        self.deadline = 0.0
        # Non-blocking from here on, each wait a poll bounded by the deadline: a socket timeout costs an ioctl
        # before every send and receive, and every syscall drops the GIL among hundreds of threads.
        sock.setblocking(False)
        self.poller = select.poll()
        self.poller.register(sock, select.POLLIN)

    @classmethod
    def open(cls, endpoint: tuple[str, str, int], deadline: float) -> "_Connection":
        scheme, host, port = endpoint
        try:
            sock = socket.create_connection((host, port), timeout=_left(deadline, httpcore2.ConnectTimeout))
        except TimeoutError as exc:
            raise httpcore2.ConnectTimeout(str(exc) or "connect timed out") from None
        except OSError as exc:
            raise httpcore2.ConnectError(str(exc) or type(exc).__name__) from None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if scheme == "https":
                sock.settimeout(_left(deadline, httpcore2.ConnectTimeout))
                sock = _ssl_context().wrap_socket(sock, server_hostname=host)
        except TimeoutError:
            sock.close()
            raise httpcore2.ConnectTimeout("TLS handshake timed out") from None
        except OSError as exc:  # ssl.SSLError included
            sock.close()
            raise httpcore2.ConnectError(str(exc) or type(exc).__name__) from None
        except BaseException:
            sock.close()
            raise
        return cls(sock, endpoint)

    def quiet(self) -> bool:
        """True while the idle connection has nothing to read: no close from the server, no stray bytes."""
        self.poller.modify(self.sock, select.POLLIN)
        return not self.poller.poll(0)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def exchange(self, head: bytes, payload: bytes, deadline: float, max_bytes: int,
                 sink: Optional[Callable[[bytes], None]]) -> HttpReply:
        """Send the request and read its reply; the connection goes back to the idle list when both ends keep it."""
        self.deadline = deadline
        abort: Optional[Abort] = getattr(_local, "abort", None)
        try:
            if abort is None:
                reply, reusable = self._exchange(head, payload, max_bytes, sink)
            else:
                abort.hold(self.sock)
                try:
                    reply, reusable = self._exchange(head, payload, max_bytes, sink)
                finally:
                    abort.release(self.sock)
                reusable = reusable and not abort.cut.is_set()  # it may have been shut as the reply ended
        except BaseException:
            self.close()
            if abort is not None and abort.cut.is_set():
                raise RequestAborted("the request was cut: its task was cancelled") from None
            raise
        if reusable:
            _keep(self)
        else:
            self.close()
        return reply

    def _exchange(self, head: bytes, payload: bytes, max_bytes: int,
                  sink: Optional[Callable[[bytes], None]]) -> tuple[HttpReply, bool]:
        fresh = self.used == 0.0
        try:
            self._send(head + payload if len(payload) < 65536 else head)
            if len(payload) >= 65536:
                self._send(payload)
        except httpcore2.WriteError:
            if fresh:
                raise
            raise _StaleConnection() from None
        status, names = self._read_head(fresh)
        while 100 <= status < 200 and status != 101:  # an interim reply: the real one follows
            status, names = self._read_head(True)
        connection = names.get("connection", "").lower()
        reusable = "close" not in connection
        announced = names.get("content-length", "")
        streamed = status == 200 and "text/event-stream" in names.get("content-type", "")
        sink = sink if streamed else None
        if status in (204, 304):
            return HttpReply(status, names, b""), reusable
        if "chunked" in names.get("transfer-encoding", "").lower():
            body = _read_capped(self._chunks(), max_bytes, sink)
        elif announced:
            if not announced.isdigit():
                raise httpcore2.RemoteProtocolError(f"bad Content-Length {announced[:40]!r}")
            if int(announced) > max_bytes:
                raise ReplyTooLarge(max_bytes, int(announced))
            body = _read_capped(self._exactly(int(announced)), max_bytes, sink)
        else:
            body = _read_capped(self._until_close(), max_bytes, sink)
            reusable = False
        return HttpReply(status, names, body), reusable

    def _wait(self, events: int, expired: type[Exception]) -> None:
        """Until the socket is ready for `events` (or has failed: the next call says how), at most to the deadline."""
        self.poller.modify(self.sock, events)
        self.poller.poll(math.ceil(_left(self.deadline, expired) * 1000))

    def _send(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[self.sock.send(view):]
            except (BlockingIOError, ssl.SSLWantWriteError):
                self._wait(select.POLLOUT, httpcore2.WriteTimeout)
            except ssl.SSLWantReadError:
                self._wait(select.POLLIN, httpcore2.WriteTimeout)
            except OSError as exc:
                raise httpcore2.WriteError(str(exc) or type(exc).__name__) from None

    def _fill(self) -> bool:
        """Read what has arrived into the buffer; False at the end of the stream."""
        if not self.tls:  # TLS may hold decrypted bytes the socket no longer shows: it tries the read first
            self._wait(select.POLLIN, httpcore2.ReadTimeout)
        while True:
            try:
                data = self.sock.recv(_RECV)
                break
            except (BlockingIOError, ssl.SSLWantReadError):
                self._wait(select.POLLIN, httpcore2.ReadTimeout)
            except ssl.SSLWantWriteError:
                self._wait(select.POLLOUT, httpcore2.ReadTimeout)
            except OSError as exc:
                raise httpcore2.ReadError(str(exc) or type(exc).__name__) from None
        self.buffer += data
        return bool(data)

    def _line(self, end: bytes = b"\r\n") -> bytes:
        """Up to and without `end`, taken from the buffer; at most MAX_HEAD bytes."""
        start = 0
        while True:
            found = self.buffer.find(end, start)
            if found >= 0:
                line = bytes(self.buffer[:found])
                del self.buffer[:found + len(end)]
                return line
            if len(self.buffer) > MAX_HEAD:
                raise httpcore2.RemoteProtocolError(f"a header or chunk line over {MAX_HEAD} bytes")
            start = max(0, len(self.buffer) - len(end) + 1)
            if not self._fill():
                raise httpcore2.RemoteProtocolError("the server closed the connection mid-reply")

    def _read_head(self, fresh: bool) -> tuple[int, dict[str, str]]:
        if not self.buffer:
            try:
                if not self._fill():
                    if not fresh:
                        raise _StaleConnection()
                    raise httpcore2.RemoteProtocolError("the server closed the connection without replying")
            except httpcore2.ReadError:
                if not fresh:
                    raise _StaleConnection() from None
                raise
        lines = self._line(b"\r\n\r\n").decode("latin-1").split("\r\n")
        status_line = lines[0].split(" ", 2)
        if len(status_line) < 2 or not status_line[0].startswith("HTTP/1.") or not status_line[1].isdigit() \
                or len(status_line[1]) != 3:
            raise httpcore2.RemoteProtocolError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
        names: dict[str, str] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon or not name or name != name.strip():
                raise httpcore2.RemoteProtocolError(f"a malformed header line: {line[:80]!r}")
            names[name.lower()] = value.strip()
        if status_line[0] == "HTTP/1.0" and "keep-alive" not in names.get("connection", "").lower():
            names.setdefault("connection", "close")
        return int(status_line[1]), names

    def _exactly(self, size: int) -> Iterable[bytes]:
        while size > 0:
            if not self.buffer and not self._fill():
                raise httpcore2.RemoteProtocolError("the server closed the connection before the whole body came")
            chunk = bytes(self.buffer[:size])
            del self.buffer[:len(chunk)]
            size -= len(chunk)
            yield chunk

    def _chunks(self) -> Iterable[bytes]:
        while True:
            size_text = self._line().split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise httpcore2.RemoteProtocolError(f"a bad chunk size {size_text[:40]!r}") from None
            if size < 0:
                raise httpcore2.RemoteProtocolError("a negative chunk size")
            if size == 0:
                while self._line():  # trailers, up to the empty line
                    pass
                return
            yield from self._exactly(size)
            if self._line():
                raise httpcore2.RemoteProtocolError("a chunk longer than its size said")

    def _until_close(self) -> Iterable[bytes]:
        while True:
            if self.buffer:
                chunk = bytes(self.buffer)
                self.buffer.clear()
                yield chunk
            if not self._fill():
                return


def _left(deadline: float, expired: type[Exception]) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise expired("the request's total deadline passed")
    return left


def _post_through_proxy(url: str, payload: bytes, headers: dict[str, str], timeout: float, max_bytes: int,
                        on_events: Optional[Callable[[bytes], None]]) -> HttpReply:
    _local.deadline = time.monotonic() + timeout
    try:
        limits = {"connect": timeout, "read": timeout, "write": timeout, "pool": timeout}
        with _pool(url).stream("POST", url, headers=list(headers.items()), content=payload,
                               extensions={"timeout": limits}) as response:
            names = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in response.headers}
            announced = names.get("content-length", "")
            if announced.isdigit() and int(announced) > max_bytes:
                raise ReplyTooLarge(max_bytes, int(announced))  # closing unread drops the connection
            streamed = response.status == 200 and "text/event-stream" in names.get("content-type", "")
            sink = on_events if streamed else None
            return HttpReply(response.status, names, _read_capped(response.iter_stream(), max_bytes, sink))
    finally:
        _local.deadline = None


def _read_capped(chunks: Iterable[bytes], max_bytes: int, sink: Optional[Callable[[bytes], None]] = None) -> bytes:
    body, size = [], 0
    for chunk in chunks:
        size += len(chunk)
        if size > max_bytes:
            raise ReplyTooLarge(max_bytes)
        body.append(chunk)
        if sink is not None:
            sink(chunk)
    return b"".join(body)


def _remaining(timeout: Optional[float], expired: type[Exception]) -> Optional[float]:
    deadline = getattr(_local, "deadline", None)
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise expired("the request's total deadline passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore2.NetworkStream):
    def __init__(self, stream: httpcore2.NetworkStream):
        self._stream = stream

    def read(self, max_bytes: int, timeout: Optional[float] = None) -> bytes:
        return self._stream.read(max_bytes, _remaining(timeout, httpcore2.ReadTimeout))

    def write(self, buffer: bytes, timeout: Optional[float] = None) -> None:
        self._stream.write(buffer, _remaining(timeout, httpcore2.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: Optional[str] = None,
                  timeout: Optional[float] = None) -> httpcore2.NetworkStream:
        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname,
                                                      _remaining(timeout, httpcore2.ConnectTimeout)))

    def get_extra_info(self, info: str) -> object:
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore2.NetworkBackend):
    def __init__(self) -> None:
        self._backend = httpcore2.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: Optional[float] = None, local_address: Optional[str] = None,
                    socket_options: Optional[Iterable[httpcore2.SOCKET_OPTION]] = None,
                    ) -> httpcore2.NetworkStream:
        return _DeadlineStream(self._backend.connect_tcp(host, port, _remaining(timeout, httpcore2.ConnectTimeout),
                                                         local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: Optional[float] = None,
                            socket_options: Optional[Iterable[httpcore2.SOCKET_OPTION]] = None,
                    ) -> httpcore2.NetworkStream:
        return _DeadlineStream(self._backend.connect_unix_socket(path, _remaining(timeout, httpcore2.ConnectTimeout),
                                                                 socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


def _pool(url: str) -> httpcore2.ConnectionPool:
    """The calling thread's pool of SHARDS per proxy per process (keep-alive across tasks)."""
    proxy = proxy_for(url)
    shard = getattr(_local, "shard", None)
    if shard is None:
        shard = _local.shard = next(_next_shard) % SHARDS
    with _POOLS_LOCK:
        pool = _POOLS.get((proxy, shard))
        if pool is None:
            pool = _POOLS[(proxy, shard)] = httpcore2.ConnectionPool(
                ssl_context=_ssl_context(), proxy=httpcore2.Proxy(proxy) if proxy else None,
                max_connections=1000, max_keepalive_connections=16, keepalive_expiry=5.0,
                network_backend=_DeadlineBackend())
        return pool


_SSL: list[ssl.SSLContext] = []
_SSL_LOCK = threading.Lock()


def _ssl_context() -> ssl.SSLContext:
    """One context (its CA bundle loaded once) for every connection and pool."""
    if not _SSL:
        with _SSL_LOCK:
            if not _SSL:
                _SSL.append(httpcore2.default_ssl_context())
    return _SSL[0]


def proxy_for(url: str) -> str:
    """The http(s) proxy the environment names for this URL ('' for none), as the SDK honoured it; remembered
    per value of the proxy variables (urllib reads the whole environment each time)."""
    parts = urllib.parse.urlsplit(url)
    key = (tuple(os.environ.get(name) for name in _PROXY_VARIABLES + tuple(v.upper() for v in _PROXY_VARIABLES)),
           parts.scheme, parts.hostname)
    found = _PROXIES.get(key)
    if found is None:
        proxy = urllib.request.getproxies().get(parts.scheme, "")
        if not proxy or urllib.request.proxy_bypass(parts.hostname or ""):
            found = ""
        else:
            found = proxy if proxy.startswith(("http://", "https://")) else ""
        _PROXIES[key] = found
    return found
