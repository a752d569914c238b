"""`python -m cli ARGS...` with timestamps of its start-up, for bench/fanout.py's breakdown of a cold run.

    cd TREE && GA_BENCH_MARKS=marks.json python PATH/TO/bench/fanout_timed.py fanout tasks.yaml --json

Calls the `ga` console script's entry point (pyproject.toml [project.scripts]) as the script does, in
this process, and writes (at exit) the wall-clock time of: the interpreter up (this file's first line),
the entry point's module imported, `ray` imported (start and
end, if it is imported at all), `ray.init` and `ray.shutdown` called and returned (through the module
attribute, which is how ga calls them), the command returned, and the last exit handler run (Ray
shuts down in its own exit handler, which runs before this one). The only hook is an import finder
that steps aside after `ray` is found: the command runs as it would without it.
"""
import time

MARKS = {"python_up": time.time()}

import atexit  # noqa: E402
import functools  # noqa: E402
import importlib  # noqa: E402
import importlib.abc  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402


def _write_marks() -> None:
    MARKS["exit_handlers_done"] = time.time()
    path = os.environ.get("GA_BENCH_MARKS")
    if path:
        with open(path, "w", encoding="utf-8") as out:
            json.dump(MARKS, out)


atexit.register(_write_marks)  # registered first, so it runs last


def _timed(name: str, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        MARKS.setdefault(f"{name}_called", time.time())
        try:
            return fn(*args, **kwargs)
        finally:
            MARKS[f"{name}_returned"] = time.time()

    return wrapper


class _AfterRay(importlib.abc.MetaPathFinder):
    """Times `import ray` and wraps ray.init / ray.shutdown once the module exists."""

    def find_spec(self, name, path=None, target=None):
        if name != "ray":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("ray")
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module):
            MARKS["ray_import_started"] = time.time()
            execute(module)
            MARKS["ray_imported"] = time.time()
            module.init = _timed("ray_init", module.init)
            module.shutdown = _timed("ray_shutdown", module.shutdown)

        spec.loader.exec_module = exec_module
        return spec


def entry_point() -> tuple[str, str]:
    found = re.search(r'^ga\s*=\s*"([^"]+)"', (Path.cwd() / "pyproject.toml").read_text(), re.M)  # [project.scripts]
    target = found.group(1) if found else "cli:app"
    module, _, attr = target.partition(":")
    return module, attr


def main() -> None:
    sys.path[0] = str(Path.cwd())  # the tree to run (bench/fanout.py runs this in it), not bench/
    sys.meta_path.insert(0, _AfterRay())
    module, attr = entry_point()
    entry = getattr(importlib.import_module(module), attr)
    MARKS["cli_imported"] = time.time()
    sys.argv = ["ga", *sys.argv[1:]]
    try:
        sys.exit(entry())
    finally:
        MARKS["command_returned"] = time.time()


if __name__ == "__main__":
    main()
