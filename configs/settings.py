"""Layered settings: shipped defaults < user file < project file < environment < flags.

Every layer is validated as it is merged, so an error names the layer that caused it.
"""
from __future__ import annotations

import copy
import difflib
import os
import re
from pathlib import Path
from typing import Literal, Mapping, Optional, Union

from pydantic import (
    BaseModel,
    ByteSize,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from configs.projecttrust import WeakerSetting, check_project
from memory_shared.jsontypes import JSONObject
from memory_shared.usererrors import FieldError
from memory_shared.yamlsource import (
    YamlError,
    YamlLimits,
    configure,
    line_of,
    load_text,
    load_yaml,
)

DEFAULT_FILE = Path(__file__).with_name("default.yaml")
USER_FILE = Path("~/.config/ga/config.yaml")
PROJECT_FILE = Path("ga.yaml")
HOST_NAME = re.compile(r"(?=.{1,253}$)(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]{0,62})(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62}))*\.?")
ENV_ALIASES = {"GA_HOME": ("home",), "GA_MODEL": ("worker", "model"), "GA_CHROMIUM": ("web", "chromium")}


class ConfigError(ValueError):
    """A user-caused configuration problem; str() is one line naming file, key and fix."""


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


class MemorySettings(Section):
    root: Optional[Path] = None
    l1_max_lines: int = Field(default=30, ge=1)
    l1_max_chars: int = Field(default=2000, ge=1)
    archive_keep_months: int = Field(default=12, ge=0)
    admit: Literal["review", "verified", "auto"] = "verified"  # what of a task's memory writes later workers see
    rewrite_share: float = Field(default=0.25, gt=0, le=1)  # of the L3 files, skills or a file's lines, per task
    l1_task_share: float = Field(default=0.2, gt=0, le=1)  # of L1's line bound one task may add
    distill: bool = True  # ga distils a task whose answer a computing code_run backs (worker/distill.py)


class WorkerSettings(Section):
    model: Optional[str] = None
    max_turns: int = Field(default=40, ge=1)
    max_tokens: Optional[int] = Field(default=None, ge=1)
    max_cost: Optional[float] = Field(default=None, gt=0)
    code_timeout: int = Field(default=60, ge=1)
    code_timeout_max: int = Field(default=600, ge=1)
    max_tool_calls_per_reply: int = Field(default=16, ge=1)  # the rest of a reply's calls are refused back to the model
    allow_read: list[Path] = []
    allow_write: list[Path] = []
    second_chance: int = Field(default=1, ge=0)


class OutputCaps(Section):
    code_run: int = 10000
    web_execute_js: int = 8000
    web_scan_html: int = 35000
    web_scan_text: int = 10000
    file_read: int = 20000
    file_read_line: int = 1280


class ContextSettings(Section):
    context_tokens: int = Field(default=24000, ge=1)
    chars_per_token: int = Field(default=3, ge=1)
    policy: Literal["watermark", "periodic"] = "watermark"
    low_water: float = Field(default=0.25, gt=0, lt=1)
    compress_every: int = 5
    keep_recent: int = 10
    strict_keep_recent: int = 4
    tag_keep_chars: int = 800
    evict_to: float = 0.6
    anchor_turns: int = 20
    schema_resend_every: int = 10
    caps: OutputCaps = OutputCaps()

    @property
    def budget_chars(self) -> int:
        return self.context_tokens * self.chars_per_token


class FanoutSettings(Section):
    address: Optional[str] = None
    executor: Literal["auto", "local", "ray"] = "auto"
    concurrency: int = Field(default=4, ge=1)
    retries: int = Field(default=2, ge=0)
    runs_dir: Path = Path("./runs")
    max_depth: int = Field(default=2, ge=0)
    timeout: Optional[float] = Field(default=None, gt=0)
    rpm: Optional[int] = Field(default=None, ge=1)
    tpm: Optional[int] = Field(default=None, ge=1)
    circuit_after: int = Field(default=10, ge=1)
    circuit_cooldown: float = Field(default=60.0, ge=0)
    pool_idle_seconds: float = Field(default=600.0, gt=0)
    num_cpus: Optional[int] = Field(default=None, ge=1)
    memory_service: Optional[bool] = None
    slots_per_actor: Optional[int] = Field(default=None, ge=1)


class WebSettings(Section):
    chromium: Optional[Path] = None
    headless: bool = True
    cdp_url: Optional[str] = None  # http://127.0.0.1:9222: use the person's own browser (risks: docs/configuration.md)


class ExploreSettings(Section):
    idle_window: str = "30m"
    idle_trigger: Optional[Path] = None
    max_cycles_per_day: int = Field(default=4, ge=0)
    max_spend_per_day: float = Field(default=1.0, ge=0)
    candidates: int = Field(default=12, ge=1, le=100)
    batch_size: int = Field(default=4, ge=1, le=50)
    verify_timeout: float = Field(default=60.0, gt=0)


class PlannerSettings(Section):
    """The exploration planner's rule (docs/skills.md; skilltree/demand.py)."""

    rule: Literal["s6", "demand"] = "demand"
    blend: float = Field(default=0.5, ge=0, le=1)               # share of the demand term in the ranking score
    window_days: float = Field(default=30.0, gt=0)              # recent uses counted for demand
    trend_days: float = Field(default=5.0, gt=0)                # a rate over these last days counts when higher
    explore_bonus: float = Field(default=1.0, ge=0)             # beta: weight of the upper-confidence bonus
    untried_demand: float = Field(default=0.6, ge=0, le=1)      # a new or unused-so-far category, as a share of the best
    weight_band: float = Field(default=0.2, gt=0, le=1)         # each weight stays within initial +- band ...
    weight_min: float = Field(default=0.1, ge=0, lt=0.25)       # ... and within [weight_min, weight_max]
    weight_max: float = Field(default=0.5, gt=0.25, le=1)


class SandboxLimits(Section):
    """Per code_run (worker/sandbox_limits.py); None: sized to this machine (docs/sandbox.md)."""

    memory: Optional[ByteSize] = Field(default=None, gt=0)  # data + private mappings of each process (RLIMIT_DATA)
    processes: int = Field(default=256, ge=8)  # processes and threads of the whole sandbox (pids cgroup, RLIMIT_NPROC)
    file_size: ByteSize = Field(default=ByteSize(1 << 30), gt=0)  # largest file a script may write (RLIMIT_FSIZE)
    cpu_seconds: int = Field(default=600, ge=1)  # CPU time of each process (RLIMIT_CPU)
    tmp_size: Optional[ByteSize] = Field(default=None, gt=0)  # the private /tmp (a tmpfs, so it is memory too)
    disk: Optional[ByteSize] = Field(default=None, gt=0)  # what the working directory may hold (worker/sandbox_disk.py)

    def resolved(self) -> "SandboxLimits":
        """These limits with None replaced by this machine's defaults: a quarter of the RAM for memory, an
        eighth (256 MiB to 4 GiB) for /tmp."""
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        return self.model_copy(update={"memory": self.memory or ByteSize(max(512 << 20, ram // 4)),
                                       "tmp_size": self.tmp_size or ByteSize(min(4 << 30, max(256 << 20, ram // 8)))})


NetworkMode = Union[Literal["gateway", "open", "off"], list[str]]


def network_mode(value: object) -> object:
    """`sandbox.network` (settings and tasks files): gateway, open, off, or a list of host names. The booleans of
    older configs still read: true is open, false is off (YAML reads on/off as booleans too)."""
    if isinstance(value, bool):
        return "open" if value else "off"
    if isinstance(value, list):
        bad = [host for host in value if not isinstance(host, str) or not HOST_NAME.fullmatch(host)]
        if bad:
            raise ValueError(f"{bad[0]!r} is not a host name; list host names like api.github.com (no scheme, "
                             "port or path), or use gateway, open or off")
        return sorted({host.lower().rstrip(".") for host in value})
    return value


def sandbox_shorthand(value: object) -> object:
    """`sandbox:` as settings and tasks files both write it: `off` or `bwrap` for the whole section, and a mode
    YAML read as a boolean (`off` is false; true is bwrap)."""
    if isinstance(value, (bool, str)):
        value = {"mode": value}
    if isinstance(value, dict) and isinstance(value.get("mode"), bool):
        value = {**value, "mode": "bwrap" if value["mode"] else "off"}
    return value


class SandboxSettings(Section):
    """How code_run (and the exploration verifier's re-runs) are confined; see worker/sandbox.py."""

    mode: Literal["bwrap", "off"] = "bwrap"
    network: NetworkMode = "gateway"  # worker/gateway.py: only the model gateway; a list: worker/egress.py
    writable: list[Path] = []
    bwrap: str = "bwrap"  # the bubblewrap binary: a name on PATH or a path
    limits: SandboxLimits = SandboxLimits()
    env: list[str] = []  # variables passed into the sandbox besides PATH, LANG, LC_*, TERM, HOME, TZ and ga's own

    _shorthand = model_validator(mode="before")(sandbox_shorthand)
    _network = field_validator("network", mode="before")(network_mode)


class LogSettings(Section):
    level: Literal["debug", "info", "warning", "error"] = "warning"  # what stderr shows; log files get info too
    json_file: Optional[Path] = None


class TelemetrySettings(Section):
    otlp_endpoint: Optional[str] = None  # e.g. http://127.0.0.1:4318: export traces over OTLP/HTTP
    capture_content: bool = False  # prompts, completions and tool arguments/results on spans (redacted)
    service_name: str = "ga"


class YamlSettings(Section):
    """Bounds on every YAML file ga reads (settings files themselves are read with the shipped ones)."""

    max_bytes: int = Field(default=YamlLimits.max_bytes, ge=1)
    max_depth: int = Field(default=YamlLimits.max_depth, ge=2)
    max_alias_nodes: int = Field(default=YamlLimits.max_alias_nodes, ge=0)


class Settings(Section):
    home: Path = Path("~/.ga")
    memory: MemorySettings = MemorySettings()
    worker: WorkerSettings = WorkerSettings()
    context: ContextSettings = ContextSettings()
    fanout: FanoutSettings = FanoutSettings()
    web: WebSettings = WebSettings()
    explore: ExploreSettings = ExploreSettings()
    planner: PlannerSettings = PlannerSettings()
    sandbox: SandboxSettings = SandboxSettings()
    log: LogSettings = LogSettings()
    telemetry: TelemetrySettings = TelemetrySettings()
    yaml: YamlSettings = YamlSettings()

    @property
    def home_dir(self) -> Path:
        return self.home.expanduser()

    @property
    def memory_root(self) -> Path:
        return (self.memory.root or self.home_dir / "memory").expanduser()


def load_settings(
    overrides: Optional[Mapping[str, object]] = None,
    *,
    user_file: Optional[Path] = None,
    project_file: Optional[Path] = None,
    environ: Optional[Mapping[str, str]] = None,
) -> Settings:
    """Merge every layer in order and validate; raise ConfigError on the first bad layer."""
    environ = os.environ if environ is None else environ
    project = project_file or PROJECT_FILE
    files = [(str(path), *_read_layer(path)) for path in (DEFAULT_FILE, (user_file or USER_FILE).expanduser(), project)
             if path.is_file()]
    later = [("environment", _env_layer(environ), {}),
             ("command-line flags", _nest({k: v for k, v in (overrides or {}).items() if v is not None}), {})]
    settings = _merge_layers([*files, *later])
    if files[-1][0] == str(project):  # the project file may tighten, never loosen what the others say
        try:
            check_project(settings, _merge_layers([*files[:-1], *later]), project, files[-1][1], files[-1][2])
        except WeakerSetting as exc:
            raise ConfigError(str(exc)) from None
    configure(YamlLimits(**settings.yaml.model_dump()))
    return settings


def _merge_layers(layers: list[tuple[str, dict, dict]]) -> Settings:
    merged: JSONObject = {}
    settings = Settings()
    for source, data, lines in layers:
        _merge(merged, copy.deepcopy(data))
        settings = _validate(merged, source, lines)
    return settings


def _read_layer(path: Path) -> tuple[dict, dict]:
    try:
        data, lines = load_yaml(path)
    except YamlError as exc:
        raise ConfigError(str(exc)) from None
    if data is None:
        return {}, lines
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1: the file must be a mapping of settings sections; see configs/default.yaml")
    return data, lines


def _env_layer(environ: Mapping[str, str]) -> JSONObject:
    layer: JSONObject = {}
    for name, raw in environ.items():
        if name in ENV_ALIASES:
            keys = ENV_ALIASES[name]
        elif name.startswith("GA_") and "__" in name:
            keys = tuple(part.lower() for part in name[3:].split("__"))
        else:
            continue
        _merge(layer, _nest({".".join(keys): _env_value(name, raw)}))
    return layer


def _env_value(name: str, raw: str) -> object:
    if not raw:
        return None
    try:
        return load_text(raw, f"environment variable {name}")[0]
    except YamlError as exc:
        raise ConfigError(str(exc)) from None


def _nest(flat: Mapping[str, object]) -> JSONObject:
    """{"a.b": 1} -> {"a": {"b": 1}}: a layer of settings as a file would write it (its values unchecked)."""
    nested: JSONObject = {}
    for dotted, value in flat.items():
        node = nested
        *parents, leaf = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return nested


def _merge(base: dict, layer: dict) -> None:
    for key, value in layer.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value


def _validate(data: dict, source: str, lines: dict) -> Settings:
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        raise ConfigError(_describe(error, source, lines)) from None


def _describe(error: ErrorDetails, source: str, lines: dict) -> str:
    problem = FieldError.of(error)
    loc, key = problem.loc, problem.key()
    line = line_of(lines, loc)
    where = f"{source}:{line}" if line else source
    if error["type"] == "extra_forbidden":
        model: type[BaseModel] = Settings
        for part in loc[:-1]:
            section = model.model_fields[part].annotation
            if not (isinstance(section, type) and issubclass(section, BaseModel)):
                break
            model = section
        allowed = list(model.model_fields)
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        return f"{where}: unknown key '{key}'; {hint}allowed here: {', '.join(allowed)}"
    return f"{where}: {problem.line()}; see configs/default.yaml for the allowed values"
