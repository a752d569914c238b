"""Before a run starts: the checks a fan-out passes, and what the plan can know about its models.

The checks run before Ray starts, so a broken store, runs dir or endpoint is one line
now instead of N failed tasks later: the memory store is healthy, the runs dir is writable, and every
model endpoint answers one `GET /models` (any HTTP reply counts; `--no-preflight` skips this probe).
Numbers (nan, inf, negatives) are already refused by the tasks and settings schemas.

What the plan knows about a model before anything starts (ModelBook, prompt_limit): an upper bound on a
task's cost (for `ga fanout --dry-run`, starting no model server) and how large a prompt the worker's
context holds.

Per turn a request carries at most the context budget (plus the largest tool output cap) and
the reply at most the model's max_tokens; a task runs at most max_turns turns, and never past its
own max_cost limit. Facts are looked up once per model name: 10,000 tasks share a handful of models.
"""
from __future__ import annotations

import inspect
import json
import os
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

from configs import Settings
from memory_shared import MemoryStore, MemoryStoreError
from worker.modelconfig import DEFAULT_MAX_TOKENS, ModelConfig, ModelConfigError, resolve_model
from worker.prompt import SYSTEM_TEMPLATE
from worker.scripted import ScriptError, load_script

MIN_FREE_BYTES = 1_000_000  # less than this free in the runs dir: the disk is as good as full


class PreflightError(ValueError):
    """One line: what is wrong, where, and the fix."""


def preflight(settings: Settings, models: dict[Optional[str], ModelConfig], runs_dir: Path, *, probe_endpoints: bool = True,
              check_memory: bool = True) -> None:
    if check_memory:
        check_memory_store(settings)
    if probe_endpoints:
        check_endpoints(models.items())
    check_runs_dir(runs_dir)


def check_memory_store(settings: Settings) -> None:
    root = settings.memory_root
    try:
        if not MemoryStore.exists(root):
            return  # the run creates it
        store = MemoryStore(root, l1_max_lines=settings.memory.l1_max_lines, l1_max_chars=settings.memory.l1_max_chars)
        quick = "quick" in inspect.signature(store.verify).parameters
        problems = store.verify(quick=True) if quick else store.verify()
    except MemoryStoreError as exc:
        problems = [str(exc)]
    except OSError as exc:
        problems = [f"{exc.filename or root}: {exc.strerror}"]
    if problems:
        raise PreflightError(f"memory store at {root} is not healthy: {problems[0]}; see the fix with "
                             "`ga memory repair --dry-run`, then `ga memory repair` (nothing was started)")


def check_runs_dir(runs_dir: Path) -> None:
    """Write a probe file there; directories made for the probe are removed again (the run makes its own)."""
    runs_dir = Path(runs_dir)
    created = [p for p in [runs_dir, *runs_dir.parents] if not p.exists()]
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
        handle, probe = tempfile.mkstemp(prefix=".ga-probe-", dir=runs_dir)
        try:
            os.write(handle, b"probe")
            os.fsync(handle)
        finally:
            os.close(handle)
            os.unlink(probe)
        stat = os.statvfs(runs_dir)
        if stat.f_bavail * stat.f_frsize < MIN_FREE_BYTES:
            raise OSError(28, f"less than {MIN_FREE_BYTES:,} bytes free")
    except OSError as exc:
        raise PreflightError(f"runs dir {runs_dir} is not writable ({exc.strerror or exc}); pass --out DIR or set "
                             "fanout.runs_dir to a writable directory (nothing was started)") from None
    finally:
        for path in created:  # deepest first
            try:
                path.rmdir()
            except OSError:
                pass


def check_endpoints(models: Iterable[tuple[Optional[str], ModelConfig]]) -> None:
    """Probe each distinct base_url once. A model whose endpoint is down is an error unless it can fail
    over to a fallback that answers, or is itself only the backup of a model that answers."""
    configs = dict(models)
    down: dict[str, str] = {}
    for base in dict.fromkeys(_base(config) for config in configs.values()):
        if base:
            reason = _probe(base, configs)
            if reason:
                down[base] = reason
    for name, config in configs.items():
        base = _base(config)
        if base not in down:
            continue
        fallbacks = [configs[f] for f in getattr(config, "fallbacks", None) or () if f in configs]
        if any(_base(f) not in down for f in fallbacks):
            continue
        if any(name in (getattr(other, "fallbacks", None) or ()) and _base(other) not in down
               for other in configs.values()):
            continue
        raise PreflightError(unreachable(name, base, down[base]))


def _base(config: ModelConfig) -> str:
    return str(getattr(config, "base_url", "") or "")


def _probe(base: str, configs: dict[Optional[str], ModelConfig]) -> Optional[str]:
    try:
        return probe(base)
    except ValueError as exc:  # http.client.InvalidURL, unknown scheme
        name = next((n for n, c in configs.items() if _base(c) == base), None)
        raise PreflightError(invalid_url(name, base, exc)) from None


# ---- Is a model endpoint there at all? One `GET BASE/models` before work starts (fan-out pre-flight, `ga run`),
# so a dead endpoint is one line at once instead of a request retried for ~16 s (worker/model/client.py backs off on
# connection errors, as it should in the middle of a task). Any HTTP reply counts: the key and the path are
# the run's business.

PROBE_SECONDS = 5.0


def probe(base: str, timeout: float = PROBE_SECONDS) -> Optional[str]:
    """None when `GET base/models` gets any HTTP reply; else why not (one line). ValueError: not a URL."""
    request = urllib.request.Request(base.rstrip("/") + "/models", method="GET")
    try:
        with urllib.request.urlopen(request, timeout=timeout):  # noqa: S310 (the user's own endpoint)
            return None
    except urllib.error.HTTPError:
        return None  # it answered (401, 404, ...): reachable
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        return " ".join(str(reason).split())[:160] or type(exc).__name__


def unreachable(name: Optional[str], base: str, reason: str) -> str:
    return (f"model {name or '(default)'}: endpoint {base} does not answer ({reason}); start it or fix base_url, "
            "or pass --no-preflight to skip this check (nothing was started)")


def invalid_url(name: Optional[str], base: str, exc: Exception) -> str:
    return f"model {name or '(default)'}: base_url {base!r} is not a valid URL ({exc}); fix it in models.yaml or the scripted@URL"


# ---- what the plan can know about a model: a task's cost bound (`--dry-run`), the prompt a context holds

DEFAULT_CONTEXT_WINDOW = 32000


@dataclass(frozen=True)
class ModelFacts:
    price_input: float  # USD per million input tokens
    price_output: float
    max_tokens: int  # the longest reply
    context_window: Optional[int]  # tokens (None: unknown)


class ModelBook:
    """ModelFacts by model name, each resolved once; None for a model that cannot be resolved."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self._facts: dict[Optional[str], Optional[ModelFacts]] = {}
        self._limits: dict[Optional[str], int] = {}
        self._bounds: dict[tuple, Optional[float]] = {}  # 100,000 tasks share a few (model, turns, max_cost)

    def facts(self, name: Optional[str]) -> Optional[ModelFacts]:
        if name not in self._facts:
            self._facts[name] = model_facts(name, self.settings)
        return self._facts[name]

    def upper_bound(self, name: Optional[str], turns: int, max_cost: Optional[float]) -> Optional[float]:
        key = (name, turns, max_cost)
        if key not in self._bounds:
            self._bounds[key] = self._upper_bound(name, turns, max_cost)
        return self._bounds[key]

    def _upper_bound(self, name: Optional[str], turns: int, max_cost: Optional[float]) -> Optional[float]:
        facts = self.facts(name)
        if facts is None:
            return max_cost
        ctx = self.settings.context
        prompt = ctx.context_tokens + max(ctx.caps.model_dump().values()) // max(1, ctx.chars_per_token)
        bound = turns * (prompt * facts.price_input + facts.max_tokens * facts.price_output) / 1e6
        return min(bound, max_cost) if max_cost else bound

    def prompt_limit(self, name: Optional[str]) -> int:
        if name not in self._limits:
            facts = self.facts(name)
            self._limits[name] = prompt_limit(self.settings, facts.context_window if facts else None)
        return self._limits[name]


def prompt_limit(settings: Settings, context_window: Optional[int]) -> int:
    """The largest first prompt (JSON-serialized chars, as the context budget measures) that the worker
    sends uncut: the context budget (capped by the model's window) less the system prompt and L1 index."""
    ctx = settings.context
    tokens = min(ctx.context_tokens, context_window or ctx.context_tokens)
    reserve = len(SYSTEM_TEMPLATE.read_text(encoding="utf-8")) + settings.memory.l1_max_chars + 500
    return max(0, tokens * ctx.chars_per_token - reserve)


def prompt_chars(prompt: str) -> int:
    return len(json.dumps(prompt, ensure_ascii=False))


def upper_bound(model_name: Optional[str], turns: int, max_cost: Optional[float], settings: Settings) -> Optional[float]:
    return ModelBook(settings).upper_bound(model_name, turns, max_cost)


def model_facts(name: Optional[str], settings: Settings) -> Optional[ModelFacts]:
    if name and name.startswith("scripted:"):
        try:
            fields = load_script(Path(name[len("scripted:"):])).model
        except ScriptError:
            return None
        return ModelFacts(float(fields.get("price_input", 0.0)), float(fields.get("price_output", 0.0)),
                          int(fields.get("max_tokens", DEFAULT_MAX_TOKENS)),
                          int(fields.get("context_window", DEFAULT_CONTEXT_WINDOW)))
    try:
        config = resolve_model(name, settings)
    except ModelConfigError:
        return None
    return ModelFacts(config.price_input, config.price_output, config.max_tokens, config.context_window)
