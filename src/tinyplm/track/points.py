"""What a tracked run sends, as plain data: parameters, metric points, tags and files.

Pure functions over what the run already writes (the resolved recipe, each ``logs/train.jsonl``
event, the :class:`~tinyplm.report.RunRecord`, the run dir), so every backend gets the same names:

- parameters: the resolved recipe flattened to dotted keys (``teacher.finetune.lr``,
  ``students.0.train.epochs``; a list of plain values is one JSON value), each value cut to
  :data:`MAX_PARAM_VALUE` characters (MLflow's limit; the whole recipe is an artifact too).
- training curves, one key prefix per training stage as the log names it (``teacher``,
  ``student-L2-H32``, ``student-x/stage-0``): ``<stage>/train/loss``, ``<stage>/train/lr``,
  ``<stage>/train/examples_per_s`` at each logged step and ``<stage>/dev/<metric>`` at each dev check.
- each measured stage's final numbers at step 0: ``<stage>/final/<metric>``,
  ``<stage>/size/{params,params_no_embeddings,disk_bytes}``,
  ``<stage>/speed/{latency_ms_p50_b1,latency_ms_p90_b1,throughput_sent_per_s}``,
  ``<stage>/vs_teacher/{retention_pct,speedup,compression}``; the run's final model's numbers again
  under ``final_model/`` (one key for every run, to compare runs on), and ``run/seconds``.
- files: summary.md, report.html, results.json, config.resolved.yaml, logs/train.jsonl and the
  folders plots/ and model/ (the final model).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinyplm.report import RunRecord, StageRecord, stage_rows
from tinyplm.report.tables import StageRow, final_stage

#: MLflow's longest parameter value (characters) and key.
MAX_PARAM_VALUE = 6000
MAX_PARAM_KEY = 250
#: Keys of a ``train`` event drawn as curves.
TRAIN_CURVES = ("loss", "lr", "examples_per_s")
SIZE_FIELDS = ("params", "params_no_embeddings", "disk_bytes")
SPEED_FIELDS = ("latency_ms_p50_b1", "latency_ms_p90_b1", "throughput_sent_per_s")
#: StageRow field -> the name it is logged under below ``vs_teacher/``.
VS_TEACHER = {"retention": "retention_pct", "speedup": "speedup", "compression": "compression"}
#: Files and folders of a finished run dir sent as artifacts (those present).
ARTIFACTS = ("summary.md", "report.html", "results.json", "config.resolved.yaml", "logs/train.jsonl", "plots",
             "model")
_UNSAFE = re.compile(r"[^\w\-. /:]")  # MLflow's metric/param key characters


@dataclass(frozen=True)
class Point:
    """One value of one metric: ``key`` at training ``step``, ``timestamp_ms`` since the epoch."""

    key: str
    value: float
    step: int
    timestamp_ms: int


@dataclass(frozen=True)
class Artifact:
    """A file or folder of the run dir, stored as ``name`` (its path relative to the run dir)."""

    path: Path
    name: str


def clean_key(key: str) -> str:
    """``key`` with characters MLflow refuses in a key replaced by ``_``."""
    return _UNSAFE.sub("_", key)


def flatten_params(tree: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """A nested recipe mapping as ``{dotted.key: value}``: mappings and lists of mappings are walked
    (list items by index), other values are written as text (strings as they are, the rest as JSON)
    and cut to :data:`MAX_PARAM_VALUE` characters."""
    out: dict[str, str] = {}
    for key, value in tree.items():
        name = clean_key(f"{prefix}{key}")[:MAX_PARAM_KEY]
        if isinstance(value, Mapping):
            out.update(flatten_params(value, f"{name}."))
        elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            for i, item in enumerate(value):
                out.update(flatten_params(item, f"{name}.{i}."))
        else:
            text = value if isinstance(value, str) else json.dumps(value)
            out[name] = text[:MAX_PARAM_VALUE]
    return out


def _number(value: Any) -> float | None:
    """``value`` as a finite float, else None (booleans and text are not metrics)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def event_points(event: Mapping[str, Any]) -> list[Point]:
    """The curve points of one ``logs/train.jsonl`` record: a ``train`` event's loss, lr and
    examples/s, an ``eval`` event's dev metrics; none for other events (checkpoint, resume, end,
    augment progress) or a record without a stage and step."""
    stage, step, kind = event.get("stage"), event.get("step"), event.get("event")
    if not isinstance(stage, str) or not isinstance(step, int):
        return []
    ms = int(float(event.get("time", 0)) * 1000)
    if kind == "train":
        values = {f"train/{k}": event.get(k) for k in TRAIN_CURVES}
    elif kind == "eval" and isinstance(event.get("metrics"), Mapping):
        values = {f"dev/{k}": v for k, v in event["metrics"].items()}
    else:
        return []
    return [Point(clean_key(f"{stage}/{k}"), v, step, ms) for k, raw in values.items()
            if (v := _number(raw)) is not None]


def _stage_values(stage: StageRecord, row: StageRow) -> dict[str, float | None]:
    values: dict[str, float | None] = {f"final/{k}": _number(v) for k, v in stage.metrics.items()}
    values.update({f"size/{k}": _number(getattr(stage, k)) for k in SIZE_FIELDS})
    values.update({f"speed/{k}": _number(getattr(stage, k)) for k in SPEED_FIELDS})
    values.update({f"vs_teacher/{name}": _number(getattr(row, col)) for col, name in VS_TEACHER.items()})
    return values


def record_points(record: RunRecord, timestamp_ms: int) -> list[Point]:
    """Every measured stage's final metrics, size, speed and ratios to the teacher, the final
    model's again under ``final_model/``, and the run's seconds; all at step 0."""
    final = final_stage(record)
    values: dict[str, float | None] = {"run/seconds": _number(record.info.seconds)}
    for stage, row in zip(record.stages, stage_rows(record), strict=True):
        own = _stage_values(stage, row)
        values.update({f"{stage.name}/{k}": v for k, v in own.items()})
        if final is not None and stage.name == final.name:
            values.update({f"final_model/{k}": v for k, v in own.items()})
    return [Point(clean_key(k), v, 0, timestamp_ms) for k, v in values.items() if v is not None]


def record_tags(record: RunRecord) -> dict[str, str]:
    """Searchable facts of a finished run: task, primary metric, run dir, the final model and why."""
    final = final_stage(record)
    tags = {"tinyplm.task": record.task, "tinyplm.metric": record.metric}
    if record.info.run_dir:
        tags["tinyplm.run_dir"] = record.info.run_dir
    if final is not None:
        tags["tinyplm.final_model"] = final.name
    if record.info.final_rule:
        tags["tinyplm.final_rule"] = record.info.final_rule[:MAX_PARAM_VALUE]
    return tags


def run_artifacts(run_dir: Path) -> list[Artifact]:
    """The :data:`ARTIFACTS` present in ``run_dir``, in that order."""
    return [Artifact(run_dir / name, name) for name in ARTIFACTS if (run_dir / name).exists()]
