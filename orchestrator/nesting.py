"""Where a fan-out stands: top level (depth 0), or inside a task of a parent run (a nested run asked for by
that task's code_run), and what a task's worker keeps for the nested runs it may ask for."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional


@dataclass
class Nesting:
    """Where this fan-out stands: top level (depth 0) or inside a task of a parent run."""

    depth: int = 0
    address: Optional[str] = None
    parent_run_dir: Optional[Path] = None
    parent_task: Optional[str] = None
    max_depth: Optional[int] = None
    session: Optional[str] = None  # the `ga run`/`ga chat` session whose task asked for this run

    @classmethod
    def from_env(cls, env: dict[str, str]) -> "Nesting":
        """Where a run asked for by a task stands, from that task's environment (Driver.job sets it)."""
        depth = int(env.get("GA_DEPTH") or 0)
        if not depth:
            return cls(session=env.get("GA_SESSION") or None)
        return cls(depth, env.get("GA_RAY_ADDRESS") or None,
                   Path(env["GA_RUN_DIR"]) if env.get("GA_RUN_DIR") else None, env.get("GA_PARENT_TASK") or None,
                   int(env["GA_MAX_DEPTH"]) if env.get("GA_MAX_DEPTH") else None)

    def limit(self, own: int) -> int:
        return own if self.max_depth is None else min(own, self.max_depth)

    def runs_dir(self) -> Optional[Path]:
        if self.parent_run_dir and self.parent_task:
            return self.parent_run_dir / "tasks" / self.parent_task / "runs"
        return None

    def child_env(self, address: Optional[str], run_dir: Path, task_id: str, max_depth: int,
                  home: Path) -> dict[str, str]:
        """What a task's worker keeps for the nested runs it may ask for (never given to its scripts' sandbox)."""
        cluster = {"GA_RAY_ADDRESS": address, "RAY_ADDRESS": address} if address else {}
        return {"GA_RUN_DIR": str(run_dir), "GA_PARENT_TASK": task_id, "GA_DEPTH": str(self.depth + 1),
                "GA_MAX_DEPTH": str(max_depth), "GA_HOME": str(home), **cluster}
