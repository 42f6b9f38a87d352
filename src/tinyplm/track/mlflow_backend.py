"""The MLflow backend: one MLflow run per tinyplm run, written with ``MlflowClient``.

``mlflow`` (``mlflow-skinny`` is enough) is imported here only, when a tracked run opens it. The
client is explicit (no fluent ``mlflow.start_run`` state), so a sweep can open one parent run and
give its id to each trial (``parent_run_id``: the child carries MLflow's ``mlflow.parentRunId``
tag and shows under the parent in the UI).

MLflow 3 keeps its local file store (``file:`` URIs, a plain folder) in maintenance mode and refuses
it unless ``MLFLOW_ALLOW_FILE_STORE`` is set; for a file store this backend sets it (when unset) for
this process, as the documented opt-out. A SQLite store's new experiments keep their files beside
the database (:func:`artifact_root`), not in ``./mlruns`` of whatever folder the run started in.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from tinyplm.track.base import RunStatus
from tinyplm.track.points import Artifact, Point

#: How long one request to an MLflow server may wait for its answer, and how often it is tried again,
#: while the run trains (unless the environment sets them): MLflow's own defaults (120 s, seven tries
#: with growing waits) held a run for minutes at each call to a server that had stopped answering, and
#: the calls are made from the training loop. A failed call costs the run a bounded wait and a warning,
#: then the store is left out (``track.tracker``).
REQUEST_LIMITS = {"MLFLOW_HTTP_REQUEST_TIMEOUT": "10", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1"}



def bound_requests() -> None:
    """Put :data:`REQUEST_LIMITS` in this process's environment, where the environment does not set
    them already (MLflow reads them at each request)."""
    for key, value in REQUEST_LIMITS.items():
        os.environ.setdefault(key, value)


#: MLflow's most metrics, parameters and tags in one log_batch call.
MAX_METRICS, MAX_PARAMS, MAX_TAGS = 1000, 100, 100
PARENT_TAG = "mlflow.parentRunId"  # mlflow.utils.mlflow_tags.MLFLOW_PARENT_RUN_ID


def _chunks(items: list, size: int) -> list[list]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def artifact_root(uri: str) -> str | None:
    """Where a new experiment keeps its runs' files: for a SQLite store, ``mlartifacts/`` beside the
    database file (MLflow's default, ``./mlruns``, is taken from the working directory: a run
    started elsewhere scattered its model and plots there); None (MLflow's choice) for other stores."""
    prefix = "sqlite:///"
    if not uri.startswith(prefix) or uri[len(prefix):] in ("", ":memory:"):
        return None
    return (Path(uri[len(prefix):]).resolve().parent / "mlartifacts").as_uri()


class MlflowBackend:
    """Logs to one MLflow run at ``uri`` in ``experiment`` (made when missing).

    A new run is named ``run_name`` and, with ``parent_run_id``, made a child of that run;
    ``run_id`` instead reopens a run (a resumed tinyplm run goes on in the MLflow run it started).
    Raises whatever MLflow raises when the store cannot be opened or a run id is not there; the
    caller (``track.open``) turns it into a ``TrackingError``.
    """

    name = "mlflow"

    def __init__(self, uri: str, experiment: str, run_name: str, *, parent_run_id: str | None = None,
                 run_id: str | None = None) -> None:
        if uri.startswith("file:"):
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        bound_requests()
        from mlflow.tracking import MlflowClient

        self.uri = uri
        self.client = MlflowClient(tracking_uri=uri)
        if run_id is not None:
            self.client.update_run(run_id, status="RUNNING")
            self.run_id = run_id
            return
        tags = {"mlflow.source.name": "tinyplm"}
        if parent_run_id is not None:
            self.client.get_run(parent_run_id)  # a missing parent fails here, not after training
            tags[PARENT_TAG] = parent_run_id
        run = self.client.create_run(self._experiment_id(experiment), run_name=run_name, tags=tags)
        self.run_id = run.info.run_id

    def _experiment_id(self, name: str) -> str:
        found = self.client.get_experiment_by_name(name)
        if found is not None:
            return found.experiment_id
        try:
            return self.client.create_experiment(name, artifact_location=artifact_root(self.uri))
        except Exception:  # made meanwhile by another run
            found = self.client.get_experiment_by_name(name)
            if found is None:
                raise
            return found.experiment_id

    @property
    def info(self) -> dict[str, str]:
        return {"tracking_uri": self.uri, "run_id": self.run_id}

    def log_params(self, params: Mapping[str, str]) -> None:
        from mlflow.entities import Param

        for chunk in _chunks([Param(k, v) for k, v in params.items()], MAX_PARAMS):
            self.client.log_batch(self.run_id, params=chunk)

    def log_points(self, points: Sequence[Point]) -> None:
        from mlflow.entities import Metric

        metrics = [Metric(p.key, p.value, p.timestamp_ms, p.step) for p in points]
        for chunk in _chunks(metrics, MAX_METRICS):
            self.client.log_batch(self.run_id, metrics=chunk)

    def set_tags(self, tags: Mapping[str, str]) -> None:
        from mlflow.entities import RunTag

        for chunk in _chunks([RunTag(k, v) for k, v in tags.items()], MAX_TAGS):
            self.client.log_batch(self.run_id, tags=chunk)

    def log_artifacts(self, artifacts: Sequence[Artifact]) -> None:
        """Files keep their place in the run dir (``logs/train.jsonl``); folders are copied whole
        under their own name (``model/``, ``plots/``)."""
        for item in artifacts:
            if item.path.is_dir():
                self.client.log_artifacts(self.run_id, str(item.path), item.name)
            else:
                parent = os.path.dirname(item.name)
                self.client.log_artifact(self.run_id, str(item.path), parent or None)

    def close(self, status: RunStatus) -> None:
        self.client.set_terminated(self.run_id, status=status.value, end_time=int(time.time() * 1000))
