"""Unit tests of the memory store on real files: every operation, rebase rules, path safety, layers."""
from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from memory_shared import (
    L1_INDEX,
    CommitConflict,
    GenerationMissing,
    L1TooLarge,
    MemoryStore,
    PathRefused,
    StoreMissing,
    format_sop,
    parse_sop,
    read_l0,
    render_l1,
)

FACTS = "L2/facts.md"


def head_text(store: MemoryStore, rel: str) -> str | None:
    with store.snapshot() as snap:
        return snap.read(rel)


# ---- opening and init ------------------------------------------------------------------------------


def test_opening_a_missing_store_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(StoreMissing) as info:
        MemoryStore(tmp_path / "nowhere")
    assert str(info.value) == f"no memory store at {tmp_path / 'nowhere'}; run `ga memory init`"
    assert not (tmp_path / "nowhere").exists(), "opening must not create anything"


def test_init_seeds_generation_zero_with_the_shipped_defaults(tmp_path: Path) -> None:
    store = MemoryStore.init(tmp_path / "mem")
    assert store.head() == 0
    [commit] = store.log()
    assert (commit.generation, commit.parent, commit.author) == (0, None, "ga")
    with store.snapshot() as snap:
        assert snap.files() == ["L0/rules.md", "L1/index.md", "L2/facts.md", "L3/README.md",
                                "L3/orchestration/fanout_map_reduce.md", "skilltree.json"]
        assert "No Execution, No Memory" in snap.read("L0/rules.md")
        assert "## Environment" in snap.read(FACTS)
        tree = json.loads(snap.read("skilltree.json"))
        assert tree["version"] == 1 and tree["categories"] == {} and tree["skills"] == {}
        assert sum(tree["weights"].values()) == pytest.approx(1.0)
        for rel in snap.files():
            assert stat.S_IMODE((snap.path / rel).stat().st_mode) == 0o444
    assert store.verify() == []


def test_init_is_idempotent_both_ways(store: MemoryStore) -> None:
    with store.transaction("add", "t1") as txn:
        txn.write("L2/extra.md", "x")
    assert store.init() is store
    again = MemoryStore.init(store.root)
    assert again.head() == store.head() == 1 and len(again.log()) == 2


# ---- transactions: write / patch / delete / read ----------------------------------------------------

OPS = [
    # (name, ops, expected texts after commit, expected log paths, expected deleted)
    ("write new", [("write", "L3/data/a.md", "alpha")], {"L3/data/a.md": "alpha"}, ["L3/data/a.md"], []),
    ("overwrite", [("write", FACTS, "new")], {FACTS: "new"}, [FACTS], []),
    ("patch", [("patch", FACTS, "## Environment\n", "## Environment\n- os: linux\n")],
     {FACTS: "# L2: verified facts\n\n## Environment\n- os: linux\n\n## User preferences\n\n## Tools and services\n"},
     [FACTS], []),
    ("patch twice", [("patch", FACTS, "## Environment\n", "## Environment\n- a\n"),
                     ("patch", FACTS, "- a\n", "- a\n- b\n")],
     {FACTS: "# L2: verified facts\n\n## Environment\n- a\n- b\n\n## User preferences\n\n## Tools and services\n"},
     [FACTS], []),
    ("delete", [("delete", "L3/README.md")], {"L3/README.md": None}, ["L3/README.md"], ["L3/README.md"]),
    ("write then delete a new file", [("write", "L3/tmp.md", "x"), ("delete", "L3/tmp.md")], {}, None, []),
    ("write then patch", [("write", "L3/s.md", "one two"), ("patch", "L3/s.md", "two", "2")],
     {"L3/s.md": "one 2"}, ["L3/s.md"], []),
    ("several paths", [("write", "a/b/c.md", "c"), ("delete", "L3/README.md"), ("write", "L1/index.md", "# i\n")],
     {"a/b/c.md": "c", "L3/README.md": None, "L1/index.md": "# i\n"},
     ["L1/index.md", "L3/README.md", "a/b/c.md"], ["L3/README.md"]),
]


def apply(txn, op: tuple) -> None:
    getattr(txn, op[0])(*op[1:])


@pytest.mark.parametrize("name,ops,expected,paths,deleted", OPS, ids=[o[0] for o in OPS])
def test_transaction_operations(store: MemoryStore, name, ops, expected, paths, deleted) -> None:
    with store.transaction(f"test {name}", "tester") as txn:
        for op in ops:
            apply(txn, op)
    if paths is None:
        assert txn.generation is None and store.head() == 0
        return
    assert txn.generation == store.head() == 1
    last = store.log()[-1]
    assert (last.generation, last.parent, last.author, last.message) == (1, 0, "tester", f"test {name}")
    assert last.paths == paths and last.deleted == deleted
    for rel, text in expected.items():
        assert head_text(store, rel) == text
    assert store.verify() == []


def test_read_sees_staged_changes_and_base(store: MemoryStore) -> None:
    with store.transaction("r", "t") as txn:
        assert txn.read("L3/none.md") is None
        assert txn.read(FACTS).startswith("# L2")
        txn.write("L3/new.md", "fresh")
        assert txn.read("L3/new.md") == "fresh"
        txn.delete(FACTS)
        assert txn.read(FACTS) is None
        assert txn.staged == {"L3/new.md": "fresh", FACTS: None}
    assert head_text(store, FACTS) is None


@pytest.mark.parametrize("text,old,message", [
    ("abc", "zzz", "0 matches"),
    ("x x", "x", "2 or more matches"),
    ("aaa", "aa", "2 or more matches"),  # overlapping occurrences count too
    ("abc", "", "empty"),
])
def test_patch_needs_exactly_one_match(store: MemoryStore, text: str, old: str, message: str) -> None:
    with store.transaction("seed", "t") as txn:
        txn.write("L3/p.md", text)
    with store.transaction("p", "t") as txn:
        with pytest.raises(ValueError, match=message):
            txn.patch("L3/p.md", old, "new")
    assert txn.generation is None and head_text(store, "L3/p.md") == text


@pytest.mark.parametrize("op,args,message", [
    ("patch", ("L3/missing.md", "a", "b"), "no such file"),
    ("delete", ("L3/missing.md",), "no such file"),
    ("write", ("L2/facts.md/x.md", "t"), "is a file"),
    ("write", ("L2", "t"), "is a folder"),
    ("write", ("L3/README.md", b"bytes"), "must be str"),
])
def test_bad_operations_are_refused(store: MemoryStore, op: str, args: tuple, message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        with store.transaction("bad", "t") as txn:
            getattr(txn, op)(*args)
    assert store.head() == 0


def test_transaction_needs_message_and_author(store: MemoryStore) -> None:
    with pytest.raises(ValueError, match="message"):
        store.transaction("", "t")
    with pytest.raises(ValueError, match="author"):
        store.transaction("m", " ")


def test_empty_transaction_commits_nothing(store: MemoryStore) -> None:
    with store.transaction("nothing", "t") as txn:
        pass
    assert txn.generation is None and store.head() == 0 and len(store.log()) == 1


def test_exception_rolls_back(store: MemoryStore) -> None:
    with pytest.raises(RuntimeError):
        with store.transaction("boom", "t") as txn:
            txn.write("L3/half.md", "x")
            raise RuntimeError("task failed")
    assert store.head() == 0 and head_text(store, "L3/half.md") is None
    assert list((store.root / "staging").iterdir()) == [] and list((store.root / "pins").iterdir()) == []
    assert store.verify() == []


def test_unchanged_files_are_hard_links_and_changed_ones_new_files(store: MemoryStore) -> None:
    with store.transaction("c", "t") as txn:
        txn.patch(FACTS, "## Environment\n", "## Environment\n- x\n")
    gen0, gen1 = store.root / "generations/0", store.root / "generations/1"
    assert (gen0 / "L0/rules.md").stat().st_ino == (gen1 / "L0/rules.md").stat().st_ino
    assert (gen0 / FACTS).stat().st_ino != (gen1 / FACTS).stat().st_ino
    assert "- x" not in (gen0 / FACTS).read_text()


# ---- rebase -----------------------------------------------------------------------------------------

END = "<!-- end -->\n"
REBASE = [
    # (name, their ops, our ops, conflict expected, expected texts after our commit)
    ("disjoint paths", [("write", "L3/theirs.md", "T")], [("write", "L3/ours.md", "O")], False,
     {"L3/theirs.md": "T", "L3/ours.md": "O"}),
    ("patches with unique anchors", [("patch", "L3/shared.md", END, "- theirs\n" + END)],
     [("patch", "L3/shared.md", "# top\n", "# top\n- ours\n")], False,
     {"L3/shared.md": "# top\n- ours\n- theirs\n" + END}),
    ("append-style patches on one anchor", [("patch", "L3/shared.md", END, "- theirs\n" + END)],
     [("patch", "L3/shared.md", END, "- ours\n" + END)], False,
     {"L3/shared.md": "# top\n- theirs\n- ours\n" + END}),
    ("patch whose anchor they removed", [("write", "L3/shared.md", "# top\n")],
     [("patch", "L3/shared.md", END, "- ours\n" + END)], True, {"L3/shared.md": "# top\n"}),
    ("patch whose anchor they duplicated", [("patch", "L3/shared.md", END, END + END)],
     [("patch", "L3/shared.md", END, "- ours\n" + END)], True, {"L3/shared.md": "# top\n" + END + END}),
    ("write over their change", [("patch", "L3/shared.md", END, "- theirs\n" + END)],
     [("write", "L3/shared.md", "mine")], True, {"L3/shared.md": "# top\n- theirs\n" + END}),
    ("delete of their change", [("patch", "L3/shared.md", END, "- theirs\n" + END)],
     [("delete", "L3/shared.md")], True, {"L3/shared.md": "# top\n- theirs\n" + END}),
    ("patch of what they deleted", [("delete", "L3/shared.md")],
     [("patch", "L3/shared.md", END, "- ours\n" + END)], True, {"L3/shared.md": None}),
    ("they deleted a sibling", [("delete", "L3/shared.md")], [("write", "L3/other.md", "o")], False,
     {"L3/shared.md": None, "L3/other.md": "o"}),
    ("both create the same new file", [("write", "L3/new.md", "T")], [("write", "L3/new.md", "O")], True,
     {"L3/new.md": "T"}),
]


@pytest.mark.parametrize("name,theirs,ours,conflict,expected", REBASE, ids=[r[0] for r in REBASE])
def test_rebase_rules(store: MemoryStore, name, theirs, ours, conflict, expected) -> None:
    with store.transaction("seed", "seeder") as txn:
        txn.write("L3/shared.md", "# top\n" + END)
    base = store.head()
    with store.transaction("theirs", "bob") as txn:
        for op in theirs:
            apply(txn, op)
    mine = store.transaction("ours", "alice", base=base)
    for op in ours:
        apply(mine, op)
    if conflict:
        with pytest.raises(CommitConflict) as info:
            mine.commit()
        message = str(info.value)
        assert "alice" in message and "bob" in message and ours[0][1] in message
        assert "\n" not in message and store.head() == base + 1
    else:
        assert mine.commit() == base + 2
    for rel, text in expected.items():
        assert head_text(store, rel) == text
    assert store.verify() == []


def test_rebase_over_many_generations_keeps_every_update(store: MemoryStore) -> None:
    with store.transaction("seed", "s") as txn:
        txn.write("L3/list.md", END)
    base = store.head()
    for i in range(5):
        with store.transaction(f"w{i}", f"w{i}") as txn:
            txn.write(f"L3/own/{i}.md", str(i))
            txn.patch("L3/list.md", END, f"- {i}\n{END}")
    with store.transaction("late", "late", base=base) as txn:
        txn.patch("L3/list.md", END, f"- late\n{END}")
        txn.write("L3/late.md", "late")
    assert head_text(store, "L3/list.md") == "".join(f"- {i}\n" for i in range(5)) + "- late\n" + END
    with store.snapshot() as snap:
        assert all(snap.read(f"L3/own/{i}.md") == str(i) for i in range(5)) and snap.read("L3/late.md") == "late"
    assert store.verify() == []


# ---- log, diff, verify ------------------------------------------------------------------------------


def test_log_and_diff(store: MemoryStore) -> None:
    with store.transaction("one", "a") as txn:
        txn.write("L3/x.md", "x")
        txn.patch(FACTS, "## Environment\n", "## Environment\n- e\n")
    with store.transaction("two", "b") as txn:
        txn.delete("L3/x.md")
        txn.write("L3/y.md", "y")
    log = store.log()
    assert [(c.generation, c.parent, c.author, c.message) for c in log] == [
        (0, None, "ga", "init: shipped defaults"), (1, 0, "a", "one"), (2, 1, "b", "two")]
    assert log[2].paths == ["L3/x.md", "L3/y.md"] and log[2].deleted == ["L3/x.md"]
    assert log[1].time <= log[2].time
    assert store.diff(0, 1) == [(FACTS, "modified"), ("L3/x.md", "added")]
    assert store.diff(1, 2) == [("L3/x.md", "deleted"), ("L3/y.md", "added")]
    assert store.diff(0, 2) == [(FACTS, "modified"), ("L3/y.md", "added")]
    assert store.diff(2, 2) == []


def test_diff_ignores_a_rewrite_with_identical_text(store: MemoryStore) -> None:
    with store.transaction("same", "a") as txn:
        txn.write(FACTS, head_text(store, FACTS))
    assert store.diff(0, 1) == []


def corrupt_writable(store: MemoryStore) -> str:
    os.chmod(store.root / "generations/0/L0/rules.md", 0o644)
    return "is writable"


def corrupt_missing_file(store: MemoryStore) -> str:
    os.unlink(store.root / "generations/1/L3/v.md")
    return "lacks L3/v.md"


def corrupt_head(store: MemoryStore) -> str:
    (store.root / "HEAD").write_text("0\n")
    return "log/HEAD mismatch"


def corrupt_extra_generation(store: MemoryStore) -> str:
    os.mkdir(store.root / "generations/7")
    return "generation 7 is above HEAD"


def corrupt_unlogged_change(store: MemoryStore) -> str:
    (store.root / "generations/1/L3/README.md").unlink()
    return "changes L3/README.md but its log line does not say so"


def corrupt_torn_log(store: MemoryStore) -> str:
    with open(store.root / "log.jsonl", "a") as fh:
        fh.write('{"generation": 2, "par')
    return "torn line"


def corrupt_missing_head_generation(store: MemoryStore) -> str:
    os.rename(store.root / "generations/1", store.root / "moved")
    return "HEAD points to generation 1, which does not exist"


def corrupt_escaping_symlink(store: MemoryStore) -> str:
    os.symlink("/etc", store.root / "generations/1/L3/etc")
    return "symlink leading outside"


CORRUPTIONS = [corrupt_writable, corrupt_missing_file, corrupt_head, corrupt_extra_generation,
               corrupt_unlogged_change, corrupt_torn_log, corrupt_missing_head_generation, corrupt_escaping_symlink]


@pytest.mark.parametrize("corrupt", CORRUPTIONS, ids=[c.__name__ for c in CORRUPTIONS])
def test_verify_reports_each_problem(store: MemoryStore, corrupt) -> None:
    with store.transaction("v", "t") as txn:
        txn.write("L3/v.md", "v")
    assert store.verify() == []
    needle = corrupt(store)
    problems = store.verify()
    assert any(needle in p for p in problems), problems


def test_verify_reports_leftover_staging(store: MemoryStore) -> None:
    (store.root / "staging/123-dead").mkdir()
    assert any("leftover staging" in p for p in store.verify())
    MemoryStore(store.root)  # reopening recovers
    assert store.verify() == []


# ---- snapshots and gc -------------------------------------------------------------------------------


def commit_n(store: MemoryStore, n: int) -> None:
    for i in range(n):
        with store.transaction(f"c{i}", "t") as txn:
            txn.write("L3/counter.md", str(i))


def test_gc_keeps_newest_head_and_pinned(store: MemoryStore) -> None:
    commit_n(store, 3)  # generations 0..3
    pinned = store.snapshot(1)
    (store.root / "archive").mkdir()
    (store.root / "archive/keep.txt").write_text("L4")
    (store.root / "stats").mkdir()
    assert store.gc(keep=2) == [0]
    assert sorted(os.listdir(store.root / "generations")) == ["1", "2", "3"]
    pinned.release()
    assert store.gc(keep=1) == [1, 2]
    assert os.listdir(store.root / "generations") == ["3"]
    assert (store.root / "archive/keep.txt").read_text() == "L4" and (store.root / "stats").is_dir()
    assert store.verify() == []
    with pytest.raises(ValueError, match="at least 1"):
        store.gc(keep=0)


def test_snapshot_is_read_only_pinned_and_stable(store: MemoryStore) -> None:
    with store.snapshot() as snap:
        assert snap.generation == 0 and snap.path == store.root / "generations/0"
        before = {rel: (snap.path / rel).read_bytes() for rel in snap.files()}
        with store.transaction("x", "t") as txn:
            txn.patch(FACTS, "## Environment\n", "## Environment\n- changed\n")
            txn.delete("L3/README.md")
        store.gc(keep=1)
        assert {rel: (snap.path / rel).read_bytes() for rel in snap.files()} == before
        assert {stat.S_IMODE((snap.path / rel).stat().st_mode) for rel in snap.files()} == {0o444}
    assert store.gc(keep=1) == [0]


def test_snapshot_of_missing_generations(store: MemoryStore) -> None:
    commit_n(store, 2)
    with pytest.raises(GenerationMissing, match="not published"):
        store.snapshot(9)
    store.gc(keep=1)
    with pytest.raises(GenerationMissing, match="removed by gc"):
        store.snapshot(0)
    with pytest.raises(GenerationMissing):
        store.transaction("stale", "t", base=0)


def test_pin_of_a_dead_process_does_not_block_gc(store: MemoryStore) -> None:
    code = ("import os, signal, sys; from memory_shared import MemoryStore; "
            "s = MemoryStore(sys.argv[1]).snapshot(0); os.kill(os.getpid(), signal.SIGKILL)")
    proc = subprocess.run([sys.executable, "-c", code, str(store.root)])
    assert proc.returncode == -signal.SIGKILL
    assert len(os.listdir(store.root / "pins")) == 1  # the dead pin is still on disk
    commit_n(store, 1)
    assert store.gc(keep=1) == [0] and os.listdir(store.root / "pins") == []


# ---- path safety ------------------------------------------------------------------------------------

BAD_PATHS = ["../escape.md", "/etc/passwd", "L3/../../x", "L3//x.md", "./L3/x.md", "L3/.", "", "L3\\x.md", "L3/x\0"]


@pytest.mark.parametrize("rel", BAD_PATHS)
@pytest.mark.parametrize("op", ["write", "patch", "delete", "read"])
def test_bad_paths_are_refused(store: MemoryStore, tmp_path: Path, rel: str, op: str) -> None:
    args = {"write": (rel, "x"), "patch": (rel, "a", "b"), "delete": (rel,), "read": (rel,)}[op]
    with pytest.raises(PathRefused) as info:
        with store.transaction("bad", "t") as txn:
            getattr(txn, op)(*args)
    assert "\n" not in str(info.value)
    assert store.head() == 0 and not (tmp_path / "escape.md").exists()


def test_symlinks_leading_outside_are_refused(store: MemoryStore, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    head = store.root / "generations/0"
    os.symlink(outside, head / "L3/evil")  # planted by hand inside the store
    os.symlink(outside / "secret.txt", head / "L3/link.md")
    for op, args in [("write", ("L3/evil/x.md", "x")), ("read", ("L3/evil/secret.txt",)),
                     ("write", ("L3/link.md", "x")), ("patch", ("L3/link.md", "secret", "gone")),
                     ("delete", ("L3/link.md",))]:
        with pytest.raises(PathRefused, match="outside the store"):
            with store.transaction("evil", "t") as txn:
                getattr(txn, op)(*args)
    with store.snapshot() as snap, pytest.raises(PathRefused):
        snap.read("L3/evil/secret.txt")
    assert os.listdir(outside) == ["secret.txt"] and (outside / "secret.txt").read_text() == "secret"
    assert store.head() == 0


def test_symlink_inside_the_tree_resolves_to_its_target(store: MemoryStore) -> None:
    os.symlink("../L2/facts.md", store.root / "generations/0/L3/facts-link.md")
    with store.transaction("via link", "t") as txn:
        txn.patch("L3/facts-link.md", "## Environment\n", "## Environment\n- via link\n")
    assert store.log()[-1].paths == [FACTS] and "- via link" in head_text(store, FACTS)


# ---- layers -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("lines,width,refused", [(30, 10, False), (31, 10, True), (10, 300, True), (1, 1999, False)])
def test_l1_bound(store: MemoryStore, lines: int, width: int, refused: bool) -> None:
    text = "\n".join("x" * width for _ in range(lines)) + "\n"
    txn = store.transaction("l1", "t")
    txn.write(L1_INDEX, text)
    if refused:
        with pytest.raises(L1TooLarge) as info:
            txn.commit()
        message = str(info.value)
        assert f"{lines} lines" in message and f"{len(text)} chars" in message and "\n" not in message
        assert "move details to L2/facts.md or an L3 SOP and keep one pointer line in L1" in message
        assert store.head() == 0
    else:
        assert txn.commit() == 1


def test_l1_bound_uses_store_limits_and_applies_after_rebase(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "mem", create=True, l1_max_lines=7)
    base = store.head()  # the default index has 5 lines
    with store.transaction("one more", "a") as txn:
        txn.patch(L1_INDEX, "- Skill tree", "- A: L3/a.md\n- Skill tree")
    late = store.transaction("two more", "b", base=base)
    late.patch(L1_INDEX, "- Skill tree", "- B: L3/b.md\n- C: L3/c.md\n- Skill tree")  # 7 lines on its base
    with pytest.raises(L1TooLarge, match="8 lines"):
        late.commit()
    assert store.head() == 1


def test_render_l1_and_read_l0(tmp_path: Path) -> None:
    (tmp_path / "L1").mkdir()
    (tmp_path / "L0").mkdir()
    (tmp_path / "L1/index.md").write_text("# idx   \n\n\n- a: L3/a.md\n\n")
    (tmp_path / "L0/rules.md").write_text("rules\n")
    (tmp_path / "L0/extra.md").write_text("extra\n")
    assert render_l1(tmp_path) == "# idx\n\n- a: L3/a.md"
    assert render_l1(tmp_path, max_lines=1) == "# idx"
    assert read_l0(tmp_path) == "rules\n\nextra"


def test_sop_round_trip_and_errors() -> None:
    front = {"name": "get-data", "category": "data", "description": "fetch it", "created": "2025-01-31",
             "evidence": "task t1, calls c2 c3", "extra": 1}
    text = format_sop(front, "## Steps\n1. run\n")
    assert text.startswith("---\nname: get-data\ncategory: data\n")
    assert parse_sop(text) == (front, "## Steps\n1. run\n")
    with pytest.raises(ValueError, match="no YAML front matter"):
        parse_sop("# just markdown")
    with pytest.raises(ValueError, match="lacks created, evidence"):
        parse_sop("---\nname: a\ncategory: b\ndescription: c\n---\nbody")
    with pytest.raises(ValueError, match="not valid YAML"):
        parse_sop("---\nname: [a\n---\n")


def test_sop_front_matter_is_read_by_the_bounded_loader() -> None:
    """A model writes SOPs: its front matter gets the bounds of every YAML file ga reads, errors as file:line."""
    fields = "category: b\ndescription: c\ncreated: 2025-01-31\nevidence: e\n"
    with pytest.raises(ValueError, match=r"L3/x\.md:3: duplicate key 'name' \(first at line 2\)"):
        parse_sop(f"---\nname: a\nname: b\n{fields}---\nbody", "L3/x.md")
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{k}: &{k} [{', '.join([f'*{p}'] * 10)}]\n" for p, k in zip("abcde", "bcdef"))
    with pytest.raises(ValueError, match="aliases expand to more than"):
        parse_sop(f"---\nname: n\n{fields}{bomb}---\nbody", "L3/x.md")


def test_conflict_found_under_the_lock_when_head_moves_after_the_early_check(store: MemoryStore) -> None:
    from memory_shared import faults

    def sneak_in(point: str) -> None:  # another commit lands while ours builds its staging tree
        if point == "staging":
            faults.hook = None
            with store.transaction("sneaky", "bob") as other:
                other.write(FACTS, "bob's")

    mine = store.transaction("mine", "alice")
    mine.write(FACTS, "alice's")
    faults.hook = sneak_in
    try:
        with pytest.raises(CommitConflict, match="alice changed it from generation 0, but bob changed it in generation 1"):
            mine.commit()
    finally:
        faults.hook = None
    assert head_text(store, FACTS) == "bob's" and store.head() == 1 and store.verify() == []
