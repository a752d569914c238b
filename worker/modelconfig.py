"""Model configuration: which OpenAI-compatible endpoint a worker talks to, and how.

A model is chosen by name, first found of: `--model`, `GA_MODEL`, the model a tasks file (or a continued
session) names, settings.worker.model (config files), else the `openai` entry when `OPENAI_API_KEY` is set
(it honours `OPENAI_BASE_URL` and `OPENAI_MODEL`); model_override() is the first two. Name syntax:

- `NAME`                       an entry of configs/models.yaml, merged with ~/.config/ga/models.yaml
                               and ./models.yaml (later files override earlier ones field by field;
                               ./models.yaml may only tune a model the others define, see
                               configs/projecttrust.py).
- `scripted:FILE`              the offline scripted model: a scripted server for FILE is started in
                               this process (once per file, 127.0.0.1, random port); a relative FILE
                               not found here is looked up in the ga checkout (shipped examples). The script's
                               optional `model:` section overrides fields (tool_mode, prices...).
- `scripted@URL`               a scripted server already running at URL (e.g. `ga fake-llm`, or one
                               server shared by a whole fan-out run):
                               `scripted@http://127.0.0.1:8765/v1`.

In models.yaml `base_url` and `model` may use `${VAR:-default}` so environment variables (OPENAI_BASE_URL)
keep working for shipped entries. A config holds only the *name* of the variable with the key.
"""
from __future__ import annotations

import difflib
import os
import re
from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from configs import Settings, load_settings
from configs.projecttrust import model_field_refusal
from memory_shared.usererrors import field_errors
from memory_shared.yamlsource import YamlError, line_of, load_yaml

SHIPPED_FILE = Path(__file__).resolve().parent.parent / "configs" / "models.yaml"
USER_FILE = Path("~/.config/ga/models.yaml")
PROJECT_FILE = Path("models.yaml")
ENV_REF = re.compile(r"\$\{(\w+)(?::-([^}]*))?\}")
# One agent turn is a tool call (a script of ~100 lines is ~1,200 tokens) or a final answer; longer
# output belongs in several file_write/file_patch calls. 1,536 keeps a looping model on a CPU server
# (~10-20 tokens/s) to about 2 minutes a request instead of 4-7 with 4,096.
DEFAULT_MAX_TOKENS = 1536
INHERITED_MARK = "GA_MODEL_INHERITED"  # set beside GA_MODEL in a task's code_run: a default, not an override


class ModelConfigError(ValueError):
    """A user-caused model configuration problem; str() is one line saying what to fix."""


class ModelConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    base_url: str
    api_key_env: Optional[str] = None  # name of the environment variable holding the key; None: no key
    model: str
    context_window: Optional[int] = Field(default=None, gt=0)  # tokens; the context budget stays inside it (None: unknown)
    tool_mode: Literal["native", "text"] = "native"
    temperature: float = 0.0
    max_tokens: int = Field(default=DEFAULT_MAX_TOKENS, gt=0)  # per request: one agent turn, see DEFAULT_MAX_TOKENS
    stop_sequences: bool = True  # text tool mode: send stop=["<tool_result"] (turned off by itself if refused)
    stream: bool = False  # stream replies: a reply that loops is cut as soon as it repeats itself, not at max_tokens
    price_input: float = 0.0  # USD per million tokens
    price_output: float = 0.0
    price_cached: Optional[float] = None  # None: cached input costs price_input
    request_timeout: float = 120.0  # seconds for a whole request: connect, headers and body together
    max_reply_bytes: int = Field(default=4 * 1024 * 1024, gt=0)  # a longer reply is refused unread (a chat reply is rarely over 100 KB)
    max_retries: int = 5
    retry_after_cap: float = 60.0
    backoff_base: float = 1.0  # first backoff ceiling (s), doubled per attempt, full jitter
    backoff_max: float = 30.0
    schema_resend_every: int = 10  # text tool mode: re-send full tool schemas every N requests
    fallbacks: list[str] = []  # other models' names, in order: used by a fan-out task when this endpoint fails

    def context_tokens(self, default: int, overhead: int = 0) -> int:
        """The context budget (tokens) for requests to this model: `default` (context.context_tokens),
        lowered to fit the window minus the reply (max_tokens) and `overhead` (tool schemas) when the
        window is known; never below a quarter of the window, so a tiny window still gets a budget."""
        if not self.context_window:
            return default
        room = self.context_window - self.max_tokens - overhead
        return min(default, max(room, self.context_window // 4))

    def api_key(self) -> str:
        """The key read from `api_key_env` ('' when the model needs none); ModelConfigError when it is unset."""
        key = os.environ.get(self.api_key_env, "") if self.api_key_env else ""
        if self.api_key_env and not key:
            raise ModelConfigError(
                f"model '{self.name}' reads its API key from {self.api_key_env}, which is not set; "
                f"export {self.api_key_env}=... or choose another model with --model"
            )
        return key

    def chat_url(self) -> str:
        """The endpoint's chat completions URL; ModelConfigError when base_url cannot be used."""
        from worker.model.transport import BadURL, check_url  # here: httpcore2, ~60 modules `ga --help` does not need

        url = self.base_url.rstrip("/") + "/chat/completions"
        try:
            check_url(url)
        except BadURL as exc:
            raise ModelConfigError(self.url_problem(exc)) from None
        return url

    def url_problem(self, problem: Exception) -> str:
        fix = "fix the URL after scripted@" if self.name.startswith("scripted@") else "fix base_url in models.yaml"
        return f"model '{self.name}': base_url {self.base_url}: {problem}; {fix}"


def user_model_files() -> list[Path]:
    """The model files only the user writes (the shipped one, ~/.config/ga/models.yaml), not a project's: what a
    task's gateway and its nested runs may choose from."""
    return [SHIPPED_FILE, USER_FILE.expanduser()]


def resolve_model(name: Optional[str], settings: Optional[Settings] = None, files: Optional[list[Path]] = None) -> ModelConfig:
    """Turn a model name (or the configured default) into a ModelConfig; ModelConfigError if none. `files`: the
    model files to look in (default: shipped, user, project; see load_model_entries)."""
    if settings is None:
        settings = load_settings()
    resend = settings.context.schema_resend_every
    name = name or settings.worker.model
    if not name:
        if os.environ.get("OPENAI_API_KEY"):
            name = "openai"
        else:
            raise ModelConfigError(
                "no model configured: pass --model NAME, set GA_MODEL, add an entry to ~/.config/ga/models.yaml "
                "(a project's ./models.yaml may only tune one), or export OPENAI_API_KEY (and OPENAI_BASE_URL); "
                "offline, use the scripted model: --model scripted:configs/examples/scripts/hello.yaml"
            )
    if name.startswith("scripted:"):
        return _scripted_file(name, resend)
    if name.startswith("scripted@"):
        url = name[len("scripted@"):].rstrip("/")
        if not url.startswith(("http://", "https://")):
            raise ModelConfigError(f"model '{name}': expected scripted@http://127.0.0.1:PORT/v1")
        return ModelConfig(name=name, base_url=url, model="scripted", schema_resend_every=resend)
    entries = load_model_entries(files)
    if name not in entries:
        close = difflib.get_close_matches(name, list(entries), n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise ModelConfigError(
            f"unknown model '{name}'; {hint}known: {', '.join(sorted(entries)) or '(none)'}, scripted:FILE, "
            "scripted@URL; add it to ~/.config/ga/models.yaml (a project's ./models.yaml may only tune a model)"
        )
    fields, places = entries[name]
    return _build({"schema_resend_every": resend, **fields, "name": name}, places)


def load_model_entries(files: Optional[list[Path]] = None) -> dict[str, tuple[dict, dict[str, str]]]:
    """name -> (merged fields, field -> "file:line" that set it) over shipped, user and project files."""
    files = files if files is not None else [SHIPPED_FILE, USER_FILE.expanduser(), PROJECT_FILE]
    entries: dict[str, tuple[dict, dict[str, str]]] = {}
    trusted: dict[str, dict] = {}  # the entries before the project file
    for path in files:
        if not path.is_file() or path.stat().st_size == 0:  # empty: code_run's placeholder while a script runs
            continue
        if path == PROJECT_FILE:
            trusted = {name: dict(fields) for name, (fields, _) in entries.items()}
        try:
            data, lines = load_yaml(path)
        except YamlError as exc:
            raise ModelConfigError(str(exc)) from None
        models = data.get("models") if isinstance(data, dict) else None
        if not isinstance(models, dict):
            raise ModelConfigError(f"{path}:1: expected a top-level 'models:' mapping of name -> fields; see {SHIPPED_FILE}")
        for name, fields in models.items():
            where = f"{path}:{line_of(lines, ('models', name)) or 1}"
            if not isinstance(fields, dict):
                raise ModelConfigError(f"{where}: model '{name}' must be a mapping of fields; see {SHIPPED_FILE}")
            merged, places = entries.get(str(name), ({}, {}))
            merged = {**merged, **fields}
            if path == PROJECT_FILE:
                _check_project_entry(str(name), fields, trusted, path, lines)
            places = {**places, "": where, **{k: f"{path}:{line_of(lines, ('models', name, k))}" for k in fields}}
            entries[str(name)] = (merged, places)
    return entries


def key_env_names(files: Optional[list[Path]] = None) -> frozenset[str]:
    """Every `api_key_env` any model file names, read leniently: a file refused by load_model_entries (a project
    file sending a key somewhere new, say) still names variables that must never reach a sandbox."""
    names: set[str] = set()
    for path in files if files is not None else [SHIPPED_FILE, USER_FILE.expanduser(), PROJECT_FILE]:
        try:
            data, _ = load_yaml(path) if path.is_file() else ({}, {})
        except YamlError:
            continue
        models = data.get("models") if isinstance(data, dict) else None
        for fields in models.values() if isinstance(models, dict) else ():
            if isinstance(fields, dict) and isinstance(fields.get("api_key_env"), str):
                names.add(fields["api_key_env"])
    return frozenset(names)


def _check_project_entry(name: str, fields: dict, trusted: dict[str, dict], path: Path, lines: dict) -> None:
    """A project models.yaml (a task's code could have written it) may tune a model the shipped or user files
    define, with the fields configs/projecttrust.py allows and only to tighten; it may not add a model."""
    fix = f"put it in {USER_FILE} instead (a task could have written the project file)"
    if name not in trusted:
        raise ModelConfigError(f"{path}:{line_of(lines, ('models', name)) or 1}: models.{name} is refused in a "
                               "project file: a project file may not add a model (its base_url would decide where "
                               f"prompts go); {fix}")
    for key, value in fields.items():
        before = trusted[name].get(key, _default(key))
        why = model_field_refusal(str(key), _expanded(value), _expanded(before))
        if why:
            raise ModelConfigError(f"{path}:{line_of(lines, ('models', name, key)) or 1}: models.{name}.{key} is "
                                   f"refused in a project file ({why}); {fix}")


def _default(key: str) -> object:
    field = ModelConfig.model_fields.get(key)
    return None if field is None else field.get_default(call_default_factory=True)


def _expanded(value: object) -> object:
    return _expand_env(value).rstrip("/") if isinstance(value, str) else value


def _scripted_file(name: str, resend: int) -> ModelConfig:
    from worker.scripted import ScriptError, ensure_scripted_server, load_script  # here: 3 import floors less

    path = Path(name[len("scripted:"):]).expanduser()
    shipped = SHIPPED_FILE.parent.parent / path  # the shipped examples work from any directory
    if not path.is_file() and not path.is_absolute() and shipped.is_file():
        path = shipped
    if not path.is_file():
        raise ModelConfigError(f"model '{name}': script file {path} not found; see configs/examples/scripts/hello.yaml")
    try:
        overrides = load_script(path).model
        base_url = ensure_scripted_server(path)
    except ScriptError as exc:
        raise ModelConfigError(str(exc)) from None
    fields = {"model": "scripted", "schema_resend_every": resend, **overrides}
    return _build({**fields, "name": name, "base_url": base_url}, {"": f"{path}:1"})


def _build(fields: dict, places: dict[str, str]) -> ModelConfig:
    for key in ("base_url", "model"):
        if isinstance(fields.get(key), str):
            fields[key] = _expand_env(fields[key])
    try:
        return ModelConfig.model_validate(fields)
    except ValidationError as exc:
        problem = field_errors(exc)[0]
        where = places.get(str(problem.loc[0]) if problem.loc else "", places[""])
        raise ModelConfigError(f"{where}: model '{fields.get('name')}' field {problem.line()}; "
                               f"allowed fields: {', '.join(ModelConfig.model_fields)}") from None


def _expand_env(text: str) -> str:
    return ENV_REF.sub(lambda m: os.environ.get(m.group(1)) or (m.group(2) or ""), text)


def model_override(flag: Optional[str]) -> Optional[str]:
    """The model that wins over a tasks file's or a session's: --model, else GA_MODEL when a person set it
    (not when a parent task handed its model down to its code_run: see nested_model_env)."""
    if flag:
        return flag
    if os.environ.get(INHERITED_MARK):
        return None
    return os.environ.get("GA_MODEL") or None


def nested_model_env(name: Optional[str], config: Optional[ModelConfig]) -> dict[str, str]:
    """GA_MODEL for a task's code_run: a nested fan-out uses the task's model unless it names another
    (a scripted model file as the server this process already started). INHERITED_MARK says this GA_MODEL
    is a default handed down, so it does not override the nested tasks file's models as a person's would."""
    if name and name.startswith("scripted:") and config is not None:
        name = f"scripted@{config.base_url}"
    return {"GA_MODEL": name, INHERITED_MARK: "1"} if name else {}
