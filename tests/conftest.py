"""Shared fixtures. Every test runs with its own GA_HOME so nothing touches ~/.ga."""
from __future__ import annotations

import os
import signal

import pytest

from lanes import mark
from memory_shared import MemoryStore

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # keep every Ray process on loopback
os.environ.update(COLUMNS="80", LINES="24")  # what `ga` in this process draws: a stock terminal's size
# The tests of Ctrl-C are about a person's terminal, where SIGINT is never ignored. A suite started as a background
# job of a script inherits SIGINT ignored, and every `ga` it started would too (an ignored signal stays ignored
# across exec): they get the default disposition instead.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# the web tests' fixtures (the fixture site, settings whose network reaches it, task contexts)
from web_fixtures.server import make_ctx, site, web_settings  # noqa: E402, F401


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark(items)  # proc, ray, browser from what each test uses (tests/lanes.py)


@pytest.fixture(autouse=True)
def ga_home(tmp_path, monkeypatch):
    home = tmp_path / "ga-home"
    monkeypatch.setenv("GA_HOME", str(home))
    return home


@pytest.fixture
def runs_in_tmp(tmp_path, monkeypatch):
    """Worker run directories go to the test's tmp dir, not ./runs of the repository (a module that starts
    workers without --out uses it for all its tests: `pytestmark = pytest.mark.usefixtures("runs_in_tmp")`)."""
    monkeypatch.setenv("GA_FANOUT__RUNS_DIR", str(tmp_path / "runs"))
    return tmp_path / "runs"


@pytest.fixture
def store_root(tmp_path):
    """Where the `store` fixture lives; a test module that needs another place (GA_HOME's) overrides this."""
    return tmp_path / "mem"


@pytest.fixture
def store(store_root) -> MemoryStore:
    """A fresh memory store at generation 0. A module seeds it by overriding `store` with a fixture that takes it."""
    return MemoryStore(store_root, create=True)


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray (127.0.0.1, 2 CPUs) shared by every test that needs it; its worker pool stays warm."""
    import ray

    from orchestrator.pool import connect

    info = connect("local", num_cpus=2)
    yield info
    ray.shutdown()
