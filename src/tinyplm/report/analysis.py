"""The "Looking inside" part of a report: stored layer probes and head statistics, as plots and text.

``tinyplm probe`` / ``tinyplm heads`` store their results in ``BASE/analysis/probe-<task>.json`` and
``BASE/analysis/heads-<task>.json`` (BASE: the run dir, or the output folder of one model dir).
:func:`analysis_section` draws them into ``BASE/plots/analysis/`` and returns a report
:class:`~tinyplm.report.html.Section`; a run's report.html shows it, and
:func:`write_analysis_page` makes ``BASE/analysis.html`` for a lone model dir.
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path

from tinyplm.errors import TinyplmError
from tinyplm.evaluate.head_run import HeadsReport, StageHeads
from tinyplm.evaluate.heads import THRESHOLD
from tinyplm.evaluate.probe import ProbeReport
from tinyplm.files import write_atomic
from tinyplm.report.analysis_plots import attention_plot, heatmaps_plot, probe_plot
from tinyplm.report.html import Section, figures_html, page

ANALYSIS = "analysis"
KINDS = ("probe", "heads")
TITLE = "Looking inside: layer probes and attention heads"


def analysis_path(base: Path, kind: str, task: str) -> Path:
    """``base/analysis/<kind>-<task>.json``; ``ValueError`` for a kind other than probe/heads."""
    if kind not in KINDS:
        raise ValueError(f"analysis kind must be one of {KINDS}, got {kind!r}")
    return Path(base) / ANALYSIS / f"{kind}-{task}.json"


def _read(path: Path, parse):
    try:
        return parse(json.loads(Path(path).read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, ValueError, TypeError) as exc:
        raise TinyplmError(f"{path}: cannot be read as a stored analysis ({exc}); delete it or rerun "
                           "tinyplm probe / tinyplm heads") from exc


def read_probe(path: Path) -> ProbeReport:
    """A stored probe report; ``TinyplmError`` naming the file when it is not one."""
    return _read(path, ProbeReport.from_dict)


def read_heads(path: Path) -> HeadsReport:
    """A stored head analysis; ``TinyplmError`` naming the file when it is not one."""
    return _read(path, HeadsReport.from_dict)


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)


def probe_table(report: ProbeReport) -> str:
    """Per model: best layer, its accuracy, its random-encoder control, selectivity, majority class."""
    rows = []
    for c in report.curves:
        best = c.best_layer
        ctl = c.control[best] if c.control is not None else None
        cells = [c.name, "emb" if best == 0 else str(best), f"{c.accuracy[best]:.4f}",
                 "—" if ctl is None else f"{ctl:.4f}",
                 "—" if ctl is None else f"{100 * (c.accuracy[best] - ctl):+.1f}",
                 f"{c.majority:.4f}", f"{c.train_items} / {c.dev_items}"]
        rows.append("<tr>" + "".join(f"<td>{escape(x)}</td>" for x in cells) + "</tr>")
    head = ("<th>model</th><th>best layer</th><th>probe accuracy</th><th>random encoder</th>"
            "<th>selectivity (points)</th><th>majority class</th><th>train / dev items</th>")
    return (f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody>'
            "</table></div>")


def positional_text(stage: StageHeads, threshold: float) -> str:
    """The heads meeting Voita et al.'s positional rule (and the other argmax rules), in words;
    layers counted from 1, heads by their index in the model (and before pruning, when pruned)."""
    def name(p) -> str:
        return f"{stage.head_name(p.layer, p.head)} {p.share:.0%}"
    found = stage.patterns(threshold)
    positional = [f"{name(p)} {p.kind}" for p in found if p.kind in ("prev", "next")]
    line = (f"Positional heads (≥ {threshold:.0%} of queries put their maximum on the previous or next "
            f"token): {', '.join(positional) or 'none'}.")
    others = [f"{name(p)} {p.kind}" for p in found if p.kind not in ("prev", "next")]
    if others:
        line += f" Heads whose maximum lands on one kind of token: {', '.join(others)}."
    return line


def _probe_part(base: Path, plot_dir: Path) -> tuple[list[str], dict[str, Path]]:
    parts, plots = [], {}
    for path in sorted((base / ANALYSIS).glob("probe-*.json")):
        report = read_probe(path)
        png = probe_plot(report, plot_dir / f"probe-{_safe(report.task)}.png")
        if png is None:
            continue
        key = f"probe:{report.task}"
        plots[key] = png
        caption = (f"Linear probe per layer on {report.task} (solid), the same probe on a randomly "
                   "initialised encoder of the same shape (dashed), majority class (dotted).")
        parts += [f"<h3>Probe: {escape(report.task)}</h3>", figures_html({key: png}, {key: caption}),
                  probe_table(report)]
    return parts, plots


def _heads_part(base: Path, plot_dir: Path) -> tuple[list[str], dict[str, Path]]:
    parts, plots = [], {}
    for path in sorted((base / ANALYSIS).glob("heads-*.json")):
        report = read_heads(path)
        parts.append(f"<h3>Attention heads: {escape(report.task)}</h3>")
        for stage in report.stages:
            stem = f"heads-{_safe(report.task)}-{_safe(stage.name)}"
            shown = {f"heatmaps:{stage.name}": heatmaps_plot(stage, plot_dir / f"{stem}.png")}
            maps = attention_plot(stage, plot_dir / f"{stem}-maps.png")
            if maps is not None:
                shown[f"maps:{stage.name}"] = maps
            plots.update(shown)
            notes = [positional_text(stage, report.threshold or THRESHOLD)]
            if stage.importance_note:
                notes.append(f"No importance: {stage.importance_note}.")
            if stage.original:
                removed = sum(o - len(k) for o, k in zip(stage.original_heads or [], stage.original, strict=False))
                notes.append(f"{removed} head(s) removed by pruning are crossed out.")
            what = {"heatmaps": "statistics per layer and head", "maps": "attention maps of chosen heads"}
            captions = {k: f"{stage.name}: {what[k.split(':')[0]]}" for k in shown}
            parts += [f"<h4>{escape(stage.name)}</h4>",
                      "".join(f'<p class="note">{escape(n)}</p>' for n in notes), figures_html(shown, captions)]
    return parts, plots


def analysis_section(base: Path) -> Section | None:
    """The section showing every analysis stored under ``base/analysis`` (plots written to
    ``base/plots/analysis``); None when nothing is stored. Raises ``TinyplmError`` naming a
    stored file that cannot be read."""
    base = Path(base)
    if not (base / ANALYSIS).is_dir():
        return None
    plot_dir = base / "plots" / ANALYSIS
    probe_parts, probe_plots = _probe_part(base, plot_dir)
    head_parts, head_plots = _heads_part(base, plot_dir)
    if not probe_parts and not head_parts:
        return None
    intro = ('<p class="note">Made by <code>tinyplm probe</code> and <code>tinyplm heads</code>; the '
             "models are frozen. Layers count from 1 (emb: the embedding output), heads from 0.</p>")
    return Section(TITLE, "\n".join([intro, *probe_parts, *head_parts]), {**probe_plots, **head_plots})


def write_analysis_page(base: Path) -> Path:
    """``base/analysis.html``: the analysis section of a lone model dir as its own page."""
    section = analysis_section(base)
    body = section.body if section is not None else '<p class="note">No analysis stored.</p>'
    return write_atomic(Path(base) / "analysis.html", page(TITLE, f"<h1>{escape(TITLE)}</h1>\n{body}"))
