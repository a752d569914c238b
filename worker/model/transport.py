"""One POST to a model endpoint, bounded in time and size: the transport under worker/llm.py.

httpcore2's timeouts apply to each socket operation, so an endpoint that sends one byte a second
never trips them. Here every socket operation of a request (the wait for a pooled connection,
connect, TLS, each write and each read) waits at most until that request's deadline, kept per
thread (sync httpcore2 does all I/O in the calling thread), so the whole exchange ends by it.
The body is read in chunks and refused once it passes `max_bytes`, so it is never held whole.
"""
from __future__ import annotations

import itertools
import os
import ssl
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

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


class ReplyTooLarge(Exception):
    """The reply's body is over the cap; `announced` is its Content-Length when the server sent one."""

    def __init__(self, limit: int, announced: Optional[int] = None):
        super().__init__(f"reply over {limit} bytes")
        self.limit, self.announced = limit, announced


class BadURL(ValueError):
    """The endpoint URL cannot be requested; str() says why."""


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
         on_events: Optional[Callable[[bytes], None]] = None) -> HttpReply:
    """POST `payload`; the reply (any status) within `timeout` seconds in all, or httpcore2.TimeoutException;
    ReplyTooLarge past `max_bytes`; httpcore2's NetworkError/ProtocolError/ProxyError when the link fails.
    A 200 that streams server-sent events is also handed to `on_events` chunk by chunk as it arrives."""
    check_url(url)
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

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore2.NetworkBackend):
    def __init__(self) -> None:
        self._backend = httpcore2.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: Optional[float] = None, local_address: Optional[str] = None,
                    socket_options: Any = None) -> httpcore2.NetworkStream:
        return _DeadlineStream(self._backend.connect_tcp(host, port, _remaining(timeout, httpcore2.ConnectTimeout),
                                                         local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: Optional[float] = None,
                            socket_options: Any = None) -> httpcore2.NetworkStream:
        return _DeadlineStream(self._backend.connect_unix_socket(path, _remaining(timeout, httpcore2.ConnectTimeout),
                                                                 socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


def _pool(url: str) -> httpcore2.ConnectionPool:
    """The calling thread's pool of SHARDS per proxy setting per process (keep-alive across tasks; the CA bundle
    is loaded once)."""
    proxy = _proxy_for(url)
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


def _ssl_context() -> ssl.SSLContext:
    """One context (its CA bundle loaded once) for every pool; the caller holds _POOLS_LOCK."""
    if not _SSL:
        _SSL.append(httpcore2.default_ssl_context())
    return _SSL[0]


def _proxy_for(url: str) -> str:
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
