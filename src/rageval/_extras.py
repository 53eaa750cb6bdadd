"""The optional extras (pyproject.toml's ``[project.optional-dependencies]``) and the one check
every feature that needs one makes before using it.

``require(extra, feature)`` imports the extra's modules and turns a failed import into a
:class:`~rageval.errors.MissingExtraError` whose message is one line with the install command,
so that the command line can print it and exit 2 (a usage problem, not a traceback) and Python
callers get an ``ImportError`` that says what to install.
"""

from __future__ import annotations

import importlib
from typing import Final

from rageval.errors import MissingExtraError

__all__ = ["EXTRAS", "install_command", "require"]

#: extra -> the modules its features import (the extra's distributions, by import name)
EXTRAS: Final[dict[str, tuple[str, ...]]] = {
    "mlflow": ("mlflow",),
    "otel": ("opentelemetry.sdk.trace",),
    "pandas": ("pandas",),
    "parquet": ("pandas", "pyarrow"),
    "ray": ("ray", "ray.data"),
    "tokens": ("tiktoken",),
}


def install_command(extra: str) -> str:
    return f"pip install 'rageval[{extra}]'"


def require(extra: str, feature: str) -> None:
    """Import the modules of `extra` (a no-op once imported), or raise MissingExtraError naming
    `feature` (e.g. "reading Parquet"), the module that failed and the install command."""
    for module in EXTRAS[extra]:
        try:
            importlib.import_module(module)
        except ImportError as e:
            if isinstance(e, ModuleNotFoundError) and e.name == module.split(".")[0]:
                why = "which is not installed"
            else:  # installed, but it does not load (built for another numpy...): say why
                why = f"which cannot be imported ({str(e).splitlines()[0] if str(e) else e!r})"
            raise MissingExtraError(
                f"{feature} needs {module}, {why}: {install_command(extra)}", extra=extra
            ) from e
