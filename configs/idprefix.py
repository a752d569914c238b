"""Ids a person may abbreviate, as git allows: a run id, a session id, given by a unique prefix."""
from __future__ import annotations

from typing import Iterable, Optional


def by_prefix(given: str, names: Iterable[str], what: str) -> Optional[str]:
    """The one name equal to `given` or starting with it (an id abbreviated as git allows); None when no name
    does. Several: ValueError, one line naming them, e.g. "run id '2026' is ambiguous: A, B; give more of it"."""
    names = sorted(set(names))
    if given in names:
        return given
    found = [name for name in names if name.startswith(given)] if given else []
    if len(found) > 1:
        shown = ", ".join(found[:6]) + (f" and {len(found) - 6} more" if len(found) > 6 else "")
        raise ValueError(f"{what} '{given}' is ambiguous: {shown}; give more of it")
    return found[0] if found else None
