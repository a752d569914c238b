"""Protected names that are missing or links (worker/policy.py), through the real tools and real bubblewrap:

- a missing `.git` in the working directory could be made by code_run (the file tools refused it), with a
  `core.fsmonitor` that the person's next `git status` there runs;
- a `ga.yaml` that is a dangling link into the working directory got no mount: code_run and file_write made its
  target, which ga then read as the project's configuration;
- a `ga.yaml` that is a link to a file got its target mounted read-only, but the link itself was replaced by a
  file of the script's (a mount follows a link: nothing can hold the link), so code_run now refuses to start.
"""
from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from configs import load_settings
from worker.tools import REGISTRY, ToolContext

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


@pytest.fixture
def project(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A repository with the working directory one folder below its root (no .git of its own), under /var/tmp."""
    root = Path(tempfile.mkdtemp(prefix="ga-links-", dir="/var/tmp"))
    for folder in ("home", "ga-home", "repo/work"):
        (root / folder).mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root / "repo")], check=True)
    monkeypatch.setenv("HOME", str(root / "home"))
    monkeypatch.chdir(root / "repo" / "work")
    yield root / "repo" / "work"
    shutil.rmtree(root, ignore_errors=True)


def call(workdir: Path, name: str, **args: object) -> str:
    settings = load_settings({"home": str(workdir.parents[1] / "ga-home")}, environ={})
    ctx = ToolContext(task_id="links", workdir=workdir, settings=settings, memory=None)
    try:
        spec = REGISTRY[name]
        return spec.run(ctx, spec.args.model_validate(args)).output
    finally:
        ctx.close()


def test_code_run_cannot_make_a_missing_git_folder_and_git_still_finds_the_repository_above(project: Path) -> None:
    said = call(project, "code_run", type="bash", script=(
        "mkdir -p .git/hooks; printf '[core]\\n\\tfsmonitor = ./evil\\n' > .git/config; git init -q .; "
        "git rev-parse --show-toplevel"))
    assert not (project / ".git").exists(), said  # nothing made, and the empty mount point is gone again
    assert said.rstrip().endswith(str(project.parent)), said  # git inside walks on to the repository above
    assert "Read-only file system" in said, said


def test_the_target_of_a_dangling_ga_yaml_link_is_written_by_no_tool(project: Path) -> None:
    (project / "conf").mkdir()
    (project / "ga.yaml").symlink_to(project / "conf" / "ga.yaml")
    written = call(project, "file_write", path="conf/ga.yaml", content="worker: {max_turns: 1}\n")
    assert "which a task may not write" in written and "\n" not in written, written
    ran = call(project, "code_run", type="bash", script="echo 'worker: {max_turns: 1}' > conf/ga.yaml; echo ran")
    assert ran.startswith("code_run refused:") and "ga.yaml is a symbolic link" in ran and "\n" not in ran, ran
    assert not (project / "conf" / "ga.yaml").exists()


def test_a_linked_ga_yaml_cannot_be_replaced_so_code_run_does_not_start(project: Path) -> None:
    (project / "conf").mkdir()
    (project / "conf" / "ga.yaml").write_text("worker: {max_turns: 40}\n")
    (project / "ga.yaml").symlink_to("conf/ga.yaml")
    ran = call(project, "code_run", type="bash", script="rm -f ga.yaml; echo 'worker: {max_turns: 1}' > ga.yaml")
    assert ran.startswith("code_run refused:") and "readlink" in ran, ran
    assert (project / "ga.yaml").is_symlink() and (project / "conf" / "ga.yaml").read_text() == "worker: {max_turns: 40}\n"
    written = call(project, "file_write", path="conf/ga.yaml", content="worker: {max_turns: 1}\n")
    assert "which a task may not write" in written, written


def test_a_script_reads_the_empty_mount_points_of_missing_names_as_empty_files(project: Path) -> None:
    """The mount point of a missing ga.yaml was /dev/null, a device on a mount without devices: `cat *` in every
    task's directory failed on it (Permission denied). It is an empty read-only file now."""
    (project / "data.txt").write_text("DATA\n")
    said = call(project, "code_run", type="bash", script="cat *; echo status=$?; wc -c ga.yaml models.yaml")
    assert "DATA" in said and "status=0" in said and "Permission denied" not in said, said
    assert "0 ga.yaml" in said and "0 models.yaml" in said, said
    assert not (project / "ga.yaml").exists() and not (project / "models.yaml").exists()
