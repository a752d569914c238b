"""The one rule of what a task may do: its Environment (docs/design.md §5, the README's Sandbox section).

A task acts through many actors: code_run's sandbox, the file tools in ga's own process, and (they consult
this too) the browser, nested runs, checks and the model gateway. Each acts with the task's rights and no
more, and those rights are written down here once, built once per task (`Environment.for_task`):

- **Write**: the task's working directory and the paths in `sandbox.writable` and `worker.allow_write`.
- **Read** (file tools): those, and `worker.allow_read`. code_run's sandbox also reads the rest of the
  filesystem read-only.
- **Never written, even inside a writable path** (the most specific path decides, as bubblewrap's mounts do):
  - ga's own state: GA_HOME, the memory store, the runs directory (`fanout.runs_dir`) and the task's run
    directory (its `steer/` folder included);
  - in every writable path and in ga's working directory: `ga.yaml`, `models.yaml`, `.ga/` (code_run's scripts
    and their output) and `.git/`; a missing one cannot be created either (an empty read-only mount point), and
    where one is a symbolic link its target is protected too, made or not. A link itself cannot be kept from
    being replaced (a mount follows it), so code_run refuses to start in a folder where one is a link
    (`link_refusal`);
  - the virtual environments (a folder with `pyvenv.cfg`) and run directories (a folder with
    `ledger.jsonl`) found up to two levels below a writable path when the task started: code that later
    runs with the person's rights (a `.pth` file is imported by every Python of a venv) or records ga
    reads back. What the task makes itself stays its own.
- **Never read**: credentials and profiles under the home directory (SECRETS), `~/.config/ga`, and
  GA_HOME's `sessions/`.
- **Network and models**: `sandbox.network`; the task's own model (`model`), spent against `account`.

What a task can write is data, never authority: project configuration it could have planted may only tighten
(configs/projecttrust.py, worker/modelconfig.py), and ga opens files in the writable area without following links
(memory_shared.fsutil).

A refusal is one line naming the path, why, and what to do instead (`PathError`).
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Literal, Optional, Union

from configs import Settings
from configs.settings import NetworkMode
from worker.paths import PathError, resolve_read, resolve_write

if TYPE_CHECKING:
    from worker.modelconfig import ModelConfig
    from worker.usage import Account

# Under the home directory: credentials, browser profiles (cookies, saved logins) and ga's own user config; a
# directory gets an empty tmpfs in the sandbox, a file /dev/null, and the file tools refuse them.
SECRETS = (".ssh", ".aws", ".gnupg", ".config/ga", ".azure", ".config/gcloud", ".kube", ".docker",
           ".password-store", ".netrc", ".git-credentials", ".pypirc", ".npmrc", ".pgpass",
           ".config/gh", ".config/hub", ".cache/huggingface", ".huggingface",
           ".config/chromium", ".cache/chromium", ".config/google-chrome", ".cache/google-chrome",
           ".config/google-chrome-beta", ".config/BraveSoftware", ".mozilla", ".cache/mozilla", "snap/chromium",
           "snap/firefox", ".var/app/org.mozilla.firefox", ".var/app/org.chromium.Chromium")
GA_HIDDEN = ("sessions",)  # under GA_HOME: every task's prompt, model and workdir (the rest is read-only)
# Project configuration ga reads from the directory it runs in (configs/settings.py, worker/modelconfig.py).
PROJECT_FILES = ("ga.yaml", "models.yaml")
PROTECTED_DIRS = (".ga", ".git")  # code_run's scripts and outputs; a repository's config and hooks
VENV_MARK = "pyvenv.cfg"  # a folder holding it is a virtual environment
RUN_MARK = "ledger.jsonl"  # a folder holding it is a run directory (orchestrator/ledger.py)
STEER_DIR = "steer"  # a run directory's steering requests (orchestrator/local.py's Mailbox)
SCAN_DEPTH = 2  # how far below a writable path venvs and run directories are looked for

# absent: a file that must not come to exist (an empty read-only mount point); absent_dir: a folder (.ga, .git)
Access = Literal["rw", "ro", "absent", "absent_dir", "hide"]
RANK = {"rw": 0, "ro": 1, "absent": 1, "absent_dir": 1, "hide": 2}
ABSENT = ("absent", "absent_dir")


@dataclass(frozen=True)
class Entry:
    """One line of the rule: a path, what a task may do there, and what it is (for a refusal's words)."""

    path: Path
    access: Access
    what: str


def entries(writable: Iterable[Path], readonly: Iterable[tuple[Path, str]] = (), hidden: Iterable[Path] = (),
            config_dirs: Iterable[Path] = (), home: Optional[Path] = None) -> list[Entry]:
    """The rule as entries that exist now, in mount order (parents first, the stronger entry for one path
    later): the writable roots, then what stays read-only inside them, then what is hidden; a missing project
    config file is `absent` (an empty read-only mount point, so the sandbox cannot create it)."""
    roots = existing(writable)
    table: dict[Path, Entry] = {p: Entry(p, "rw", "a writable path") for p in roots}
    for path, what in readonly:
        table.update({real: Entry(real, "ro", what) for real in existing([path])})
    for folder in protected_folders(roots, existing(config_dirs)):
        if folder.is_dir():
            for entry in _protected_in(folder):
                found = _on_disk(entry, roots)
                if found is not None:
                    table[found.path] = found
    home = home or Path.home()
    for real in existing([*(home / name for name in SECRETS), *hidden]):
        table[real] = Entry(real, "hide", HIDDEN_WHAT)
    return sorted(table.values(), key=lambda e: (len(e.path.parts), RANK[e.access], str(e.path)))


HIDDEN_WHAT = "hidden from tasks (credentials, ga's user config, sessions)"


@lru_cache(maxsize=16)
def hidden_entries(home: Path, hidden: tuple[Path, ...]) -> tuple[Entry, ...]:
    """The names hidden from tasks (SECRETS under `home`, and `hidden`), each at its real path, existing or not.

    Made once per process for each (home, hidden) pair: 30-odd realpaths were half of what a trivial task
    spent on its Environment, and every task of a run has the same. Where a name leads changes only when the
    person moves it; no task can: an existing one is hidden from every actor (the sandbox mounts over it, the
    file tools refuse it), and where a task makes a missing one itself, the entry still covers the name."""
    return tuple(Entry(Path(os.path.realpath(os.path.expanduser(str(p)))), "hide", HIDDEN_WHAT)
                 for p in [*(home / name for name in SECRETS), *hidden])


@lru_cache(maxsize=16)
def _hidden_table(home: Path, hidden: tuple[Path, ...]) -> "_Table":
    """hidden_entries as a table, made once per process like them (read only: a task's table starts from a copy)."""
    return _Table(hidden_entries(home, hidden))


def protected_folders(roots: list[Path], config_dirs: list[Path]) -> list[Path]:
    """Where the protected names are: every writable root, and ga's working directory when one holds it."""
    return [*roots, *(d for d in config_dirs if d not in roots and any(d.is_relative_to(r) for r in roots))]


def _protected_in(folder: Path) -> list[Entry]:
    """The protected names in `folder`, whether they exist or not, as what they are when missing (`absent`)."""
    found = [Entry(folder / name, "absent", f"ga's project configuration ({name})") for name in PROJECT_FILES]
    found += [Entry(folder / ".ga", "absent_dir", "code_run's scripts and their output (.ga)"),
              Entry(folder / ".git", "absent_dir", "a repository's config and hooks (.git)")]
    return found


def _on_disk(entry: Entry, roots: list[Path]) -> Optional[Entry]:
    """How a protected name is mounted now: read-only where it is (a link: its target), an empty read-only mount
    point where it is missing (a dangling link: at its target); None where its target lies outside every writable
    root (read-only there already, and no mount point may be made there)."""
    real = Path(os.path.realpath(entry.path))
    if real.exists():
        return Entry(real, "ro", entry.what)
    if any(real.is_relative_to(root) for root in roots):
        return Entry(real, entry.access, entry.what)
    return None


def linked_names(roots: Iterable[Path], config_dirs: Iterable[Path] = ()) -> list[Path]:
    """The protected names that are symbolic links in the folders where names are protected."""
    folders = protected_folders(existing(roots), existing(config_dirs))
    return [e.path for folder in folders for e in _protected_in(folder) if e.path.is_symlink()]


def decide(table: Iterable[Entry], path: Path) -> Optional[Entry]:
    """The entry that decides for `path` (a real path): the most specific one containing it, the stronger for
    one path, as the sandbox's mounts stack; None when no entry contains it."""
    return _Table(table).decide(str(path))


class _Table:
    """Entries by path, the stronger kept for one path (the later of equals, as the mounts stack): `decide` looks
    up the path and each of its parents, most specific first, instead of comparing every entry."""

    def __init__(self, table: Iterable[Entry]):
        self.by_path: dict[str, Entry] = {}
        for entry in table:
            self.add(entry)

    def add(self, entry: Entry) -> None:
        key = str(entry.path)
        held = self.by_path.get(key)
        if held is None or RANK[entry.access] >= RANK[held.access]:
            self.by_path[key] = entry

    def copy(self) -> "_Table":
        other = _Table(())
        other.by_path = dict(self.by_path)
        return other

    def decide(self, text: str) -> Optional[Entry]:
        by_path = self.by_path
        while True:
            found = by_path.get(text)
            if found is not None:
                return found
            if text == "/":
                return None
            text = text.rsplit("/", 1)[0] or "/"


def marked_folders(roots: Iterable[Path], skip: Iterable[Path] = (), real: bool = False) -> tuple[tuple[Path, str], ...]:
    """Virtual environments and run directories up to SCAN_DEPTH below each root (not a root itself, no
    symlink followed), with what each is. real: `roots` and `skip` are real paths already (no need to look
    again; a folder found below a real root by a scan that follows no link is a real path too)."""
    skipped = set(skip) if real else set(existing(skip))
    found: dict[Path, str] = {}

    def visit(folder: Path, depth: int) -> None:
        try:
            children = [Path(e.path) for e in os.scandir(folder) if e.is_dir(follow_symlinks=False)]
        except OSError:
            return
        for child in children:
            if child in skipped or child.name == ".git":
                continue
            if os.path.isfile(os.path.join(child, VENV_MARK)):
                found[child] = f"a virtual environment ({child.name}, with {VENV_MARK})"
            elif os.path.isfile(os.path.join(child, RUN_MARK)):
                found[child] = "a run directory (its ledger, results, summary and steer/)"
            elif depth < SCAN_DEPTH:
                visit(child, depth + 1)

    for root in (roots if real else existing(roots)):
        visit(root, 1)
    return tuple(found.items())


def _is_link(path: str) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return False


def existing(paths: Iterable[Union[Path, str, None]], *, remembered: bool = False) -> list[Path]:
    """Real paths of those that exist, each once (a bind needs its source; a symlink would bind its target's path).

    Whether a path exists is looked at now. Where it leads is too, unless `remembered`: for paths ga's configuration
    names, whose real path is remembered per process (`_real`)."""
    found = []
    for path in paths:
        if not path:
            continue
        real = _real(str(path)) if remembered else Path(os.path.expanduser(str(path))).resolve()
        if real not in found and os.path.exists(real):
            found.append(real)
    return found


def _real(path: str) -> Path:
    """The real path of a path ga's configuration names (its state, the paths a person made writable or readable),
    remembered per process, as hidden_entries is: where such a name leads changes only when the person moves it. A
    task cannot: ga's state is read-only to every actor of a task (a mount point in the sandbox, refused by the file
    tools), and a configured root can be replaced only from a writable folder around it, writable already."""
    expanded = os.path.expanduser(path)
    return _real_absolute(expanded if os.path.isabs(expanded) else os.path.join(os.getcwd(), expanded))


@lru_cache(maxsize=1024)
def _real_absolute(path: str) -> Path:
    return Path(os.path.realpath(path))


@dataclass(frozen=True)
class Environment:
    """One task's rights: what it may read and write, what is protected inside that, its network, model and
    budget. Built once per task (`for_task`; ToolContext.policy); every actor that works for the task asks it.

    - `check_write(path)` / `check_read(path)`: the real path a file tool may use, or PathError (one line);
    - `entries()`: the rule as it stands on disk now, which code_run's bubblewrap mounts (worker/tools/code.py);
    - `writable`, `readable`, `state`, `hidden`, `config_dirs`, `network`, `model`, `account`: its parts
      (file tools open a checked path again from the root in `writable` or `readable` that holds it).
    """

    workdir: Path  # real path
    writable: tuple[Path, ...]  # the workdir first, then sandbox.writable and worker.allow_write
    readable: tuple[Path, ...] = ()  # worker.allow_read: read-only roots of the file tools
    state: tuple[tuple[Path, str], ...] = ()  # read-only even inside a writable path, with what each is
    hidden: tuple[Path, ...] = ()  # besides SECRETS under `home`
    config_dirs: tuple[Path, ...] = ()  # where ga reads project configuration (its working directory)
    home: Path = field(default_factory=Path.home)
    network: NetworkMode = "gateway"  # sandbox.network: gateway, open, off, or a list of host names
    model: Optional["ModelConfig"] = None  # the task's own model: where its gateway forwards
    account: Optional["Account"] = None  # what the task spent and may spend

    @classmethod
    def for_task(cls, settings: Settings, workdir: Path, *, run_dir: Optional[Path] = None,
                 memory_roots: Iterable[Optional[Path]] = (), model: Optional["ModelConfig"] = None,
                 account: Optional["Account"] = None, cwd: Optional[Path] = None) -> "Environment":
        """The task's Environment from its settings (a tasks file's sandbox block already merged in), its
        directory and run directory, and the memory it reads (the store's root, the pinned snapshot)."""
        cwd = _real(str(cwd)) if cwd else Path(os.getcwd())  # getcwd: a real path already
        root = Path(os.path.realpath(workdir))
        configured = existing([*settings.sandbox.writable, *settings.worker.allow_write], remembered=True)
        writable = (root, *(p for p in configured if p != root))
        runs_dir = os.path.expanduser(str(settings.fanout.runs_dir))
        state: list[tuple[Path, str]] = [(_real(str(settings.home_dir)), "GA_HOME"),
                                         (_real(str(settings.memory_root)), "the memory store"),
                                         *((_real(str(p)), "the memory store") for p in memory_roots if p),
                                         (_real(os.path.join(cwd, runs_dir)), "ga's runs directory (fanout.runs_dir)")]
        if run_dir:
            state.append((_real(str(run_dir)), "this task's run directory"))
            state.append((_real(os.path.join(run_dir, STEER_DIR)), "a run's steering requests (steer/)"))
        state += marked_folders(writable, skip=[p for p, _ in state], real=True)
        readable = tuple(existing(settings.worker.allow_read, remembered=True))
        return cls(workdir=root, writable=writable, readable=readable,
                   state=tuple(state), hidden=tuple(settings.home_dir / name for name in GA_HIDDEN), config_dirs=(cwd,),
                   network=settings.sandbox.network, model=model, account=account)

    def entries(self) -> list[Entry]:
        """The rule as it stands on disk now, in mount order: what code_run's bubblewrap mounts."""
        return entries(self.writable, self.state, self.hidden, self.config_dirs, self.home)

    @cached_property
    def _named(self) -> tuple[Entry, ...]:
        """The rule by name but what is hidden, whether each path exists or not (the file tools refuse a missing one
        too)."""
        table = [Entry(p, "rw", "a writable path") for p in self.writable]
        table += [Entry(p, "ro", what) for p, what in self.state]
        for folder in protected_folders(list(self.writable), list(self.config_dirs)):
            table += _protected_in(folder)
        return tuple(table)

    @cached_property
    def _fixed(self) -> tuple[Entry, ...]:
        """The rule by name, whether each path exists or not."""
        return (*self._named, *hidden_entries(self.home, self.hidden))

    @cached_property
    def _fixed_table(self) -> _Table:
        table = _hidden_table(self.home, self.hidden).copy()  # a hidden entry outranks any other for its path
        for entry in self._named:
            table.add(entry)
        return table

    @property
    def _hidden_table(self) -> _Table:
        return _hidden_table(self.home, self.hidden)

    @cached_property
    def _may_become_links(self) -> tuple[Entry, ...]:
        """The protected entries a task could turn into a symbolic link: those whose folder lies in a writable root
        (a task makes links only where it may write; ga's state and the rest are real paths already)."""
        roots = _Table(Entry(p, "rw", "") for p in self.writable)
        return tuple(e for e in self._named if e.access in ("ro", *ABSENT)
                     and roots.decide(os.path.dirname(str(e.path))) is not None)

    def _now(self) -> _Table:
        """The fixed rule, and where a protected name is a symlink now, its target too, made or not (as the sandbox
        mounts it). Looked at on every call: a task's background process may make one at any time."""
        linked = [Entry(Path(os.path.realpath(e.path)), "ro", e.what) for e in self._may_become_links
                  if _is_link(str(e.path))]
        if not linked:
            return self._fixed_table
        table = self._fixed_table.copy()
        for entry in linked:
            table.add(entry)
        return table

    def link_refusal(self) -> Optional[str]:
        """Why a sandbox cannot start for this task (one line), or None: a protected name that is a symbolic link,
        which a script could replace by a file of its own (a mount protects the target, not the link)."""
        links = linked_names(self.writable, self.config_dirs)
        if not links:
            return None
        return (f"{links[0]} is a symbolic link, which the sandbox cannot keep a task from replacing (ga and git read "
                "it); make it the file or folder itself (cp -a --remove-destination \"$(readlink -f LINK)\" LINK), "
                "or run from another folder")

    def check_write(self, path: str) -> Path:
        """The real path a file tool may write for `path`; PathError (one line: why, and what to do) when the
        sandbox could not write it either."""
        real = resolve_write(path, self.workdir, self.writable[1:])
        refusal = self.write_refusal(real)
        if refusal:
            raise PathError(f"{path}: {refusal}")
        return real

    def check_read(self, path: str) -> Path:
        """The real path a file tool may read for `path`; PathError when it is outside the task's paths or
        hidden from tasks."""
        real = resolve_read(path, self.workdir, self.readable, self.writable[1:])
        entry = self._hidden_table.decide(str(real))
        if entry is not None:
            raise PathError(f"{path}: {entry.path} is {entry.what}; read refused (a task never reads it)")
        return real

    def write_refusal(self, real: Path) -> Optional[str]:
        """Why a write to the real path `real` is refused (None: allowed)."""
        entry = self._now().decide(str(real))
        if entry is None:
            return f"{real} is outside the task's writable paths; write refused (write inside the working directory)"
        if entry.access == "rw":
            return None
        where = f"{real} is" if entry.path == real else f"{real} is inside {entry.path},"
        if entry.access == "hide":
            return f"{where} {entry.what}; write refused"
        return f"{where} {entry.what}, which a task may not write; write elsewhere in the working directory"
