"""The policy table (worker/policy.py, README "Sandbox"): every actor that works for a task, against every
resource a task must not change or read, through the real tools and real bubblewrap.

A row is an actor: an object with `name`, `write(place, path)` (try to make `path` hold PLANTED: overwrite an
existing file, create a missing one) and `read(place, path) -> str` (what the task got back), either of which
may be None where the actor cannot do that at all. A column is a Resource. To add the browser, a nested run, a
check or the gateway, write its actor class (it gets the same Place: HOME, GA_HOME, the project directory
where `ga run` would run, its runs/) and add it to ACTORS; every resource is then tried through it.

The Place is `ga run`'s: the working directory is the project directory (a git checkout with a virtual
environment), its runs directory holds another run and this task's run, with a steer/ folder.
"""
from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional

import pytest

from configs import load_settings
from memory_shared import MemoryStore
from worker.tools import REGISTRY, ToolContext

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
ORIGINAL = "original content\n"
PLANTED = "planted by the task\n"
SECRET = "FAKE-SECRET-policy-table"


@dataclass
class Place:
    root: Path  # under /var/tmp: the sandbox's private /tmp would hide a place under /tmp, and prove nothing

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def ga_home(self) -> Path:
        return self.root / "ga-home"

    @property
    def project(self) -> Path:
        return self.root / "project"

    @property
    def run_dir(self) -> Path:
        return self.project / "runs" / "run-this"

    def shown(self, path: Path) -> str:
        """The path as a model would name it: relative inside the project, absolute elsewhere."""
        return str(path.relative_to(self.project)) if path.is_relative_to(self.project) else str(path)

    def context(self) -> ToolContext:
        settings = load_settings({"home": str(self.ga_home)}, environ={})
        return ToolContext(task_id="run-this", workdir=self.project, settings=settings, memory=None,
                           env={"GA_RUN_DIR": str(self.run_dir)})


@dataclass(frozen=True)
class Resource:
    name: str
    path: Callable[[Place], Path]
    exists: bool = True  # False: a file that must not come to exist
    secret: bool = False  # reading it is refused too
    allowed: bool = False  # the control: the task's own file, which every actor may write and read


RESOURCES = [
    Resource("the task's own file (control)", lambda p: p.project / "notes.txt", allowed=True),
    Resource("a file outside the task", lambda p: p.root / "outside" / "victim.txt"),
    Resource("ga.yaml (new)", lambda p: p.project / "ga.yaml", exists=False),
    Resource("models.yaml (new)", lambda p: p.project / "models.yaml", exists=False),
    Resource(".git/config", lambda p: p.project / ".git" / "config"),
    Resource(".venv: a new .pth", lambda p: p.project / ".venv" / "lib" / "python3.11" / "site-packages" / "x.pth",
             exists=False),
    Resource(".venv/pyvenv.cfg", lambda p: p.project / ".venv" / "pyvenv.cfg"),
    Resource(".venv through a link in the workdir", lambda p: p.project / "libs" / "y.pth", exists=False),
    Resource(".ga/ (code_run's outputs)", lambda p: p.project / ".ga" / "code_1.out"),
    Resource("runs/<other run>/results.jsonl", lambda p: p.project / "runs" / "run-other" / "results.jsonl"),
    Resource("runs/<other run>/summary.json", lambda p: p.project / "runs" / "run-other" / "summary.json"),
    Resource("runs/<this run>/steer/ (new)", lambda p: p.run_dir / "steer" / "forged.json", exists=False),
    Resource("GA_HOME", lambda p: p.ga_home / "explore" / "state.json"),
    Resource("the memory store", lambda p: p.ga_home / "memory" / "log.jsonl"),
    Resource("GA_HOME/sessions", lambda p: p.ga_home / "sessions" / "old.json", secret=True),
    Resource("~/.ssh/id_rsa", lambda p: p.home / ".ssh" / "id_rsa", secret=True),
    Resource("~/.config/ga/config.yaml (new)", lambda p: p.home / ".config" / "ga" / "config.yaml", exists=False),
]


@pytest.fixture
def place(monkeypatch: pytest.MonkeyPatch) -> Iterator[Place]:
    place = Place(Path(tempfile.mkdtemp(prefix="ga-table-", dir="/var/tmp")))
    for folder in (place.home / ".ssh", place.ga_home / "explore", place.ga_home / "sessions", place.root / "outside",
                   place.project / ".git", place.project / ".ga", place.run_dir / "steer",
                   place.project / ".venv" / "lib" / "python3.11" / "site-packages", place.project / "runs" / "run-other"):
        folder.mkdir(parents=True, exist_ok=True)
    MemoryStore(place.ga_home / "memory", create=True)
    for resource in RESOURCES:
        path = resource.path(place)
        if resource.exists and not path.exists():
            path.write_text(SECRET + "\n" if resource.secret else ORIGINAL)
    (place.project / "runs" / "run-other" / "ledger.jsonl").write_text("{}\n")
    (place.project / "libs").symlink_to(place.project / ".venv" / "lib" / "python3.11" / "site-packages")
    monkeypatch.setenv("HOME", str(place.home))
    monkeypatch.chdir(place.project)
    yield place
    shutil.rmtree(place.root, ignore_errors=True)


def call(ctx: ToolContext, name: str, **args):
    spec = REGISTRY[name]
    return spec.run(ctx, spec.args.model_validate(args))


class CodeRun:
    """code_run's bubblewrap sandbox (network: the gateway only)."""

    name = "code_run"

    def write(self, place: Place, path: Path) -> str:
        return self._run(place, f"mkdir -p '{path.parent}' 2>/dev/null; printf '{PLANTED}' > '{path}' && echo wrote")

    def read(self, place: Place, path: Path) -> str:
        return self._run(place, f"cat '{path}'")

    def _run(self, place: Place, script: str) -> str:
        ctx = place.context()
        try:
            return call(ctx, "code_run", type="bash", script=script).output
        finally:
            ctx.close()


class FileTool:
    """file_write, file_patch, file_read: in ga's own process, through the task's Environment."""

    def __init__(self, name: str):
        self.name = name
        self.write = self._write if name in ("file_write", "file_patch") else None
        self.read = self._read if name == "file_read" else None

    def _write(self, place: Place, path: Path) -> str:
        ctx = place.context()
        try:
            if self.name == "file_write":
                result = call(ctx, "file_write", path=place.shown(path), content=PLANTED)
            else:
                result = call(ctx, "file_patch", path=place.shown(path), old_content=ORIGINAL, new_content=PLANTED)
        finally:
            ctx.close()
        assert "\n" not in result.output, result.output  # a refusal (or a success) is one line
        return result.output

    def _read(self, place: Place, path: Path) -> str:
        ctx = place.context()
        try:
            return call(ctx, "file_read", path=place.shown(path)).output
        finally:
            ctx.close()


ACTORS = [CodeRun(), FileTool("file_write"), FileTool("file_patch"), FileTool("file_read")]
CELLS = [(actor, resource) for actor in ACTORS for resource in RESOURCES]


def cell_id(cell: tuple) -> str:
    actor, resource = cell
    return f"{actor.name}-{resource.name}"


@pytest.mark.parametrize("cell", CELLS, ids=[cell_id(c) for c in CELLS])
def test_the_policy_table(place: Place, cell: tuple) -> None:
    actor, resource = cell
    path = resource.path(place)
    before: Optional[str] = path.read_text() if path.exists() else None
    if actor.write is not None and not (actor.name == "file_patch" and not resource.exists):
        said = actor.write(place, path)
        if resource.allowed:
            assert path.read_text() == PLANTED, said
        elif resource.exists:
            assert not path.is_symlink() and path.read_text() == before, f"{actor.name} changed {path}: {said}"
        else:
            assert not path.exists() and not path.is_symlink(), f"{actor.name} created {path}: {said}"
            assert not path.resolve().exists(), f"{actor.name} created {path.resolve()}: {said}"
    if actor.read is not None:
        got = actor.read(place, path)
        if resource.allowed:
            assert path.read_text().strip() in got, got
        elif resource.secret:
            assert SECRET not in got, f"{actor.name} read {path}"
