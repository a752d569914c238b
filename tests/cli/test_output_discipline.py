"""What `ga` writes where, as a user's shell sees it: stdout only the result, stderr only warnings and errors
(log lines there only with --log-level info), info lines in the run's ga.log, progress only on a terminal.
Real processes, the offline scripted model, a real terminal (pexpect) where one is needed."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pexpect

from tests.ga_support import run_ga

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "configs" / "examples" / "scripts" / "hello.yaml"
NO_MODEL = {"OPENAI_API_KEY": None, "GA_MODEL": None}
ANSWER = "The tool printed:\nexit code 0\n42"  # hello.yaml's answer to 6*7, echoed from a real code_run


def _log_file(runs: Path) -> str:
    found = list(runs.glob("*/ga.log"))
    assert len(found) == 1, found
    return found[0].read_text()


def test_ga_run_piped_prints_only_the_answer_and_logs_to_the_session_directory(tmp_path: Path) -> None:
    done = run_ga("run", "what is 6*7?", "--model", f"scripted:{HELLO}", cwd=tmp_path, env=NO_MODEL)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ANSWER  # no turn lines, no status line, no log line
    assert done.stderr == ""
    log = _log_file(tmp_path / "runs")
    assert "info: task_done" in log and "status=succeeded" in log


def test_log_level_info_puts_readable_log_lines_on_stderr(tmp_path: Path) -> None:
    done = run_ga("--log-level", "info", "run", "what is 6*7?", "--model", f"scripted:{HELLO}", cwd=tmp_path,
                  env=NO_MODEL)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ANSWER
    lines = done.stderr.splitlines()
    assert any(line.startswith("info: task_done ") and "status=succeeded" in line for line in lines), done.stderr
    assert not any(line.lstrip().startswith("{") for line in lines), done.stderr  # readable, not JSON


def test_log_json_still_writes_json_lines(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    done = run_ga("--log-json", str(log), "run", "what is 6*7?", "--model", f"scripted:{HELLO}", cwd=tmp_path,
                  env=NO_MODEL)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert any(e["event"] == "task_done" and e["level"] == "info" for e in events)


def test_ga_run_on_a_terminal_shows_each_turn_and_the_outcome(tmp_path: Path) -> None:
    env = {**os.environ, "GA_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT), "TERM": "dumb"}
    for name in ("OPENAI_API_KEY", "GA_MODEL", "COLUMNS", "LINES"):
        env.pop(name, None)
    child = pexpect.spawn(sys.executable, ["-m", "cli", "run", "what is 6*7?", "--model", f"scripted:{HELLO}"],
                          cwd=str(tmp_path), env=env, encoding="utf-8", timeout=120, dimensions=(24, 80))
    child.expect_exact("I will compute it with Python.")  # streamed as it came
    child.expect(r"t1\s+code_run")  # the turn
    child.expect_exact("42")
    child.expect(r"succeeded after 2 turns, [\d,]+ tokens · session run-")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_ga_fanout_piped_draws_no_progress(tmp_path: Path) -> None:
    done = run_ga("fanout", str(ROOT / "configs/examples/quickstart.yaml"), "--out", str(tmp_path / "runs"),
                  cwd=tmp_path, env=NO_MODEL)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no fanout.progress line, no live view
    assert "56 words in 3 files" in done.stdout and "progress" not in done.stdout
    assert "info: fanout.progress" in _log_file(tmp_path / "runs")  # where the progress went


def test_a_session_log_planted_as_a_symlink_is_never_written_through(tmp_path: Path) -> None:
    """`ga run` keeps its run directory in the working directory, where the task's scripts write: a ga.log swapped
    for a symlink to a file outside changes nothing there, in this exchange (the file is held open) or the next
    (it is refused, with a warning, and the exchange goes on)."""
    from worker.scripted import ScriptedServer

    victim = tmp_path / "outside" / "victim"
    victim.parent.mkdir()
    victim.write_text("the original content\n")
    work = tmp_path / "work"
    work.mkdir()
    plant = f"d=$(ls -d runs/*/) && rm -f $d/ga.log && ln -s {victim} $d/ga.log && echo planted"
    turns = [{"tool_calls": [{"name": "code_run", "arguments": {"type": "bash", "script": plant}}]},
             {"content": "planted it"}, {"content": "the follow-up answer"}]
    # The sandbox keeps runs/ read-only, so a sandboxed script cannot plant there; the driver's own defence is
    # tried where no sandbox stands before it: the user's explicit opt-out.
    unsandboxed = {**NO_MODEL, "GA_SANDBOX__MODE": "off"}
    with ScriptedServer({"tasks": [{"match": ".*", "turns": turns}]}) as server:
        first = run_ga("run", "plant", "--model", f"scripted@{server.base_url}", cwd=work, env=unsandboxed)
        assert first.returncode == 0 and first.stdout.strip() == "planted it", first.stderr
        second = run_ga("run", "--continue", "last", "go on", cwd=work, env=unsandboxed)
    assert victim.read_text() == "the original content\n" and not victim.is_symlink()
    assert second.stdout.strip() == "the follow-up answer", second.stderr
    assert "warning: log_file_skipped" in second.stderr and "ga.log" in second.stderr
