"""Files with a known format, validated by the consolidation gate before a task's change to them commits.

memory_shared knows which paths have a format (layers.SKILLTREE) but not the format itself: the layer that
owns it registers a validator, a callable that raises ValueError with a one-line message on bad text
(skilltree/tree.py registers its parser). Where none is registered in the process the check cannot be made,
and a change to the path is refused (fail closed).
"""
from __future__ import annotations

from typing import Callable, Optional

from .layers import SKILLTREE

KNOWN = frozenset({SKILLTREE})
_validators: dict[str, Callable[[str], object]] = {}


def register(path: str, validator: Callable[[str], object]) -> None:
    """Validate every gated change to `path` with `validator` (it raises ValueError on bad text)."""
    _validators[path] = validator


def has_format(path: str) -> bool:
    return path in KNOWN or path in _validators


def problem(path: str, text: str) -> Optional[str]:
    """One line saying why `text` cannot be committed at `path`, or None when it is valid (or has no format)."""
    if not has_format(path):
        return None
    validator = _validators.get(path)
    if validator is None:
        return (f"{path} has a format but no validator for it is loaded in this process, so it cannot be checked; "
                "change it from a `ga` command instead")
    try:
        validator(text)
    except ValueError as exc:
        return " ".join(str(exc).split()) or f"{path}: invalid"
    return None
