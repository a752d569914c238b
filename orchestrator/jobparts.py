"""What a `Job` carries besides records.py's own: the driver's lease (a plain dict, typed), and its endpoint's
governor (the `EndpointGovernor` protocol) with the snapshot it reports, which summary.json holds as reported.

Apart from executor.py, which names them, so that records.py can hold them in its models without importing the
executor (which names records.py's under TYPE_CHECKING). typing_extensions' TypedDict: pydantic validates them
where a model holds one, and asks for it on Python < 3.12.
"""
from __future__ import annotations

from typing import Optional, Protocol, Union

from typing_extensions import TypedDict

__all__ = ["DriverIdentity", "EndpointGovernor", "GovernorSnapshot", "Lease"]


class DriverIdentity(TypedDict):
    """The driver's process, which a worker in the same pid namespace checks directly (orchestrator/reaper.py); with
    `lessee` and `ttl`, a job's lease (Pool.lease_for_job)."""

    pid: int
    pid_started: Optional[int]  # its start time: tells it from a later process of the same pid
    namespace: str  # the machine's boot and pid namespace ("" when unknown)


class Lease(DriverIdentity):
    """What a job carries so its worker can tell when its driver is gone (WorkerActor.renew)."""

    lessee: str  # the driver's name with the actor manager
    ttl: float  # seconds without renewal after which the worker takes the driver for gone


# an endpoint governor's state and counts, as reported; int before float: pydantic keeps a count an int
GovernorSnapshot = dict[str, Union[str, int, float, bool, None]]


class EndpointGovernor(Protocol):
    """One model endpoint's rate limits and circuit (orchestrator/governor.py): in this process, or a Ray actor."""

    @property
    def instance(self) -> str:
        """Tells a re-created governor (same name) from the one before."""
        ...

    def acquire(self, client: str, tokens: int = 0) -> float: ...

    def done(self, client: str, tokens: int = 0, estimate: int = 0) -> None: ...

    def rate_limited(self, client: str, retry_after: float) -> None: ...

    def watch(self, version: int, timeout: float) -> tuple[int, bool]: ...

    def snapshot(self) -> GovernorSnapshot: ...
