"""The dev metric over training time of every trained stage, in one plot.

Training stages record their dev evaluations in ``info["history"]`` (``step``, ``elapsed_s`` and the
metrics), also inside ``info["stages"]`` (multi-stage students) and ``info["recover"]`` (recovery
after a compress step). Each history is one line: the primary metric against minutes of training.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tinyplm.report.plots import GRID, TEACHER_COLOR, new_figure, save_figure
from tinyplm.report.records import RunRecord


def histories(record: RunRecord) -> list[tuple[str, list[dict[str, Any]]]]:
    """(label, evaluations) of every trained stage with at least one dev evaluation, in run order."""
    found: list[tuple[str, list[dict[str, Any]]]] = []

    def visit(label: str, info: Any) -> None:
        if not isinstance(info, dict):
            return
        history = info.get("history")
        if isinstance(history, list) and any(record.metric in h for h in history if isinstance(h, dict)):
            found.append((label, [h for h in history if isinstance(h, dict) and record.metric in h]))
        for i, part in enumerate(info.get("stages") or []):  # a multi-stage student, stage by stage
            name = part.get("stage") if isinstance(part, dict) else None
            visit(f"{label}/{name or i}", part)
        if isinstance(info.get("recover"), dict):  # recovery training after a compress step
            visit(f"{label}/recover", info["recover"])

    for stage in record.stages:
        visit(stage.name, stage.info)
    return found


def training_curves(record: RunRecord, path: Path) -> Path | None:
    """Plot every history's primary metric against training minutes; None when there is none."""
    lines = histories(record)
    if not lines:
        return None
    fig, ax = new_figure(7.5, 4.2)
    for label, history in lines:
        x = [float(h.get("elapsed_s", 0.0)) / 60 for h in history]
        y = [float(h[record.metric]) for h in history]
        style = {"color": TEACHER_COLOR, "linewidth": 2.2} if label == "teacher" else {"linewidth": 1.4}
        ax.plot(x, y, marker="o", markersize=3, label=label, **style)
    ax.set_xlabel("training time (minutes, evaluation excluded)")
    ax.set_ylabel(f"dev {record.metric}")
    ax.set_title(f"{record.task}: dev {record.metric} during training", fontsize=12, fontweight="bold", loc="left")
    ax.grid(True, **GRID)
    ax.legend(fontsize=8, frameon=False, loc="lower right")
    return save_figure(fig, path)
