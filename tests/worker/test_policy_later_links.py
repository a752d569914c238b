"""The Environment is built once per task, at its first tool call; what a task's background processes change later
must still be seen by every file_write after it (worker/policy.py looks at the protected names on each call)."""
from __future__ import annotations

from pathlib import Path

from configs import load_settings
from worker.tools import REGISTRY, ToolContext


def write(ctx: ToolContext, path: str) -> str:
    spec = REGISTRY["file_write"]
    return spec.run(ctx, spec.args.model_validate({"path": path, "content": "x\n"})).output


def test_a_protected_name_made_a_link_after_the_first_call_still_guards_its_target(tmp_path: Path, monkeypatch) -> None:
    workdir = tmp_path / "work"
    (workdir / "sub").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    settings = load_settings({"home": str(tmp_path / "ga-home")}, environ={})
    ctx = ToolContext(task_id="later", workdir=workdir, settings=settings, memory=None)
    try:
        assert write(ctx, "sub/first.txt").startswith("wrote"), "the Environment is built by this call"
        (workdir / ".git").symlink_to(workdir / "sub")  # a background process makes one after that
        refused = write(ctx, "sub/config")
        assert "which a task may not write" in refused and "\n" not in refused, refused
        assert not (workdir / "sub" / "config").exists()
        assert write(ctx, "elsewhere.txt").startswith("wrote")  # the rest of the working directory stays writable
    finally:
        ctx.close()


def test_a_relative_memory_root_is_taken_from_the_directory_ga_runs_in_at_each_task(tmp_path: Path, monkeypatch) -> None:
    """The real paths of ga's state are remembered per process: per path as it resolves from where ga runs."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in ("one", "two"):
        here = tmp_path / name
        (here / "work").mkdir(parents=True)
        (here / "store").mkdir()
        monkeypatch.chdir(here)
        settings = load_settings({"home": str(tmp_path / "ga-home"), "memory": {"root": "store"}}, environ={})
        ctx = ToolContext(task_id=name, workdir=here / "work", settings=settings, memory=None)
        try:
            assert settings.memory_root.resolve() == here / "store"
            assert (here / "store", "the memory store") in ctx.policy.state
        finally:
            ctx.close()
