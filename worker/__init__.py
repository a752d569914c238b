"""One isolated GenericAgent worker: the loop, the model client, the tools, context control."""
from worker.agent import Worker
from worker.types import Usage, WorkerResult

__all__ = ["Usage", "Worker", "WorkerResult"]
