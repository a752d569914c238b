"""Copy-on-write by folder: a commit copies only the folders on its changed paths, shares the rest through
pooled directories that readers (and the sandbox) follow as plain paths, and gc removes the ones nobody links."""
from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from memory_shared import CommitConflict, MemoryStore
from worker import sandbox

REPO = Path(__file__).resolve().parents[2]
BEFORE_COW = "3a72b77"  # main before copy-on-write: its store hard-links whole trees
# tarfile's filter= came with Python 3.11.4; Debian 12's 3.11.2 lacks it (the archive is this repository's own)
HAS_FILTER = hasattr(tarfile, "data_filter")


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    return MemoryStore(tmp_path / "mem", create=True)


def pool(store: MemoryStore) -> set[str]:
    """The pooled folders (next to each, its manifest and stat tables: <id>.m, <id>.s)."""
    return {e.name for e in os.scandir(store.root / "dirs") if e.is_dir()}


def test_a_commit_copies_only_the_folders_on_its_path(store: MemoryStore) -> None:
    before = pool(store)
    with store.transaction("deep", "t") as txn:
        txn.write("L3/deep/x.md", "x")
    gen0, gen1 = store.root / "generations/0", store.root / "generations/1"
    for shared in ("L0", "L1", "L2"):
        assert os.readlink(gen0 / shared) == os.readlink(gen1 / shared)  # the same pooled directory
    assert os.readlink(gen0 / "L3") != os.readlink(gen1 / "L3")
    new = pool(store) - before
    assert len(new) == 2  # L3, L3/deep
    assert all((store.root / "dirs" / f"{name}{suffix}").is_file() for name in new for suffix in (".m", ".s"))
    assert (gen0 / "L3/README.md").stat().st_ino == (gen1 / "L3/README.md").stat().st_ino
    assert (gen1 / "L3/deep/x.md").read_text() == "x" and not (gen0 / "L3/deep").exists()
    assert os.path.realpath(gen1 / "L3/deep/x.md").startswith(str(store.root / "dirs") + os.sep)
    with store.snapshot() as snap:
        assert "L3/deep/x.md" in snap.files() and snap.read("L3/deep/x.md") == "x"
    with store.transaction("delete", "t") as txn:
        txn.delete("L3/deep/x.md")
    assert not (store.root / "generations/2/L3/deep").exists()  # the emptied folder went with it
    assert store.diff(0, 2) == [] and store.verify() == []


def test_a_failed_commit_leaves_no_pooled_folder(store: MemoryStore) -> None:
    first = store.transaction("first", "a", base=0)
    second = store.transaction("second", "b", base=0)
    first.write("L3/same/x.md", "a")
    second.write("L3/same/x.md", "b")
    first.commit()
    before = pool(store)
    with pytest.raises(CommitConflict):
        second.commit()
    assert pool(store) == before and list((store.root / "staging").iterdir()) == []
    assert len(os.listdir(store.root / "dirs")) == 3 * len(before)  # no folder's tables left either


def test_gc_removes_pooled_folders_nobody_links_and_keeps_pinned_ones(store: MemoryStore) -> None:
    for i in range(3):
        with store.transaction(f"c{i}", "t") as txn:
            txn.write(f"L3/topic{i}/n.md", str(i))
    pinned = store.snapshot(1)
    l3_of_1 = os.readlink(pinned.path / "L3")
    orphan = store.root / "dirs" / "1-0123456789ab.1"  # left by a commit that died: no staging dir, no link
    orphan.mkdir()
    assert store.gc(keep=1) == [0, 2]
    assert not orphan.exists() and (store.root / "dirs" / l3_of_1.rsplit("/", 1)[1]).is_dir()
    assert pinned.read("L3/topic0/n.md") == "0" and pinned.read("L3/topic1/n.md") is None
    pinned.release()
    assert store.gc(keep=1) == [1]
    linked = set()
    for name in pool(store):
        for entry in os.scandir(store.root / "dirs" / name):
            if entry.is_symlink():
                linked.add(os.readlink(entry.path).rsplit("/", 1)[1])
    top = {os.readlink(e.path).rsplit("/", 1)[1] for e in os.scandir(store.root / "generations/3") if e.is_symlink()}
    assert pool(store) == top | linked  # every pooled folder left is reachable from generation 3
    assert store.verify() == []
    with store.snapshot() as snap:
        assert [snap.read(f"L3/topic{i}/n.md") for i in range(3)] == ["0", "1", "2"]


def test_a_planted_relative_link_in_a_shared_folder_resolves_against_the_generation(store: MemoryStore) -> None:
    os.symlink("../L2/facts.md", store.root / "generations/0/L3/alias.md")
    os.symlink("../../../x", store.root / "generations/0/L3/escape.md")
    with store.snapshot() as snap:
        assert "## Environment" in snap.read("L3/alias.md")
    problems = store.verify()
    assert any("escape.md is a symlink leading outside" in p for p in problems), problems
    assert not any("alias.md is a symlink" in p for p in problems), problems


def old_store(root: Path, tmp_path: Path) -> None:
    """A store written by the code before copy-on-write (its memory_shared, run in its own process)."""
    try:
        data = subprocess.run(["git", "-C", str(REPO), "archive", BEFORE_COW, "memory_shared"],
                              capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip(f"needs git and commit {BEFORE_COW} of this repository")
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        if HAS_FILTER:
            tar.extractall(tmp_path / "old", filter="data")
        else:
            tar.extractall(tmp_path / "old")
    script = ("import sys; from memory_shared import MemoryStore; s = MemoryStore(sys.argv[1], create=True)\n"
              "for i in range(3):\n"
              "    with s.transaction(f'old {i}', 'old') as t:\n"
              "        t.write(f'L3/old/n{i}.md', str(i))\n")
    subprocess.run([sys.executable, "-c", script, str(root)], env={**os.environ, "PYTHONPATH": str(tmp_path / "old")},
                   cwd=tmp_path, check=True, timeout=60)  # cwd: not this checkout's memory_shared


def test_a_store_written_before_copy_on_write_is_read_and_built_on(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    old_store(root, tmp_path)
    assert (root / "generations/3/L3").is_dir() and not (root / "generations/3/L3").is_symlink()
    store = MemoryStore(root)
    assert store.verify() == [] and store.head() == 3
    with store.transaction("new", "t") as txn:
        txn.patch("L3/old/n2.md", "2", "two")
    assert (root / "generations/4/L3").is_symlink() and not (root / "generations/3/L3").is_symlink()
    assert store.diff(3, 4) == [("L3/old/n2.md", "modified")]
    with store.transaction("newer", "t") as txn:
        txn.write("L2/more.md", "m")
    assert os.readlink(root / "generations/4/L3") == os.readlink(root / "generations/5/L3")
    assert store.verify() == [] and store.gc(keep=1) == [0, 1, 2, 3, 4] and store.verify() == []
    with store.snapshot() as snap:
        assert [snap.read(f"L3/old/n{i}.md") for i in range(3)] == ["0", "1", "two"]
    os.chmod(root / "generations/5/L3/old/n0.md", 0o644)
    (root / "generations/5/L3/old/n0.md").write_text("tampered")
    assert any("L3/old/n0.md changed in place" in p for p in store.verify())


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_shared_folders_read_inside_the_sandbox_and_stay_read_only(tmp_path: Path) -> None:
    """The cluster-less policy of code_run: the store's bookkeeping writable, generations/ and dirs/ not."""
    store = MemoryStore(tmp_path / "mem", create=True)
    root = store.root
    with store.snapshot() as snap:
        facts = snap.path / "L2/facts.md"
        script = (f'set +e\ncat "{facts}" > /dev/null; echo "read=$?"\nchmod u+w "{facts}"; echo "chmod=$?"\n'
                  f'touch "{facts.parent}/planted.md"; echo "plant=$?"\n')
        policy = sandbox.Policy(network=False, writable=(root, tmp_path / "work"),
                                readonly=(root / "generations", root / "dirs"))
        (tmp_path / "work").mkdir()
        argv = sandbox.wrap(["bash", "-c", script], policy, shutil.which("bwrap"), tmp_path / "work",
                            proc=sandbox.mounts_proc(shutil.which("bwrap"), network=False))
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout
        codes = dict(line.split("=") for line in out.split())
        assert codes["read"] == "0" and codes["chmod"] != "0" and codes["plant"] != "0", out
    assert store.verify() == []


def test_folder_manifests_chain_to_the_record_and_a_lost_one_is_rebuilt(store: MemoryStore) -> None:
    with store.transaction("deep", "t") as txn:
        txn.write("L3/deep/x.md", "x")
    root_manifest = (store.root / "generations/1/MANIFEST").read_text()
    assert '"L3/"\t' in root_manifest and "L3/deep/x.md" not in root_manifest  # one line per top-level folder
    deep = Path(os.path.realpath(store.root / "generations/1/L3/deep"))
    table = Path(f"{deep}.m")
    assert table.read_text().startswith('"x.md"\t')
    edited = table.read_text().replace('"x.md"', '"y.md"')
    table.unlink()
    table.write_text(edited)
    assert any("the manifest of folder L3/deep does not match" in p for p in store.verify())
    table.unlink()  # lost to a power cut (folder tables are not fsynced, like MANIFEST)
    assert any("the manifest of folder L3/deep is missing" in p for p in store.verify())
    done, unsolved = store.repair()
    assert unsolved == [] and any("rebuilt the MANIFEST of generation 1" in line for line in done), done
    assert table.is_file() and store.verify() == []
    with store.transaction("after", "t") as txn:
        txn.write("L3/deep/z.md", "z")
    assert store.verify() == [] and store.diff(1, 2) == [("L3/deep/z.md", "added")]
