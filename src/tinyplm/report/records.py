"""Run and stage records: the data every report is built from.

``results.json`` is ``RunRecord.to_dict()``; ``tinyplm report RUN_DIR`` rebuilds every report file
from it without rerunning anything.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from pathlib import Path
from typing import Any

from tinyplm.files import write_json_atomic

#: results.json layout. 2: typed stage fields (model_dir, kind, parent, compress_step, shape) instead of
#: keys inside ``info``, and ``throughput_sent_per_s`` + ``throughput_batch`` instead of
#: ``throughput_b32`` (which said batch 32 whatever the batch measured). Version-1 files (no
#: ``schema_version``) still load: :meth:`StageRecord.from_dict` maps their keys.
SCHEMA_VERSION = 2

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
    ``info``: free-form extras (training time, objective, notes) shown in reports.
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
    info: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["kind"] = str(self.kind)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StageRecord:
        """A stage from results.json, of schema 2 or (keys mapped) 1. Raises ``ValueError``
        naming missing keys or an unknown kind."""
        data = _from_v1(data) if _V1_THROUGHPUT in data else dict(data)
        missing = [k for k in STAGE_KEYS if k not in data]
        if missing:
            raise ValueError(f"stage record lacks keys {missing}; expected {list(STAGE_KEYS)}")
        names = {f.name for f in fields(cls)}
        known = {k: v for k, v in data.items() if k in names}
        try:
            known["kind"] = StageKind(known.get("kind", StageKind.STUDENT))
        except ValueError:
            raise ValueError(f"stage kind {data.get('kind')!r} is not one of {[k.value for k in StageKind]}") from None
        return cls(**known)


def _from_v1(data: dict[str, Any]) -> dict[str, Any]:
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
    ``info``: run-level extras (run name, recipe, machine, torch version, timings).
    """

    task: str
    metric: str
    stages: list[StageRecord] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)

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
            "info": self.info,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunRecord:
        for key in ("task", "metric", "stages"):
            if key not in data:
                raise ValueError(f"results.json lacks key '{key}'")
        return cls(
            task=data["task"],
            metric=data["metric"],
            stages=[StageRecord.from_dict(s) for s in data["stages"]],
            info=dict(data.get("info", {})),
        )

    def save(self, path: Path) -> None:
        """Write JSON atomically (temp file + rename)."""
        write_json_atomic(Path(path), self.to_dict())

    @classmethod
    def load(cls, path: Path) -> RunRecord:
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))
