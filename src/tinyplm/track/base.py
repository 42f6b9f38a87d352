"""The backend protocol every tracking store implements, the run's end states, and the errors.

A backend only stores what it is given (``track.points`` decides what that is); ``Tracker`` in
``track.tracker`` fans each call out to the backends the recipe turned on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Protocol

from tinyplm.errors import TinyplmError
from tinyplm.track.points import Artifact, Point


class TrackingError(TinyplmError):
    """Tracking was asked for and cannot be done: its package is missing, or its store cannot be
    opened. The message names the recipe key (or ``--track``) and what to do."""


class RunStatus(StrEnum):
    """How a tracked run ended (MLflow's run statuses)."""

    FINISHED = "FINISHED"
    FAILED = "FAILED"
    KILLED = "KILLED"


class Backend(Protocol):
    """One tracking store for one run. ``name`` names it in messages (``mlflow``, ``tensorboard``);
    ``info`` says where the run went (URI, run id, folder), for ``logs/tracking.json``."""

    name: str

    @property
    def info(self) -> dict[str, str]: ...

    def log_params(self, params: Mapping[str, str]) -> None:
        """Store the run's parameters (flattened recipe keys -> text)."""

    def log_points(self, points: Sequence[Point]) -> None:
        """Store metric points."""

    def set_tags(self, tags: Mapping[str, str]) -> None:
        """Store searchable facts of the run."""

    def log_artifacts(self, artifacts: Sequence[Artifact]) -> None:
        """Store files and folders of the run dir (a backend without files ignores them)."""

    def close(self, status: RunStatus) -> None:
        """End the run with ``status`` and release the store."""
