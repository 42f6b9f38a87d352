"""The metric that keeps checkpoints, over training time of every trained stage, in one plot.

Training stages record their evaluations in their ``TrainingInfo.history`` (``step``,
``elapsed_s`` and the metrics): a stage's ``info.training`` (one per training stage) and a compressed
stage's ``info.compress.recover`` (recovery after the step). Each history is one line: the
primary metric against minutes of training, on dev, or on the held-out training examples when the
run chose on them (``RunInfo.selection_metric``: then dev is not evaluated during training).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tinyplm.report.info import TrainingInfo
from tinyplm.report.plots import GRID, TEACHER_COLOR, new_figure, save_figure
from tinyplm.report.records import RunRecord


def histories(record: RunRecord) -> list[tuple[str, list[dict[str, Any]]]]:
    """(label, evaluations) of every trained stage with at least one dev evaluation, in run order:
    a stage's one training under its name, several as ``name/stage``, a recovery as ``name/recover``."""
    found: list[tuple[str, list[dict[str, Any]]]] = []
    metric = curve_metric(record)

    def visit(label: str, training: TrainingInfo) -> None:
        shown = [h for h in training.history if metric in h]
        if shown:
            found.append((label, shown))

    for stage in record.stages:
        training = stage.info.training
        for i, part in enumerate(training):
            visit(stage.name if len(training) == 1 else f"{stage.name}/{part.stage or i}", part)
        if stage.info.compress is not None and stage.info.compress.recover is not None:
            visit(f"{stage.name}/recover", stage.info.compress.recover)
    return found


def curve_metric(record: RunRecord) -> str:
    """The metric key the training evaluations hold: the one the run chose on."""
    return record.info.selection_metric or record.metric


def training_curves(record: RunRecord, path: Path) -> Path | None:
    """Plot every history's primary metric against training minutes; None when there is none."""
    lines = histories(record)
    if not lines:
        return None
    metric = curve_metric(record)
    split = f"held-out {record.metric}" if metric != record.metric else f"dev {record.metric}"
    fig, ax = new_figure(7.5, 4.2)
    for label, history in lines:
        x = [float(h.get("elapsed_s", 0.0)) / 60 for h in history]
        y = [float(h[metric]) for h in history]
        style = {"color": TEACHER_COLOR, "linewidth": 2.2} if label == "teacher" else {"linewidth": 1.4}
        ax.plot(x, y, marker="o", markersize=3, label=label, **style)
    ax.set_xlabel("training time (minutes, evaluation excluded)")
    ax.set_ylabel(split)
    ax.set_title(f"{record.task}: {split} during training", fontsize=12, fontweight="bold", loc="left")
    ax.grid(True, **GRID)
    ax.legend(fontsize=8, frameon=False, loc="lower right")
    return save_figure(fig, path)
