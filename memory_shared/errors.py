"""Exceptions of the memory store. Every message is one line that says what to do."""
from __future__ import annotations


class MemoryStoreError(Exception):
    """Base class of every error the memory store raises on purpose. One made with its own arguments keeps them
    in `_made`, so it pickles: the Ray memory service's errors reach the worker as themselves (the gate retries a
    CommitConflict), where Exception's pickling would call __init__ with the message alone and fail."""

    _made: tuple[object, ...] = ()

    def __reduce__(self) -> "str | tuple[object, ...]":
        return (type(self), self._made) if self._made else super().__reduce__()


class StoreMissing(MemoryStoreError):
    def __init__(self, root: object) -> None:
        super().__init__(f"no memory store at {root}; run `ga memory init`")
        self.root = root
        self._made = (root,)


class GenerationMissing(MemoryStoreError):
    """A generation that was asked for is not published or was removed by gc."""


class CommitConflict(MemoryStoreError):
    """A write/delete (or a patch that no longer applies) of a path someone else changed since the base."""

    def __init__(self, path: str, author: str, other_author: str, base: int, other_generation: int, why: str) -> None:
        super().__init__(
            f"commit conflict on {path}: {author} changed it from generation {base}, but {other_author} "
            f"changed it in generation {other_generation} ({why}); re-read it from a new snapshot and retry"
        )
        self.path = path
        self.author = author
        self.other_author = other_author
        self.base = base
        self.other_generation = other_generation
        self._made = (path, author, other_author, base, other_generation, why)


class PathRefused(MemoryStoreError, ValueError):
    """A path that is not a plain relative POSIX path inside the store."""


class L1TooLarge(MemoryStoreError, ValueError):
    """A commit would make the always-injected L1 index exceed its bound."""


class StoreNeedsRepair(MemoryStoreError):
    """The log and the generations disagree beyond what a crash leaves: commits and pins refuse."""

    def __init__(self, root: object, problem: str) -> None:
        super().__init__(f"memory store at {root} needs repair: {problem}; run `ga memory repair --dry-run` "
                         "to see the fix, then `ga memory repair`")
        self.root = root
        self.problem = problem
        self._made = (root, problem)


class GenerationDamaged(MemoryStoreError):
    """A generation's files no longer match what was recorded when it was published."""


class FormatRefused(MemoryStoreError, ValueError):
    """A change would commit a file of a known format (skilltree.json) whose text does not validate."""
