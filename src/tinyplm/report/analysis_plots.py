"""Pictures of what is inside the models: probe curves, head-statistic heatmaps, attention maps.

Drawn like the other report plots (explicit Agg canvas, atomic PNG; :mod:`tinyplm.report.plots`).
Each function reads the stored analysis (:class:`~tinyplm.evaluate.probe.ProbeReport`,
:class:`~tinyplm.evaluate.head_run.StageHeads`) only, never a model.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from tinyplm.evaluate.head_run import StageHeads
from tinyplm.evaluate.probe import ProbeReport
from tinyplm.report.plots import DPI, new_figure, save_figure

#: Titles of the head statistics, in panel order (those a stage lacks are left out).
STAT_TITLES: dict[str, str] = {
    "entropy": "entropy (nats)", "confidence": "mean max weight", "importance": "Taylor importance",
    "prev": "mass on previous token", "next": "mass on next token", "cls": "mass on [CLS]",
    "sep": "mass on [SEP]", "punct": "mass on punctuation", "rare": "mass on rarest token",
    "argmax_prev": "max on previous (share)", "argmax_next": "max on next (share)",
    "argmax_cls": "max on [CLS] (share)", "argmax_sep": "max on [SEP] (share)",
    "argmax_punct": "max on punctuation (share)", "argmax_rare": "max on rarest (share)",
}


def probe_plot(report: ProbeReport, path: Path) -> Path | None:
    """Accuracy per layer of every stored model (solid), its random-encoder control (dashed, same
    colour) and the majority class (grey dotted); None (nothing written) without curves."""
    if not report.curves:
        return None
    fig, ax = new_figure(7.0, 4.6)
    colors = colormaps["tab10"]
    for i, curve in enumerate(report.curves):
        x = np.arange(len(curve.accuracy))
        ax.plot(x, curve.accuracy, marker="o", color=colors(i % 10), label=curve.name)
        if curve.control is not None:
            ax.plot(x, curve.control, linestyle="--", marker=".", color=colors(i % 10), alpha=0.6,
                    label=f"{curve.name}: random encoder")
    majority = max(c.majority for c in report.curves)
    ax.axhline(majority, color="0.5", linestyle=":", linewidth=1.2, label=f"majority class ({majority:.3f})")
    top = max(len(c.accuracy) for c in report.curves)
    ax.set_xticks(range(top), ["emb", *(str(k) for k in range(1, top))])
    ax.set_xlabel("layer (emb = embedding output)")
    ax.set_ylabel("dev accuracy of a linear probe")
    ax.set_title(f"Probing {report.task}: {report.description}", fontsize=10)
    ax.legend(fontsize=7, loc="lower right", ncol=2 if len(report.curves) > 3 else 1)
    return save_figure(fig, path)


def _grid(stage: StageHeads, values: list[list[float]]) -> tuple[np.ndarray, np.ndarray]:
    """(layers, heads) values on the original head grid, NaN where pruning removed a head, and
    the bool mask of removed heads (all False for an unpruned stage)."""
    widths = stage.original_heads or stage.heads_per_layer
    grid = np.full((len(widths), max(widths) if widths else 0), np.nan)
    removed = np.zeros_like(grid, dtype=bool)
    for layer, row in enumerate(values):
        cols = stage.original[layer] if stage.original else list(range(len(row)))
        grid[layer, cols] = row
        if stage.original:
            removed[layer, : widths[layer]] = True
            removed[layer, cols] = False
    return grid, removed


def heatmaps_plot(stage: StageHeads, path: Path) -> Path:
    """One heatmap (layer x head) per statistic of ``stage``; heads pruning removed are grey with
    a cross, and the title says so."""
    stats = [s for s in STAT_TITLES if s in stage.stats]
    cols = 4
    rows = -(-len(stats) // cols)
    layers = len(stage.heads_per_layer)
    fig = Figure(figsize=(13, 0.5 + rows * (0.45 * layers + 1.1)), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    cmap = colormaps["viridis"].with_extremes(bad="#dddddd")
    for k, stat in enumerate(stats):
        ax = fig.add_subplot(rows, cols, k + 1)
        grid, removed = _grid(stage, stage.stats[stat])
        image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, aspect="auto", interpolation="nearest")
        ys, xs = np.nonzero(removed)
        ax.scatter(xs, ys, marker="x", color="#b3261e", s=18, linewidths=1)
        ax.set_title(STAT_TITLES[stat], fontsize=9)
        ax.set_yticks(range(layers), [str(i + 1) for i in range(layers)], fontsize=7)
        ax.set_xticks(range(grid.shape[1]), [str(i) for i in range(grid.shape[1])], fontsize=6)
        ax.set_xlabel("head", fontsize=7)
        ax.set_ylabel("layer", fontsize=7)
        fig.colorbar(image, ax=ax, shrink=0.8).ax.tick_params(labelsize=6)
    pruned = " (x: removed by head pruning)" if stage.original else ""
    fig.suptitle(f"{stage.name}: head statistics over {stage.sentences} dev sentences{pruned}", fontsize=11)
    return save_figure(fig, path)


def attention_plot(stage: StageHeads, path: Path) -> Path | None:
    """The attention maps of the stage's chosen heads on its example sentence (rows: queries,
    columns: keys); None when it has no example."""
    example = stage.example
    if example is None or not example.maps:
        return None
    n = len(example.maps)
    cols = min(3, n)
    rows = -(-n // cols)
    size = max(3.2, 0.2 * len(example.tokens) + 1.5)
    fig = Figure(figsize=(cols * size, rows * size + 0.4), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    ticks = range(len(example.tokens))
    for k, m in enumerate(example.maps):
        ax = fig.add_subplot(rows, cols, k + 1)
        ax.imshow(np.asarray(m["weights"]), cmap="Blues", vmin=0, vmax=1, interpolation="nearest")
        head = m["head"]
        if stage.original:
            head = f"{m['head']} (was {stage.original[m['layer']][m['head']]})"
        ax.set_title(f"layer {m['layer'] + 1} head {head}: {m['why']}", fontsize=8)
        ax.set_xticks(ticks, example.tokens, rotation=90, fontsize=6)
        ax.set_yticks(ticks, example.tokens, fontsize=6)
        ax.grid(False)
    fig.suptitle(f"{stage.name}: attention on dev sentence {example.sentence} (row: query, column: key)",
                 fontsize=10)
    return save_figure(fig, path)

