"""run(cfg) -> RunRecord: the only place that knows the order of the stages.

task data -> teacher (fine-tuned if asked) -> students (distilled) -> measure all side by side
-> report. Every stage's output is saved in the run dir as it completes, so ``resume`` skips
finished stages and continues an interrupted one from its last checkpoint.
"""

from __future__ import annotations

import platform
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from tinyplm import tasks
from tinyplm.config.load import dump_resolved
from tinyplm.config.schema import MeasureSpec, RunConfig, TaskSpec, student_name
from tinyplm.distill import PredictionObjective
from tinyplm.train import StageIO, get_accelerator, train
from tinyplm.errors import ModelError, RecipeError, TinyplmError
from tinyplm.evaluate.model_eval import encode_evals, evaluate_model
from tinyplm.evaluate.size import count_params, disk_bytes
from tinyplm.evaluate.speed import measure_speed
from tinyplm.models import (
    check_model_dir,
    is_complete,
    load_classifier,
    load_tokenizer,
    quiet_transformers,
    resolve_model_dir,
    save_model,
    shape_of,
)
from tinyplm.models.infer import cpu_supports_bf16, use_bf16
from tinyplm.models.loading import HEAD_ARCH
from tinyplm.report import RunRecord, StageRecord, best_student, write_all
from tinyplm.pretrain.mlm_head import has_mlm_head
from tinyplm.files import claim_run_dir
from tinyplm.run.students import StageInputs, run_compress, run_student, stage_list, train_info
from tinyplm.tasks.base import TaskData
from tinyplm.tasks.encoding import Encoded, encode_split


def run_dir_of(cfg: RunConfig) -> Path:
    """The run directory a recipe writes to."""
    return Path(cfg.output_dir.replace("{name}", cfg.name))


def load_task(spec: TaskSpec) -> TaskData:
    """Read the task's train and eval splits (see :func:`tinyplm.tasks.load_task`)."""
    return tasks.load_task(spec)


def run(cfg: RunConfig, run_dir: Path | None = None, *, resume: bool = False, force: bool = False) -> RunRecord:
    """Run a whole recipe in ``run_dir`` (default from the recipe) and write its reports."""
    quiet_transformers()
    acc = get_accelerator()
    run_dir = Path(run_dir or run_dir_of(cfg))
    started = time.time()
    checked = preflight(cfg)  # bad input fails here, before the run dir is touched
    data, teacher_src, tok = checked.data, checked.teacher_dir, checked.tokenizer
    claim = None
    with acc.main_process_first():
        if acc.is_main_process:
            claim = claim_run_dir(run_dir, dump_resolved(cfg), resume=resume, force=force)
    resumed = claim.resumed if claim else True
    try:
        return _run_claimed(cfg, run_dir, data, teacher_src, tok, resumed, started)
    finally:
        if claim is not None:
            claim.release()


def _run_claimed(cfg, run_dir, data, teacher_src, tok, resumed, started) -> RunRecord:
    acc = get_accelerator()
    train_enc = encode_split(data.train, tok, cfg.task.max_length, cfg.task.max_train_examples)
    evals = encode_evals(data, tok, cfg.task.max_length, cfg.task.max_eval_examples)
    teacher, tok, teacher_info = prepare_teacher(cfg, data, teacher_src, (train_enc, evals), run_dir, resumed)
    models = {"teacher": teacher}
    infos = {"teacher": teacher_info}
    evals_of: dict[str, dict[str, Encoded]] = {}
    inputs = StageInputs(cfg, data, teacher, run_dir / "teacher", teacher_src, tok, train_enc, evals, run_dir)
    for spec in cfg.students:
        name = student_name(spec)
        model, info = run_student(spec, inputs)
        inputs.students[name] = model
        if spec.stages == []:  # only compressed: its starting point is reported where it came from
            source = spec.init_from if spec.init_from in models else None
        else:
            models[name], infos[name], source = model, info, name
        for stage, model, info, own_evals in run_compress(spec, model, inputs, source):
            models[stage], infos[stage] = model, info
            if own_evals is not None:  # a trimmed vocabulary: measured on its own token ids
                evals_of[stage] = own_evals
    record = RunRecord(task=data.task, metric=data.primary_metric, info=run_info(cfg, run_dir, started))
    if acc.is_main_process:
        record.stages = measure_all(models, infos, data, evals, cfg, run_dir, evals_of)
        finish(record, run_dir)
    acc.wait_for_everyone()
    return record


@dataclass(frozen=True)
class Preflight:
    """What a run reads, checked before anything is written: the task's data, the teacher's
    directory and its tokenizer."""

    data: TaskData
    teacher_dir: Path
    tokenizer: object


def preflight(cfg: RunConfig) -> Preflight:
    """Check everything a run reads before it writes anything: the task's data files (every
    line), the teacher directory, its tokenizer, and that a teacher used as is has a head.

    Returns (task data, teacher dir, its tokenizer); raises ``TinyplmError`` subclasses naming the
    problem.
    """
    data = load_task(cfg.task)
    src = resolve_model_dir(cfg.teacher.model)
    model_cfg = check_model_dir(src)
    tok = load_tokenizer(src, int(model_cfg["vocab_size"]))
    layerwise = any(st.objective.layerwise for spec in cfg.students for st in stage_list(spec))
    if layerwise and model_cfg["model_type"] != "bert":
        raise ModelError(f"{src}: layer-wise distillation needs a BERT teacher; this one is '{model_cfg['model_type']}'")
    archs = model_cfg.get("architectures") or []
    needs_head = not cfg.students or any(st.teacher == "finetuned" for spec in cfg.students for st in stage_list(spec))
    suffix = HEAD_ARCH[data.head]
    if needs_head and cfg.teacher.finetune is None and not any(suffix in a for a in archs):
        raise ModelError(
            f"{src}: has no {data.head} head ({suffix}) for task '{data.task}'; add a teacher.finetune section "
            "to the recipe to fine-tune it first"
        )
    if data.head != "sequence" and any(
            st.data == "augmented" for spec in cfg.students for st in stage_list(spec)):
        raise RecipeError(f"data: augmented (TinyBERT word replacement) is for sentence tasks; task '{data.task}' "
                          f"has a {data.head} head whose labels are tied to word positions")
    for spec in cfg.students:
        if spec.init_from and spec.init_from != "teacher" and cfg.earlier_student(spec) is None:
            try:
                check_model_dir(Path(spec.init_from))
            except ModelError as exc:
                names = [student_name(s) for s in cfg.students[:cfg.students.index(spec)]]
                hint = f" (nor 'teacher' or an earlier student: {names})" if names else " (nor 'teacher')"
                raise ModelError(f"student {student_name(spec)}: init_from: {exc}{hint}") from None
        for k, st in enumerate(stage_list(spec)):
            _check_stage_teacher(st, src, int(model_cfg["vocab_size"]), f"student {student_name(spec)}, stage {k}")
    return Preflight(data, src, tok)


def _check_stage_teacher(stage, src: Path, vocab_size: int, where: str) -> None:
    """A stage's own teacher (``base`` or a dir) exists, shares the vocabulary, and has a masked-LM
    head when the stage's objective needs one."""
    if stage.teacher == "finetuned":
        return
    path = src if stage.teacher == "base" else resolve_model_dir(stage.teacher)
    cfg = check_model_dir(path)
    if int(cfg.get("vocab_size", -1)) != vocab_size:
        raise ModelError(f"{where}: teacher {path} has a vocabulary of {cfg.get('vocab_size')} word pieces, "
                         f"the run's tokenizer {vocab_size}; a stage teacher must share the tokenizer")
    if stage.objective.masked_lm and not has_mlm_head(path):
        raise ModelError(f"{where}: mlm_soft/mlm_hard need a teacher with a masked-LM head and {path} has none; "
                         f"fit one with `tinyplm fit-mlm-head {path} --corpus PATH --out DIR` and use "
                         "'teacher: DIR' (or DIR as teacher.model)")


def prepare_teacher(cfg: RunConfig, data: TaskData, src: Path, encoded: tuple, run_dir: Path, resumed: bool):
    """Load (and fine-tune on ``encoded`` = (train, evals), if the recipe asks) the teacher;
    saved to ``run_dir/teacher``."""
    out = run_dir / "teacher"
    if resumed and is_complete(out):
        model, tok = load_classifier(out, data.labels, data.is_regression, data.head)
        return model, tok, {"model_dir": "teacher", "source": cfg.teacher.model, "reused": True}
    model, tok = load_classifier(src, data.labels, data.is_regression, data.head)
    info = {"model_dir": "teacher", "source": str(cfg.teacher.model), "shape": shape_of(model)}
    if cfg.teacher.finetune is not None:
        spec = cfg.teacher.finetune
        enc, evals = encoded
        objective = PredictionObjective(kd_weight=0.0, hard_weight=1.0, is_regression=data.is_regression, head=data.head)
        bf16 = use_bf16(spec.precision)
        io = StageIO("teacher", run_dir / "checkpoints" / "teacher", run_dir / "logs" / "train.jsonl", resume=True)
        evaluate = lambda m: evaluate_model(m, data, evals, bf16=bf16, batch_size=spec.eval_batch_size)  # noqa: E731
        result = train(model, enc, objective, spec, io, evaluate, data.primary_metric)
        model = result.model
        info.update(train_info(result, spec, {"hard_weight": 1.0}))
    if get_accelerator().is_main_process:
        save_model(model, tok, out)
    get_accelerator().wait_for_everyone()
    return model, tok, info


def measure_all(models: dict, infos: dict, data: TaskData, evals: dict[str, Encoded], cfg: RunConfig, run_dir: Path,
                evals_of: dict[str, dict[str, Encoded]] | None = None) -> list[StageRecord]:
    """Every model of a run measured side by side (see :func:`measure_models`)."""
    dirs = {name: run_dir / infos[name]["model_dir"] for name in models}
    return measure_models(models, dirs, infos, data, evals, cfg.measure, evals_of)


def measure_models(
    models: dict, dirs: dict[str, Path], infos: dict, data: TaskData, evals: dict[str, Encoded], spec: MeasureSpec,
    evals_of: dict[str, dict[str, Encoded]] | None = None,
) -> list[StageRecord]:
    """Metrics (fp32, as deployed), size of the saved dir, and speed, all models side by side.

    ``evals_of`` gives the encodings of models with their own tokenizer (a trimmed vocabulary:
    the same pieces under other ids, so the same lengths and the same timing work)."""
    evals_of = evals_of or {}
    first = {name: next(iter(evals_of.get(name, evals).values())) for name in models}
    speed = measure_speed(models, next(iter(evals.values())), spec, per_model=first)
    stages = []
    for name, model in models.items():
        total, no_emb = count_params(model)
        s = speed[name]
        stages.append(StageRecord(
            name=name, metrics=evaluate_model(model, data, evals_of.get(name, evals), bf16=False), params=total,
            params_no_embeddings=no_emb, disk_bytes=disk_bytes(dirs[name]), latency_ms_p50_b1=s.latency_ms_p50_b1,
            latency_ms_p90_b1=s.latency_ms_p90_b1, throughput_b32=s.throughput_b32, info=infos[name],
        ))
    return stages


def bench(model_dirs: list[Path], task: TaskSpec, rounds: int = 3) -> RunRecord:
    """Saved models (the first is the reference, named ``teacher``) measured side by side.

    Raises ``TinyplmError`` when the models tokenise differently (speed is timed on one set of ids).
    """
    data = load_task(task)
    models, encs, dirs, infos = {}, {}, {}, {}
    for i, d in enumerate(model_dirs):
        name = "teacher" if i == 0 else (d.name if d.name not in models else f"{d.parent.name}-{d.name}")
        models[name], tok = load_classifier(d, data.labels, data.is_regression, data.head)
        encs[name] = encode_evals(data, tok, task.max_length, task.max_eval_examples)
        dirs[name], infos[name] = d, {"model_dir": str(d)}
    if len({next(iter(e.values())).fingerprint() for e in encs.values()}) > 1:
        raise TinyplmError("bench times every model on the same token ids, but these models use different tokenizers")
    record = RunRecord(task=data.task, metric=data.primary_metric, info={"bench": [str(d) for d in model_dirs]})
    record.stages = measure_models(models, dirs, infos, data, encs["teacher"], MeasureSpec(rounds=rounds))
    return record


def run_info(cfg: RunConfig, run_dir: Path, started: float) -> dict:
    return {
        "run_name": cfg.name,
        "run_dir": str(run_dir),
        "created": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)),
        "started_unix": round(started, 3),
        "machine": {"cpu": platform.processor() or platform.machine(), "threads": torch.get_num_threads(),
                    "torch": torch.__version__, "bf16_native": cpu_supports_bf16()},
        "processes": get_accelerator().num_processes,
    }


def finish(record: RunRecord, run_dir: Path) -> None:
    """Copy the best student to ``model/`` and write every report; results.json marks the run done."""
    record.info["seconds"] = round(time.time() - record.info["started_unix"], 1)
    best = best_student(record) or record.teacher
    if best is not None:
        dst = run_dir / "model"
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(run_dir / best.info["model_dir"], dst)
        record.info["final_model"] = best.name
    write_all(record, run_dir)
