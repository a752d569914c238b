"""Path resolution: the workdir is the root; '..', absolute and symlink escapes are refused; config opens paths."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from configs import load_settings
from worker.paths import PathError, memory_rel, resolve_read, resolve_write
from worker.tools import REGISTRY, ToolContext


@pytest.fixture
def tree(tmp_path):
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "a.txt").write_text("inside\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    (work / "link_out").symlink_to(outside / "secret.txt")
    (work / "dir_out").symlink_to(outside)
    (work / "link_in").symlink_to(work / "a.txt")
    return work, outside


@pytest.mark.parametrize("path, expected", [
    ("memory/L2/facts.md", "L2/facts.md"),
    ("./memory/L1/index.md", "L1/index.md"),
    ("memory", ""),
    ("memory/", ""),
    ("memory/./L3/x.md", "L3/x.md"),
    ("memories/x", None),
    ("notes/memory/x", None),
    ("/memory/x", None),
])
def test_memory_prefix(path, expected):
    assert memory_rel(path) == expected


def test_memory_prefix_refuses_dotdot():
    with pytest.raises(PathError, match=r"'\.\.' is not allowed"):
        memory_rel("memory/../a.txt")


@pytest.mark.parametrize("path, ok", [
    ("a.txt", True),
    ("sub/../a.txt", True),
    ("sub/new.txt", True),        # a missing file inside the workdir is fine (writes create it)
    ("link_in", True),            # a symlink that stays inside
    ("../outside/secret.txt", False),
    ("sub/../../outside/secret.txt", False),
    ("link_out", False),          # symlink to a file outside
    ("dir_out/secret.txt", False),  # through a symlinked directory
    ("dir_out/new.txt", False),
    ("", False),
])
def test_relative_paths(tree, path, ok):
    work, _ = tree
    if ok:
        assert work.resolve() in resolve_read(path, work).parents
        assert work.resolve() in resolve_write(path, work).parents
    else:
        for resolve in (resolve_read, resolve_write):
            with pytest.raises(PathError) as info:
                resolve(path, work)
            assert "\n" not in str(info.value)


def test_dotdot_message_is_clear(tree):
    work, _ = tree
    with pytest.raises(PathError, match=r"'\.\.' leaves the worker's directory"):
        resolve_read("../outside/secret.txt", work)


def test_symlink_message_names_the_target(tree):
    work, outside = tree
    with pytest.raises(PathError, match="symlink") as info:
        resolve_read("link_out", work)
    assert str((outside / "secret.txt").resolve()) in str(info.value)


def test_absolute_paths(tree):
    work, outside = tree
    assert resolve_read(str(work / "a.txt"), work) == (work / "a.txt").resolve()
    with pytest.raises(PathError, match="outside the worker's directory; read refused"):
        resolve_read(str(outside / "secret.txt"), work)
    with pytest.raises(PathError, match="worker.allow_write"):
        resolve_write(str(outside / "new.txt"), work)
    with pytest.raises(PathError):
        resolve_read("/etc/passwd", work)


def test_configured_paths(tree):
    work, outside = tree
    secret = str(outside / "secret.txt")
    assert resolve_read(secret, work, allow_read=[outside]) == Path(secret).resolve()
    assert resolve_read("link_out", work, allow_read=[outside]) == Path(secret).resolve()
    with pytest.raises(PathError):  # allow_read opens reads only
        resolve_write(secret, work)
    assert resolve_write(str(outside / "new.txt"), work, allow_write=[outside]).parent == outside.resolve()
    assert resolve_read(secret, work, allow_write=[outside]) == Path(secret).resolve()  # writable is readable
    with pytest.raises(PathError):  # '..' stays refused even towards an allowed directory
        resolve_read("../outside/secret.txt", work, allow_read=[outside])


# ---- the same rules through the tools, as the loop calls them

def _ctx(work: Path, **overrides) -> ToolContext:
    return ToolContext(task_id="t", workdir=work, settings=load_settings(overrides), memory=None)


def _call(ctx: ToolContext, name: str, **args):
    spec = REGISTRY[name]
    return spec.run(ctx, spec.args.model_validate(args))


@pytest.mark.parametrize("name, args", [
    ("file_read", {"path": "../outside/secret.txt"}),
    ("file_read", {"path": "link_out"}),
    ("file_write", {"path": "dir_out/planted.txt", "content": "x"}),
    ("file_write", {"path": "../outside/planted.txt", "content": "x"}),
    ("file_patch", {"path": "link_out", "old_content": "secret", "new_content": "changed"}),
    ("code_run", {"script": "print(1)", "cwd": "../outside"}),
    ("code_run", {"script": "print(1)", "cwd": "dir_out"}),
])
def test_tools_refuse_escapes(tree, name, args):
    work, outside = tree
    before = sorted(p.name for p in outside.iterdir())
    result = _call(_ctx(work), name, **args)
    assert not result.ok and not result.evidence
    assert "outside the worker's directory" in result.output or "leaves the worker's directory" in result.output
    assert "\n" not in result.output
    where = args.get("path") or args["cwd"]
    assert result.output.startswith(f"{where}: ") and not result.output.startswith(f"{where}: {where}")
    assert sorted(p.name for p in outside.iterdir()) == before
    assert (outside / "secret.txt").read_text() == "secret\n"


def test_tools_honour_allow_write(tree):
    work, outside = tree
    ctx = _ctx(work, **{"worker.allow_write": [str(outside)]})
    result = _call(ctx, "file_write", path=str(outside / "ok.txt"), content="allowed\n")
    assert result.ok, result.output
    assert (outside / "ok.txt").read_text() == "allowed\n"
    assert _call(ctx, "file_patch", path="link_out", old_content="secret", new_content="patched").ok
    assert (outside / "secret.txt").read_text() == "patched\n"
    read = _call(_ctx(work, **{"worker.allow_read": [str(outside)]}), "file_read", path=str(outside / "ok.txt"))
    assert read.ok and "1|allowed" in read.output


def test_home_relative_path_is_checked(tree, monkeypatch):
    work, outside = tree
    monkeypatch.setenv("HOME", str(outside))
    with pytest.raises(PathError):
        resolve_read("~/secret.txt", work)
    assert os.path.exists(outside / "secret.txt")
