"""The lanes a test is put in (tests/lanes.py): read from the names its code reaches, through helpers of tests/."""
from __future__ import annotations

import subprocess
from functools import partial

from lanes import NAMES, lanes_of, names_reached
from tests.ga_support import invoke_ga, run_ga
from web_fixtures.server import goto


def _runs_ga_twice_removed() -> None:
    _runs_ga()


def _runs_ga() -> None:
    run_ga("--help")


ga_version = partial(run_ga, "--version")


class _Terminal:
    def open(self) -> None:
        subprocess.run(["true"], check=True)


def test_a_process_started_through_helpers_is_seen() -> None:
    reached = names_reached(lambda: _runs_ga_twice_removed())
    assert "run_ga" in reached and NAMES["proc"] & reached


def test_a_process_started_by_a_helper_class_is_seen() -> None:
    assert NAMES["proc"] & names_reached(lambda: _Terminal().open())


def test_a_process_started_through_a_partial_is_seen() -> None:
    reached = names_reached(lambda: ga_version())
    assert "tests.ga_support.run_ga" in reached and NAMES["proc"] & reached


def test_the_browser_helpers_of_the_web_fixtures_are_seen() -> None:
    assert NAMES["browser"] & names_reached(lambda: goto(None, "about:blank"))


def test_invoke_ga_stays_in_process() -> None:
    reached = names_reached(lambda: invoke_ga("--help"))
    assert not NAMES["proc"] & reached and not NAMES["browser"] & reached


def test_this_test_is_in_the_fast_lane(request) -> None:
    assert lanes_of(request.node) == set()
    assert not {"proc", "ray", "browser", "slow"} & {m.name for m in request.node.iter_markers()}
