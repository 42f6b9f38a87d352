"""Plots of a run's models side by side for a binary task: ROC curves, and the primary metric
against batch-1 latency with the TF-IDF floor.

Both read the :class:`RunRecord` only: a stage's curve is ``stage.info["roc"]``
(:func:`tinyplm.evaluate.roc.model_roc`: ``fpr``, ``tpr``, ``auc``); the floor is the stage whose
shape has ``arch: tfidf_lr``. Drawn like the other report plots (explicit Agg canvas, atomic PNG).
"""

from __future__ import annotations

from pathlib import Path

from matplotlib import colormaps

from tinyplm.report.html import Section, figures_html
from tinyplm.report.plots import _new_figure, _save
from tinyplm.report.records import RunRecord, StageKind, StageRecord

FLOOR_ARCH = "tfidf_lr"


def _label(stage: StageRecord) -> str:
    arch = (stage.shape or {}).get("arch")
    return f"{stage.name} ({arch})" if arch and arch not in stage.name else stage.name


def floor_stage(record: RunRecord) -> StageRecord | None:
    """The TF-IDF + logistic-regression stage (the floor every row is compared with), if any."""
    return next((s for s in record.stages if (s.shape or {}).get("arch") == FLOOR_ARCH), None)


def roc_plot(record: RunRecord, path: Path) -> Path | None:
    """Every stage's ROC curve with its area in the legend, the chance diagonal dashed; None (and
    nothing written) when no stage has a curve."""
    stages = [s for s in record.stages if (s.info or {}).get("roc")]
    if not stages:
        return None
    fig, ax = _new_figure(6.4, 5.6)
    colors = colormaps["tab10"]
    ax.plot([0, 1], [0, 1], linestyle="--", color="0.6", linewidth=1)
    for i, s in enumerate(sorted(stages, key=lambda s: -s.info["roc"]["auc"])):
        roc = s.info["roc"]
        teacher = s.kind is StageKind.TEACHER
        ax.plot(roc["fpr"], roc["tpr"], color=colors(i % 10), linewidth=2.4 if teacher else 1.5,
                label=f"{_label(s)}: AUC {roc['auc']:.3f}")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.01)
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    split = stages[0].info["roc"].get("split", "dev")
    ax.set_title(f"{record.task}: ROC on {split}", fontsize=12, fontweight="bold", loc="left")
    ax.legend(loc="lower right", fontsize=8, frameon=False)
    return _save(fig, path)


def metric_latency_plot(record: RunRecord, path: Path) -> Path | None:
    """Primary metric (y) against batch-1 p50 latency (x, log scale), one labelled point per stage,
    marker area by MB on disk, the TF-IDF floor as a dashed line; None when no stage has both."""
    stages = [s for s in record.stages if s.latency_ms_p50_b1 > 0 and record.metric in s.metrics]
    if not stages:
        return None
    fig, ax = _new_figure(7.5, 4.8)
    largest = max(s.disk_bytes for s in stages) or 1
    for s in stages:
        value = s.metrics[record.metric]
        ax.scatter(s.latency_ms_p50_b1, value, s=30 + 400 * s.disk_bytes / largest, alpha=0.75,
                   marker="*" if s.kind is StageKind.TEACHER else "o", edgecolor="white", zorder=3)
        ax.annotate(_label(s), (s.latency_ms_p50_b1, value), xytext=(6, 4), textcoords="offset points", fontsize=8)
    floor = floor_stage(record)
    if floor is not None and record.metric in floor.metrics:
        ax.axhline(floor.metrics[record.metric], linestyle="--", color="0.5", linewidth=1)
        ax.annotate("TF-IDF floor", (0.01, floor.metrics[record.metric]), xycoords=("axes fraction", "data"),
                    xytext=(0, -10), textcoords="offset points", fontsize=8, color="0.4")
    ax.set_xscale("log")
    ax.margins(x=0.2)
    ax.set_xlabel("latency, batch 1, p50 (ms, log scale); marker area: MB on disk")
    ax.set_ylabel(f"{record.metric} (dev)")
    ax.set_title(f"{record.task}: {record.metric} per millisecond", fontsize=12, fontweight="bold", loc="left")
    return _save(fig, path)


def family_plots(record: RunRecord, run_dir: Path) -> dict[str, Path]:
    """Both plots under ``run_dir/plots`` -> {"roc": path, "metric_vs_latency": path} (those drawn)."""
    made = {"roc": roc_plot(record, Path(run_dir) / "plots" / "roc.png"),
            "metric_vs_latency": metric_latency_plot(record, Path(run_dir) / "plots" / "metric_vs_latency.png")}
    return {k: v for k, v in made.items() if v is not None}


CAPTIONS = {
    "roc": "Dev ROC curve of every model, area under it in the legend; dashed: chance.",
    "metric_vs_latency": "Primary metric vs batch-1 p50 latency (log scale), marker area by MB on disk; "
                         "dashed: the TF-IDF + logistic-regression floor.",
}


def roc_section(record: RunRecord, run_dir: Path) -> Section | None:
    """The report.html part showing :func:`family_plots` for a run that has ROC curves (a binary
    task scored by ROC AUC) or a TF-IDF floor; None (nothing drawn) for any other run, whose
    accuracy-vs-latency plot already says the same."""
    if floor_stage(record) is None and not any((s.info or {}).get("roc") for s in record.stages):
        return None
    plots = family_plots(record, run_dir)
    if not plots:
        return None
    return Section("ROC curves and the TF-IDF floor", figures_html(plots, CAPTIONS), plots)
