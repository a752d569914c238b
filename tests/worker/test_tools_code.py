"""code_run with real child processes: exit codes, merged output, caps, timeouts killing the whole group."""
from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from configs import load_settings
from worker.tools import REGISTRY, ToolContext
from worker.tools.code import Scripts


@pytest.fixture
def ctx(tmp_path) -> ToolContext:
    work = tmp_path / "work"
    work.mkdir()
    return ToolContext(task_id="t1", workdir=work, settings=load_settings(), memory=None)


def call(ctx: ToolContext, name: str = "code_run", **args):
    spec = REGISTRY[name]
    return spec.run(ctx, spec.args.model_validate(args))


def alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def wait_gone(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("kind, script, code, expect", [
    ("python", "print('hi')", 0, "hi"),
    ("python", "import sys; print('bad'); sys.exit(3)", 3, "bad"),
    ("python", "raise ValueError('boom')", 1, "ValueError: boom"),
    ("bash", "echo hello; exit 0", 0, "hello"),
    ("bash", "echo oops >&2; exit 7", 7, "oops"),
    ("bash", "false", 1, ""),
])
def test_exit_codes(ctx, kind, script, code, expect):
    result = call(ctx, type=kind, script=script)
    assert result.output.startswith(f"exit code {code}\n")
    assert expect in result.output
    assert result.ok is (code == 0) and result.evidence is (code == 0)
    assert result.data["exit_code"] == code


def test_traceback_has_line_numbers(ctx):
    result = call(ctx, script="x = 1\ny = 2\nraise RuntimeError('third line')\n")
    assert re.search(r'File ".*code_\d+\.py", line 3', result.output)


def test_stdout_and_stderr_merged_in_order(ctx):
    script = "import sys\nfor i in range(3):\n    print('out', i)\n    print('err', i, file=sys.stderr)\n"
    out = call(ctx, script=script).output
    assert out.split("\n", 1)[1].split() == "out 0 err 0 out 1 err 1 out 2 err 2".split()


def test_runs_in_workdir_and_cwd_subdir(ctx):
    (ctx.workdir / "sub").mkdir()
    (ctx.workdir / "sub" / "helper.py").write_text("VALUE = 42\n")
    out = call(ctx, script="import os, helper; print(os.getcwd()); print(helper.VALUE)", cwd="sub").output
    assert str((ctx.workdir / "sub").resolve()) in out and "42" in out
    out = call(ctx, type="bash", script="pwd").output
    assert out.split("\n")[1] == str(ctx.workdir.resolve())
    missing = call(ctx, script="print(1)", cwd="nope")
    assert not missing.ok and "no such directory" in missing.output


def test_env_from_context_reaches_the_child(ctx):
    ctx.env = {"GA_RUN_DIR": "/tmp/run-x", "GA_DEPTH": 1}
    out = call(ctx, type="bash", script='echo "$GA_RUN_DIR|$GA_DEPTH|$HOME"').output
    assert out.split("\n")[1] == f"/tmp/run-x|1|{os.environ['HOME']}"


def test_output_cut_head_and_tail(ctx):
    cap = ctx.settings.context.caps.code_run
    out = call(ctx, script="print('FIRST'); print('m' * 50000); print('LAST')").output
    body = out.split("\n", 1)[1]
    assert len(body) <= cap
    assert body.startswith("FIRST") and body.rstrip().endswith("LAST")
    assert re.search(r"\[\.\.\. \d+ chars cut \.\.\.\]", body)
    full = re.search(r"full output in (\S+)", out.split("\n", 1)[0]).group(1)
    assert (ctx.workdir / full).read_text().count("m") == 50000


def processes_with(marker: str) -> list[int]:
    """Host pids of live processes whose command line holds `marker` (pids inside a sandbox are its own)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in cmdline and "pytest" not in cmdline and alive(int(entry.name)):
                found.append(int(entry.name))
    return found


def wait_none_with(marker: str, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not processes_with(marker):
            return True
        time.sleep(0.05)
    return False


def with_mode(ctx: ToolContext, mode: str) -> ToolContext:
    ctx.settings = ctx.settings.model_copy(update={"sandbox": ctx.settings.sandbox.model_copy(update={"mode": mode})})
    return ctx


@pytest.mark.parametrize("mode", ["bwrap", "off"])
def test_timeout_kills_whole_group(ctx, mode):
    marker = f"300.{os.getpid()}1"  # a sleep duration no other process uses
    script = f"sleep {marker} &\necho started\nsleep {marker}\n"
    started = time.monotonic()
    result = call(with_mode(ctx, mode), type="bash", script=script, timeout=1)
    assert time.monotonic() - started < 30
    assert result.output.startswith("timeout after 1s: killed the script's whole process group")
    assert "started" in result.output
    assert not result.ok and result.data["timed_out"]
    assert wait_none_with(marker), "the background sleep survived the timeout"


def test_background_child_does_not_block_and_is_killed_at_end(ctx):
    """Unsandboxed, a background child outlives its script until the task ends."""
    marker = f"300.{os.getpid()}2"
    started = time.monotonic()
    result = call(with_mode(ctx, "off"), type="bash", script=f"sleep {marker} &\necho done\n")
    assert time.monotonic() - started < 10  # output goes to a file: an open pipe cannot hold us
    assert result.ok and "done" in result.output
    deadline = time.monotonic() + 10
    while not processes_with(marker) and time.monotonic() < deadline:  # the fork may not have exec'd sleep yet
        time.sleep(0.05)
    assert processes_with(marker)
    assert ctx.state(Scripts).kill_leftovers() >= 1
    assert wait_none_with(marker)


def test_sandboxed_background_child_ends_with_its_script(ctx):
    """In the sandbox a script's PID namespace closes when the script ends: nothing is left behind."""
    marker = f"300.{os.getpid()}3"
    started = time.monotonic()
    result = call(ctx, type="bash", script=f"sleep {marker} &\necho done\n")
    assert time.monotonic() - started < 10
    assert result.ok and "done" in result.output
    assert wait_none_with(marker)
    assert ctx.state(Scripts).kill_leftovers() == 0


def test_scripts_kept_numbered(ctx):
    call(ctx, script="print(1)")
    call(ctx, type="bash", script="echo 2")
    names = sorted(p.name for p in (ctx.workdir / ".ga").iterdir())
    assert names == ["code_1.out", "code_1.py", "code_2.out", "code_2.sh"]


def test_type_aliases_and_bad_type():
    from pydantic import ValidationError

    args = REGISTRY["code_run"].args
    assert args.model_validate({"script": "x", "type": "sh"}).type == "bash"
    assert args.model_validate({"script": "x", "type": "py"}).type == "python"
    with pytest.raises(ValidationError):
        args.model_validate({"script": "x", "type": "powershell"})
    enum = REGISTRY["code_run"].schema()["function"]["parameters"]["properties"]["type"]["enum"]
    assert enum == ["python", "bash"]
