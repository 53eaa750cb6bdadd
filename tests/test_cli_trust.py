"""No silent loss, no tracebacks, numbers a careful user would not question (issue 22): what
the command line (and evaluate()) says when a metric is left out or measures nothing, when an
optional extra is missing, and how it prints intervals, estimates and gates."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from helpers import rows
from rageval import evaluate
from rageval.cli import main
from rageval.errors import MissingExtraError
from rageval.testing import FAKE_API_KEY


def run_cli(*args: str | Path) -> int:
    return main([str(a) for a in args])


@pytest.fixture(autouse=True)
def no_judge_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAGEVAL_LLM", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)


# ---------------------------------------------------------------------- missing extras


def test_parquet_without_pyarrow_is_one_line_with_the_install_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import pandas as pd

    data = tmp_path / "x.parquet"
    pd.DataFrame(rows(2)).to_parquet(data)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as after `pip install .`
    for extra in ([], ["--dry-run"]):
        assert run_cli("evaluate", data, "-o", tmp_path / "run", *extra) == 2  # not 1: no gate
        err = capsys.readouterr().err
        assert err == (
            "rageval: reading Parquet needs pyarrow, which is not installed: "
            "pip install 'rageval[parquet]'\n"
        )
    assert not (tmp_path / "run").exists()
    with pytest.raises(MissingExtraError) as caught:
        evaluate(data, progress=False)
    assert isinstance(caught.value, ImportError) and caught.value.extra == "parquet"


def test_every_extra_is_checked_the_same_way(monkeypatch: pytest.MonkeyPatch) -> None:
    from rageval._extras import EXTRAS, require

    for extra, modules in EXTRAS.items():
        monkeypatch.setitem(sys.modules, modules[-1], None)
        with pytest.raises(MissingExtraError, match=rf"pip install 'rageval\[{extra}\]'$"):
            require(extra, "this")
        monkeypatch.undo()


def test_to_pandas_without_pandas_is_the_same_error(monkeypatch: pytest.MonkeyPatch) -> None:
    result = evaluate(rows(1), ["token_f1"], progress=False)
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(MissingExtraError, match=r"^to_pandas\(\) needs pandas, which is not"):
        result.to_pandas()
