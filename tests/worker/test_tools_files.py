"""file_read, file_patch, file_write on real files in a worker directory, called as the loop calls them."""
from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from configs import load_settings
from worker.tools import REGISTRY, ToolContext


@pytest.fixture
def ctx(tmp_path) -> ToolContext:
    work = tmp_path / "work"
    work.mkdir()
    return ToolContext(task_id="t1", workdir=work, settings=load_settings(), memory=None)


def call(ctx: ToolContext, name: str, **args):
    spec = REGISTRY[name]
    return spec.run(ctx, spec.args.model_validate(args))


def lines_of(output: str) -> list[int]:
    return [int(m) for m in re.findall(r"^(\d+)\|", output, re.M)]


# ---- file_read

def test_read_numbers_lines_with_header(ctx):
    (ctx.workdir / "f.txt").write_text("alpha\nbeta\ngamma\n")
    result = call(ctx, "file_read", path="f.txt")
    assert result.ok and not result.evidence  # a read or write of a file is never evidence for memory (issue 31)
    assert result.output == "[f.txt: 3 lines]\n1|alpha\n2|beta\n3|gamma"


@pytest.mark.parametrize("start, count, shown, header", [
    (1, 200, list(range(1, 201)), "[big.txt: 500 lines; showing 1-200]"),
    (250, 10, list(range(250, 260)), "[big.txt: 500 lines; showing 250-259]"),
    (495, 50, list(range(495, 501)), "[big.txt: 500 lines; showing 495-500]"),
    (600, 10, [], "[big.txt: 500 lines; nothing from line 600]"),
    (0, 3, [1, 2, 3], "[big.txt: 500 lines; showing 1-3]"),
])
def test_read_pages(ctx, start, count, shown, header):
    (ctx.workdir / "big.txt").write_text("".join(f"line {i}\n" for i in range(1, 501)))
    out = call(ctx, "file_read", path="big.txt", start=start, count=count).output
    assert out.splitlines()[0] == header
    assert lines_of(out) == shown
    if shown:
        assert f"{shown[0]}|line {shown[0]}\n" in out + "\n"


def test_read_keeps_crlf_out_of_the_text(ctx):
    (ctx.workdir / "w.txt").write_bytes(b"one\r\ntwo\r\n")
    assert call(ctx, "file_read", path="w.txt").output == "[w.txt: 2 lines]\n1|one\n2|two"


def test_long_lines_are_cut(ctx):
    cap = ctx.settings.context.caps.file_read_line
    (ctx.workdir / "wide.txt").write_text("x" * (cap + 500) + "\nshort\n")
    out = call(ctx, "file_read", path="wide.txt").output
    first = out.splitlines()[1]
    assert first.startswith("1|" + "x" * cap) and first.endswith("...[+500 chars]")
    assert "x" * (cap + 1) not in out
    assert "2|short" in out


def test_whole_reply_capped_head_and_tail(ctx):
    (ctx.workdir / "huge.txt").write_text("".join(f"{i:04d} " + "y" * 300 + "\n" for i in range(1, 201)))
    out = call(ctx, "file_read", path="huge.txt").output
    assert len(out) <= ctx.settings.context.caps.file_read
    assert out.startswith("[huge.txt: 200 lines]\n1|0001 ")
    assert out.rstrip().endswith("y" * 50) and "200|0200 " in out
    assert re.search(r"\[\.\.\. \d+ chars cut \.\.\.\]", out)


def test_keyword_shows_window_and_lists_matches(ctx):
    text = "".join(f"row {i}{' NEEDLE' if i in (120, 300) else ''}\n" for i in range(1, 401))
    (ctx.workdir / "k.txt").write_text(text)
    out = call(ctx, "file_read", path="k.txt", keyword="needle", count=30).output
    header = out.splitlines()[0]
    assert header == "[k.txt: 400 lines; showing 110-139; 'needle' on lines 120, 300]"
    shown = lines_of(out)
    assert shown == list(range(110, 140))  # count//3 lines before the first match, the rest after
    # searching from a later start finds the second match
    out = call(ctx, "file_read", path="k.txt", keyword="NEEDLE", start=200, count=9).output
    assert "'NEEDLE' on line 300]" in out and lines_of(out) == list(range(297, 306))


def test_keyword_not_found_falls_back_to_page(ctx):
    (ctx.workdir / "k.txt").write_text("a\nb\nc\n")
    result = call(ctx, "file_read", path="k.txt", keyword="zzz")
    assert result.output == "[k.txt: 3 lines; 'zzz' not found from line 1]\n1|a\n2|b\n3|c"


def test_missing_file_suggests_close_names(ctx):
    (ctx.workdir / "src").mkdir()
    for name in ("src/config_loader.py", "src/main.py", "README.md", "notes.txt"):
        (ctx.workdir / name).write_text("x\n")
    result = call(ctx, "file_read", path="src/config_loadr.py")
    assert not result.ok and not result.evidence
    assert result.output.startswith("src/config_loadr.py: no such file; closest: src/config_loader.py")
    assert "notes.txt" not in result.output
    result = call(ctx, "file_read", path="README.txt")
    assert "closest: README.md" in result.output
    assert "no similar names" in call(ctx, "file_read", path="qqqqqqqqqq.bin").output


def test_read_directory_lists_entries(ctx):
    (ctx.workdir / "d" / "inner").mkdir(parents=True)
    (ctx.workdir / "d" / "f.txt").write_text("x")
    result = call(ctx, "file_read", path="d")
    assert result.ok and result.output == "[d: directory, 2 entries]\nf.txt\ninner/"


def test_read_binary_refused(ctx):
    (ctx.workdir / "b.bin").write_bytes(b"\x00\x01\x02" * 10)
    result = call(ctx, "file_read", path="b.bin")
    assert not result.ok and "binary file (30 bytes)" in result.output


def test_read_args_validated_by_pydantic():
    with pytest.raises(ValidationError):
        REGISTRY["file_read"].args.model_validate({"path": "x", "start": "first"})
    with pytest.raises(ValidationError):
        REGISTRY["file_read"].args.model_validate({"start": 1})


# ---- file_patch

@pytest.mark.parametrize("content, old, new, ok, expected, message", [
    ("a = 1\nb = 2\n", "b = 2", "b = 3", True, "a = 1\nb = 3\n", "patched f.py at line 2"),
    ("a = 1\nb = 2\n", "c = 9", "c = 0", False, None, "matched 0 times"),
    ("x = 1\nx = 1\nx = 1\n", "x = 1", "x = 2", False, None, "matched 3 times"),
    ("aaa\n", "aa", "b", False, None, "matched 2 times"),  # overlapping matches are not unique
    ("a = 1\n", "", "b", False, None, "old_content is empty"),
    ("def f():\n    return 1\n", "def f():\n    return 1", "def f():\n    return 2", True,
     "def f():\n    return 2\n", "2 lines -> 2"),
])
def test_patch_table(ctx, content, old, new, ok, expected, message):
    path = ctx.workdir / "f.py"
    path.write_text(content)
    result = call(ctx, "file_patch", path="f.py", old_content=old, new_content=new)
    assert result.ok is ok, result.output
    assert message in result.output
    assert path.read_text() == (expected if ok else content)


def test_patch_keeps_crlf(ctx):
    path = ctx.workdir / "win.txt"
    path.write_bytes(b"first\r\nsecond\r\nthird\r\n")
    result = call(ctx, "file_patch", path="win.txt", old_content="second\nthird", new_content="2nd\nnew\nthird")
    assert result.ok, result.output
    assert path.read_bytes() == b"first\r\n2nd\r\nnew\r\nthird\r\n"


def test_patch_keeps_lf_when_model_sends_crlf(ctx):
    path = ctx.workdir / "unix.txt"
    path.write_bytes(b"first\nsecond\n")
    assert call(ctx, "file_patch", path="unix.txt", old_content="first\r\nsecond", new_content="one\r\ntwo").ok
    assert path.read_bytes() == b"one\ntwo\n"


def test_patch_missing_file(ctx):
    result = call(ctx, "file_patch", path="nope.txt", old_content="a", new_content="b")
    assert not result.ok and "no such file; create it with file_write" in result.output
    assert not (ctx.workdir / "nope.txt").exists()


def test_patch_non_utf8_refused(ctx):
    path = ctx.workdir / "latin.txt"
    path.write_bytes("caf\xe9\n".encode("latin-1"))
    result = call(ctx, "file_patch", path="latin.txt", old_content="caf", new_content="tea")
    assert not result.ok and "not UTF-8" in result.output
    assert path.read_bytes() == "caf\xe9\n".encode("latin-1")


# ---- file_write

@pytest.mark.parametrize("mode, before, content, after", [
    ("overwrite", None, "new\n", "new\n"),
    ("overwrite", "old\n", "new\n", "new\n"),
    ("append", "old\n", "new\n", "old\nnew\n"),
    ("append", None, "new\n", "new\n"),
    ("prepend", "old\n", "new\n", "new\nold\n"),
    ("prepend", None, "new\n", "new\n"),
])
def test_write_modes(ctx, mode, before, content, after):
    path = ctx.workdir / "w.txt"
    if before is not None:
        path.write_text(before)
    result = call(ctx, "file_write", path="w.txt", content=content, mode=mode)
    assert result.ok and not result.evidence  # a read or write of a file is never evidence for memory (issue 31)
    assert path.read_text() == after
    assert f"({mode})" in result.output


def test_write_creates_parent_dirs_and_keeps_bytes(ctx):
    result = call(ctx, "file_write", path="a/b/c.txt", content="x\r\ny\n\u00e9")
    assert result.ok
    assert (ctx.workdir / "a/b/c.txt").read_bytes() == "x\r\ny\n\u00e9".encode()


def test_write_to_directory_refused(ctx):
    (ctx.workdir / "d").mkdir()
    result = call(ctx, "file_write", path="d", content="x")
    assert not result.ok and "is a directory" in result.output


def test_write_bad_mode_rejected_by_pydantic():
    with pytest.raises(ValidationError):
        REGISTRY["file_write"].args.model_validate({"path": "x", "content": "y", "mode": "insert"})


def test_memory_paths_without_memory_tier(ctx):
    for name, args in [("file_read", {"path": "memory/L1/index.md"}),
                       ("file_write", {"path": "memory/L2/facts.md", "content": "x"}),
                       ("file_patch", {"path": "memory/L2/facts.md", "old_content": "a", "new_content": "b"})]:
        result = call(ctx, name, **args)
        assert not result.ok and "no memory tier" in result.output
    assert not (ctx.workdir / "memory").exists()


def test_schemas_are_small():
    for name in ("file_read", "file_patch", "file_write"):
        schema = REGISTRY[name].schema()
        assert len(str(schema)) / 4 < 250, name
        assert "anyOf" not in str(schema)
