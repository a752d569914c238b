"""`ga`'s global flags (--home, --log-level) reach the command through Typer's context, per invocation."""
from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from cli import app

runner = CliRunner()


def test_home_flag_reaches_the_command_and_does_not_outlive_its_invocation(ga_home: Path, tmp_path: Path) -> None:
    other = tmp_path / "other-home"
    created = runner.invoke(app, ["--home", str(other), "memory", "init"])
    assert created.exit_code == 0, created.output
    assert (other / "memory" / "HEAD").exists() and not (ga_home / "memory").exists()

    # The next invocation without --home uses GA_HOME again: nothing of the previous one is left over.
    missing = runner.invoke(app, ["memory", "log"])
    assert missing.exit_code == 2
    assert str(ga_home / "memory") in missing.stderr and "ga memory init" in missing.stderr
    assert runner.invoke(app, ["--home", str(other), "memory", "log"]).exit_code == 0


def test_a_bad_global_flag_is_one_line_naming_it(ga_home: Path) -> None:
    done = runner.invoke(app, ["--log-level", "loud", "memory", "log"])
    assert done.exit_code == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: command-line flags: 'log.level'"), done.stderr


def test_version_is_the_packages_version() -> None:
    import re

    from tests.ga_support import REPO, run_ga

    version = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.M).group(1)
    done = run_ga("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"ga {version}\n"
