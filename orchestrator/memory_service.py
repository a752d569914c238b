"""Memory on a cluster: shared filesystem (every actor opens the store) or, later, a service actor."""
from __future__ import annotations

from typing import Any, Optional


def memory_mode(settings: Any, cluster: dict[str, Any]) -> tuple[str, Optional[str]]:
    return "store", None
