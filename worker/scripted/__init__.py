"""The scripted model: an OpenAI-compatible server answering from a YAML script (see script.py)."""
from worker.scripted.script import Script, ScriptError, load_script
from worker.scripted.server import (
    ScriptedServer,
    ensure_scripted_server,
    scripted_server,
)

__all__ = ["Script", "ScriptError", "ScriptedServer", "ensure_scripted_server", "load_script", "scripted_server"]
