"""One statement of a judge's settings: :class:`JudgeSpec`.

Everything that makes a :class:`~rageval.judge.Judge` what it is, apart from the API key (a
secret, never written), its price table and its request cache (objects of their own). The
judge describes itself from it (``Judge.describe()``, the run manifest's ``judge``), a resumed
run makes the judge again from it (``Judge.from_spec``), the runner keys the cells it keeps by
the settings that change a reply (:meth:`JudgeSpec.cell_identity`), and the Ray engine ships
it to its workers. A setting added here reaches all of them.

The command line resolves a judge from layers -- its flags, the environment, the config file's
``[judge]`` or, resuming, the run's manifest -- each a table of settings by these names:
:meth:`JudgeChoice.of_layers` reads them, the one place that does, into a JudgeSpec and the
two settings beside it (the price table and the request cache).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

if TYPE_CHECKING:
    from rageval._client._cache import RequestCache
    from rageval._client._usage import PriceTable

__all__ = ["BACKENDS", "JudgeChoice", "JudgeSpec", "StructuredMode"]

#: the judge backends that ship with rageval, as ``Judge(backend=...)`` and ``--llm KIND:MODEL``
#: name them; others are registered (:mod:`rageval.judge._registry`)
BACKENDS: tuple[str, ...] = ("openai", "anthropic")
StructuredMode = Literal["auto", "json_schema", "tools", "json"]


class _ChangesReplies:
    """Marks a setting that changes what the judge replies: part of a kept cell's key."""


_REPLIES = _ChangesReplies()


class JudgeSpec(BaseModel):
    """A judge's settings (see the module docstring). The defaults are ``Judge``'s; ``None``
    for ``base_url`` and ``api_key_env`` means the backend's default (for ``"openai"``:
    ``RAGEVAL_BASE_URL``, ``OPENAI_BASE_URL`` or OpenAI, and ``OPENAI_API_KEY``; for
    ``"anthropic"``: Anthropic's API and ``ANTHROPIC_API_KEY``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: Annotated[str, _REPLIES] = Field(min_length=1)
    #: a registered backend's kind (checked when the judge is made: a plug-in's may not be
    #: installed where a manifest is read)
    backend: Annotated[str, _REPLIES] = Field(default="openai", min_length=1)
    base_url: Annotated[str | None, _REPLIES] = None
    api_key_env: str | None = None
    temperature: Annotated[float, _REPLIES] = 0.0
    #: the smallest reply budget of a request
    max_tokens: Annotated[int, _REPLIES] = Field(default=1024, ge=1)
    max_prompt_tokens: int | None = Field(default=None, ge=1)
    seed: Annotated[int | None, _REPLIES] = None
    #: the structured-output mode ("auto": probed per endpoint, see rageval.judge._modes)
    mode: Annotated[StructuredMode, _REPLIES] = "auto"
    #: how verdicts and ratings are scored ("auto": by the probabilities of their options where
    #: the endpoint returns log-probabilities; see rageval.judge._probabilities)
    scoring: Annotated[Literal["auto", "probabilities", "sampled"], _REPLIES] = "auto"
    max_reasks: int = Field(default=2, ge=0)
    #: seconds an attempt may take; None: the default (60 s, longer at a llama.cpp server whose
    #: slots the run follows: rageval._client._settings.LOCAL_SERVER_TIMEOUT)
    timeout: float | None = Field(default=None, gt=0)
    max_retries: int = Field(default=6, ge=0)
    #: None: the endpoint's default (16 concurrent requests)
    max_concurrency: int | None = Field(default=None, ge=1)
    requests_per_minute: float | None = Field(default=None, gt=0)
    tokens_per_minute: float | None = Field(default=None, gt=0)

    @classmethod
    def described_settings(cls, described: Mapping[str, Any]) -> dict[str, Any]:
        """`described` (a judge's ``describe()`` as a run manifest of any rageval version
        stores it) without the settings it leaves null, which take their defaults, and with
        ``scoring="sampled"`` when it records none: a judge described before there was a
        scoring setting scored by sampled values. Keys that are no setting are kept."""
        return {"scoring": "sampled"} | {
            k: v for k, v in described.items() if v is not None or k not in cls.model_fields
        }

    @classmethod
    def of_described(cls, described: Mapping[str, Any]) -> JudgeSpec:
        """The spec in a judge's ``describe()`` as a run manifest stores it (of any rageval
        version: :meth:`described_settings`)."""
        settings = cls.described_settings(described)
        return cls.model_validate({k: v for k, v in settings.items() if k in cls.model_fields})

    def judge_arguments(self) -> dict[str, Any]:
        """``Judge(spec.model, **spec.judge_arguments())`` makes the judge (with the key from
        its variable, the default prices and cache)."""
        return self.model_dump(exclude={"model"}, exclude_none=True)

    def cell_identity(self) -> dict[str, Any]:
        """The settings that change a reply (the rest -- limits, retries, re-asks -- only
        decide whether there is one)."""
        return {
            name: getattr(self, name)
            for name, field in type(self).model_fields.items()
            if _REPLIES in field.metadata
        }


#: the settings of a layer that are no part of a spec, made into the judge beside it
_BESIDE = ("prices", "cache")
#: the settings objects a layer may give whole, read as the spec's fields they hold
_OBJECTS = {
    "limits": ("max_concurrency", "requests_per_minute", "tokens_per_minute"),
    "retry": ("max_retries", "timeout"),
}


def _spec_fields(layer: Mapping[str, Any]) -> dict[str, Any]:
    """A layer's settings by JudgeSpec's names (None: not given); a name that is none of
    them is a ValueError."""
    fields: dict[str, Any] = {}
    for name, value in layer.items():
        if name in _BESIDE or value is None:
            continue
        if name in _OBJECTS:
            held = value if isinstance(value, Mapping) else dataclasses.asdict(value)
            fields |= {k: v for k, v in held.items() if k in _OBJECTS[name] and v is not None}
        elif name in JudgeSpec.model_fields:
            fields[name] = value
        else:
            raise ValueError(f"{name}: not a judge setting")
    return fields


@dataclasses.dataclass(frozen=True)
class JudgeChoice:
    """A judge as a command resolved it: its :class:`JudgeSpec`, and its price table and
    request cache (not part of a spec): ``Judge.from_spec(c.spec, cache=c.cache,
    prices=c.prices)`` makes the judge (:func:`rageval.runner._runconfig.made`)."""

    spec: JudgeSpec
    #: None: the built-in price table
    prices: PriceTable | None = None
    cache: RequestCache | bool | str | os.PathLike[str] = True
    #: where the settings were read, for a message about them (a config file's table)
    source: str | None = None

    @classmethod
    def of_layers(cls, *layers: Mapping[str, Any]) -> JudgeChoice:
        """The judge the `layers` state, highest first: each setting from the first layer
        that gives it (a value of None gives nothing), the rest at JudgeSpec's defaults. A
        layer is a table of settings by JudgeSpec's names, ``limits`` and ``retry`` (objects
        or tables of their fields), ``prices`` and ``cache`` -- the command line's flags, the
        environment's model and endpoint, the config file's ``[judge]``, a stored run's spec.

        Args:
            *layers: the tables of settings, the one that wins first.
        """
        merged: dict[str, Any] = {}
        for layer in reversed(layers):
            merged |= _spec_fields(layer)
        beside = {
            name: next(layer[name] for layer in layers if layer.get(name) is not None)
            for name in _BESIDE
            if any(layer.get(name) is not None for layer in layers)
        }
        try:
            spec = JudgeSpec.model_validate(merged)
        except ValidationError as e:  # said as the judge says a bad setting
            problems = "; ".join(f"{'.'.join(map(str, p['loc']))}: {p['msg']}" for p in e.errors())
            raise ValueError(problems) from None
        return cls(spec, **beside)

    def layer(self) -> dict[str, Any]:
        """This judge as a layer of :meth:`of_layers` (under the layers that change it)."""
        return {**self.spec.model_dump(), "prices": self.prices, "cache": self.cache}

    def under(self, layer: Mapping[str, Any]) -> JudgeChoice:
        """This judge with the settings `layer` gives over its own."""
        return dataclasses.replace(JudgeChoice.of_layers(layer, self.layer()), source=self.source)
