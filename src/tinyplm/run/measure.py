"""Models measured side by side: metrics as deployed, size of the saved dir, and speed."""

from __future__ import annotations

from pathlib import Path

from tinyplm.config.schema import MeasureSpec, TaskSpec
from tinyplm.errors import TinyplmError
from tinyplm.evaluate.model_eval import encode_evals, evaluate_model
from tinyplm.evaluate.size import count_params, disk_bytes
from tinyplm.evaluate.speed import measure_speed
from tinyplm.models import load_classifier, shape_of
from tinyplm.report import RunRecord, StageRecord
from tinyplm.report.records import StageKind
from tinyplm.run.preflight import load_task
from tinyplm.run.results import StageResult
from tinyplm.tasks.base import TaskData
from tinyplm.tasks.encoding import Encoded


def measure_stages(stages: list[StageResult], root: Path, data: TaskData, evals: dict[str, Encoded],
                   spec: MeasureSpec) -> list[StageRecord]:
    """Every stage measured side by side: metrics (fp32, as deployed), the size of its saved dir
    (``root / model_dir``), and speed on the same sentences.

    A stage with its own ``evals`` (a trimmed vocabulary: the same pieces under other ids, so the
    same lengths and the same timing work) is scored and timed on them."""
    models = {s.name: s.model for s in stages}
    own = {s.name: next(iter((s.evals or evals).values())) for s in stages}
    speed = measure_speed(models, next(iter(evals.values())), spec, per_model=own)
    records = []
    for s in stages:
        total, no_emb = count_params(s.model)
        t = speed[s.name]
        records.append(StageRecord(
            name=s.name, metrics=evaluate_model(s.model, data, s.evals or evals, bf16=False), params=total,
            params_no_embeddings=no_emb, disk_bytes=disk_bytes(root / s.model_dir),
            latency_ms_p50_b1=t.latency_ms_p50_b1, latency_ms_p90_b1=t.latency_ms_p90_b1,
            throughput_sent_per_s=t.throughput_sent_per_s, throughput_batch=t.throughput_batch,
            model_dir=s.model_dir, kind=s.kind, parent=s.parent, compress_step=s.compress_step, shape=s.shape,
            info=s.info,
        ))
    return records


def bench(model_dirs: list[Path], task: TaskSpec, rounds: int = 3) -> RunRecord:
    """Saved models (the first is the reference, named ``teacher``) measured side by side.

    Raises ``TinyplmError`` when the models tokenise differently (speed is timed on one set of ids).
    """
    data = load_task(task)
    stages, encs = [], {}
    for i, d in enumerate(model_dirs):
        names = {s.name for s in stages}
        name = "teacher" if i == 0 else (d.name if d.name not in names else f"{d.parent.name}-{d.name}")
        model, tok = load_classifier(d, data.labels, data.is_regression, data.head)
        encs[name] = encode_evals(data, tok, task.max_length, task.max_eval_examples)
        kind = StageKind.TEACHER if i == 0 else StageKind.MODEL
        stages.append(StageResult(name, model, str(Path(d).resolve()), kind, shape_of(model)))
    if len({next(iter(e.values())).fingerprint() for e in encs.values()}) > 1:
        raise TinyplmError("bench times every model on the same token ids, but these models use different tokenizers")
    record = RunRecord(task=data.task, metric=data.primary_metric, info={"bench": [str(d) for d in model_dirs]})
    record.stages = measure_stages(stages, Path("/"), data, encs["teacher"], MeasureSpec(rounds=rounds))
    return record
