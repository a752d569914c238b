"""Issue 10's hostile inputs, one test per row: each is one `error:` line with exit 2, no traceback,
nothing left behind, and (for the cheap ones) said before Ray starts. Through the real `ga` process."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import tracemalloc
from pathlib import Path

import pytest

from memory_shared.yamlsource import YamlError, load_yaml
from tests.ga_support import run_ga
from tests.hostile_support import SCRIPT, alias_bomb, one_line_error, tasks_file

SIMPLE = f"version: 1\ndefaults: {{model: 'scripted:{SCRIPT}'}}\ntasks:\n  - {{id: one, prompt: say hello}}\n"


# ---- the YAML loader ----------------------------------------------------------------------------


@pytest.mark.parametrize("levels", [6, 8])
def test_an_alias_bomb_is_refused_at_once_with_little_memory(tmp_path: Path, levels: int) -> None:
    path = tasks_file(tmp_path, "version: 1\n" + alias_bomb(levels) + "tasks: [{prompt: x}]\n")
    tracemalloc.start()
    with pytest.raises(YamlError) as caught:
        load_yaml(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert "yaml.max_alias_nodes" in str(caught.value) and str(path) in str(caught.value)
    assert peak < 50_000_000, peak
    proc = run_ga("fanout", str(path), "--dry-run", cwd=tmp_path)
    assert proc.returncode == 2 and "aliases expand to more than" in one_line_error(proc.stderr)


@pytest.mark.parametrize("name", ["tasks.yaml", "ga.yaml", "models.yaml", "script.yaml", "jobs.yaml"])
def test_a_bomb_in_any_yaml_the_tool_reads_is_one_line(tmp_path: Path, name: str) -> None:
    bomb = alias_bomb(6)
    (tmp_path / name).write_text(bomb)
    if name == "tasks.yaml":
        args = ["fanout", "tasks.yaml", "--dry-run"]
    elif name == "script.yaml":
        args = ["run", "hello", "--model", "scripted:script.yaml"]
    elif name == "jobs.yaml":
        args = ["schedule", "jobs.yaml", "--list"]
    else:
        tasks_file(tmp_path, SIMPLE.replace(f"scripted:{SCRIPT}", "m1") if name == "models.yaml" else SIMPLE)
        args = ["fanout", "tasks.yaml", "--dry-run"]
    proc = run_ga(*args, cwd=tmp_path)
    line = one_line_error(proc.stderr)
    assert proc.returncode == 2 and name in line and "yaml.max_alias_nodes" in line


def test_duplicate_keys_are_an_error_naming_both_lines(tmp_path: Path) -> None:
    path = tasks_file(tmp_path, "version: 1\ntasks:\n  - prompt: first\nname: x\ntasks:\n  - prompt: second\n")
    proc = run_ga("fanout", str(path), "--dry-run", cwd=tmp_path)
    line = one_line_error(proc.stderr)
    assert proc.returncode == 2
    assert f"{path}:5: duplicate key 'tasks' (first at line 2)" in line


def test_nesting_5000_deep_is_one_line(tmp_path: Path) -> None:
    path = tasks_file(tmp_path, "version: 1\ntasks: " + "[" * 5000 + "]" * 5000 + "\n")
    proc = run_ga("fanout", str(path), "--dry-run", cwd=tmp_path)
    assert proc.returncode == 2 and "yaml.max_depth" in one_line_error(proc.stderr)
    config = tmp_path / "ga.yaml"
    config.write_text("worker: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n")
    proc = run_ga("fanout", str(path), "--dry-run", cwd=tmp_path)
    assert proc.returncode == 2 and "ga.yaml:1: nested deeper than" in one_line_error(proc.stderr)


def test_non_utf8_tasks_csv_and_config_name_the_file_and_offset(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    content = b"version: 1\ntasks: [{prompt: caf\xe9}]\n"
    bad.write_bytes(content)
    proc = run_ga("fanout", str(bad), "--dry-run", cwd=tmp_path)
    offset = content.index(b"\xe9")
    assert one_line_error(proc.stderr) == f"error: {bad}: not UTF-8 text (byte 0xe9 at offset {offset}); save the file as UTF-8"

    (tmp_path / "items.csv").write_bytes(b"name\nok\n\xff\xfe\n")
    path = tasks_file(tmp_path, "version: 1\nmatrix: {template: 'do {{name}}', from: items.csv}\n")
    proc = run_ga("fanout", str(path), "--dry-run", cwd=tmp_path)
    line = one_line_error(proc.stderr)
    assert proc.returncode == 2 and "items.csv is not UTF-8 text (byte 0xff at offset 8)" in line

    tasks_file(tmp_path, SIMPLE)
    content = b"worker:\n  max_turns: 4 # \xc3\x28\n"
    (tmp_path / "ga.yaml").write_bytes(content)
    proc = run_ga("fanout", "tasks.yaml", "--dry-run", cwd=tmp_path)
    offset = content.index(b"\xc3")
    assert one_line_error(proc.stderr) == f"error: ga.yaml: not UTF-8 text (byte 0xc3 at offset {offset}); save the file as UTF-8"


def test_a_file_over_the_size_limit_is_refused_unread(tmp_path: Path) -> None:
    (tmp_path / "ga.yaml").write_text("yaml: {max_bytes: 1000}\n")
    path = tasks_file(tmp_path, SIMPLE + "# " + "x" * 2000 + "\n")
    proc = run_ga("fanout", str(path), "--dry-run", cwd=tmp_path)
    assert proc.returncode == 2 and "larger than 1,000 bytes (yaml.max_bytes)" in one_line_error(proc.stderr)


# ---- numbers ------------------------------------------------------------------------------------


@pytest.mark.parametrize("snippet,key", [("timeout: .nan", "defaults.timeout"), ("timeout: .inf", "defaults.timeout"),
                                         ("max_turns: -5", "defaults.max_turns")])
def test_nan_inf_and_negatives_are_refused_by_the_tasks_schema(tmp_path: Path, snippet: str, key: str) -> None:
    path = tasks_file(tmp_path, f"version: 1\ndefaults: {{{snippet}}}\ntasks: [{{prompt: x}}]\n")
    proc = run_ga("fanout", str(path), "--dry-run", cwd=tmp_path)
    line = one_line_error(proc.stderr)
    assert proc.returncode == 2 and line.startswith(f"error: {path}:2: '{key}'")


@pytest.mark.parametrize("snippet", ["fanout: {timeout: .nan}", "fanout: {timeout: .inf}", "worker: {max_turns: -5}",
                                     "fanout: {concurrency: 0}", "context: {low_water: .nan}"])
def test_nan_inf_and_negatives_are_refused_in_settings(tmp_path: Path, snippet: str) -> None:
    (tmp_path / "ga.yaml").write_text(snippet + "\n")
    tasks_file(tmp_path, SIMPLE)
    proc = run_ga("fanout", "tasks.yaml", "--dry-run", cwd=tmp_path)
    assert proc.returncode == 2 and one_line_error(proc.stderr).startswith("error: ga.yaml:1: ")


# ---- inputs -------------------------------------------------------------------------------------


@pytest.mark.parametrize("given", ["/etc/shadow", "../../etc/passwd", "link.txt", "sub/../../outside.txt"])
def test_inputs_outside_the_tasks_directory_are_refused(tmp_path: Path, given: str) -> None:
    folder = tmp_path / "project" / "deep"
    (folder / "sub").mkdir(parents=True)
    (tmp_path / "project" / "outside.txt").write_text("secret")
    (folder / "link.txt").symlink_to("/etc/passwd")
    if given.startswith("../../"):
        given = "../" * len(folder.parts) + "etc/passwd"
    path = tasks_file(folder, f"version: 1\ntasks:\n  - prompt: read it\n    inputs: ['{given}']\n")
    runs = tmp_path / "runs"
    proc = run_ga("fanout", str(path), "--out", str(runs), cwd=folder)
    line = one_line_error(proc.stderr)
    assert proc.returncode == 2 and f"{path}:4: input" in line and "allow_paths" in line
    assert not runs.exists()


def test_allow_paths_admits_an_input_and_a_symlink_keeps_its_own_name(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "data-v2.csv").write_text("a,b\n")
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "current.csv").symlink_to(shared / "data-v2.csv")
    path = tasks_file(folder, f"version: 1\nallow_paths: ['{shared}']\ntasks:\n  - prompt: read it\n    inputs: [current.csv]\n")
    proc = run_ga("fanout", str(path), "--dry-run", "--json", cwd=folder)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["tasks"][0]["inputs"] == ["current.csv"]

    from orchestrator.spec import load

    (task,) = load(path).tasks
    assert Path(task.inputs[0]).name == "current.csv" and Path(task.inputs[0]).read_text() == "a,b\n"


# ---- prompt size --------------------------------------------------------------------------------


def test_a_5mb_prompt_is_an_error_at_plan_time_unless_truncate(tmp_path: Path) -> None:
    prompt = "word " * 1_000_000
    path = tasks_file(tmp_path, f"version: 1\ndefaults: {{model: 'scripted:{SCRIPT}'}}\ntasks:\n"
                                f"  - id: huge\n    prompt: '{prompt}'\n")
    runs = tmp_path / "runs"
    for args in (["--dry-run"], ["--out", str(runs)]):
        proc = run_ga("fanout", str(path), *args, cwd=tmp_path)
        line = one_line_error(proc.stderr)
        assert proc.returncode == 2 and f"{path}:4: task 'huge': the prompt is 5,000,002 chars" in line
        assert "truncate: true" in line
    assert not runs.exists()
    path.write_text(path.read_text().replace("  - id: huge\n", "  - id: huge\n    truncate: true\n"))
    proc = run_ga("fanout", str(path), "--dry-run", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-400:]


# ---- the environment ----------------------------------------------------------------------------


def test_ga_home_dev_null_is_one_line(tmp_path: Path) -> None:
    tasks_file(tmp_path, SIMPLE)
    for args in (["fanout", "tasks.yaml", "--out", "runs"], ["run", "hello", "--model", f"scripted:{SCRIPT}"]):
        proc = run_ga(*args, cwd=tmp_path, env={"GA_HOME": "/dev/null"})
        line = one_line_error(proc.stderr)
        assert proc.returncode == 2 and "/dev/null" in line and "Not a directory" in line
    assert not list(tmp_path.glob("runs/*"))


def test_an_unwritable_runs_dir_is_said_before_ray_starts(tmp_path: Path) -> None:
    tasks_file(tmp_path, SIMPLE)
    (tmp_path / "a-file").write_text("x")
    started = time.monotonic()
    proc = run_ga("fanout", "tasks.yaml", "--out", str(tmp_path / "a-file" / "runs"), cwd=tmp_path)
    line = one_line_error(proc.stderr)
    assert proc.returncode == 2 and "is not writable (Not a directory)" in line and "nothing was started" in line
    print(f"unwritable runs dir reported after {time.monotonic() - started:.1f}s")


@pytest.fixture
def small_disk(tmp_path: Path):
    mount = tmp_path / "disk"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_is_one_line_and_leaves_no_temp_file(tmp_path: Path, small_disk: Path) -> None:
    tasks_file(tmp_path, SIMPLE)
    filler = small_disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:  # fill it to the last block
            os.write(fd, b"x" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    proc = run_ga("fanout", "tasks.yaml", "--out", str(small_disk / "runs"), cwd=tmp_path)
    line = one_line_error(proc.stderr)
    assert proc.returncode == 2 and "No space left on device" in line
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler"]


def test_enospc_while_the_run_directory_is_written_leaves_nothing(tmp_path: Path, small_disk: Path) -> None:
    """Pre-flight passes (1 MB free) but the spec (about 1.3 MB) does not fit: the run dir goes away."""
    (small_disk / "filler").write_bytes(b"x" * 900_000)
    prompts = "".join(f"  - {{id: t{i}, prompt: '{'p' * 60_000}'}}\n" for i in range(22))
    tasks_file(tmp_path, f"version: 1\ndefaults: {{model: 'scripted:{SCRIPT}'}}\ntasks:\n{prompts}")
    proc = run_ga("fanout", "tasks.yaml", "--out", str(small_disk / "runs"), cwd=tmp_path, timeout=300)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode == 2 and len(errors) == 1 and "No space left on device" in errors[0], proc.stderr[-2000:]
    assert "not writable" not in errors[0]  # past pre-flight: the spec write itself hit the full disk
    leftovers = [p for p in (small_disk / "runs").rglob("*")] if (small_disk / "runs").exists() else []
    assert leftovers == []


def test_a_bad_model_url_is_one_line_and_leaves_no_run_directory(tmp_path: Path) -> None:
    proc = run_ga("run", "hello", "--model", "scripted@http://[::1", cwd=tmp_path)
    line = one_line_error(proc.stderr)
    assert proc.returncode == 2 and "[::1" in line and "URL" in line
    assert not list(tmp_path.glob("runs/run-*"))
    path = tasks_file(tmp_path, "version: 1\ntasks: [{prompt: x, model: 'scripted@http://[::1'}]\n")
    proc = run_ga("fanout", str(path), "--out", "runs", cwd=tmp_path)
    line = one_line_error(proc.stderr)
    assert proc.returncode == 2 and "[::1" in line and "URL" in line
    assert not list(tmp_path.glob("runs/*"))


# ---- pre-flight ---------------------------------------------------------------------------------


def test_a_damaged_memory_store_is_reported_before_the_run(tmp_path: Path, ga_home: Path) -> None:
    # a garbage HEAD is no longer damage (it is recomputed from the log); a published generation gone is
    assert run_ga("memory", "init", cwd=tmp_path).returncode == 0
    head = (ga_home / "memory" / "HEAD").read_text().strip()
    shutil.rmtree(ga_home / "memory" / "generations" / head)
    tasks_file(tmp_path, SIMPLE)
    proc = run_ga("fanout", "tasks.yaml", "--out", "runs", cwd=tmp_path)
    line = one_line_error(proc.stderr)
    assert proc.returncode == 2 and "memory store at" in line and "not healthy" in line and "nothing was started" in line
    assert "ga memory repair" in line
    assert not (tmp_path / "runs").exists()


def test_an_unreachable_endpoint_is_reported_before_the_run(tmp_path: Path) -> None:
    path = tasks_file(tmp_path, "version: 1\ntasks: [{prompt: x, model: 'scripted@http://127.0.0.1:1/v1'}]\n")
    proc = run_ga("fanout", str(path), "--out", "runs", cwd=tmp_path)
    line = one_line_error(proc.stderr)
    assert proc.returncode == 2 and "endpoint http://127.0.0.1:1/v1 does not answer" in line and "--no-preflight" in line
    assert not (tmp_path / "runs").exists()


def test_no_preflight_skips_only_the_endpoint_probe(tmp_path: Path) -> None:
    from configs import load_settings
    from orchestrator.preflight import PreflightError, preflight

    class Endpoint:
        base_url = "http://127.0.0.1:1/v1"

    settings = load_settings({"home": str(tmp_path / "home")})
    preflight(settings, {"m": Endpoint()}, tmp_path / "runs", probe_endpoints=False)
    assert not (tmp_path / "runs").exists()  # the probe directory is not left behind
    with pytest.raises(PreflightError, match="does not answer"):
        preflight(settings, {"m": Endpoint()}, tmp_path / "runs")
    (tmp_path / "file").write_text("")
    with pytest.raises(PreflightError, match="not writable"):
        preflight(settings, {"m": Endpoint()}, tmp_path / "file" / "runs", probe_endpoints=False)


def test_an_os_error_keeps_its_traceback_only_when_asked(tmp_path: Path) -> None:
    tasks_file(tmp_path, SIMPLE)
    proc = run_ga("fanout", "tasks.yaml", "--out", "runs", cwd=tmp_path,
                  env={"GA_HOME": "/dev/null", "GA_TRACEBACK": "1"})
    assert proc.returncode == 1 and "NotADirectoryError" in proc.stderr


def test_a_dead_endpoint_with_a_live_fallback_passes_pre_flight(tmp_path: Path) -> None:
    from orchestrator.preflight import PreflightError, check_endpoints
    from worker.modelconfig import ModelConfig
    from worker.scripted import ScriptedServer

    server = ScriptedServer({"tasks": [{"match": "x", "turns": [{"content": "fine"}]}]})
    server.start()
    try:
        dead = ModelConfig(name="primary", base_url="http://127.0.0.1:1/v1", model="m", fallbacks=["backup"])
        live = ModelConfig(name="backup", base_url=server.base_url, model="m")
        check_endpoints({"primary": dead, "backup": live}.items())  # the run can fail over
        alone = ModelConfig(name="primary", base_url="http://127.0.0.1:1/v1", model="m")
        with pytest.raises(PreflightError, match="model primary: endpoint http://127.0.0.1:1/v1 does not answer"):
            check_endpoints({"primary": alone, "backup": live}.items())
    finally:
        server.stop()
