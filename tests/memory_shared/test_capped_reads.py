"""A capped read asks the kernel for what the file holds, not for its cap: the exit rule reads every finished
task's history under a 1 GiB cap, and os.pread allocates all it is asked for."""
from __future__ import annotations

import tracemalloc
from pathlib import Path

from memory_shared.fsutil import read_file


def test_a_small_file_under_a_large_cap_costs_its_size(tmp_path: Path) -> None:
    small = tmp_path / "history.jsonl"
    small.write_bytes(b'{"turn": 1}\n' * 200)
    tracemalloc.start()
    try:
        data = read_file(small, 1 << 30)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert data == small.read_bytes()
    assert peak < 1 << 20, peak  # was the whole 1 GiB cap


def test_the_cap_still_bounds_what_is_read(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_bytes(b"y" * 300_000)
    assert read_file(big, 1000) == b"y" * 1000
    assert read_file(big, 1 << 30) == big.read_bytes()
