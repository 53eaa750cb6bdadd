"""One statement of a judge's settings: :class:`JudgeSpec`.

Everything that makes a :class:`~rageval.judge.Judge` what it is, apart from the API key (a
secret, never written), its price table and its request cache (objects of their own). The
judge describes itself from it (``Judge.describe()``, the run manifest's ``judge``), a resumed
run makes the judge again from it (``Judge.from_spec``), the runner keys the cells it keeps by
the settings that change a reply (:meth:`JudgeSpec.cell_identity`), and the Ray engine ships
it to its workers. A setting added here reaches all of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["BACKENDS", "JudgeSpec", "StructuredMode"]

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
    timeout: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=6, ge=0)
    #: None: the endpoint's default (16 concurrent requests)
    max_concurrency: int | None = Field(default=None, ge=1)
    requests_per_minute: float | None = Field(default=None, gt=0)
    tokens_per_minute: float | None = Field(default=None, gt=0)

    @classmethod
    def of_described(cls, described: Mapping[str, Any]) -> JudgeSpec:
        """The spec in a judge's ``describe()`` as a run manifest stores it (of any rageval
        version: a setting it does not record takes its default)."""
        # a judge described before there was a scoring setting scored by sampled values
        return cls.model_validate(
            {"scoring": "sampled"}
            | {k: v for k, v in described.items() if k in cls.model_fields and v is not None}
        )

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
