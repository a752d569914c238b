"""The markers a test gets from what it uses, so `-m` can pick a lane (`make test-fast`: not proc, ray, browser, slow).

- `ray`: the test uses the `ray_session` fixture (directly, through another fixture or `usefixtures`).
- `browser`: it uses task contexts with a browser (`make_ctx`) or starts Chromium itself (Playwright).
- `proc`: the test, a fixture it uses or a helper in tests/ it calls starts a process of its own: a real `ga`
  (`run_ga`, `GA`), `subprocess`, `pexpect`. Processes the code under test starts (a `code_run`'s interpreter, a
  sandbox) do not count: those tests stay in-process.
- `slow`: marked by hand (`@pytest.mark.slow` or a module's `pytestmark`) where a test takes many seconds of
  real work (a fresh clone's install, fuzzing, a task that beats for 10 s).

The markers are registered in pyproject.toml (`--strict-markers`: a misspelt one is an error).

Derivation reads the code (names a function refers to, followed through functions and modules of tests/); what
it cannot see (a `ga` process that starts Ray, a Ray cluster in a script) is marked in the test module itself.
"""
from __future__ import annotations

import functools
import inspect
import types
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
FIXTURES = {"ray": {"ray_session"}, "browser": {"make_ctx"}}
NAMES = {
    "proc": {"run_ga", "GA", "subprocess", "Popen", "pexpect"},
    "browser": {"sync_playwright", "async_playwright", "find_chromium", "CHROMIUM",
                "web_fixtures.server.goto", "web_fixtures.server.js", "web_fixtures.server.scan"},
}


def _in_tests(obj: object) -> bool:
    path = getattr(obj, "__file__", None) or getattr(getattr(obj, "__code__", None), "co_filename", None)
    return bool(path) and Path(path).resolve().is_relative_to(TESTS)


def _code_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


def names_reached(func: object, seen: set[int] | None = None) -> set[str]:
    """Every name `func` refers to, and those of the functions and classes of tests/ it reaches by them (these
    also as `module.name`)."""
    seen = set() if seen is None else seen
    while isinstance(func, functools.partial):
        func = func.func
    hypothesis = getattr(func, "hypothesis", None)  # a @given test: the test is its inner function
    func = inspect.unwrap(getattr(hypothesis, "inner_test", None) or getattr(func, "__func__", func))
    code = getattr(func, "__code__", None)
    if code is None or id(code) in seen:
        return set()
    seen.add(id(code))
    names = _code_names(code)
    scopes = [func.__globals__] + [vars(m) for m in func.__globals__.values()
                                   if isinstance(m, types.ModuleType) and _in_tests(m)]
    reached = set(names)
    for name in names:
        for scope in scopes:
            value = scope.get(name)
            if isinstance(value, type) and _in_tests(inspect.getmodule(value)):
                for member in vars(value).values():
                    reached |= names_reached(member, seen)
            elif isinstance(value, functools.partial) and _in_tests(value.func):
                reached |= names_reached(value, seen) | {f"{value.func.__module__}.{value.func.__name__}"}
            elif callable(value) and _in_tests(value):
                reached |= names_reached(value, seen) | {f"{value.__module__}.{value.__name__}"}
    return reached


def lanes_of(item: pytest.Item) -> set[str]:
    fixtures = set(item.fixturenames)
    functions = [getattr(item, "function", None)]
    for name in fixtures:
        functions += [d.func for d in item._fixtureinfo.name2fixturedefs.get(name, ())]  # type: ignore[attr-defined]
    reached: set[str] = set()
    seen: set[int] = set()
    for func in functions:
        if func is not None and _in_tests(func):
            reached |= names_reached(func, seen)
    lanes = {lane for lane, wanted in FIXTURES.items() if wanted & fixtures}
    lanes |= {lane for lane, wanted in NAMES.items() if wanted & reached}
    return lanes


def mark(items: list[pytest.Item]) -> None:
    for item in items:
        for lane in lanes_of(item) - {m.name for m in item.iter_markers()}:
            item.add_marker(lane)
