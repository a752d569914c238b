"""The rate-limit governor on a Ray cluster: one named actor per endpoint (orchestrator/governor.py's Governor),
and `RemoteGovernor`, how workers call it. Only a run on Ray loads this module (and Ray with it).
"""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, TypeVar

import ray
import ray.exceptions  # a submodule: `import ray` alone does not make it an attribute for pyright
from ray import ObjectRef
from ray.actor import ActorClass, ActorHandle

from orchestrator.governor import NAMESPACE, Governor, GovernorGone, actor_name
from orchestrator.records import GovernorSnapshot

if TYPE_CHECKING:
    from configs.settings import FanoutSettings

Answer = TypeVar("Answer")


@dataclass
class RemoteGovernor:
    """A Ray governor actor as workers call it: the same methods as Governor, synchronous where an answer is
    needed, fire-and-forget for reports. Picklable: it travels in the job to worker processes."""

    handle: ActorHandle[Governor]
    instance: str

    def _get(self, ref: ObjectRef[Answer], timeout: Optional[float] = None) -> Answer:
        try:
            return ray.get(ref, timeout=timeout)
        except ray.exceptions.RayError as exc:
            raise GovernorGone(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None

    def acquire(self, client: str, tokens: int = 0) -> float:
        return self._get(self.handle.acquire.remote(client, tokens))

    def done(self, client: str, tokens: int = 0, estimate: int = 0) -> None:
        self.handle.done.remote(client, tokens, estimate)

    def rate_limited(self, client: str, retry_after: float) -> None:
        self.handle.rate_limited.remote(client, retry_after)

    def watch(self, version: int, timeout: float) -> tuple[int, bool]:
        return self._get(self.handle.watch.remote(version, timeout))

    def snapshot(self) -> GovernorSnapshot:
        return self._get(self.handle.snapshot.remote(), timeout=5)


@functools.lru_cache(maxsize=1)
def _governor_actor() -> ActorClass[Governor]:
    # type: ignore below: ray's typed overload of remote(**options) lists task options, not actor ones (max_concurrency)
    return ray.remote(num_cpus=0, max_concurrency=64)(Governor)  # type: ignore[call-overload]


def governor_for(key: str, fanout_settings: FanoutSettings) -> RemoteGovernor:
    """The endpoint's governor actor on the cluster, created on first use (the newest run's rates apply)."""

    s = fanout_settings
    for attempt in range(3):
        handle = _governor_actor().options(name=actor_name(key), namespace=NAMESPACE, lifetime="detached",
                                           get_if_exists=True, max_restarts=0).remote(
            key, s.rpm, s.tpm, s.circuit_after, s.circuit_cooldown, s.pool_idle_seconds)
        assert isinstance(handle, ActorHandle)  # ray's types let `.remote()` answer the class itself
        try:
            instance: str = ray.get(handle.configure.remote(s.rpm, s.tpm, s.circuit_after, s.circuit_cooldown))
            return RemoteGovernor(handle, instance)
        except ray.exceptions.RayActorError:  # it was ending itself (idle) as we asked: make a new one
            time.sleep(0.2 * (attempt + 1))
    raise RuntimeError(f"the rate-limit governor for {key} keeps dying; check the cluster (`ray status`)")
