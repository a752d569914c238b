"""Fan-out on Ray: tasks.yaml spec, worker pool, run ledger and resume, rate-limit governor, reduce.

    from orchestrator import fanout
    run = fanout("tasks.yaml")            # or a dict, or a list of prompts
"""
import os

# Read by Ray when it is imported: without it a local Ray binds the machine's address, not 127.0.0.1.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

from orchestrator.fanout import FanoutError, Run, dry_run, fanout, serve_nested  # noqa: E402
from orchestrator.spec import Plan, SpecError  # noqa: E402
from orchestrator.steer import SteerError, stop, tell  # noqa: E402
from worker.gateway import serve_fanouts_with  # noqa: E402

serve_fanouts_with(serve_nested)  # a task's code_run asks its gateway; this process runs the run

__all__ = ["FanoutError", "Plan", "Run", "SpecError", "SteerError", "dry_run", "fanout", "stop", "tell"]
