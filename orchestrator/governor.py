"""The rate-limit governor: one per model endpoint, shared by every worker that calls it (a named Ray actor
on a cluster, a plain object in the driver's process with the in-process executor).

- Request and token rates (`fanout.rpm`, `fanout.tpm`) are kept with GCRA reservations: a worker
  asks before each request and is told to go or how long to wait (the governor never sleeps).
- While nothing is to be enforced (no rates, no pause) workers do not ask: each worker process follows
  the governor's "calm" state with one long poll, so the calm path costs no call per request.
- A 429 pauses *every* worker on the endpoint for its Retry-After plus jitter. When the pause ends,
  one probe request goes first; the others wait until it succeeds, so a storm costs one request per
  pause instead of one per worker.
- `circuit_after` pauses in a row without a success open the circuit: callers are told to stop,
  the run is paused (resumable). After `circuit_cooldown` seconds one probe may try again.
"""
from __future__ import annotations

import hashlib
import random
import threading
import time
import uuid
from typing import TYPE_CHECKING, Callable, Optional, Union

from configs.logs import redact_text
from orchestrator.records import EndpointGovernor, GovernorSnapshot, Job
from worker.model import ChatMessage, HookedModel, LLMClient, Model, ModelError, Reply, ToolSchema
from worker.usage import Usage

if TYPE_CHECKING:
    from worker.modelconfig import ModelConfig

if TYPE_CHECKING:
    from configs.settings import FanoutSettings

NAMESPACE = "ga"
CIRCUIT_OPEN = -1.0
PROBE_WAIT = 0.2  # seconds a non-probe caller waits before asking again while a probe is out
PROBE_TIMEOUT = 30.0  # a probe that never reports back frees its slot after this long
BURST_SECONDS = 10.0  # rates allow a burst of this many seconds' worth


def endpoint_key(base_url: str, model: str) -> str:
    return f"{base_url.rstrip('/')}#{model}"


def actor_name(key: str) -> str:
    return "ga-governor-" + hashlib.sha1(key.encode()).hexdigest()[:16]


class GovernorState:
    """The decision logic, plain Python (the actor below wraps it)."""

    def __init__(self, key: str, rpm: Optional[int] = None, tpm: Optional[int] = None,
                 circuit_after: int = 10, circuit_cooldown: float = 60.0, clock: Callable[[], float] = time.monotonic):
        self.key, self.clock = key, clock
        self.configure(rpm, tpm, circuit_after, circuit_cooldown)
        self.req_tat = self.tok_tat = 0.0
        self.paused_until = 0.0
        self.need_probe = False
        self.probe: Optional[tuple[str, float]] = None  # (client, granted at)
        self.failed_pauses = 0
        self.circuit_until = 0.0
        self.stats = {"granted": 0, "waits": 0, "rate_limits": 0, "pauses": 0, "circuit_opened": 0, "successes": 0}

    def configure(self, rpm: Optional[int], tpm: Optional[int], circuit_after: int, circuit_cooldown: float) -> None:
        self.rpm, self.tpm = rpm, tpm
        self.circuit_after, self.circuit_cooldown = max(1, circuit_after), circuit_cooldown

    def acquire(self, client: str, tokens: int = 0) -> float:
        now = self.clock()
        if now < self.circuit_until:
            return CIRCUIT_OPEN
        if now < self.paused_until:
            self.stats["waits"] += 1
            return self.paused_until - now + random.uniform(0, 0.05)
        if self.need_probe:
            holder = self.probe
            if holder is None or holder[0] == client or now - holder[1] > PROBE_TIMEOUT:
                self.probe = (client, now)
            else:
                self.stats["waits"] += 1
                return PROBE_WAIT
        wait = self._reserve(now, tokens)
        if wait > 0:
            self.stats["waits"] += 1
            return wait
        self.stats["granted"] += 1
        return 0.0

    def _reserve(self, now: float, tokens: int) -> float:
        waits = []
        req_tat = tok_tat = None
        if self.rpm:
            req_tat, wait = _gcra(self.req_tat, now, 60.0 / self.rpm, 1)
            waits.append(wait)
        if self.tpm and tokens:
            tok_tat, wait = _gcra(self.tok_tat, now, 60.0 / self.tpm, tokens)
            waits.append(wait)
        if any(w > 0 for w in waits):
            return max(waits)
        if req_tat is not None:
            self.req_tat = req_tat
        if tok_tat is not None:
            self.tok_tat = tok_tat
        return 0.0

    def done(self, client: str, tokens: int = 0, estimate: int = 0) -> None:
        """A request succeeded: close the pause, release the probe, correct the token reservation."""
        self.stats["successes"] += 1
        self.failed_pauses = 0
        self.need_probe = False
        self.probe = None
        self.circuit_until = 0.0
        if self.tpm and tokens != estimate:
            self.tok_tat += (tokens - estimate) * 60.0 / self.tpm

    def rate_limited(self, client: str, retry_after: float) -> None:
        now = self.clock()
        self.stats["rate_limits"] += 1
        retry_after = max(0.0, float(retry_after or 0.0))
        fresh = now >= self.paused_until  # a 429 of a request sent before the pause began does not count again
        self.paused_until = max(self.paused_until, now + retry_after + random.uniform(0, min(1.0, 0.2 * retry_after + 0.05)))
        self.need_probe = True
        self.probe = None
        if fresh:
            self.stats["pauses"] += 1
            self.failed_pauses += 1
            if self.failed_pauses >= self.circuit_after:
                self.circuit_until = now + self.circuit_cooldown
                self.failed_pauses = 0
                self.stats["circuit_opened"] += 1

    def calm(self) -> bool:
        """Nothing to enforce: no rates, no pause, no probe pending, circuit closed (workers may skip asking)."""
        now = self.clock()
        return not (self.rpm or self.tpm or self.need_probe or now < self.paused_until or now < self.circuit_until)

    def snapshot(self) -> GovernorSnapshot:
        now = self.clock()
        return {"endpoint": self.key, "paused_for": max(0.0, self.paused_until - now),
                "circuit_open": now < self.circuit_until, "rpm": self.rpm, "tpm": self.tpm, **self.stats}


def _gcra(tat: float, now: float, interval: float, cost: int) -> tuple[float, float]:
    """(new theoretical arrival time, wait): wait > 0 means not yet."""
    tat = max(tat, now)
    allowed_at = tat - BURST_SECONDS
    if now < allowed_at:
        return tat, allowed_at - now
    return tat + interval * cost, 0.0


class Governor:
    """The shared part: GovernorState behind a lock. In the driver's process (in-process executor) it is used as
    is; on Ray it is a detached, named actor per endpoint that ends itself after `idle_seconds` without calls.

    Threaded: worker processes keep a `watch` call open (a long poll) to learn at once when the
    endpoint stops or starts being calm; every state change bumps `version` and wakes them.
    """

    def __init__(self, key: str, rpm: Optional[int], tpm: Optional[int], circuit_after: int,
                 circuit_cooldown: float, idle_seconds: Optional[float] = None):
        self.state = GovernorState(key, rpm, tpm, circuit_after, circuit_cooldown)
        self.instance = uuid.uuid4().hex  # a re-created governor (same name) is told apart by this
        self.last_call = time.monotonic()
        self.version = 0
        self.changed = threading.Condition()
        if idle_seconds:
            threading.Thread(target=self._reap_when_idle, args=(idle_seconds,), daemon=True).start()

    def _touch(self, bump: bool = False) -> None:
        self.last_call = time.monotonic()
        if bump:
            self.version += 1
            self.changed.notify_all()

    def configure(self, rpm: Optional[int], tpm: Optional[int], circuit_after: int, circuit_cooldown: float) -> str:
        with self.changed:
            self.state.configure(rpm, tpm, circuit_after, circuit_cooldown)
            self._touch(bump=True)
            return self.instance

    def acquire(self, client: str, tokens: int = 0) -> float:
        with self.changed:
            calm = self.state.calm()
            wait = self.state.acquire(client, tokens)
            self._touch(bump=calm != self.state.calm())
            return wait

    def done(self, client: str, tokens: int = 0, estimate: int = 0) -> None:
        with self.changed:
            calm = self.state.calm()
            self.state.done(client, tokens, estimate)
            self._touch(bump=calm != self.state.calm())

    def rate_limited(self, client: str, retry_after: float) -> None:
        with self.changed:
            self.state.rate_limited(client, retry_after)
            self._touch(bump=True)

    def watch(self, version: int, timeout: float) -> tuple[int, bool]:
        """(version, calm) as soon as the version differs from the caller's, or after `timeout` seconds."""
        with self.changed:
            self.changed.wait_for(lambda: self.version != version, timeout)
            return self.version, self.state.calm()

    def snapshot(self) -> GovernorSnapshot:
        with self.changed:
            self._touch()
            return self.state.snapshot()

    def _reap_when_idle(self, idle_seconds: float) -> None:
        import ray  # here: only the Ray actor reaps itself; the in-process Governor runs without Ray

        while True:
            time.sleep(min(5.0, idle_seconds / 2))
            if time.monotonic() - self.last_call > idle_seconds:
                ray.kill(ray.get_runtime_context().current_actor)
                return


class GovernorGone(RuntimeError):
    """The governor actor is gone (idle reap race, cluster trouble)."""


_LOCAL: dict[str, Governor] = {}
_LOCAL_LOCK = threading.Lock()


def local_governor(key: str, fanout_settings: FanoutSettings) -> Governor:
    """The endpoint's governor in this process (in-process executor): shared by every run of the process."""
    s = fanout_settings
    with _LOCAL_LOCK:
        governor = _LOCAL.get(key)
        if governor is None:
            governor = _LOCAL[key] = Governor(key, s.rpm, s.tpm, s.circuit_after, s.circuit_cooldown)
    governor.configure(s.rpm, s.tpm, s.circuit_after, s.circuit_cooldown)
    return governor


class CircuitOpen(ModelError):
    """The endpoint's circuit is open: the run pauses instead of failing its tasks."""


class GovernorLink:
    """One per governor per worker process: follows the governor's calm state with a long poll, so while
    the endpoint is calm (no rates set, no pause, no probe) requests go out without asking."""

    IDLE = 30.0  # stop watching after this long without a request (an idle pool must let the governor idle out)

    def __init__(self, governor: EndpointGovernor):
        self.governor = governor
        self.calm = False
        self.version = -1
        self.used = time.monotonic()
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()

    def touch(self) -> None:
        with self._lock:
            self.used = time.monotonic()
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._follow, daemon=True, name="ga-governor-link")
                self._thread.start()

    def disturb(self) -> None:
        """A 429 seen here: stop skipping at once (the governor's answer follows)."""
        self.calm = False

    def _follow(self) -> None:
        while time.monotonic() - self.used < self.IDLE:
            try:
                self.version, self.calm = self.governor.watch(self.version, 5.0)
            except GovernorGone:
                self.calm = False
                time.sleep(1.0)
        self.calm = False  # no longer followed: ask again


_LINKS: dict[str, GovernorLink] = {}
_LINKS_LOCK = threading.Lock()


def link_for(governor: EndpointGovernor) -> GovernorLink:
    key = governor.instance  # a re-created governor (same name) is a different one: a new link
    with _LINKS_LOCK:
        link = _LINKS.get(key)
        if link is None:
            link = _LINKS[key] = GovernorLink(governor)
    link.touch()
    return link


class GovernedModel:
    """Wraps an LLMClient so every request asks the endpoint's governor first and reports back
    (unless the endpoint is calm: then the request goes straight out)."""

    def __init__(self, client: HookedModel, governor: EndpointGovernor, client_id: str):
        self.client, self.governor, self.client_id = client, governor, client_id
        self.link = link_for(governor)
        self.asked = False  # this request went through the governor: report its outcome
        self.estimate = 2000
        self.circuit_open = False
        self.rate_limits = 0
        self.waited = 0.0
        client.before_request = self.before_request
        client.on_rate_limit = self.on_rate_limit

    @property
    def config(self) -> Optional[ModelConfig]:
        return self.client.config

    def before_request(self) -> None:
        self.link.touch()
        if self.link.calm:
            return
        self.asked = True
        while True:
            try:
                wait = self.governor.acquire(self.client_id, self.estimate)
            except GovernorGone:
                return  # the governor is gone (idle reap race): proceed ungoverned rather than fail the task
            if wait == CIRCUIT_OPEN:
                self.circuit_open = True
                raise CircuitOpen("the endpoint keeps refusing requests (rate limit/quota): circuit open, run paused")
            if wait <= 0:
                return
            self.waited += wait
            time.sleep(wait)

    def on_rate_limit(self, retry_after: float) -> None:
        self.rate_limits += 1
        self.link.disturb()
        self.governor.rate_limited(self.client_id, retry_after)

    def chat(self, messages: list[ChatMessage], tools: list[ToolSchema]) -> Reply:
        self.asked = False
        reply = self.client.chat(messages, tools)
        used = reply.usage.prompt + reply.usage.completion
        if self.asked:
            self.governor.done(self.client_id, used, self.estimate)
        self.estimate = max(1, used)
        return reply


def task_model(job: Job, client_id: str) -> Model:
    """A task's model from its job: the client, governed when its endpoint has a governor, with the
    fallbacks its models.yaml entry names behind it."""
    chain: list[tuple[str, Model]] = []
    for entry in [job, *job.fallbacks]:
        client = LLMClient(entry.endpoint)
        model: Model = GovernedModel(client, entry.governor, client_id) if entry.governor else client
        chain.append((str(entry.model_name or entry.endpoint.name), model))
    return chain[0][1] if len(chain) == 1 else FailoverModel(chain)


class FailoverModel:
    """A task's model and its fallbacks: when the model in use fails a request after the client's
    retries (5xx, connection errors, a key refused) or its endpoint's circuit opens, that request and the
    rest of the task go to the next model. Every switch is kept (the driver writes it to the ledger)."""

    def __init__(self, chain: list[tuple[str, Model]]):
        self.chain, self.index = chain, 0
        self.switches: list[dict[str, Union[str, float]]] = []  # {from, to, at, reason}
        self.usage: dict[str, Usage] = {}

    @property
    def config(self) -> Optional[ModelConfig]:
        """The config of the model in use."""
        return self.chain[self.index][1].config

    @property
    def circuit_open(self) -> bool:
        """Only the last model's open circuit pauses the run: before it, the task moves on."""
        return bool(getattr(self.chain[self.index][1], "circuit_open", False))

    def chat(self, messages: list[ChatMessage], tools: list[ToolSchema]) -> Reply:
        while True:
            name, model = self.chain[self.index]
            try:
                reply = model.chat(messages, tools)
            except ModelError as exc:
                if self.index + 1 == len(self.chain):
                    raise
                self.index += 1
                self.switches.append({"from": name, "to": self.chain[self.index][0], "at": round(time.time(), 3),
                                      "reason": redact_text(str(exc))[:300]})
                continue
            self.usage[name] = self.usage.get(name, Usage()) + reply.usage
            return reply
