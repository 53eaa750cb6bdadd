"""Token, request and cost accounting, rolled up by whatever tags the caller attaches.

:class:`Usage` is the one usage type of rageval: what a judge call returns, what the ledgers
sum, and what the run log, the summary and the report store (pydantic models, ``rageval.log``
among them, read and write it as it is, with ``total_tokens`` added to its JSON).
"""

from __future__ import annotations

import dataclasses
import math
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_PRICES",
    "ModelPrice",
    "PriceTable",
    "Tally",
    "Usage",
    "UsageLedger",
    "price_record",
    "sum_usage",
]

_COUNTS = (
    "prompt_tokens",
    "completion_tokens",
    "requests",
    "retries",
    "reasks",
    "cache_hits",
    "cached_tokens",
)


# A plain dataclass, not a validating one: judges make several per request, and a pydantic
# dataclass costs 2-5x more to build. Models holding one validate and write it through
# __get_pydantic_core_schema__ below.
@dataclass(frozen=True)
class Usage:
    """What one or more calls consumed.

    ``requests`` counts every HTTP request sent (first tries, retries, re-asks and mode probes),
    ``retries`` the re-sends after transient errors, ``reasks`` the re-asks after a reply that
    failed validation, ``cache_hits`` the calls answered from rageval's request cache (which
    cost nothing). ``cached_tokens`` are the prompt tokens the provider served from its own
    prompt cache (``usage.prompt_tokens_details.cached_tokens``): part of ``prompt_tokens``,
    priced at the model's cached-input rate. ``cost_usd`` is None when the price of a model
    that was used is unknown: an unknown cost is never reported as zero, and a sum with an
    unknown part is unknown.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0
    retries: int = 0
    reasks: int = 0
    cache_hits: int = 0
    cost_usd: float | None = 0.0
    cached_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        total = Tally()
        total.add(self)
        total.add(other)
        return total.usage()

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: every count, the cost and ``total_tokens``."""
        return {**vars(self), "total_tokens": self.prompt_tokens + self.completion_tokens}

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        """Inside a pydantic model: read from its JSON form (counts that are whole numbers, a
        finite cost or null; other keys, total_tokens among them, ignored), written as
        :meth:`to_dict`."""
        from pydantic_core import core_schema as cs

        fields = {
            name: cs.typed_dict_field(cs.int_schema(ge=0), required=False) for name in _COUNTS
        }
        fields["cost_usd"] = cs.typed_dict_field(
            cs.nullable_schema(cs.float_schema(allow_inf_nan=False)), required=False
        )
        from_json = cs.no_info_after_validator_function(
            lambda found: cls(**found), cs.typed_dict_schema(fields, extra_behavior="ignore")
        )
        return cs.json_or_python_schema(
            json_schema=from_json,
            python_schema=cs.union_schema([cs.is_instance_schema(cls), from_json]),
            serialization=cs.plain_serializer_function_ser_schema(cls.to_dict),
        )


@dataclass(frozen=True)
class ModelPrice:
    """USD per million tokens of one model. ``cached_input`` is the rate of prompt tokens the
    provider served from its prompt cache (None: billed as ``input``); the ``batch_*`` rates
    apply to requests sent through a Batch API (None: unknown, so a batched request's cost is
    unknown; ``batch_cached_input`` None: billed as ``batch_input``)."""

    input: float
    output: float
    cached_input: float | None = None
    batch_input: float | None = None
    batch_output: float | None = None
    batch_cached_input: float | None = None

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if value is not None and not (isinstance(value, (int, float)) and value >= 0):
                raise ValueError(f"price {name} must be a number >= 0, got {value!r}")

    @classmethod
    def of(cls, value: ModelPrice | Sequence[float] | Mapping[str, float | None]) -> ModelPrice:
        """A price from a ModelPrice, a mapping of its fields, or a sequence ``(input,
        output)``, ``(input, output, cached_input)`` or ``(input, output, cached_input,
        batch_input, batch_output)``."""
        if isinstance(value, ModelPrice):
            return value
        if isinstance(value, Mapping):
            return cls(**value)  # type: ignore[arg-type]
        items = tuple(value)
        if len(items) not in (2, 3, 5):
            raise ValueError(
                "a price is (input, output[, cached_input[, batch_input, batch_output]]) in "
                f"USD per million tokens, or a ModelPrice; got {value!r}"
            )
        return cls(*items)

    @property
    def batched(self) -> bool:
        """Whether batched requests have a known price."""
        return self.batch_input is not None and self.batch_output is not None


def price_record(price: ModelPrice | None) -> dict[str, float] | None:
    """`price` as a run manifest records it: its known rates (``ModelPrice.of`` reads it)."""
    if price is None:
        return None
    return {k: v for k, v in dataclasses.asdict(price).items() if v is not None}


def _openai(inp: float, cached: float | None, out: float) -> ModelPrice:
    # OpenAI's Batch API costs half the online rates, the cached-input rate included
    return ModelPrice(
        inp,
        out,
        cached,
        batch_input=inp / 2,
        batch_output=out / 2,
        batch_cached_input=None if cached is None else cached / 2,
    )


# USD per million tokens (input, cached input, output): OpenAI list prices at the time of
# writing, with the Batch API at half of each. They go stale; pass your own PriceTable for
# anything that matters.
DEFAULT_PRICES: dict[str, ModelPrice] = {
    "gpt-4o-mini": _openai(0.15, 0.075, 0.60),
    "gpt-4o": _openai(2.50, 1.25, 10.00),
    "gpt-4.1": _openai(2.00, 0.50, 8.00),
    "gpt-4.1-mini": _openai(0.40, 0.10, 1.60),
    "gpt-4.1-nano": _openai(0.10, 0.025, 0.40),
    "gpt-4-turbo": _openai(10.00, None, 30.00),
    "gpt-3.5-turbo": _openai(0.50, None, 1.50),
    "o3-mini": _openai(1.10, 0.55, 4.40),
    "o4-mini": _openai(1.10, 0.275, 4.40),
    "text-embedding-3-small": _openai(0.02, None, 0.0),
    "text-embedding-3-large": _openai(0.13, None, 0.0),
    "text-embedding-ada-002": _openai(0.10, None, 0.0),
}

# A dated snapshot ("gpt-4o-mini-2024-07-18") is priced like its family name.
_SNAPSHOT_SUFFIX = re.compile(r"-\d{4}-\d{2}-\d{2}$")

PriceSpec = ModelPrice | Sequence[float] | Mapping[str, "float | None"]


class PriceTable:
    """Model name -> :class:`ModelPrice` (USD per million input, output, cached-input and
    batch tokens). An entry may be given as ``(input, output)``, ``(input, output,
    cached_input)``, a mapping of ModelPrice's fields or a ModelPrice.

    Entries given here override the defaults; ``include_defaults=False`` starts empty. A model
    that is not in the table has an unknown (None) cost.
    """

    def __init__(
        self,
        prices: Mapping[str, PriceSpec] | None = None,
        *,
        include_defaults: bool = True,
    ) -> None:
        self._prices: dict[str, ModelPrice] = dict(DEFAULT_PRICES) if include_defaults else {}
        for model, spec in (prices or {}).items():
            try:
                self._prices[model] = ModelPrice.of(spec)
            except (TypeError, ValueError) as e:
                raise ValueError(f"price for {model!r}: {e}") from None

    def price(self, model: str) -> ModelPrice | None:
        found = self._prices.get(model)
        if found is None:
            found = self._prices.get(_SNAPSHOT_SUFFIX.sub("", model))
        return found

    def cost(
        self,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        *,
        cached_tokens: int = 0,
        batch: bool = False,
    ) -> float | None:
        """USD for these tokens; `cached_tokens` (part of `prompt_tokens`) at the cached-input
        rate, and every rate the batch one when `batch`. None when a rate is unknown."""
        price = self.price(model)
        if price is None:
            return None
        if batch:
            if price.batch_input is None or price.batch_output is None:
                return None
            inp, out = price.batch_input, price.batch_output
            cached = price.batch_cached_input
        else:
            inp, out, cached = price.input, price.output, price.cached_input
        cached_tokens = min(max(cached_tokens, 0), prompt_tokens)
        rate = inp if cached is None else cached
        total = (prompt_tokens - cached_tokens) * inp + cached_tokens * rate
        return (total + completion_tokens * out) / 1_000_000

    def to_dict(self) -> dict[str, ModelPrice]:
        return dict(self._prices)

    def __repr__(self) -> str:
        return f"PriceTable({len(self._prices)} models)"


class Tally:
    """A running sum of usage, counted in place; a :class:`Usage` is made only on reading. It is
    what one call has consumed so far (the retry loop counts its requests and retries, the judge
    its re-asks and tokens, before the call's cost is known), and a ledger's running total, which
    is added to for every call, several times over for its tags."""

    __slots__ = (*_COUNTS, "cost_usd")

    def __init__(self) -> None:
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.requests = 0
        self.retries = 0
        self.reasks = 0
        self.cache_hits = 0
        self.cached_tokens = 0
        self.cost_usd: float | None = 0.0

    def add(self, u: Usage | Tally) -> None:
        """Count `u` in: a cost is unknown from the first unknown part on."""
        self.prompt_tokens += u.prompt_tokens
        self.completion_tokens += u.completion_tokens
        self.requests += u.requests
        self.retries += u.retries
        self.reasks += u.reasks
        self.cache_hits += u.cache_hits
        self.cached_tokens += u.cached_tokens
        if self.cost_usd is not None:
            self.cost_usd = None if u.cost_usd is None else self.cost_usd + u.cost_usd

    def usage(self) -> Usage:
        return Usage(
            self.prompt_tokens,
            self.completion_tokens,
            self.requests,
            self.retries,
            self.reasks,
            self.cache_hits,
            self.cost_usd,
            self.cached_tokens,
        )


def sum_usage(usages: Iterable[Usage]) -> Usage:
    """The sum of `usages` with its cost summed exactly (``math.fsum``), so that the total does
    not depend on the order of the parts; unknown if any part's cost is unknown."""
    tally = Tally()
    costs: list[float] = []
    for u in usages:
        tally.add(u)
        if u.cost_usd:
            costs.append(u.cost_usd)
    if tally.cost_usd is not None:
        tally.cost_usd = math.fsum(costs)
    return tally.usage()


class UsageLedger:
    """Thread-safe running totals, overall and per value of every tag name seen."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._total = Tally()
        self._by: dict[str, dict[str, Tally]] = {}

    def record(self, usage: Usage, tags: Mapping[str, str] | None = None) -> None:
        with self._lock:
            self._total.add(usage)
            for name, value in (tags or {}).items():
                bucket = self._by.setdefault(name, {})
                tally = bucket.get(value)
                if tally is None:
                    tally = bucket[value] = Tally()
                tally.add(usage)

    @property
    def total(self) -> Usage:
        with self._lock:
            return self._total.usage()

    def by_tag(self, name: str) -> dict[str, Usage]:
        """Usage per value of tag ``name``, e.g. ``by_tag("metric")["faithfulness"]``."""
        with self._lock:
            return {value: tally.usage() for value, tally in self._by.get(name, {}).items()}

    def tag_names(self) -> list[str]:
        with self._lock:
            return sorted(self._by)

    def __repr__(self) -> str:
        return f"UsageLedger(total={self.total})"
