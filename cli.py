"""The `ga` command: parses arguments, calls into the packages, prints. No logic lives here."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, NoReturn, Optional

import typer
from rich.console import Console

from configs import ConfigError, Settings, load_settings
from configs.logs import setup_logging

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Run GenericAgent-style LLM workers in parallel.")
memory_app = typer.Typer(no_args_is_help=True, help="The shared memory tier: show, log, diff, verify, gc, archive.")
app.add_typer(memory_app, name="memory")
console = Console()
err_console = Console(stderr=True)


class State:
    overrides: dict[str, Any] = {}


def fail(message: str, code: int = 2) -> NoReturn:
    """A user-caused error: one line, no traceback."""
    err_console.print(f"[red]error:[/red] {message}", highlight=False, markup=True)
    raise typer.Exit(code)


def settings(**flags: Any) -> Settings:
    try:
        return load_settings({**State.overrides, **flags})
    except ConfigError as exc:
        fail(str(exc))


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


@app.callback()
def main(
    log_level: Optional[str] = typer.Option(None, help="debug, info, warning or error"),
    log_json: Optional[Path] = typer.Option(None, help="Also write JSON log lines to this file"),
    home: Optional[Path] = typer.Option(None, help="GA home directory (memory, activity); default ~/.ga"),
) -> None:
    State.overrides = {"log.level": log_level, "log.json_file": log_json, "home": home}
    current = settings()
    setup_logging(current.log.level, current.log.json_file)


# ---- memory (memory_shared) -------------------------------------------------


# ---- run, fake-llm (worker) -------------------------------------------------


@app.command("fake-llm")
def fake_llm(
    script: Path = typer.Option(..., "--script", help="Script YAML (format: worker/scripted/script.py)"),
    port: int = typer.Option(8765, help="Port on 127.0.0.1 (0: any free port)"),
    log: Optional[Path] = typer.Option(None, "--log", help="Append every request received to this JSONL file"),
) -> None:
    """Serve the scripted OpenAI-compatible model on 127.0.0.1 until Ctrl-C."""
    from worker.scripted import ScriptedServer, ScriptError

    try:
        server = ScriptedServer(script, port=port, log_path=log, keep=0)
        url = server.start()
    except ScriptError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot listen on 127.0.0.1:{port} ({exc.strerror}); pass another --port")
    console.print(f"scripted model at {url}: use --model scripted@{url} (Ctrl-C stops)", highlight=False, soft_wrap=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


# ---- fanout, runs (orchestrator) --------------------------------------------


# ---- skills, explore, reflect, schedule (skilltree, orchestrator) -----------


if __name__ == "__main__":
    app()
