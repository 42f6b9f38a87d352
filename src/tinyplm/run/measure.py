"""Models measured side by side: metrics as deployed, size of the saved dir, and speed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from tinyplm.config.schema import MeasureSpec, TaskSpec
from tinyplm.errors import ModelError, RunDirError, TinyplmError
from tinyplm.evaluate.compute import effective_rate
from tinyplm.evaluate.model_eval import encode_evals, eval_logits, metrics_from_logits
from tinyplm.evaluate.roc import logits_roc
from tinyplm.evaluate.runtime import describe
from tinyplm.evaluate.size import count_params, disk_bytes
from tinyplm.evaluate.speed import measure_speed
from tinyplm.files import LOCK, RESOLVED, RESULTS, check_creatable, lock_state
from tinyplm.models import shape_of
from tinyplm.models.head_loading import load_for_head
from tinyplm.models.infer import precision_name
from tinyplm.models.pooling import layout_similarity
from tinyplm.models.token_ids import segment_problem
from tinyplm.report import RunRecord, StageRecord
from tinyplm.report.records import StageKind
from tinyplm.report.run_info import FastestRuntime, RunInfo, RunPrecision
from tinyplm.run.preflight import load_task
from tinyplm.run.results import StageResult
from tinyplm.tasks.base import TaskData
from tinyplm.tasks.encoding import Encoded
from tinyplm.tasks.heads import Head


def measure_stages(stages: list[StageResult], root: Path, data: TaskData, evals: dict[str, Encoded],
                   spec: MeasureSpec) -> list[StageRecord]:
    """Every stage measured side by side: metrics (a PyTorch model in ``spec.precision``, fp32 by
    default, whatever the CPU; another runtime as deployed), the size of its saved dir
    (``root / model_dir``), and speed on the same sentences.

    A stage with its own ``evals`` (its own tokenizer: a trimmed vocabulary, a word-level model) is
    scored and timed on them: the same sentences under its own ids."""
    models = {s.name: s.model for s in stages}
    own = {s.name: next(iter((s.evals or evals).values())) for s in stages}
    timed = next(iter(evals.values()))
    speed = measure_speed(models, timed, spec, per_model=own)
    threads = spec.threads or torch.get_num_threads()
    tokens = float(timed.lengths()[: spec.throughput_sentences].mean()) if len(timed) else 0.0
    records = []
    for s in stages:
        total, no_emb = count_params(s.model)
        t, ran = speed[s.name], describe(s.model)
        own_evals = s.evals or evals
        bf16 = spec.precision == "bf16" and ran.runtime == "torch" and ran.precision == "fp32"
        logits = eval_logits(s.model, own_evals, bf16=bf16)  # one pass over dev: the metrics and the ROC curve
        roc = logits_roc(data, own_evals, logits) if "roc_auc" in data.metrics else None
        rate = effective_rate(s.shape, getattr(s.model.config, "hidden_size", None), tokens,
                              t.throughput_sent_per_s, ran.precision, threads)
        records.append(StageRecord(
            name=s.name, metrics=metrics_from_logits(data, own_evals, logits), params=total,
            params_no_embeddings=no_emb, disk_bytes=disk_bytes(root / s.model_dir),
            latency_ms_p50_b1=t.latency_ms_p50_b1, latency_ms_p90_b1=t.latency_ms_p90_b1,
            throughput_sent_per_s=t.throughput_sent_per_s, throughput_batch=t.throughput_batch,
            model_dir=s.model_dir, kind=s.kind, parent=s.parent, compress_step=s.compress_step, shape=s.shape,
            runtime=ran.runtime, precision=ran.precision, compute=rate,
            metric_precision=precision_name(True) if bf16 else ran.precision,
            info=replace(s.info, runtime_detail=ran.detail or None, roc=roc),
        ))
    return records


RUNTIMES = ("torch", "onnxruntime", "openvino")


def bench(model_dirs: list[Path], task: TaskSpec, rounds: int = 3, runtimes: list[str] | None = None,
          work: Path | None = None, tolerance: float = 0.005, precision: str = "fp32") -> RunRecord:
    """Saved models (the first is the reference, named ``teacher``) measured side by side; with
    ``runtimes``, each PyTorch model also converted to each of them (ONNX Runtime fp32, OpenVINO in
    its default precision; graphs written under ``work``) and ``record.info.fastest`` names, per
    model, the fastest runtime whose primary metric is within ``tolerance`` of its PyTorch form.

    Each model is scored and timed on its own encoding of the same dev sentences, so models with
    different tokenizers (a trimmed vocabulary, a word-level BiLSTM or TF-IDF model) sit side by
    side as in a run. PyTorch models are scored in ``precision`` (``fp32`` or ``bf16``). Raises
    ``TinyplmError`` for an unknown runtime.
    """
    unknown = sorted(set(runtimes or []) - set(RUNTIMES))
    if unknown:
        raise TinyplmError(f"--runtimes: unknown {', '.join(unknown)}; choose from {', '.join(RUNTIMES)}")
    data = load_task(task, train=False)  # the eval splits alone: a task's train file may be absent
    if Head(data.head).row.vectors:  # judged as the reference is meant to be compared (its similarity_fn_name)
        data = replace(data, similarity=layout_similarity(model_dirs[0]))
    stages, groups = [], {}
    for i, d in enumerate(model_dirs):
        names = {s.name for s in stages}
        base = "teacher" if i == 0 else (d.name if d.name not in names else f"{d.parent.name}-{d.name}")
        model, tok = load_for_head(d, data.labels, data.is_regression, data.head)
        first = next((split.examples[0] for split in data.evals.values() if split.examples), None)
        pairs = getattr(first, "text_pair", None) is not None
        problem = segment_problem(d, getattr(getattr(model, "config", None), "to_dict", dict)(), tok) if pairs else None
        if problem:
            raise ModelError(f"{problem} (task '{data.task}' is a pair task)")
        enc = encode_evals(data, tok, task.max_length, task.max_eval_examples)
        for name, variant, where in _variants(base, model, Path(d), runtimes, work):
            kind = StageKind.TEACHER if name == "teacher" else StageKind.MODEL
            stages.append(StageResult(name, variant, str(where.resolve()), kind, shape_of(model), evals=enc))
            groups.setdefault(base, []).append(name)
    record = RunRecord(task=data.task, metric=data.primary_metric,
                       info=RunInfo(bench=[str(d) for d in model_dirs], precision=RunPrecision(metrics=precision)))
    record.stages = measure_stages(stages, Path("/"), data, stages[0].evals,
                                   MeasureSpec(rounds=rounds, precision=precision))
    if runtimes:
        record.info.fastest = fastest_runtimes(record, groups, tolerance)
    return record


def _variants(base: str, model, source: Path, runtimes: list[str] | None, work: Path | None):
    """(stage name, model, its dir) of ``model`` in each runtime asked for (itself when none is)."""
    from tinyplm.compress.onnx_quant import onnx_fp32
    from tinyplm.compress.openvino import openvino_float
    from tinyplm.evaluate.runtime import describe

    own = describe(model).runtime
    if not runtimes:
        return [(base, model, source)]
    out = []
    for runtime in runtimes:
        name = "teacher" if base == "teacher" and runtime == runtimes[0] else f"{base}@{runtime}"
        if runtime == own:
            out.append((name, model, source))
        elif own == "torch":
            folder = Path(work or source) / "bench-exports" / f"{base}-{runtime}"
            folder.mkdir(parents=True, exist_ok=True)
            made = onnx_fp32(model, folder) if runtime == "onnxruntime" else openvino_float(model, folder)
            if runtime == "openvino":
                from tinyplm.models.openvino import save_openvino

                save_openvino(made.model, folder, made.precision_asked)
            out.append((name, made, folder))
    return out


def fastest_runtimes(record: RunRecord, groups: dict[str, list[str]], tolerance: float) -> dict[str, FastestRuntime]:
    """Per model: its fastest runtime whose primary metric is within ``tolerance`` (absolute) of the
    model's first runtime's, with every runtime's throughput and metric."""
    out = {}
    for base, names in groups.items():
        rows = [record.stage(n) for n in names]
        ref = rows[0].metrics.get(record.metric) or 0.0
        ok = [s for s in rows if (s.metrics.get(record.metric) or 0.0) >= ref - tolerance]
        pick = max(ok or rows, key=lambda s: s.throughput_sent_per_s)
        out[base] = FastestRuntime(
            fastest=pick.name, runtime=f"{pick.runtime} {pick.precision}", tolerance=tolerance,
            candidates={s.name: {"sent_per_s": round(s.throughput_sent_per_s, 1),
                                 record.metric: s.metrics.get(record.metric)} for s in rows})
    return out


def check_bench_out(out_dir: Path, flag: str) -> None:
    """Raise ``RunDirError`` (naming ``flag``) when bench's results.json and reports cannot go into
    ``out_dir``: it is a file or cannot be made, it is a run
    directory (finished or not, live or not: a results.json there would mark it finished and its
    resume would be refused), or it holds a results.json already. Found before any measuring."""
    out_dir = Path(out_dir)
    try:
        check_creatable(out_dir, "output destination")
    except RunDirError as exc:
        raise RunDirError(f"{flag}: {exc}") from None
    live, holder = lock_state(out_dir)
    if live:
        who = holder.describe() if holder else "another process"
        raise RunDirError(f"{flag} {out_dir}: a run is in progress there ({who}); choose another {flag}")
    if (out_dir / RESOLVED).is_file() or (out_dir / LOCK).exists():
        raise RunDirError(f"{flag} {out_dir}: is a tinyplm run directory; a {RESULTS} written there would mark "
                          f"the run finished; choose another {flag}")
    if (out_dir / RESULTS).exists():
        raise RunDirError(f"{flag} {out_dir}: already holds {RESULTS}; choose another {flag}")
