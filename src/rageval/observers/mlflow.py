"""A run in MLflow: the run's settings as params, each metric's mean and CI as metrics, the
per-sample scores as a table, summary.json and report.html as artifacts (``rageval[mlflow]``).

Through an ``MlflowClient`` of its own, never MLflow's "active run", so two evaluations at
once log to two runs, even through one observer: what it holds of each run is kept by the
run's id, which every event carries. Where it logs is MLflow's own choice unless given:
``tracking_uri`` (else ``MLFLOW_TRACKING_URI``), ``experiment`` (else
``MLFLOW_EXPERIMENT_NAME``, else "rageval"). A run that stops early ends FAILED (KILLED on
Ctrl-C) with what finished logged.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from rageval import _env
from rageval._extras import require
from rageval._version import __version__
from rageval.errors import RunConfigError
from rageval.log import SUMMARY_FILE, SampleLine
from rageval.observers import RunEnd, RunObserver, RunStart
from rageval.report import REPORT_FILE

__all__ = ["MLflowObserver"]

#: the per-sample table's artifact (MLflow's table format: columns and rows)
SAMPLES_ARTIFACT = "rageval_samples.json"
_MAX_PARAM = 6000  # MLflow's longest param value


@dataclass
class _Logged:
    """What the observer holds of one rageval run while it lasts."""

    #: the MLflow run it logs to
    mlflow_run_id: str
    metrics: list[str]
    rows: list[list[Any]] = field(default_factory=list)


class MLflowObserver(RunObserver):
    """Log each run to MLflow (see the module docstring)."""

    def __init__(
        self,
        *,
        experiment: str | None = None,
        run_name: str | None = None,
        tracking_uri: str | None = None,
    ) -> None:
        require("mlflow", "the MLflow observer")
        import mlflow
        from mlflow.tracking import MlflowClient

        uri = tracking_uri or mlflow.get_tracking_uri()
        try:
            self.client = MlflowClient(tracking_uri=uri)
            # the store opens here: one it cannot use stops the run before it starts, with what
            # to do, not at the run's start in MLflow's words
            self.client.search_experiments(max_results=1)
        except Exception as e:
            raise RunConfigError(_store_problem(uri, tracking_uri, e)) from e
        self.experiment = experiment
        self.run_name = run_name
        #: the MLflow run of the rageval run started last (its id), once one started
        self.run_id: str | None = None
        #: the MLflow run of each rageval run, by the rageval run's id
        self.runs: dict[str, str] = {}
        self._logged: dict[str, _Logged] = {}

    def _experiment_id(self) -> str:
        name = _env.mlflow_experiment(self.experiment)
        found = self.client.get_experiment_by_name(name)
        return found.experiment_id if found is not None else self.client.create_experiment(name)

    def on_start(self, start: RunStart) -> None:
        from mlflow.entities import Param

        manifest = start.manifest
        metrics = [m.name for m in manifest.metrics]
        run = self.client.create_run(
            self._experiment_id(),
            run_name=self.run_name,
            tags={"rageval.version": __version__, "rageval.run_dir": str(start.run_dir or "")},
        )
        self.run_id = self.runs[start.run_id] = run.info.run_id
        self._logged[start.run_id] = _Logged(run.info.run_id, metrics)
        params: dict[str, Any] = {
            "metrics": ",".join(metrics),
            "judge": manifest.judge.model if manifest.judge is not None else "none",
            "embeddings": manifest.embeddings.name if manifest.embeddings is not None else "none",
            "rows": start.n_rows,
            "repeats": manifest.repeats,
            "data": manifest.data.path or manifest.data.source or "",
        }
        for spec in manifest.metrics:
            for key, value in spec.params.items():
                params[f"{spec.name}.{key}"] = value
        self.client.log_batch(
            run.info.run_id, params=[Param(k, str(v)[:_MAX_PARAM]) for k, v in params.items()]
        )

    def on_sample(self, line: SampleLine) -> None:
        logged = self._logged.get(line.run_id or "")
        if logged is None:
            return
        cells = [line.cells.get(name) for name in logged.metrics]
        logged.rows.append([line.id, *(c.value if c is not None else None for c in cells)])

    def on_end(self, end: RunEnd) -> None:
        from mlflow.entities import Metric

        logged = self._logged.pop(end.run_id, None)
        if logged is None:
            return
        run_id = logged.mlflow_run_id
        now = int(time.time() * 1000)
        values: dict[str, float] = {}
        for name, stats in end.summary.metrics.items():
            for key, value in (
                ("mean", stats.mean),
                ("ci_low", stats.ci_low),
                ("ci_high", stats.ci_high),
                ("n_measured", stats.n_measured),
                ("n_not_measured", stats.n_not_measured),
            ):
                if value is not None and math.isfinite(value):
                    values[f"{name}.{key}"] = float(value)
        values["rows_finished"] = float(end.result.n_finished)
        self.client.log_batch(run_id, metrics=[Metric(k, v, now, 0) for k, v in values.items()])
        table = {"columns": ["id", *logged.metrics], "data": logged.rows}
        self.client.log_dict(run_id, table, SAMPLES_ARTIFACT)
        if end.run_dir is not None:
            for name in (SUMMARY_FILE, REPORT_FILE):
                if (end.run_dir / name).is_file():
                    self.client.log_artifact(run_id, str(end.run_dir / name))
        if end.error is None:
            status = "FINISHED"
        else:
            status = "FAILED" if isinstance(end.error, Exception) else "KILLED"
        self.client.set_terminated(run_id, status=status)


def _store_problem(uri: str, given: str | None, error: Exception) -> str:
    """Why MLflow cannot log to `uri` (`given` as ``tracking_uri``, else MLflow's choice), and
    what to do: mlflow-skinny 3.x has no database store, yet defaults to ``sqlite:`` where no
    ``MLFLOW_TRACKING_URI`` is set, and refuses a ``file:`` store without an opt-in."""
    where = "tracking_uri" if given else "MLFLOW_TRACKING_URI or tracking_uri"
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    if uri.startswith(("sqlite:", "postgresql", "mysql", "mssql")):
        chosen = "" if given else ", MLflow's choice where no MLFLOW_TRACKING_URI is set"
        hint = (
            f"a database store{chosen} needs SQLAlchemy, which mlflow-skinny lacks: give "
            f"{where} a tracking server (e.g. 'http://localhost:5000', started with "
            "`mlflow server`), or pip install mlflow (the full package) for a local database"
        )
    elif uri.startswith("file:") or "://" not in uri:
        hint = (
            "MLflow 3 refuses a local file store unless MLFLOW_ALLOW_FILE_STORE=true is set; "
            f"set it, or give {where} a tracking server (e.g. 'http://localhost:5000')"
        )
    else:
        hint = f"check {where} and that the tracking server is up"
    return f"the MLflow observer cannot log to {uri}: {hint} ({type(error).__name__}: {first})"
