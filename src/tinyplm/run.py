"""run(cfg) -> RunRecord: the only place that knows the order of the stages.

task data -> teacher (fine-tuned if asked) -> students (distilled) -> measure all side by side
-> report. Every stage's output is saved in the run dir as it completes, so ``resume`` skips
finished stages and continues an interrupted one from its last checkpoint.
"""

from __future__ import annotations

import platform
import shutil
import time
from pathlib import Path

import torch

from tinyplm import tasks
from tinyplm.config.load import dump_resolved
from tinyplm.config.schema import RunConfig, StudentSpec, TaskSpec, TrainSpec, student_name
from tinyplm.distill import PredictionObjective, StageIO, cached_teacher_logits, default_cache_dir, get_accelerator, train
from tinyplm.errors import ModelError
from tinyplm.evaluate.model_eval import encode_evals, evaluate_model
from tinyplm.evaluate.size import count_params, disk_bytes
from tinyplm.evaluate.speed import measure_speed
from tinyplm.models import quiet_transformers, build_student, check_model_dir, fingerprint, is_complete, load_classifier, resolve_model_dir, save_model
from tinyplm.models.infer import cpu_supports_bf16, use_bf16
from tinyplm.report import RunRecord, StageRecord, best_student, write_all
from tinyplm.rundir import claim_run_dir
from tinyplm.tasks.base import TaskData
from tinyplm.tasks.encoding import Encoded, encode_split


def run_dir_of(cfg: RunConfig) -> Path:
    """The run directory a recipe writes to."""
    return Path(cfg.output_dir.replace("{name}", cfg.name))


def load_task(spec: TaskSpec) -> TaskData:
    """Read the task's train and eval splits (GLUE by name, or a custom CSV/JSONL task)."""
    if spec.name == "custom":
        if not spec.train_file or not spec.dev_file:
            raise ModelError("task.name 'custom' needs task.train_file and task.dev_file")
        task = tasks.custom_task(
            "custom", Path(spec.train_file), Path(spec.dev_file), spec.text_column, spec.label_column,
            spec.text_pair_column, spec.labels, spec.regression,
        )
    else:
        task = tasks.get(spec.name, spec.data_dir)
    return task.load()


def run(cfg: RunConfig, run_dir: Path | None = None, *, resume: bool = False, force: bool = False) -> RunRecord:
    """Run a whole recipe in ``run_dir`` (default from the recipe) and write its reports."""
    quiet_transformers()
    acc = get_accelerator()
    run_dir = Path(run_dir or run_dir_of(cfg))
    started = time.time()
    with acc.main_process_first():
        resumed = claim_run_dir(run_dir, dump_resolved(cfg), resume=resume, force=force) if acc.is_main_process else True
    data = load_task(cfg.task)
    teacher, tok, teacher_info = prepare_teacher(cfg, data, run_dir, resumed)
    train_enc = encode_split(data.train, tok, cfg.task.max_length, cfg.task.max_train_examples)
    evals = encode_evals(data, tok, cfg.task.max_length, cfg.task.max_eval_examples)
    models = {"teacher": teacher}
    infos = {"teacher": teacher_info}
    logits = None
    for spec in cfg.students:
        if logits is None and spec.objective.kd_weight > 0:
            logits = teacher_logits(cfg, teacher, run_dir / "teacher", train_enc)
        name = student_name(spec)
        models[name], infos[name] = prepare_student(spec, cfg, data, teacher, tok, train_enc, evals, logits, run_dir)
    record = RunRecord(task=data.task, metric=data.primary_metric, info=run_info(cfg, run_dir, started))
    if acc.is_main_process:
        record.stages = measure_all(models, infos, data, evals, cfg, run_dir)
        finish(record, run_dir)
    acc.wait_for_everyone()
    return record


def prepare_teacher(cfg: RunConfig, data: TaskData, run_dir: Path, resumed: bool):
    """Load (and fine-tune, if the recipe asks) the teacher; saved to ``run_dir/teacher``."""
    out = run_dir / "teacher"
    if resumed and is_complete(out):
        model, tok = load_classifier(out, data.labels, data.is_regression)
        return model, tok, {"model_dir": "teacher", "source": cfg.teacher.model, "reused": True}
    src = resolve_model_dir(cfg.teacher.model)
    archs = check_model_dir(src).get("architectures") or []
    if cfg.teacher.finetune is None and not any("ForSequenceClassification" in a for a in archs):
        raise ModelError(
            f"{src}: has no classification head for task '{data.task}'; add a teacher.finetune section "
            "to the recipe to fine-tune it first"
        )
    model, tok = load_classifier(src, data.labels, data.is_regression)
    info = {"model_dir": "teacher", "source": str(cfg.teacher.model), "shape": shape_of(model)}
    if cfg.teacher.finetune is not None:
        spec = cfg.teacher.finetune
        enc = encode_split(data.train, tok, cfg.task.max_length, cfg.task.max_train_examples)
        evals = encode_evals(data, tok, cfg.task.max_length, cfg.task.max_eval_examples)
        objective = PredictionObjective(kd_weight=0.0, hard_weight=1.0, is_regression=data.is_regression)
        result = _train_stage(model, enc, evals, objective, spec, data, "teacher", run_dir, None)
        model = result.model
        info.update(train_info(result, spec, objective))
    if get_accelerator().is_main_process:
        save_model(model, tok, out)
    get_accelerator().wait_for_everyone()
    return model, tok, info


def teacher_logits(cfg: RunConfig, teacher, teacher_dir: Path, enc: Encoded) -> torch.Tensor:
    """Teacher logits on the training data, from the on-disk cache when present."""
    acc = get_accelerator()
    cache = Path(cfg.cache_dir) if cfg.cache_dir else default_cache_dir()
    bf16 = use_bf16(cfg.teacher.finetune.precision if cfg.teacher.finetune else "auto")
    with acc.main_process_first():
        logits, _hit = cached_teacher_logits(teacher, fingerprint(teacher_dir), enc, cache, bf16=bf16)
    return logits


def prepare_student(spec: StudentSpec, cfg: RunConfig, data, teacher, tok, enc, evals, logits, run_dir: Path):
    """Build, distil and save one student (or reload it when a resumed run already finished it)."""
    name = student_name(spec)
    out = run_dir / "students" / name
    init = f"teacher layers {spec.teacher_layers}" if spec.teacher_layers else "random"
    if is_complete(out):
        model, _ = load_classifier(out, data.labels, data.is_regression)
        return model, {"model_dir": f"students/{name}", "init": init, "reused": True, "shape": shape_of(model)}
    student = build_student(spec, teacher, seed=spec.train.seed)
    o = spec.objective
    objective = PredictionObjective(o.kd_weight, o.hard_weight, o.temperature, data.is_regression)
    result = _train_stage(student, enc, evals, objective, spec.train, data, name, run_dir, logits)
    if get_accelerator().is_main_process:
        save_model(result.model, tok, out)
    get_accelerator().wait_for_everyone()
    info = {"model_dir": f"students/{name}", "init": init, "shape": shape_of(result.model)}
    info.update(train_info(result, spec.train, objective))
    return result.model, info


def _train_stage(model, enc, evals, objective, spec: TrainSpec, data: TaskData, name: str, run_dir: Path, logits):
    """Train one stage; it always resumes from its checkpoints, which exist only in a resumed run."""
    bf16 = use_bf16(spec.precision)
    io = StageIO(name, run_dir / "checkpoints" / name, run_dir / "logs" / "train.jsonl", resume=True)
    evaluate = lambda m: evaluate_model(m, data, evals, bf16=bf16, batch_size=spec.eval_batch_size)  # noqa: E731
    return train(model, enc, objective, spec, io, evaluate, data.primary_metric, logits)


def shape_of(model) -> dict[str, int]:
    c = model.config
    return {"layers": c.num_hidden_layers, "hidden": c.hidden_size, "heads": c.num_attention_heads, "ffn": c.intermediate_size}


def train_info(result, spec: TrainSpec, objective: PredictionObjective) -> dict:
    return {
        "train_seconds": round(result.seconds, 1),
        "steps": result.steps,
        "stopped_by": result.stopped_by,
        "best_step": result.best_step,
        "budget_minutes": spec.budget_minutes,
        "precision": "bf16" if use_bf16(spec.precision) else "fp32",
        "objective": {"kd_weight": objective.kd_weight, "hard_weight": objective.hard_weight,
                      "temperature": objective.temperature},
        "history": result.history,
    }


def measure_all(models: dict, infos: dict, data: TaskData, evals: dict[str, Encoded], cfg: RunConfig, run_dir: Path) -> list[StageRecord]:
    """Metrics (fp32, as deployed), size on disk and speed of every model, measured side by side."""
    first_eval = next(iter(evals.values()))
    speed = measure_speed(models, first_eval, cfg.measure)
    stages = []
    for name, model in models.items():
        total, no_emb = count_params(model)
        s = speed[name]
        stages.append(StageRecord(
            name=name,
            metrics=evaluate_model(model, data, evals, bf16=False),
            params=total,
            params_no_embeddings=no_emb,
            disk_bytes=disk_bytes(run_dir / infos[name]["model_dir"]),
            latency_ms_p50_b1=s.latency_ms_p50_b1,
            latency_ms_p90_b1=s.latency_ms_p90_b1,
            throughput_b32=s.throughput_b32,
            info=infos[name],
        ))
    return stages


def run_info(cfg: RunConfig, run_dir: Path, started: float) -> dict:
    return {
        "run_name": cfg.name,
        "run_dir": str(run_dir),
        "created": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)),
        "machine": {"cpu": platform.processor() or platform.machine(), "threads": torch.get_num_threads(),
                    "torch": torch.__version__, "bf16_native": cpu_supports_bf16()},
        "processes": get_accelerator().num_processes,
    }


def finish(record: RunRecord, run_dir: Path) -> None:
    """Copy the best student to ``model/`` and write every report; results.json marks the run done."""
    record.info["seconds"] = round(time.time() - time.mktime(time.strptime(record.info["created"], "%Y-%m-%d %H:%M:%S")), 1)
    best = best_student(record) or record.teacher
    if best is not None:
        dst = run_dir / "model"
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(run_dir / best.info["model_dir"], dst)
        record.info["final_model"] = best.name
    write_all(record, run_dir)
