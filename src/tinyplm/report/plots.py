"""Report plots: primary metric vs batch-1 latency, and batch-32 throughput per stage.

Figures are drawn with matplotlib's object API on an explicit Agg canvas (``FigureCanvasAgg``),
so no display is needed, the global pyplot backend and figure registry are never touched, and a
figure is freed as soon as the function returns. PNGs are written atomically.
"""

from __future__ import annotations

import os
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from tinyplm.files import tmp_sibling
from tinyplm.report.records import RunRecord
from tinyplm.report.tables import RETENTION_TARGET, StageRow, final_stage, primary, stage_rows

DPI = 120
TEACHER_COLOR = "#d1495b"
BEST_COLOR = "#2a9d8f"
STUDENT_COLOR = "#3d5a80"
GRID = {"alpha": 0.3, "linestyle": ":", "linewidth": 0.8}


def new_figure(width: float, height: float) -> tuple[Figure, Axes]:
    """A figure on an Agg canvas with one axes, top/right spines hidden."""
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(True, **GRID)
    ax.set_axisbelow(True)
    return fig, ax


def save_figure(fig: Figure, path: Path) -> Path:
    """Write ``fig`` as PNG to ``path`` atomically (parent created); returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = tmp_sibling(path)
    try:
        fig.savefig(tmp, format="png", dpi=DPI, facecolor="white")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
        fig.clear()
    return path


def _color(row: StageRow, best_name: str | None) -> str:
    """Teacher red, best student teal, other students blue."""
    if row.is_teacher:
        return TEACHER_COLOR
    return BEST_COLOR if row.name == best_name else STUDENT_COLOR


def _empty(ax: Axes, what: str) -> None:
    """Say on the axes that there is nothing to plot."""
    ax.text(0.5, 0.5, f"no {what} measured", ha="center", va="center", transform=ax.transAxes,
            color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def _target_line(ax: Axes, record: RunRecord, values: list[float]) -> None:
    """Dashed line at 97% of the teacher's metric, labelled; y-limits widened to show it."""
    teacher = record.teacher
    t_value = primary(record, teacher) if teacher else None
    if t_value is None:
        return
    level = t_value * RETENTION_TARGET / 100
    ax.axhline(level, linestyle="--", color="0.45", linewidth=1.1, zorder=1)
    ax.text(0.99, level, f"{RETENTION_TARGET:.0f}% of teacher", transform=ax.get_yaxis_transform(),
            ha="right", va="bottom", fontsize=8.5, color="0.35")
    lo, hi = min([*values, level]), max([*values, level])
    pad = (hi - lo) * 0.15 or abs(hi) * 0.02 or 0.01
    ax.set_ylim(lo - pad, hi + pad)


def accuracy_vs_latency(record: RunRecord, path: Path) -> Path:
    """Scatter of primary metric (y) against batch-1 p50 latency in ms (x), one labelled point per
    stage; the teacher is a red star, the best student teal; a dashed line marks 97% of the
    teacher. The x axis is logarithmic when latencies span more than 10x. Stages without a
    latency or the primary metric are left out. Writes a PNG to ``path`` and returns it.
    """
    fig, ax = new_figure(7.5, 4.8)
    best = final_stage(record)
    best_name = best.name if best else None
    rows = [r for r in stage_rows(record) if r.latency_p50_ms > 0 and r.metric is not None]
    title = f"{record.task}: {record.metric} vs latency"
    ax.set_title(title, fontsize=12, fontweight="bold", loc="left")
    if not rows:
        _empty(ax, "latency")
        return save_figure(fig, path)
    rightmost = max(r.latency_p50_ms for r in rows)
    for row in rows:
        teacher = row.is_teacher
        flip = len(rows) > 1 and row.latency_p50_ms == rightmost  # keep the label inside
        ax.scatter(row.latency_p50_ms, row.metric, s=190 if teacher else 70,
                   marker="*" if teacher else "o", color=_color(row, best_name),
                   edgecolor="white", linewidth=0.8, zorder=3)
        ax.annotate(row.name, (row.latency_p50_ms, row.metric),
                    xytext=(-7 if flip else 7, 5), textcoords="offset points", fontsize=8.5,
                    color="0.15", ha="right" if flip else "left",
                    fontweight="bold" if teacher or row.name == best_name else "normal")
    if rightmost / min(r.latency_p50_ms for r in rows) > 10:
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.margins(x=0.18)
    _target_line(ax, record, [r.metric for r in rows])
    ax.set_xlabel("Latency, batch 1, p50 (ms) — lower is better")
    ax.set_ylabel(f"{record.metric} (dev) — higher is better")
    ax.legend(handles=_legend_handles(rows, best_name), loc="lower right", ncols=3, fontsize=8.5,
              frameon=False, bbox_to_anchor=(1.0, 1.0), borderaxespad=0.2, handletextpad=0.3)
    return save_figure(fig, path)


def _legend_handles(rows: list[StageRow], best_name: str | None) -> list[Line2D]:
    """Legend entries for the kinds of point present (teacher, best student, students)."""
    kinds = [("teacher", "*", TEACHER_COLOR, 13, any(r.is_teacher for r in rows)),
             ("final model", "o", BEST_COLOR, 8, any(r.name == best_name for r in rows)),
             ("student", "o", STUDENT_COLOR, 8,
              any(not r.is_teacher and r.name != best_name for r in rows))]
    return [Line2D([], [], marker=m, color=c, linestyle="", markersize=s, label=label)
            for label, m, c, s, present in kinds if present]


def throughput_bar(record: RunRecord, path: Path) -> Path:
    """Bar chart of batch-32 throughput (sentences/s) per stage, each bar labelled with its
    throughput and its speed-up over the teacher (when there is one). Writes a PNG and returns it.
    """
    rows = stage_rows(record)
    fig, ax = new_figure(max(6.0, 1.15 * len(rows) + 2.5), 4.6)
    ax.grid(False, axis="x")
    ax.set_title(f"{record.task}: throughput at batch 32", fontsize=12, fontweight="bold",
                 loc="left")
    if not rows or all(r.throughput <= 0 for r in rows):
        _empty(ax, "throughput")
        return save_figure(fig, path)
    best = final_stage(record)
    best_name = best.name if best else None
    names = [r.name for r in rows]
    values = [r.throughput for r in rows]
    bars = ax.bar(range(len(rows)), values, color=[_color(r, best_name) for r in rows], width=0.62)
    for bar, row in zip(bars, rows, strict=True):
        label = f"{row.throughput:,.0f}/s"
        if row.speedup is not None and not row.is_teacher:
            label += f"\n{row.speedup:.1f}×"
        ax.annotate(label, (bar.get_x() + bar.get_width() / 2, bar.get_height()), xytext=(0, 3),
                    textcoords="offset points", ha="center", va="bottom", fontsize=8.5)
    ax.set_xticks(range(len(rows)), names, rotation=20 if len(rows) > 3 else 0,
                  ha="right" if len(rows) > 3 else "center", fontsize=9)
    ax.set_ylim(0, max(values) * 1.2)
    ax.set_ylabel("Throughput, batch 32 (sentences/s)")
    return save_figure(fig, path)
