"""``Tracker``: the run's one seam to tracking, fanning each call out to the backends that are on.

The run calls it at three points: ``on_event`` for every ``logs/train.jsonl`` record as it is
written (``train.progress.observe_log``), ``finish`` once the reports are written, ``close`` at
the end however the run ended. With no backends (tracking off) every call does nothing.

A backend that fails once the run has started (a tracking server gone away mid-training) is
reported once on the ``tinyplm.track`` logger and left out from then on: the run it observes
goes on. Failures while opening are errors (``track.session.open_tracker``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tinyplm.report import RunRecord
from tinyplm.track.base import Backend, RunStatus
from tinyplm.track.points import Artifact, event_points, record_points, record_tags, run_artifacts

log = logging.getLogger("tinyplm.track")


class Tracker:
    """Sends a run's curves, results and files to ``backends`` (none: tracking off)."""

    def __init__(self, backends: Sequence[Backend] = ()) -> None:
        self._backends = list(backends)
        self._failed: list[Backend] = []

    @property
    def enabled(self) -> bool:
        """True while any backend is taking the run."""
        return bool(self._backends)

    @property
    def info(self) -> dict[str, dict[str, str]]:
        """Where the run went, per backend: ``{"mlflow": {"tracking_uri", "run_id"}, ...}``."""
        return {b.name: b.info for b in self._backends}

    def on_event(self, event: Mapping[str, Any]) -> None:
        """One ``logs/train.jsonl`` record: its curve points, if it has any."""
        points = event_points(event) if self._backends else []
        if points:
            self._each(lambda b: b.log_points(points))

    def finish(self, record: RunRecord, run_dir: Path) -> None:
        """The finished run: every stage's final numbers, its tags and its report files."""
        if not self._backends:
            return
        points, tags = record_points(record, int(time.time() * 1000)), record_tags(record)
        artifacts = run_artifacts(Path(run_dir))
        self._each(lambda b: (b.log_points(points), b.set_tags(tags), b.log_artifacts(artifacts)))

    def log_files(self, artifacts: Sequence[Artifact]) -> None:
        """Files that are not a run's report (a sweep's table and plots, on its parent run)."""
        self._each(lambda b: b.log_artifacts(artifacts))

    def close(self, status: RunStatus) -> None:
        """End the run in every backend (those that failed earlier too, quietly)."""
        self._each(lambda b: b.close(status))
        for backend in self._failed:
            try:
                backend.close(RunStatus.FAILED)
            except Exception:  # already reported when it first failed
                pass
        self._backends, self._failed = [], []

    def _each(self, call: Callable[[Backend], object]) -> None:
        for backend in list(self._backends):
            try:
                call(backend)
            except Exception as exc:  # a tracking store must not stop the run it observes
                log.warning("tracking: %s failed (%s: %s); the run goes on without it",
                            backend.name, type(exc).__name__, exc)
                self._backends.remove(backend)
                self._failed.append(backend)
