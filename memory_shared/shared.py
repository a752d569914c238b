"""One pin per generation, shared by every reader of a store handle that starts while it is HEAD.

A fan-out's tasks all read the same HEAD: pinning it once per task (a pin file, its flock, the pin check) was
most of what a task that never reads memory paid for the memory tier. `SharedPins.acquire()` reads HEAD (the
log's fingerprint: a few stats) and hands out a reference to that generation's one pin, creating the pin
only for the first reader; `release()` of the last reference removes it. So every reader keeps snapshot
isolation (it holds its generation from its start to its end, and gc keeps it), and a process holds at most
one pin per generation its running readers started on; none once they end.

The pin check (core.py: files whose inode, size or mtime differ from the record) still runs for a reader that
starts more than CHECK_TRUST_S after the generation was last found intact, as it would for a pin of its own.
What a reader derives from its generation alone (the prompt's L1 text) is made once per pin (`derived`).
"""
from __future__ import annotations

import threading
import weakref
from pathlib import Path
from typing import Callable, Optional

from .core import Hold, StoreCore
from .errors import GenerationDamaged, GenerationMissing


class _Shared:
    """A generation's one pin and what its readers derived from it."""

    def __init__(self, generation: int, pin: Hold) -> None:
        self.generation = generation
        self.pin = pin
        self.readers = 0
        self.derived: dict[str, str] = {}
        self.making = threading.Lock()  # one reader makes a derived text, the others wait for it


class SharedPins:
    """The shared pins of one store handle (MemoryStore.shared_snapshot)."""

    def __init__(self, core: StoreCore) -> None:
        self.core = core
        self._lock = threading.Lock()
        self._by_generation: dict[int, _Shared] = {}  # only pins with readers

    def acquire(self) -> "SharedSnapshot":
        """A reference to HEAD's shared pin (created if no reader holds it); GenerationDamaged as a pin."""
        head = self.core.head()
        with self._lock:  # the first readers of a new HEAD wait for its one pin instead of making their own
            shared = self._by_generation.get(head)
            if shared is not None:
                self._check(shared)
            else:
                try:
                    generation, pin = head, self.core.pin(head, head=head)
                except GenerationMissing:  # HEAD moved on and gc took it meanwhile: the newer HEAD then
                    generation, pin = self.core.pin_head()
                shared = self._by_generation.get(generation)
                if shared is None:
                    shared = self._by_generation[generation] = _Shared(generation, pin)
                else:
                    pin.release()
            shared.readers += 1
        return SharedSnapshot(self, shared, self.core.gen_path(shared.generation))

    def held(self) -> dict[int, int]:
        """Readers per generation pinned through this handle now."""
        with self._lock:
            return {g: s.readers for g, s in self._by_generation.items()}

    def _check(self, shared: _Shared) -> None:
        """The pin check a pin of the reader's own would make (at most once per CHECK_TRUST_S)."""
        try:
            self.core.check_intact(shared.generation)
        except GenerationDamaged:  # the readers that hold it keep it; the next reader pins anew and is refused
            self._by_generation.pop(shared.generation, None)
            raise

    def _release(self, shared: _Shared) -> None:
        with self._lock:
            shared.readers -= 1
            if shared.readers > 0:
                return
            if self._by_generation.get(shared.generation) is shared:
                del self._by_generation[shared.generation]
        shared.pin.release()


class SharedSnapshot:
    """A reader's reference to a shared pin: a SnapshotHandle (`generation`, `path`, `release`, a context
    manager), released at the latest when it is garbage."""

    def __init__(self, pins: SharedPins, shared: _Shared, path: Path) -> None:
        self._shared = shared
        self._pins = pins
        self.path = path
        self._finalizer = weakref.finalize(self, pins._release, shared)

    @property
    def generation(self) -> int:
        return self._shared.generation

    def derived(self, key: str, make: Callable[[], str]) -> str:
        """A text that depends only on this generation, made once however many readers share the pin."""
        shared = self._shared
        found: Optional[str] = shared.derived.get(key)
        if found is None:
            with shared.making:
                found = shared.derived.get(key)
                if found is None:
                    found = shared.derived[key] = make()
        return found

    def release(self) -> None:
        self._finalizer()

    def __enter__(self) -> "SharedSnapshot":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"SharedSnapshot(generation={self.generation}, path={str(self.path)!r})"
