"""A pydantic ValidationError as one readable line: where (union tags dropped), what, what it got.

Which exceptions a user can cause and their one-line description, for the command line: cli/errors.py.
"""
from __future__ import annotations

from typing import Iterable, NamedTuple

from pydantic import ValidationError
from pydantic_core import ErrorDetails

# pydantic names union members in error locations: str, dict[str,any], function-after[...], a model's class
TYPE_TAGS = frozenset({"str", "int", "float", "bool", "none", "dict", "list"})


class FieldError(NamedTuple):
    """One pydantic error, readable: where (union tags dropped), its kind, what it says, what it got."""

    loc: tuple
    kind: str
    message: str
    got: str  # " (got 'x')", or "" where the input is a mapping or a validator's own message says it

    @classmethod
    def of(cls, error: ErrorDetails, tags: Iterable[str] = ()) -> "FieldError":
        tags = TYPE_TAGS | set(tags)
        loc = tuple(p for p in error["loc"] if not (isinstance(p, str) and (p in tags or "[" in p or p.startswith("function-"))))
        message = str(error["msg"]).removeprefix("Value error, ")
        got = error.get("input")
        shown = f" (got {got!r:.60})" if not isinstance(got, dict) and error["type"] != "value_error" else ""
        return cls(loc, error["type"], message, shown)

    def key(self, top: str = "(top)") -> str:
        return ".".join(str(part) for part in self.loc) or top

    def line(self, top: str = "(top)", quote: bool = True) -> str:
        key = f"'{self.key(top)}'" if quote else self.key(top)
        return f"{key}: {self.message}{self.got}"


def field_errors(exc: ValidationError, tags: Iterable[str] = ()) -> list[FieldError]:
    return [FieldError.of(error, tags) for error in exc.errors()]


def validation_line(exc: ValidationError, *, top: str = "(top)", every: bool = False, quote: bool = True) -> str:
    """The one-line form of a ValidationError: "'key': message (got X)", for the first problem or for
    every one (joined by '; '); `top` names an error on the whole value."""
    errors = field_errors(exc)
    return "; ".join(error.line(top, quote) for error in (errors if every else errors[:1]))
