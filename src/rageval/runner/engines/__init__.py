"""Where an evaluation's cells are scored.

``local`` (the default): the cell scheduler (:mod:`rageval.runner._schedule`) on this
process's event loop. ``ray`` (the ``rageval[ray]`` extra): the same scheduler inside the actors
of a Ray Data job, one batch of rows at a time (:mod:`rageval.runner.engines._ray`). Both
write the same run directory from the process that called ``evaluate()``.

Nothing here imports Ray: the Ray engine's modules are imported only when it is asked for.
"""

from __future__ import annotations

from typing import Literal

from rageval._extras import install_command
from rageval.errors import RagevalError

Engine = Literal["local", "ray"]
ENGINES: tuple[Engine, ...] = ("local", "ray")
RAY_INSTALL_HINT = install_command("ray")


class RayEngineError(RagevalError):
    """The Ray job could not start or failed for a reason other than the judge (Ray's own
    message is kept). Finished rows are in the run directory."""


__all__ = ["ENGINES", "RAY_INSTALL_HINT", "Engine", "RayEngineError"]
