"""Reports of a run: results.json, summary.md, report.html, plots and model cards.

Every report is rendered from a :class:`RunRecord` alone, so ``tinyplm report RUN_DIR`` can
rebuild them all from ``results.json`` without rerunning anything::

    write_all(record, run_dir)   # after a run
    rebuild(run_dir)             # later, from run_dir/results.json
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tinyplm.errors import TinyplmError
from tinyplm.files import RESOLVED, lock_state, write_atomic, write_problem
from tinyplm.report.analysis import analysis_section
from tinyplm.report.card import render_model_card, write_model_card
from tinyplm.report.curves import training_curves
from tinyplm.report.html import Section, render_html
from tinyplm.report.plots import accuracy_vs_latency, throughput_bar
from tinyplm.report.records import RunRecord, StageKind, StageRecord
from tinyplm.report.roc import roc_section
from tinyplm.report.summary import render_summary
from tinyplm.report.tables import StageRow, best_student, final_stage, headline, markdown_table, stage_rows

__all__ = [
    "OPTIONAL_SECTIONS",
    "RunRecord",
    "Section",
    "StageRecord",
    "StageRow",
    "accuracy_vs_latency",
    "best_student",
    "headline",
    "load_record",
    "markdown_table",
    "rebuild",
    "render_html",
    "render_model_card",
    "render_summary",
    "stage_rows",
    "throughput_bar",
    "write_all",
    "write_model_card",
]

RESULTS = "results.json"

#: Optional parts of report.html after its plots, in page order: each maker is called with the
#: record and the run dir and returns a :class:`Section` (its PNGs written) or None to be left out.
#: A new part is one more entry here.
OPTIONAL_SECTIONS: list[Callable[[RunRecord, Path], Section | None]] = [
    roc_section,
    lambda record, run_dir: analysis_section(run_dir),
]
_NUMERIC = ("params", "params_no_embeddings", "disk_bytes", "latency_ms_p50_b1",
            "latency_ms_p90_b1", "throughput_sent_per_s", "throughput_b32", "throughput_batch")


def _write_cards(record: RunRecord, run_dir: Path) -> dict[str, Path]:
    """Model cards: run_dir/model (the final model: the teacher too where the run chose it, as a
    ``finetune`` run or one without students does) and each stage's existing ``model_dir``."""
    out: dict[str, Path] = {}
    best = final_stage(record) or (record.stage(record.info.final_model) if record.info.final_model else None)
    if best is not None and (run_dir / "model").is_dir():
        out["model_card"] = write_model_card(run_dir / "model", record, best.name)
    for stage in record.stages:  # never into a model dir that `bench` was only given to measure
        rel = stage.model_dir
        if rel and stage.kind is not StageKind.MODEL and _inside(run_dir, run_dir / rel) and (run_dir / rel).is_dir():
            out[f"card:{stage.name}"] = write_model_card(run_dir / rel, record, stage.name)
    return out


def _inside(run_dir: Path, path: Path) -> bool:
    """True for a folder the run made (under ``run_dir``); `bench` records the user's own model
    folders, its first one as the teacher, by their absolute paths: their README.md is theirs."""
    return run_dir.resolve() in path.resolve().parents


def write_all(record: RunRecord, run_dir: Path, save_record: bool = True) -> dict[str, Path]:
    """Write every report file of ``record`` into ``run_dir``; returns {name: path}.

    Names: ``results`` (results.json), ``summary`` (summary.md), ``report`` (report.html),
    ``accuracy_vs_latency``, ``throughput`` and, when stages were trained here, ``training``
    (plots/*.png), the PNGs of each :data:`OPTIONAL_SECTIONS` part that has something to show
    (e.g. ``probe:<task>``, ``heatmaps:<stage>``), ``model_card`` (model/README.md,
    when run_dir/model exists and a final model was chosen) and ``card:<stage>`` for each stage whose
    ``model_dir`` (relative to run_dir) exists. All files are written atomically, results.json
    last: it marks the run finished, so a run killed while writing its reports is not taken for one.
    ``save_record`` False leaves an existing results.json as it is (:func:`rebuild`).
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    plot_dir = run_dir / "plots"
    plots = {
        "accuracy_vs_latency": accuracy_vs_latency(record, plot_dir / "accuracy_vs_latency.png"),
        "throughput": throughput_bar(record, plot_dir / "throughput.png"),
    }
    curves = training_curves(record, plot_dir / "training.png")
    if curves is not None:
        plots["training"] = curves
    out.update(plots)
    sections = [s for s in (make(record, run_dir) for make in OPTIONAL_SECTIONS) if s is not None]
    for section in sections:
        out.update(section.plots)
    out["summary"] = write_atomic(run_dir / "summary.md", render_summary(record))
    out["report"] = write_atomic(run_dir / "report.html", render_html(record, plots, sections))
    out.update(_write_cards(record, run_dir))
    out["results"] = run_dir / RESULTS
    if save_record:
        record.save(out["results"])
    return out


def _check_types(data: dict[str, Any]) -> None:
    """Raise ValueError when a field of parsed results.json has the wrong type."""
    if not isinstance(data.get("task"), str) or not isinstance(data.get("metric"), str):
        raise ValueError("'task' and 'metric' must be strings")
    if not isinstance(data.get("stages"), list):
        raise ValueError("'stages' must be a list of stage objects")
    if not isinstance(data.get("info", {}), dict):
        raise ValueError("'info' must be an object")
    for i, stage in enumerate(data["stages"]):
        if not isinstance(stage, dict):
            raise ValueError(f"stages[{i}] must be an object")
        metrics = stage.get("metrics")
        if not isinstance(metrics, dict) or not all(
                isinstance(v, (int, float)) or v is None for v in metrics.values()):
            raise ValueError(f"stages[{i}].metrics must map metric names to numbers")
        for key in _NUMERIC:
            if key in stage and not isinstance(stage[key], (int, float)):
                raise ValueError(f"stages[{i}].{key} must be a number, got {stage[key]!r}")
        if not isinstance(stage.get("info", {}), dict):
            raise ValueError(f"stages[{i}].info must be an object")


def load_record(path: Path) -> RunRecord:
    """Read a results.json into a RunRecord.

    Raises :class:`TinyplmError` naming the file when it is missing, a folder, not JSON or not a
    run record.
    """
    path = Path(path)
    expected = "a results.json written by a finished tinyplm run"
    if path.is_dir():
        raise TinyplmError(f"{path}: is a folder; expected {expected}")
    if not path.is_file():
        raise TinyplmError(f"{path}: file not found; expected {expected}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TinyplmError(f"{path}: cannot be read as JSON ({exc}); expected {expected}") from exc
    try:
        if not isinstance(data, dict):
            raise ValueError(f"top level is {type(data).__name__}, not an object")
        _check_types(data)
        return RunRecord.from_dict(data)
    except (ValueError, TypeError, KeyError) as exc:
        raise TinyplmError(f"{path}: not a valid run record ({exc}); expected {expected} with "
                           "keys task, metric, stages") from exc


def unfinished_note(run_dir: Path) -> str:
    """Why a run dir holding ``config.resolved.yaml`` but no results.json has no results yet, and
    how to go on: a run in progress there (its holder named), or the command that continues it."""
    live, holder = lock_state(run_dir)
    if live:
        return f"unfinished: a run is in progress there ({holder.describe() if holder else 'another process'})"
    return (f"unfinished: no {RESULTS}, the run was killed or failed; continue it with "
            f"`tinyplm run {run_dir / RESOLVED} -o {run_dir} --resume`")


def _check_run_dir(run_dir: Path) -> None:
    """Raise :class:`TinyplmError` when ``run_dir`` is not a finished run's folder, saying what it
    is instead: missing, a recipe or other file, an unfinished run, a sweep's folder."""
    if not run_dir.exists():
        raise TinyplmError(f"{run_dir}: no such folder; expected a run dir (the folder a run wrote, "
                           f"holding {RESULTS})")
    if run_dir.is_file():
        what = "a recipe" if run_dir.suffix.lower() in (".yaml", ".yml") else "a file"
        raise TinyplmError(f"{run_dir}: is {what}; report takes a run dir, the folder a run wrote (a recipe's "
                           f"output_dir, or run's -o) holding {RESULTS}")
    if (run_dir / RESULTS).exists():
        return
    if (run_dir / "sweep.json").is_file():
        trials = sorted(p.name for p in (run_dir / "trials").glob("t-*") if p.is_dir())
        raise TinyplmError(f"{run_dir}: is a sweep's folder; its table across trials is {run_dir / 'sweep.json'} "
                           f"and {run_dir / 'summary.md'}; report takes one trial's run dir, e.g. "
                           f"{run_dir / 'trials' / (trials[0] if trials else 't-...')}")
    if (run_dir / "pretrain.json").is_file():
        raise TinyplmError(f"{run_dir}: is a pre-training run, its results in {run_dir / 'pretrain.json'}; report "
                           f"reads a task run's {RESULTS}")
    if (run_dir / RESOLVED).is_file():
        raise TinyplmError(f"{run_dir}: {unfinished_note(run_dir)}; report reads a finished run's {RESULTS}")


def rebuild(run_dir: Path) -> dict[str, Path]:
    """Regenerate every report file of ``run_dir`` from its results.json (see :func:`write_all`),
    which is read, never rewritten: a record of an older schema, or with keys this version does not
    know (a newer tinyplm's, a user's notes), stays as it was written.

    Raises :class:`TinyplmError` naming the path when ``run_dir`` is missing, a file (a recipe), an
    unfinished run (with the command that continues it) or a sweep's folder, naming the file
    when results.json is missing or invalid, and naming the folder or file it cannot write.
    """
    run_dir = Path(run_dir)
    _check_run_dir(run_dir)
    record = load_record(run_dir / RESULTS)
    if problem := write_problem(run_dir):
        raise TinyplmError(f"{run_dir}: report rewrites summary.md, report.html, plots/ and the model cards here, and "
                           f"nothing can be written in it ({problem}); copy the run dir somewhere writable and report "
                           "the copy")
    try:
        return write_all(record, run_dir, save_record=False)
    except OSError as exc:  # a folder where a report file goes, a full disk: each file is whole, old or new
        where = exc.filename2 or exc.filename or run_dir  # the file, not its temporary sibling
        raise TinyplmError(f"{where}: cannot write this report file ({exc.strerror or exc}); the files written "
                           "before it are the new ones, the rest as they were") from None
