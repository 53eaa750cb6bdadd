"""What a reply the request cache kept is worth again: the judge uses it only if it still
validates (the response model or the check may have changed since it was cached)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from rageval.judge._probabilities import (
    SAMPLED,
    Path,
    ReplyScoring,
    fallback_scoring,
    read_stored,
)

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["revalidate", "revalidate_all", "revalidate_scored"]

T = TypeVar("T", bound="BaseModel")


def revalidate(text: str, response_model: type[T], check: Callable[[T], None] | None) -> T | None:
    """A cached value, if it still validates."""
    try:
        value = response_model.model_validate_json(text)
        if check is not None:
            check(value)
    except ValueError:
        return None
    return value


def revalidate_scored(
    text: str,
    *,
    response_model: type[T],
    check: Callable[[T], None] | None,
    leaves: Mapping[Path, tuple[Any, ...]],
    scored: bool,
) -> tuple[T, ReplyScoring] | None:
    """A cached reply of :meth:`~rageval.judge.Judge.ask`, if it still validates, with how its
    choices (`leaves`) were scored: kept beside it when `scored` by probability, else its
    sampled values."""
    scoring = SAMPLED
    if scored:
        stored = read_stored(text)
        if stored is None:
            return None
        text, scoring = stored
    value = revalidate(text, response_model, check)
    if value is None:
        return None
    if not scored and leaves:
        scoring = fallback_scoring(json.loads(text), leaves, "sampled", None)
    return value, scoring


def revalidate_all(
    text: str, *, response_model: type[T], check: Callable[[T], None] | None, n: int
) -> list[T] | None:
    """The ``n`` cached values of an ``ask_n``, if every one still validates."""
    try:
        items = json.loads(text)
    except ValueError:
        return None
    if not isinstance(items, list) or len(items) != n:
        return None
    values = []
    for item in items:
        value = revalidate(json.dumps(item), response_model=response_model, check=check)
        if value is None:
            return None
        values.append(value)
    return values
