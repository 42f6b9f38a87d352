"""The TensorBoard backend: event files written with ``tensorboardX`` (no TensorFlow, no
``tensorboard`` package needed to write them; ``tensorboard --logdir`` reads them).

Scalars are the metric points under their keys (one chart section per stage); the recipe's
parameters and the run's tags are one text entry each. TensorBoard keeps no files, so artifacts
are left where they are, in the run dir.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from tinyplm.track.base import RunStatus
from tinyplm.track.points import Artifact, Point


def _table(values: Mapping[str, str]) -> str:
    """``values`` as a markdown table (TensorBoard's text plugin renders markdown)."""
    rows = [f"| {k} | {str(v).replace('|', '&#124;')} |" for k, v in values.items()]
    return "\n".join(["| key | value |", "| --- | --- |", *rows])


class TensorBoardBackend:
    """Writes one run's event files into ``log_dir`` (made when missing; a resumed run adds a file)."""

    name = "tensorboard"

    def __init__(self, log_dir: Path) -> None:
        from tensorboardX import SummaryWriter

        self.log_dir = Path(log_dir)
        self.writer = SummaryWriter(logdir=str(self.log_dir), flush_secs=30)

    @property
    def info(self) -> dict[str, str]:
        return {"log_dir": str(self.log_dir.resolve())}  # one folder, however the run dir was spelled

    def log_params(self, params: Mapping[str, str]) -> None:
        self.writer.add_text("recipe", _table(params), global_step=0)

    def log_points(self, points: Sequence[Point]) -> None:
        for p in points:
            self.writer.add_scalar(p.key, p.value, global_step=p.step, walltime=p.timestamp_ms / 1000)

    def set_tags(self, tags: Mapping[str, str]) -> None:
        self.writer.add_text("tags", _table(tags), global_step=0)

    def log_artifacts(self, artifacts: Sequence[Artifact]) -> None:
        return None

    def close(self, status: RunStatus) -> None:
        self.writer.add_text("status", status.value, global_step=0)
        self.writer.close()
