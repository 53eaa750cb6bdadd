"""Settings from a config file and from `-p METRIC.PARAM=VALUE`, for `rageval evaluate` and
the pytest plugin.

The file is `--config FILE`, else the first `rageval.toml`, or `pyproject.toml` with a
`[tool.rageval]` table, found in the current directory or above it. Its names are the Python
API's: `[judge]` holds `Judge` keyword arguments, `[params.METRIC]` a metric's constructor
arguments, and the top-level keys are `evaluate()`'s (plus the command line's `fail_under`
and `probe`)::

    metrics = ["faithfulness", "answer_correctness"]
    embeddings = "local"
    column_map = { query = "user_input" }
    on_invalid = "skip"
    fail_under = { faithfulness = 0.8 }
    max_cost = 5.0        # USD: the run stops before passing it (docs/cost.md)
    batch = false         # true: judge requests through the endpoint's Batch API, or
                          # { poll_interval = 60, settle = 1 } (rageval.judge.BatchSettings)

    [judge]
    model = "llama3.1"
    base_url = "http://localhost:11434/v1"
    timeout = 120
    requests_per_minute = 600
    temperature = 0.0
    prices = { "llama3.1" = [0.0, 0.0] }   # [input, output(, cached, batch in, batch out)]

    [params.answer_correctness]
    weights = [0.5, 0.5]

    # a judge panel (docs/panels.md): each [[judges]] is a judge, its settings over [judge]'s
    [[judges]]
    name = "qwen"          # the name its values are kept under (default: model@base_url)
    model = "qwen1.5b"
    base_url = "http://127.0.0.1:8080/v1"
    [[judges]]
    model = "smollm2"
    base_url = "http://127.0.0.1:8081/v1"

Precedence, highest first: the command line (including `-p`), the environment (`RAGEVAL_LLM`,
`RAGEVAL_BASE_URL` / `OPENAI_BASE_URL`), the config file, the defaults.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from rageval import _env
from rageval.errors import RagevalError

if TYPE_CHECKING:
    from rageval.judge import Judge
    from rageval.judge._spec import JudgeChoice
    from rageval.runner._runconfig import JudgeSetup

__all__ = [
    "CONFIG_FILE",
    "ConfigError",
    "Settings",
    "configured_choice",
    "configured_judge",
    "configured_panel_setup",
    "find_config",
    "load_settings",
    "parse_params",
]

CONFIG_FILE = "rageval.toml"


class ConfigError(RagevalError, ValueError):
    """A config file or `-p` setting that cannot be used (named in the message)."""


class _File(BaseModel):
    """What a config file may hold; unknown keys are an error (a typo must not be ignored)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    metrics: list[str] | None = None
    embeddings: str | None = None
    column_map: dict[str, str] | None = None
    on_invalid: Literal["raise", "skip"] | None = None
    fail_under: dict[str, float] | None = None
    probe: bool | None = None
    max_cost: float | None = None
    batch: bool | dict[str, int | float | str] | None = None
    judge: dict[str, Any] | None = None
    judges: list[dict[str, Any]] | None = None
    params: dict[str, dict[str, Any]] | None = None


@dataclass(frozen=True)
class Settings:
    """The settings of a config file (all empty when there is none)."""

    source: Path | None = None
    metrics: list[str] | None = None
    embeddings: str | None = None
    column_map: dict[str, str] | None = None
    on_invalid: Literal["raise", "skip"] | None = None
    fail_under: dict[str, float] = field(default_factory=dict)
    probe: bool | None = None
    #: the run's budget in USD (evaluate(max_cost=...)); whether it goes through a Batch API
    max_cost: float | None = None
    batch: bool | dict[str, int | float | str] | None = None
    #: Judge keyword arguments, `model` and `base_url` among them when the file sets them
    judge: dict[str, Any] = field(default_factory=dict)
    #: a judge panel's judges ([[judges]]): each one's `name` (optional) and Judge keyword
    #: arguments, over those of `judge`
    judges: list[dict[str, Any]] = field(default_factory=list)
    #: metric name -> constructor arguments
    params: dict[str, dict[str, Any]] = field(default_factory=dict)


def find_config(start: Path) -> Path | None:
    """The config file that applies in `start`: the nearest `rageval.toml`, or
    `pyproject.toml` with a `[tool.rageval]` table, in `start` or a directory above it."""
    for folder in (start.resolve(), *start.resolve().parents):
        candidate = folder / CONFIG_FILE
        if candidate.is_file():
            return candidate
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file() and "rageval" in (_read_toml(pyproject).get("tool") or {}):
            return pyproject
    return None


def _read_toml(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        with path.open("rb") as fh:
            table: dict[str, Any] = tomllib.load(fh)
            return table
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"cannot read the config file {path}: {e}") from e


def load_settings(
    path: str | os.PathLike[str] | None = None, *, start: Path | None = None
) -> Settings:
    """The settings in `path`, else in the config file found from `start` (default: the
    current directory); empty Settings when there is none."""
    found = Path(path) if path is not None else find_config(start or Path.cwd())
    if found is None:
        return Settings()
    if not found.is_file():
        raise ConfigError(f"config file not found: {found}")
    table = _read_toml(found)
    if found.name == "pyproject.toml":
        table = (table.get("tool") or {}).get("rageval") or {}
    try:
        parsed = _File.model_validate(table)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(map(str, err['loc'])) or '(top)'}: {err['msg']}" for err in e.errors()
        )
        raise ConfigError(f"{found}: {problems}") from None
    judge = dict(parsed.judge or {})
    _check_judge_names(judge, found)
    judges = [dict(entry) for entry in parsed.judges or ()]
    for i, entry in enumerate(judges):
        _check_judge_names({k: v for k, v in entry.items() if k != "name"}, found, i)
        if not isinstance(entry.get("model") or judge.get("model"), str):
            raise ConfigError(f"{found}: [[judges]] number {i + 1}: give its model")
    return Settings(
        source=found,
        metrics=parsed.metrics,
        embeddings=parsed.embeddings,
        column_map=parsed.column_map,
        on_invalid=parsed.on_invalid,
        fail_under=dict(parsed.fail_under or {}),
        probe=parsed.probe,
        max_cost=parsed.max_cost,
        batch=parsed.batch,
        judge=judge,
        judges=judges,
        params={name: dict(p) for name, p in (parsed.params or {}).items()},
    )


def _judge_parameters() -> list[str]:
    from rageval._client._settings import EndpointOptions
    from rageval.judge import Judge

    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    names = [p.name for p in inspect.signature(Judge.__init__).parameters.values()
             if p.kind in kinds]  # fmt: skip
    names += EndpointOptions.__annotations__  # the keywords Judge takes for its endpoint
    return [n for n in names if n not in ("self", "client", "api_key")]


def _check_judge_names(judge: Mapping[str, Any], source: Path, entry: int | None = None) -> None:
    """`judge`'s keys are Judge settings ([judge], or the [[judges]] table number `entry`)."""
    table = "[judge]" if entry is None else f"[[judges]] number {entry + 1}"
    known = _judge_parameters()
    unknown = sorted(set(judge) - set(known))
    if "api_key" in judge:
        raise ConfigError(
            f"{source}: {table} api_key: a key does not belong in a file; name the variable "
            "that holds it with api_key_env"
        )
    if unknown:
        raise ConfigError(
            f"{source}: {table} {', '.join(unknown)}: not a Judge setting (known: "
            f"{', '.join(known)})"
        )


def parse_params(items: Sequence[str]) -> dict[str, dict[str, Any]]:
    """`-p METRIC.PARAM=VALUE` settings: VALUE is read as a TOML value when it is one
    (`3`, `0.5`, `true`, `[0.5, 0.5]`, `"text"`), else taken as text; PARAM may be a dotted
    path into a table (`rubric_score.rubrics.score1_description=...`)."""
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        metric, dot, path = key.strip().partition(".")
        if not sep or not dot or not metric or not path:
            raise ConfigError(f"-p must look like METRIC.PARAM=VALUE, got {item!r}")
        target = out.setdefault(metric, {})
        *parents, leaf = path.split(".")
        for name in parents:
            target = target.setdefault(name, {})
        target[leaf] = _value(raw.strip())
    return out


def _value(text: str) -> Any:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def merged_params(*layers: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Metric parameters, later layers winning key by key (tables merged, not replaced)."""
    out: dict[str, dict[str, Any]] = {}
    for layer in layers:
        for metric, params in layer.items():
            out[metric] = _deep_merge(out.get(metric, {}), params)
    return out


def _deep_merge(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def configured_judge(
    settings: Settings,
    *,
    model: str | None = None,
    base_url: str | None = None,
    **overrides: Any,
) -> Judge | None:
    """The judge of the command line (`model`, `base_url`, `overrides`), the environment and
    the config file, in that order of precedence; None when none of them names a model."""
    from rageval.runner._runconfig import made

    choice = configured_choice(settings, model=model, base_url=base_url, overrides=overrides)
    return made(choice) if choice is not None else None


def configured_choice(
    settings: Settings,
    *,
    model: str | None = None,
    base_url: str | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> JudgeChoice | None:
    """The JudgeSpec (with prices and cache) of the layers, highest first: `overrides` (the
    command line's settings), `model` and `base_url` (the command line's, else the
    environment's), the config file's [judge]; None when none of them names a model."""
    from rageval.judge import backend_traits, split_backend
    from rageval.judge._spec import JudgeChoice

    file = dict(settings.judge)
    file_model = file.pop("model", None)
    model = _env.judge_model(model) or file_model
    if model is None:
        return None
    backend, model = split_backend(model)
    backend = backend or file.get("backend") or "openai"
    try:
        own_address = backend_traits(backend).default_base_url is not None
    except ValueError as e:  # a kind no installed package registers
        raise ConfigError(f"{settings.source}: [judge]: {e}") from None
    if own_address:
        # an API with an address of its own (Anthropic's): the OpenAI variables do not apply
        base_url = base_url or file.pop("base_url", None)
    else:
        base_url = _env.base_url(base_url, fallback=file.pop("base_url", None))
    given = {"model": model, "backend": backend, "base_url": base_url}
    try:
        if "prices" in file:
            file["prices"] = _price_table(file["prices"])
        # [judge.limits] and [judge.retry]: the settings objects the Python API takes
        from rageval.judge import Limits, RetryPolicy

        for key, kind in (("limits", Limits), ("retry", RetryPolicy)):
            if key in file:
                file[key] = kind(**file[key])
        choice = JudgeChoice.of_layers(overrides or {}, given, file)
        where = f"{settings.source}: [judge]" if settings.source is not None else None
        return dataclasses.replace(choice, source=where)
    except (TypeError, ValueError) as e:  # a value of the wrong type or range in the file
        raise ConfigError(f"{settings.source}: [judge]: {e}") from None


def configured_panel_setup(
    settings: Settings, overrides: Mapping[str, Any] | None = None
) -> JudgeSetup | None:
    """The judges of the config file's [[judges]] (None without): each judge its table's
    settings over [judge]'s, then `overrides` (the command line's); named by its `name`, else
    ``model@base_url``. RAGEVAL_LLM does not apply to them (each names its model); the
    environment's endpoint only to one without a ``base_url``."""
    if not settings.judges:
        return None
    from rageval.runner._runconfig import JudgeSetup

    names: list[str | None] = []
    choices = []
    for entry in settings.judges:
        table = {**settings.judge, **entry}
        names.append(table.pop("name", None))
        model, base_url = table.pop("model"), table.pop("base_url", None)
        one = Settings(source=settings.source, judge=table)
        choice = configured_choice(one, model=model, base_url=base_url, overrides=overrides)
        assert choice is not None  # a model is named
        choices.append(choice)
    return JudgeSetup(tuple(choices), panel=tuple(names))


def _price_table(prices: Any) -> Any:
    from rageval.judge import ModelPrice, PriceTable

    try:
        # a price is a list [input, output, ...] or a table {input = ..., output = ...}
        return PriceTable({name: ModelPrice.of(p) for name, p in prices.items()})
    except (AttributeError, TypeError, ValueError, IndexError) as e:
        raise ValueError(
            "prices must map a model to [input, output(, cached input(, batch input, batch "
            f"output))] USD per million tokens ({e})"
        ) from None
