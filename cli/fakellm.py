"""`ga fake-llm`: the scripted OpenAI-compatible model (worker/scripted/) served on 127.0.0.1."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from cli.kit import console, fail
from worker.scripted import ScriptedServer, ScriptError

commands = typer.Typer()


@commands.command("fake-llm")
def fake_llm(
    ctx: typer.Context,
    script: Path = typer.Option(..., "--script", help="Script YAML (format: worker/scripted/script.py)"),
    port: int = typer.Option(8765, help="Port on 127.0.0.1 (0: any free port)"),
    log: Optional[Path] = typer.Option(None, "--log", help="Append every request received to this JSONL file"),
) -> None:
    """Serve the scripted OpenAI-compatible model on 127.0.0.1 until Ctrl-C."""
    try:
        server = ScriptedServer(script, port=port, log_path=log, keep=0)
        url = server.start()
    except ScriptError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot listen on 127.0.0.1:{port} ({exc.strerror}); pass another --port")
    try:  # the line inside: a Ctrl-C that follows it at once (a script that waits for it) is a clean stop too
        console.print(f"scripted model at {url}: use --model scripted@{url} (Ctrl-C stops)", highlight=False,
                      soft_wrap=True)
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
