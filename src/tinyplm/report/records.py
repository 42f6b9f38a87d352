"""Run and stage records: the data every report is built from.

``results.json`` is ``RunRecord.to_dict()``; ``tinyplm report RUN_DIR`` rebuilds every report file
from it without rerunning anything.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tinyplm.files import write_json_atomic

# The keys every stage carries in results.json (the schema in the core issue).
STAGE_KEYS = (
    "name",
    "metrics",
    "params",
    "params_no_embeddings",
    "disk_bytes",
    "latency_ms_p50_b1",
    "latency_ms_p90_b1",
    "throughput_b32",
)


@dataclass
class StageRecord:
    """What was measured for one model (the teacher or one student).

    ``metrics``: official task metrics, e.g. ``{"accuracy": 0.91}`` (MNLI adds ``accuracy_mm``).
    ``disk_bytes``: bytes of the saved weights and config on disk (tokenizer files excluded).
    ``latency_ms_*_b1``: batch-1 latency percentiles over the task's dev sentences.
    ``throughput_b32``: sentences per second at batch 32 over the dev sentences.
    ``info``: free-form extras (model_dir, shape, train seconds, notes) shown in reports.
    """

    name: str
    metrics: dict[str, float]
    params: int = 0
    params_no_embeddings: int = 0
    disk_bytes: int = 0
    latency_ms_p50_b1: float = 0.0
    latency_ms_p90_b1: float = 0.0
    throughput_b32: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "StageRecord":
        missing = [k for k in STAGE_KEYS if k not in data]
        if missing:
            raise ValueError(f"stage record lacks keys {missing}; expected {list(STAGE_KEYS)}")
        known = {k: data[k] for k in (*STAGE_KEYS, "info") if k in data}
        return cls(**known)


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
            "task": self.task,
            "metric": self.metric,
            "stages": [s.to_dict() for s in self.stages],
            "info": self.info,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunRecord":
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
    def load(cls, path: Path) -> "RunRecord":
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))
