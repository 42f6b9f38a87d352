"""report.html: one self-contained page (inline CSS, plots as base64 data URIs, no external links).

Every piece of text that comes from the record (stage names, info values, metric names) passes
through :func:`html.escape`.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

from tinyplm import __version__
from tinyplm.report.info import StageInfo
from tinyplm.report.notes import compression_notes, cut_notes
from tinyplm.report.records import RunRecord, StageRecord
from tinyplm.report.tables import (
    RETENTION_TARGET,
    below_target,
    column_note,
    final_stage,
    fmt_metric,
    fmt_num,
    fmt_seconds,
    headline,
    stage_rows,
    table_cells,
    table_header,
)

CSS = """
:root { --ink:#1d2430; --muted:#5b6472; --line:#e3e6eb; --best:#e3f4f1; --low:#b3261e;
        --teacher:#fbeff1; --accent:#2a9d8f; }
* { box-sizing: border-box; }
body { font: 15px/1.5 -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif;
       color: var(--ink); margin: 0; background: #f6f7f9; }
main { max-width: 1100px; margin: 0 auto; padding: 28px 24px 48px; background: #fff;
       min-height: 100vh; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 34px 0 10px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
.sub { color: var(--muted); margin: 0 0 18px; }
.headline { font-size: 18px; background: #f1f8f7; border-left: 4px solid var(--accent);
            padding: 12px 16px; margin: 0 0 8px; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; font-size: 14px; }
th, td { padding: 7px 10px; border-bottom: 1px solid var(--line); text-align: right; white-space: nowrap; }
th { background: #f3f4f6; font-weight: 600; }
th:first-child, td:first-child { text-align: left; }
tr.teacher td { background: var(--teacher); }
tr.best td { background: var(--best); font-weight: 600; }
td.low { color: var(--low); font-weight: 700; }
.note { color: var(--muted); font-size: 13px; margin: 8px 0 0; }
.tag { display: inline-block; font-size: 11px; font-weight: 600; padding: 1px 6px; margin-left: 6px;
       border-radius: 8px; background: var(--accent); color: #fff; vertical-align: middle; }
.tag.t { background: #d1495b; }
.plots { display: flex; flex-wrap: wrap; gap: 18px; }
figure { margin: 0; flex: 1 1 460px; }
figure img { width: 100%; height: auto; border: 1px solid var(--line); border-radius: 6px; }
figcaption { color: var(--muted); font-size: 13px; margin-top: 4px; }
details { border: 1px solid var(--line); border-radius: 6px; padding: 8px 14px; margin: 8px 0; }
summary { cursor: pointer; font-weight: 600; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 4px 18px; margin: 10px 0 4px; }
dt { color: var(--muted); }
dd { margin: 0; overflow-wrap: anywhere; }
footer { color: var(--muted); font-size: 12px; margin-top: 40px; }
"""

PLOT_CAPTIONS = {
    "accuracy_vs_latency": "Primary metric vs batch-1 p50 latency; dashed line: 97% of teacher.",
    "throughput": "Batch throughput per stage, with speed-up over the teacher.",
    "training": "Dev metric over training time, one line per trained stage (and recovery).",
}


def fmt_value(value: Any) -> str:
    """Plain text for an info value: dicts as ``k=v, ...``, lists comma-joined, floats short."""
    if isinstance(value, dict):
        return ", ".join(f"{k}={fmt_value(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(fmt_value(v) for v in value)
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def fmt_shape(shape: Any) -> str:
    """``{"layers": 4, "hidden": 312, "heads": 12, "ffn": 1200}`` -> "4 layers, hidden 312, ..."."""
    if not isinstance(shape, dict):
        return fmt_value(shape)
    labels = {"layers": "{} layers", "hidden": "hidden {}", "heads": "{} heads", "ffn": "FFN {}"}
    parts = [labels[k].format(fmt_value(v)) for k, v in shape.items() if k in labels]
    parts += [f"{k} {fmt_value(v)}" for k, v in shape.items() if k not in labels]
    return ", ".join(parts)


def _dl(items: list[tuple[str, str]]) -> str:
    """A definition list of (label, plain text) pairs, both escaped."""
    body = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in items)
    return f"<dl>{body}</dl>"


def _table(record: RunRecord) -> str:
    """The comparison table: best student row highlighted, low retention marked."""
    best = final_stage(record)
    header = table_header(record)
    ret_idx = header.index("Retention")
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = []
    for row in stage_rows(record):
        cells = [escape(c) for c in table_cells(record, row)]
        classes = ["" for _ in cells]
        if row.is_teacher:
            cells[0] += '<span class="tag t">reference</span>'
        elif best is not None and row.name == best.name:
            cells[0] += '<span class="tag">best</span>'
        if below_target(row):
            cells[ret_idx] += " ⚠"
            classes[ret_idx] = ' class="low"'
            tip = f"below {RETENTION_TARGET:.0f}% of teacher"
            cells[ret_idx] = f'<span title="{tip}">{cells[ret_idx]}</span>'
        tr = "teacher" if row.is_teacher else "best" if best and row.name == best.name else ""
        tds = "".join(f"<td{c}>{v}</td>" for c, v in zip(classes, cells, strict=True))
        body.append(f'<tr class="{tr}">{tds}</tr>' if tr else f"<tr>{tds}</tr>")
    note = (f"Highlighted row: the final model (the best student when the run names none). Retention = stage "
            f"{escape(record.metric)} / teacher {escape(record.metric)}; values below {RETENTION_TARGET:.0f}% "
            "are marked ⚠ in red. "
            f"{escape(column_note(record))}")
    return (f'<div class="scroll"><table><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></div><p class="note">{note}</p>')


@dataclass
class Section:
    """An optional part of the page after the plots: a ``title`` (an <h2>), its ``body`` (HTML,
    already escaped by its maker) and the PNGs it made (name -> path; embedded by the maker with
    :func:`figures_html`, listed here so ``write_all`` reports them)."""

    title: str
    body: str
    plots: dict[str, Path] = field(default_factory=dict)


def figures_html(plots: dict[str, Path], captions: dict[str, str] | None = None) -> str:
    """Each existing PNG as a <figure> with a base64 data URI and its caption (``captions``, else
    :data:`PLOT_CAPTIONS`, else the name); missing files are skipped; "" when none exists."""
    figures = []
    for name, path in plots.items():
        path = Path(path)
        if not path.is_file():
            continue
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        caption = (captions or {}).get(name) or PLOT_CAPTIONS.get(name, name.replace("_", " "))
        figures.append(f'<figure><img src="data:image/png;base64,{data}" alt="{escape(name)}">'
                       f"<figcaption>{escape(caption)}</figcaption></figure>")
    return f'<div class="plots">{"".join(figures)}</div>' if figures else ""


def _plots(plots: dict[str, Path]) -> str:
    """The run's plots, or a note that none was made."""
    return figures_html(plots) or '<p class="note">No plots were made.</p>'


def stage_details(stage: StageRecord) -> list[tuple[str, str]]:
    """(label, text) pairs describing one stage: shape, init, training time, metrics, then how it
    was made (:func:`info_fields`)."""
    info, training = stage.info, stage.info.training
    metrics = ", ".join(f"{k} {fmt_metric(v)}" for k, v in stage.metrics.items())
    items = [("metrics", metrics or "—")]
    if stage.shape:
        items.append(("shape", fmt_shape(stage.shape)))
    if stage.parent:
        items.append(("made from", stage.parent + (f" by {stage.compress_step}" if stage.compress_step else "")))
    if info.init:
        items.append(("init", info.init))
    if len(training) == 1 and training[0].train_seconds is not None:
        items.append(("training time", fmt_seconds(training[0].train_seconds)))
    items += [
        ("params", f"{fmt_num(stage.params / 1e6, 2)} M "
                   f"({fmt_num(stage.params_no_embeddings / 1e6, 2)} M without embeddings)"),
        ("size on disk", f"{fmt_num(stage.disk_bytes / 1e6, 1)} MB"),
    ]
    items += [(k.replace("_", " "), fmt_value(_without_history(v))) for k, v in info_fields(info).items()]
    return items


def info_fields(info: StageInfo) -> dict[str, Any]:
    """A stage's info as one flat list of facts for the page: its one training stage's fields
    (several: ``stages``), its classic-model facts, its compress step's fields and what the step
    reported, and the rest; ``init`` and a single training time are shown above, the training
    history is drawn in the training plot, and a ROC curve is its area."""
    flat = info.to_dict()
    flat.pop("init", None)
    source = {"source": flat.pop("source")} if "source" in flat else {}
    training = flat.pop("training", [])
    if len(training) == 1:
        training[0].pop("train_seconds", None)
        flat = {**training[0], **flat}
    elif training:
        flat["stages"] = training
    compress = flat.pop("compress", {})
    compress.update(compress.pop("details", {}))
    if "agreement" in compress:
        compress["agreement_with_parent"] = compress.pop("agreement")
    flat = {**source, **compress, **flat.pop("classic", {}), **flat}
    if info.roc is not None:
        flat["roc"] = f"AUC {info.roc.auc:.4f} on {info.roc.split}"
    flat.pop("history", None)
    return flat


def _without_history(value: Any) -> Any:
    """``value`` with every nested ``history`` list left out (it is drawn in the training plot)."""
    if isinstance(value, dict):
        return {k: _without_history(v) for k, v in value.items() if k != "history"}
    if isinstance(value, list):
        return [_without_history(v) for v in value]
    return value


def _details(record: RunRecord) -> str:
    """One collapsible block per stage."""
    blocks = [f"<details open><summary>{escape(s.name)}</summary>{_dl(stage_details(s))}</details>"
              for s in record.stages]
    return "".join(blocks) or '<p class="note">No stages.</p>'


def run_details(record: RunRecord) -> list[tuple[str, str]]:
    """(label, text) pairs about the run: name, benchmark, date, machine, torch, precision, the rest."""
    info = record.info.to_dict()
    machine = info.pop("machine", {})
    items = [("task", record.task), ("primary metric", record.metric)]
    if "run_name" in info:
        items.append(("run name", fmt_value(info.pop("run_name"))))
    benchmark = info.pop("benchmark", {})
    items += [(k if k != "name" else "benchmark", fmt_value(v)) for k, v in benchmark.items()]
    if "created" in info:
        items.append(("date", fmt_value(info.pop("created"))))
    for key in ("cpu", "threads", "torch"):
        if key in machine:
            items.append((key if key != "cpu" else "machine", fmt_value(machine.pop(key))))
    if "precision" in info:
        items.append(("precision", fmt_value(info.pop("precision"))))
    items += [(str(k).replace("_", " "), fmt_value(v)) for k, v in machine.items()]
    items += [(str(k).replace("_", " "), fmt_value(v)) for k, v in info.items()]
    return items


def page(title: str, body: str) -> str:
    """A complete, self-contained HTML page around ``body`` (``title`` is escaped here)."""
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{escape(title)}</title>\n<style>{CSS}</style>\n</head>\n"
            f"<body>\n<main>\n{body}\n</main>\n</body>\n</html>\n")


def render_html(record: RunRecord, plots: dict[str, Path], sections: Sequence[Section] = ()) -> str:
    """The full report page as a string.

    ``plots`` maps a plot name (``accuracy_vs_latency``, ``throughput``) to a PNG path; each
    existing file is embedded inline, so the page needs no other file. ``sections`` (optional
    parts such as the analysis of layers and heads) follow the plots, in order.
    """
    name = record.info.run_name or record.task
    title = f"tinyplm report — {name}"
    parts = [
        f"<h1>{escape(title)}</h1>",
        f'<p class="sub">Task <b>{escape(record.task)}</b> · primary metric '
        f"<b>{escape(record.metric)}</b> · {len(record.stages)} stage(s)</p>",
        f'<p class="headline">{escape(headline(record))}</p>',
        "<h2>Comparison</h2>", _table(record),
        *(f'<p class="note">⚠ {escape(n)}</p>' for n in cut_notes(record)),
        *(["<h2>Compression</h2>",
           "<ul>" + "".join(f"<li>{escape(n)}</li>" for n in compression_notes(record)) + "</ul>"]
          if compression_notes(record) else []),
        "<h2>Plots</h2>", _plots(plots),
        *(part for sec in sections for part in (f"<h2>{escape(sec.title)}</h2>", sec.body)),
        "<h2>Stages</h2>", _details(record),
        "<h2>Run</h2>", _dl(run_details(record)),
        '<p class="note">Latency: batch-1 p50/p90 over the dev sentences; throughput: sentences/s '
        "at batch 32. Models are measured in the same process, interleaved, after warm-up.</p>",
        f"<footer>Generated by tinyplm {escape(__version__)}.</footer>",
    ]
    return page(title, "\n".join(parts))
