"""Plots of a run's models side by side for a binary task: ROC curves, and the primary metric
against batch-1 latency with the TF-IDF floor.

Both read the :class:`RunRecord` only: a stage's curve is ``stage.info.roc``
(:class:`tinyplm.evaluate.roc.RocCurve`: ``fpr``, ``tpr``, ``auc``); the floor is the stage whose
shape has ``arch: tfidf_lr``. Stages that differ only by seed (``bilstm-kd-s1``, ``-s2``, ...:
:func:`plot_groups`) are drawn as one model: the metric's mean with the seeds' range as an error
bar, and the ROC curve of the median seed with the range of areas in the legend; sixteen labels
on top of each other are read by nobody. Drawn like the other report plots (explicit Agg canvas,
atomic PNG).
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from matplotlib import colormaps

from tinyplm.report.html import Section, figures_html
from tinyplm.report.plots import new_figure, save_figure
from tinyplm.report.records import RunRecord, StageKind, StageRecord
from tinyplm.report.tables import primary

FLOOR_ARCH = "tfidf_lr"
#: A stage name that ends in a seed (``bilstm-kd-s2``): the group is what comes before.
SEEDED = re.compile(r"^(?P<group>.+)-s(?P<seed>\d+)$")


@dataclass(frozen=True)
class PlotGroup:
    """Stages drawn as one model: the seeds of a seeded group (two or more), or a single stage."""

    name: str
    stages: tuple[StageRecord, ...]

    @property
    def label(self) -> str:
        first = self.stages[0]
        arch = (first.shape or {}).get("arch")
        name = self.name if arch is None or arch in self.name else f"{self.name} ({arch})"
        return f"{name}, {len(self.stages)} seeds" if len(self.stages) > 1 else name

    @property
    def teacher(self) -> bool:
        return any(s.kind is StageKind.TEACHER for s in self.stages)


def plot_groups(stages: list[StageRecord]) -> list[PlotGroup]:
    """``stages`` in order, those named ``<group>-s<N>`` gathered under ``<group>`` (at its first
    stage's place) when there are two or more of them; every other stage on its own."""
    by_name: dict[str, list[StageRecord]] = {}
    for s in stages:
        m = SEEDED.match(s.name)
        by_name.setdefault(m.group("group") if m else s.name, []).append(s)
    out = []
    for name, members in by_name.items():
        if len(members) > 1 and all(SEEDED.match(s.name) for s in members):
            out.append(PlotGroup(name, tuple(members)))
        else:
            out += [PlotGroup(s.name, (s,)) for s in members]
    return out


def floor_stage(record: RunRecord) -> StageRecord | None:
    """The TF-IDF + logistic-regression stage (the floor every row is compared with), if any."""
    return next((s for s in record.stages if (s.shape or {}).get("arch") == FLOOR_ARCH), None)


def roc_plot(record: RunRecord, path: Path) -> Path | None:
    """Every stage's ROC curve with its area in the legend, the chance diagonal dashed; None (and
    nothing written) when no stage has a curve."""
    stages = [s for s in record.stages if s.info.roc is not None]
    if not stages:
        return None
    fig, ax = new_figure(6.4, 5.6)
    colors = colormaps["tab10"]
    ax.plot([0, 1], [0, 1], linestyle="--", color="0.6", linewidth=1)
    def mean_auc(g: PlotGroup) -> float:
        return statistics.mean(s.info.roc.auc for s in g.stages)

    for i, g in enumerate(sorted(plot_groups(stages), key=lambda g: -mean_auc(g))):
        ranked = sorted(g.stages, key=lambda s: s.info.roc.auc)
        roc = ranked[(len(ranked) - 1) // 2].info.roc  # the median seed's curve
        low, high = ranked[0].info.roc.auc, ranked[-1].info.roc.auc
        area = f"AUC {low:.3f}" if len(ranked) == 1 else f"AUC {mean_auc(g):.3f} ({low:.3f}-{high:.3f})"
        ax.plot(roc.fpr, roc.tpr, color=colors(i % 10), linewidth=2.4 if g.teacher else 1.5,
                label=f"{g.label}: {area}")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.01)
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    split = stages[0].info.roc.split
    ax.set_title(f"{record.task}: ROC on {split}", fontsize=12, fontweight="bold", loc="left")
    ax.legend(loc="lower right", fontsize=8, frameon=False)
    return save_figure(fig, path)


def metric_latency_plot(record: RunRecord, path: Path) -> Path | None:
    """Primary metric (y) against batch-1 p50 latency (x, log scale), one labelled point per stage,
    marker area by MB on disk, the TF-IDF floor as a dashed line; None when no stage has both."""
    stages = [s for s in record.stages if s.latency_ms_p50_b1 > 0 and primary(record, s) is not None]
    if not stages:
        return None
    fig, ax = new_figure(7.5, 4.8)
    largest = max(s.disk_bytes for s in stages) or 1
    colors = colormaps["tab10"]
    labels = []
    for i, g in enumerate(plot_groups(stages)):
        values = [primary(record, s) or 0.0 for s in g.stages]  # each is defined: see ``stages``
        x, y = statistics.median(s.latency_ms_p50_b1 for s in g.stages), statistics.mean(values)
        size = statistics.mean(s.disk_bytes for s in g.stages)
        ax.scatter(x, y, s=30 + 400 * size / largest, alpha=0.75, color=colors(i % 10),
                   marker="*" if g.teacher else "o", edgecolor="white", zorder=3)
        if len(values) > 1:  # the seeds' range
            ax.errorbar(x, y, yerr=[[y - min(values)], [max(values) - y]], color=colors(i % 10), capsize=3,
                        linewidth=1, zorder=2)
        labels.append(ax.annotate(g.label, (x, y), xytext=(6, 4), textcoords="offset points", fontsize=8))
    floor = floor_stage(record)
    if floor is not None and (level := primary(record, floor)) is not None:
        ax.axhline(level, linestyle="--", color="0.5", linewidth=1)
        labels.append(ax.annotate("TF-IDF floor", (0.01, level),
                                  xycoords=("axes fraction", "data"), xytext=(0, -10), textcoords="offset points",
                                  fontsize=8, color="0.4"))
    ax.set_xscale("log")
    ax.margins(x=0.2)
    ax.set_xlabel("latency, batch 1, p50 (ms, log scale); marker area: MB on disk")
    ax.set_ylabel(f"{record.metric} (dev)")
    ax.set_title(f"{record.task}: {record.metric} per millisecond", fontsize=12, fontweight="bold", loc="left")
    _unstack(fig, labels)
    return save_figure(fig, path)


def spread_labels(boxes: list[tuple[float, float, float, float]], gap: float = 1.0) -> list[float]:
    """Vertical shifts that keep text boxes ``(x0, y0, x1, y1)`` (display units, y up) apart.

    Boxes are placed from the top down; one that overlaps a box already placed moves down until
    its top is ``gap`` below that box's bottom, so of labels at one spot the top one stays and the
    others stack under it. Boxes that overlap nothing keep shift 0."""
    placed: list[tuple[float, float, float, float]] = []
    shifts = [0.0] * len(boxes)
    for i in sorted(range(len(boxes)), key=lambda i: -boxes[i][3]):
        x0, y0, x1, y1 = boxes[i]
        dy, moved = 0.0, True
        while moved:  # dy only decreases, and each placed box can push at most once: this ends
            moved = False
            for a0, b0, a1, b1 in placed:
                if x0 < a1 and a0 < x1 and y0 + dy < b1 and b0 < y1 + dy:
                    dy, moved = b0 - gap - y1, True
        shifts[i] = dy
        placed.append((x0, y0 + dy, x1, y1 + dy))
    return shifts


def _unstack(fig, labels: list) -> None:
    """Move overlapping point labels apart (:func:`spread_labels`) once the layout is drawn: two
    models at nearly the same latency and metric otherwise print their names over each other.
    (``adjustText`` does this in general; one pass down the page is all these plots need.)"""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in labels]
    for t, dy in zip(labels, spread_labels([(b.x0, b.y0, b.x1, b.y1) for b in boxes]), strict=True):
        if dy:
            x, y = t.xyann
            t.xyann = (x, y + dy * 72.0 / fig.dpi)  # display pixels -> offset points


def roc_floor_plots(record: RunRecord, run_dir: Path) -> dict[str, Path]:
    """Both plots under ``run_dir/plots`` -> {"roc": path, "metric_vs_latency": path} (those drawn)."""
    made = {"roc": roc_plot(record, Path(run_dir) / "plots" / "roc.png"),
            "metric_vs_latency": metric_latency_plot(record, Path(run_dir) / "plots" / "metric_vs_latency.png")}
    return {k: v for k, v in made.items() if v is not None}


CAPTIONS = {
    "roc": "Dev ROC curve of every model, area under it in the legend (a model trained with several seeds: "
           "the median seed's curve, the mean area and its range); dashed: chance.",
    "metric_vs_latency": "Primary metric vs batch-1 p50 latency (log scale), marker area by MB on disk; "
                         "a model trained with several seeds is one point, their mean, with their range as a bar; "
                         "dashed: the TF-IDF + logistic-regression floor.",
}


def roc_section(record: RunRecord, run_dir: Path) -> Section | None:
    """The report.html part showing :func:`roc_floor_plots` for a run that has ROC curves (a binary
    task scored by ROC AUC) or a TF-IDF floor; None (nothing drawn) for any other run, whose
    accuracy-vs-latency plot already says the same."""
    if floor_stage(record) is None and not any(s.info.roc is not None for s in record.stages):
        return None
    plots = roc_floor_plots(record, run_dir)
    if not plots:
        return None
    return Section("ROC curves and the TF-IDF floor", figures_html(plots, CAPTIONS), plots)
