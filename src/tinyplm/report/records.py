"""Run and stage records: the data every report is built from.

``results.json`` is ``RunRecord.to_dict()``; ``tinyplm report RUN_DIR`` rebuilds every report file
from it without rerunning anything.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from enum import StrEnum
from pathlib import Path
from typing import Any

from tinyplm.files import write_json_atomic
from tinyplm.report.info import StageInfo
from tinyplm.report.run_info import RunInfo

#: results.json layout (its ``schema_version``). 2: typed stage fields (model_dir, kind, parent,
#: compress_step, shape) instead of keys inside ``info``, and ``throughput_sent_per_s`` +
#: ``throughput_batch`` instead of ``throughput_b32`` (which said batch 32 whatever the batch
#: measured). 3: a stage's ``info`` is a :class:`~tinyplm.report.info.StageInfo` and the run's a
#: :class:`~tinyplm.report.run_info.RunInfo` (typed, nested records) instead of free dicts.
#: Older files still load, upgraded one version at a time: 1 -> 2 (:func:`stage_v1_to_v2`),
#: 2 -> 3 (:func:`stage_v2_to_v3`, :func:`run_v2_to_v3`).
SCHEMA_VERSION = 3

# The keys every stage carries in results.json.
STAGE_KEYS = (
    "name",
    "metrics",
    "params",
    "params_no_embeddings",
    "disk_bytes",
    "latency_ms_p50_b1",
    "latency_ms_p90_b1",
    "throughput_sent_per_s",
)
_V1_THROUGHPUT = "throughput_b32"


class StageKind(StrEnum):
    """What a measured stage is: the run's teacher, a distilled student, a compressed copy of an
    earlier stage, or a model given to ``tinyplm bench``."""

    TEACHER = "teacher"
    STUDENT = "student"
    COMPRESSED = "compressed"
    MODEL = "model"


@dataclass
class StageRecord:
    """What was measured for one model (the teacher, a student or a compressed stage).

    ``metrics``: official task metrics, e.g. ``{"accuracy": 0.91}`` (MNLI adds ``accuracy_mm``).
    ``disk_bytes``: bytes of the saved weights and config on disk (tokenizer files excluded).
    ``latency_ms_*_b1``: batch-1 latency percentiles over the task's dev sentences.
    ``throughput_sent_per_s``: sentences per second at batch ``throughput_batch`` over the dev sentences.
    ``model_dir``: where the model is saved (relative to the run dir; absolute for ``bench``).
    ``kind``: see :class:`StageKind`. ``parent``: the stage it was made from (a compressed stage's
    parent, a compress-only student's source). ``compress_step``: the compress ``kind`` that made it.
    ``shape``: layers, widths and per-layer heads/FFN (``models.shape_of``).
    ``runtime`` / ``precision``: what ran (torch, onnxruntime, openvino; fp32, bf16, int8), read off
    the model. ``metric_precision``: what ``metrics`` were computed in (a PyTorch model scored in
    the run's ``measure.precision``; None in files written before it was recorded). ``compute``:
    useful GFLOP/s and its share of this CPU's peak for that precision (``evaluate.compute``), when
    the shape is known.
    ``info``: how it was made (:class:`~tinyplm.report.info.StageInfo`: its training, its compress
    step, its ROC curve ...).
    """

    name: str
    metrics: dict[str, float]
    params: int = 0
    params_no_embeddings: int = 0
    disk_bytes: int = 0
    latency_ms_p50_b1: float = 0.0
    latency_ms_p90_b1: float = 0.0
    throughput_sent_per_s: float = 0.0
    throughput_batch: int = 32
    model_dir: str | None = None
    kind: StageKind = StageKind.STUDENT
    parent: str | None = None
    compress_step: str | None = None
    shape: dict[str, Any] | None = None
    runtime: str = "torch"
    precision: str = "fp32"
    compute: dict[str, Any] | None = None
    metric_precision: str | None = None
    info: StageInfo = field(default_factory=StageInfo)

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["kind"], out["info"] = str(self.kind), self.info.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any], schema: int = SCHEMA_VERSION) -> StageRecord:
        """A stage from results.json of ``schema`` (1 and 2 upgraded first). Raises ``ValueError``
        naming missing keys, an unknown kind or an info key schema 3 does not have."""
        if schema < SCHEMA_VERSION:
            data = stage_v2_to_v3(stage_v1_to_v2(data) if _V1_THROUGHPUT in data else data)
        missing = [k for k in STAGE_KEYS if k not in data]
        if missing:
            raise ValueError(f"stage record lacks keys {missing}; expected {list(STAGE_KEYS)}")
        names = {f.name for f in fields(cls)}
        known = {k: v for k, v in data.items() if k in names}
        try:
            known["kind"] = StageKind(known.get("kind", StageKind.STUDENT))
        except ValueError:
            raise ValueError(f"stage kind {data.get('kind')!r} is not one of {[k.value for k in StageKind]}") from None
        known["info"] = StageInfo.from_dict(known.get("info") or {})
        return cls(**known)


def stage_v2_to_v3(data: dict[str, Any]) -> dict[str, Any]:
    """A schema-2 stage dict in schema 3: its free ``info`` dict read into a :class:`StageInfo`
    (:meth:`StageInfo.from_v2`; a compressed stage's keys are its step's)."""
    info = StageInfo.from_v2(data.get("info") or {}, compressed=bool(data.get("compress_step")))
    return {**data, "info": info.to_dict()}


def run_v2_to_v3(data: dict[str, Any]) -> dict[str, Any]:
    """A schema-1 or -2 results.json in schema 3: every stage (a schema-1 one through schema 2) and
    the run's ``info`` (:meth:`RunInfo.from_v2`)."""
    stages = [stage_v2_to_v3(stage_v1_to_v2(s) if _V1_THROUGHPUT in s else s) for s in data["stages"]]
    info = RunInfo.from_v2(data.get("info") or {})
    return {**data, "schema_version": SCHEMA_VERSION, "stages": stages, "info": info.to_dict()}


def stage_v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """A schema-1 stage dict in schema-2 keys (``throughput_b32`` and the typed keys in ``info``)."""
    out = {k: v for k, v in data.items() if k != _V1_THROUGHPUT}
    out["throughput_sent_per_s"], out["throughput_batch"] = data[_V1_THROUGHPUT], 32
    info = dict(data.get("info") or {})
    out["model_dir"] = info.pop("model_dir", None)
    out["shape"] = info.pop("shape", None)
    out["parent"] = info.pop("from", None)
    out["compress_step"] = info.pop("kind", None)
    name = data.get("name")
    out["kind"] = (StageKind.TEACHER if name == "teacher" else
                   StageKind.COMPRESSED if out["compress_step"] else StageKind.STUDENT)
    out["info"] = info
    return out


@dataclass
class RunRecord:
    """A whole run: the task, its primary metric and one StageRecord per model.

    The stage named ``teacher`` (if any) is the reference for retention and speed-up.
    ``info``: what the run records about itself (:class:`~tinyplm.report.run_info.RunInfo`: its
    name, machine, timings, final model ...).
    """

    task: str
    metric: str
    stages: list[StageRecord] = field(default_factory=list)
    info: RunInfo = field(default_factory=RunInfo)

    def stage(self, name: str) -> StageRecord | None:
        return next((s for s in self.stages if s.name == name), None)

    @property
    def teacher(self) -> StageRecord | None:
        return self.stage("teacher")

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "task": self.task,
            "metric": self.metric,
            "stages": [s.to_dict() for s in self.stages],
            "info": self.info.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunRecord:
        """A record from results.json of schema 3, or of schema 1 or 2 (no ``schema_version``: 1,
        whose stages say ``throughput_b32``) upgraded first (:func:`run_v2_to_v3`). Raises
        ``ValueError`` for a missing key, a schema newer than this tinyplm reads, or (schema 3) an
        info key it does not have."""
        for key in ("task", "metric", "stages"):
            if key not in data:
                raise ValueError(f"results.json lacks key '{key}'")
        schema = data.get("schema_version", 1)
        if not isinstance(schema, int) or schema > SCHEMA_VERSION:
            raise ValueError(f"schema_version {schema!r}: this tinyplm reads schema 1 to {SCHEMA_VERSION}")
        if schema < SCHEMA_VERSION:
            data = run_v2_to_v3(data)
        return cls(
            task=data["task"],
            metric=data["metric"],
            stages=[StageRecord.from_dict(s) for s in data["stages"]],
            info=RunInfo.from_dict(data.get("info") or {}),
        )

    def save(self, path: Path) -> None:
        """Write JSON atomically (temp file + rename)."""
        write_json_atomic(Path(path), self.to_dict())

    @classmethod
    def load(cls, path: Path) -> RunRecord:
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))
