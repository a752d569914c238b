"""A store made by ga before provenance (tests/fixtures/make_old_store.py, main's code) opens, reads and takes
new commits with today's code: its entries have no records, so they read as the person's; what a task commits
on it now carries provenance."""
from __future__ import annotations

import tarfile
from pathlib import Path

from memory_shared import MemoryStore
from tests.memory_shared.memory_attack_support import first_request, ga_run, learner, script_file, trusted_part, turns
from tests.store_support import ga_memory, store_in_ga_home  # noqa: F401  (fixture)

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "old_store.tar.gz"
OLD_LINE = "- Count words: L3/text/count_words.md"


def unpack(store_root: Path) -> None:
    store_root.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(store_root.parent)  # (no `filter=`: Debian's 3.11.2 lacks it; the fixture is ours)
    assert (store_root / "log.jsonl").is_file()


def test_an_old_store_opens_reads_and_takes_new_commits(tmp_path: Path, store_root: Path) -> None:
    unpack(store_root)
    repaired = ga_memory("repair")  # unpacked, its files have new inodes: repair refreshes the stat records
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert ga_memory("verify").returncode == 0
    assert OLD_LINE in ga_memory("show", "L1/index.md").stdout
    listing = ga_memory("show")
    assert listing.returncode == 0 and "L3/text/count_words.md" in listing.stdout and "person" in listing.stdout
    provenance = ga_memory("show", "L3/text/count_words.md", "--provenance")
    assert "no task's provenance" in provenance.stdout
    assert ga_memory("log").returncode == 0 and "old-task" in ga_memory("log", "--task", "old-task").stdout
    skills = ga_memory("review")
    assert skills.returncode == 0 and "no proposals" in skills.stdout

    model = script_file(tmp_path, [learner(5), {"match": "say hello", "turns": turns(
        {"name": "file_read", "arguments": {"path": "memory/L2/facts.md"}}, answer="hello")}])
    later = ga_run(tmp_path, "say hello", model)
    system = first_request(later["history_path"])[0]["content"]
    assert OLD_LINE in trusted_part(system)  # an old store's entries are the person's: no hint block for them
    honest = ga_run(tmp_path, "learn square 5", model)
    assert honest["status"] == "succeeded"
    store = MemoryStore(store_root)
    with store.snapshot() as snap:
        index = snap.read("L1/index.md") or ""
        assert OLD_LINE in index and "- Square 5: L3/math/square_5.md" in index
        assert any(p.startswith("L3/math/.square_5.md.") and p.endswith(".prov") for p in snap.files())
    assert store.verify() == []
    assert ga_run(tmp_path, "say hello", model)["status"] == "unverified"  # a file_read backs no answer
