"""Every error rageval defines derives from RagevalError and keeps its builtin base."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import rageval
from rageval.errors import RagevalError

# (error, where users import it from, the builtin base it had before the root existed)
PUBLIC = [
    ("InvalidDataError", "rageval", ValueError),
    ("RunConfigError", "rageval.runner", ValueError),
    ("RunDirError", "rageval.runner", ValueError),
    ("RunLogError", "rageval.log", ValueError),
    ("DatasetError", "rageval.calibration.datasets", ValueError),
    ("JudgeError", "rageval.judge", Exception),
    ("FatalJudgeError", "rageval.judge", Exception),
    ("JudgeCallFailed", "rageval.judge", Exception),
    ("MissingExtraError", "rageval.errors", ImportError),
    ("NoJudgeError", "rageval.metrics.base", RuntimeError),
    ("ModelFilesError", "rageval.embeddings", RuntimeError),
    ("NetworkBlockedError", "rageval.testing", RuntimeError),
]


@pytest.mark.parametrize(("name", "module", "builtin"), PUBLIC)
def test_public_errors_have_one_root_and_keep_their_builtin_base(
    name: str, module: str, builtin: type[Exception]
) -> None:
    error = getattr(importlib.import_module(module), name)
    assert issubclass(error, RagevalError)
    assert issubclass(error, builtin)


def test_the_root_is_importable_from_the_package() -> None:
    assert rageval.RagevalError is RagevalError
    from rageval.judge import errors

    assert errors.JudgeError is rageval.JudgeError


def _modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(rageval.__path__, "rageval."):
        if info.name != "rageval.__main__":  # runs the command line when imported
            names.append(info.name)
    return names


def test_every_exception_class_in_the_package_derives_from_the_root() -> None:
    found = []
    for name in _modules():
        module = importlib.import_module(name)
        for cls_name, cls in vars(module).items():
            if (
                inspect.isclass(cls)
                and issubclass(cls, BaseException)
                and cls.__module__ == name
                and not cls_name.startswith("_")  # private control flow, never raised to users
            ):
                found.append(cls)
    assert len(found) >= len(PUBLIC)
    assert [c.__qualname__ for c in found if not issubclass(c, RagevalError)] == []
