"""Experiment tracking of a run: MLflow and TensorBoard, off by default (the recipe's ``tracking``
section, ``tinyplm run --track``).

The run opens a :class:`Tracker` once its dir is claimed and calls it through one seam: every
``logs/train.jsonl`` record as it is written, then the finished :class:`~tinyplm.report.RunRecord`
and its report files. What is sent is decided in ``track.points``; each backend only stores it.
Nothing here imports ``mlflow`` or ``tensorboardX`` until a backend is opened.

    check_available(cfg.tracking)                  # before any work: TrackingError if not installed
    check_places(cfg.tracking, run_dir)            # ... and where it goes is usable (run.preflight)
    tracker = open_tracker(cfg.tracking, run_dir, run_name=cfg.name, params=...)
    tracker.on_event(record) ...; tracker.finish(record, run_dir); tracker.close(RunStatus.FINISHED)
"""

from tinyplm.track.base import Backend, RunStatus, TrackingError
from tinyplm.track.points import Artifact, Point, flatten_params
from tinyplm.track.session import (
    check_available,
    check_places,
    mlflow_problem,
    mlflow_uri,
    open_tracker,
    tensorboard_dir,
)
from tinyplm.track.tracker import Tracker

__all__ = [
    "Artifact", "Backend", "Point", "RunStatus", "Tracker", "TrackingError", "check_available", "check_places",
    "flatten_params", "mlflow_problem", "mlflow_uri", "open_tracker", "tensorboard_dir",
]
