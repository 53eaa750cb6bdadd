"""A metric's configuration, captured from its constructor's arguments: each argument as plain
JSON data that says exactly what it is (or why it cannot), with the digests of the classes it
names; what :class:`rageval.metrics.base.Metric` records, keys kept cells on and writes to the
run log."""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import inspect
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

__all__ = ["UNCAPTURED", "Captured", "capture", "capturing", "source_digest"]


#: constructor arguments that are not configuration: the judge and the embeddings are recorded
#: (and keyed on) separately
_NOT_CONFIG = frozenset({"llm", "embeddings"})
#: how params() shows an argument whose value cannot be recorded faithfully
UNCAPTURED = "$uncaptured"


@functools.cache
def source_digest(cls: type) -> str | None:
    """What stands for a class's code in cache keys: "" for rageval's own (covered by the
    digest of rageval's source), the sha256 of its source file for a class defined elsewhere,
    None when that file cannot be read (a class typed into a notebook or REPL)."""
    if cls.__module__.split(".")[0] == "rageval":
        return ""
    try:
        path = inspect.getsourcefile(cls)
        return hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else None
    except (OSError, TypeError):
        return None


@dataclass
class Captured:
    """A constructor argument in JSON form, the code digests of the classes it names, and why
    it cannot be recorded faithfully (None when it can)."""

    value: Any
    sources: dict[str, str] = field(default_factory=dict)
    problem: str | None = None


def capture(value: Any) -> Captured:
    """`value` as plain JSON data that says exactly what it is, or why it cannot be: data
    (numbers, strings, lists, dicts, enums, paths, pydantic models and dataclass instances) is
    recorded as itself; a class as ``"module:QualName"`` plus the digest of its source; a
    function, a lambda or any other object cannot be recorded faithfully (its repr does not
    say what it does), which makes the metric uncacheable."""
    out = Captured(None)
    out.value = _capture(value, out, 0)
    return out


def _capture(value: Any, out: Captured, depth: int) -> Any:
    if depth > 32:
        out.problem = out.problem or "a value nested too deep"
        return {UNCAPTURED: "nested too deep"}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, enum.Enum):
        return _capture(value.value, out, depth + 1)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (list, tuple)):
        return [_capture(v, out, depth + 1) for v in value]
    if isinstance(value, (set, frozenset)):
        items = [_capture(v, out, depth + 1) for v in value]
        return sorted(items, key=repr)
    if isinstance(value, Mapping):
        return {str(k): _capture(v, out, depth + 1) for k, v in value.items()}
    if isinstance(value, BaseModel):
        return _capture(value.model_dump(mode="json"), out, depth + 1)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _capture(dataclasses.asdict(value), out, depth + 1)
    if isinstance(value, type):
        path = f"{value.__module__}:{value.__qualname__}"
        digest = source_digest(value)
        if digest is None:
            out.problem = out.problem or f"class {path} has no readable source file"
        else:
            out.sources[path] = digest
        return path
    kind = type(value).__name__
    out.problem = out.problem or f"a {kind} ({value!r:.60}) cannot be recorded faithfully"
    return {UNCAPTURED: kind}


def capturing(init: Callable[..., None]) -> Callable[..., None]:
    """Wrap a metric's ``__init__`` so that the arguments it is called with (its defaults
    included) are recorded as the metric's configuration. The outermost constructor's values
    win; the ``**kw`` a subclass passes up is bound again by its parent's constructor."""
    signature = inspect.signature(init)

    @functools.wraps(init)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> None:
        config: dict[str, Captured] = self.__dict__.setdefault("_config", {})
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError:
            bound = None  # the constructor raises the same TypeError, with its own message
        if bound is not None:
            bound.apply_defaults()
            for name, value in list(bound.arguments.items())[1:]:
                kind = signature.parameters[name].kind
                if kind is inspect.Parameter.VAR_KEYWORD:
                    for key, item in value.items():
                        if key not in _NOT_CONFIG and key not in config:
                            config[key] = capture(item)
                elif name not in _NOT_CONFIG and name not in config:
                    config[name] = capture(
                        list(value) if kind is inspect.Parameter.VAR_POSITIONAL else value
                    )
        init(self, *args, **kwargs)

    wrapper._captures_config = True  # type: ignore[attr-defined]
    return wrapper
