"""The stages of one student: build or load it, then run its training stages in order.

A student has one stage (its ``objective`` and ``train``) or a list of ``stages``; each stage's
output is saved (``students/<name>.stage-<k>/``, the last one ``students/<name>/``) and is where
the next one starts, so a resumed run skips finished stages. Stage data is the task's training
set, its TinyBERT augmentation, or unlabelled corpus text (general distillation with the
teacher's base checkpoint).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch

from tinyplm.config.schema import StageSpec, StudentSpec, TrainSpec, student_name
from tinyplm.distill.aligned_pieces import TeacherPieces, align
from tinyplm.distill.embedding import with_start
from tinyplm.distill.mlm import with_mlm_head
from tinyplm.distill.objective import stage_objective
from tinyplm.errors import ModelError
from tinyplm.evaluate.model_eval import evaluate_model
from tinyplm.models import build_student, resolve_model_dir, roles, save_model, shape_of
from tinyplm.models.head_loading import load_for_head
from tinyplm.models.infer import use_bf16
from tinyplm.models.token_ids import token_id_mismatch
from tinyplm.report.info import StageInfo, training_from_saved
from tinyplm.report.records import StageKind
from tinyplm.run.classic import run_classic
from tinyplm.run.inputs import RunInputs, stamp_task
from tinyplm.run.results import StageResult, StudentOutcome, TrainedStage, train_info
from tinyplm.tasks.encoding import Encoded
from tinyplm.tasks.heads import Head
from tinyplm.tasks.holdout import selection_evals, selection_metric
from tinyplm.train import StageIO, get_accelerator, train
from tinyplm.train.progress import JsonlLog

log = logging.getLogger(__name__)


def initial_student(spec: StudentSpec, inp: RunInputs) -> tuple[torch.nn.Module, str, RunInputs]:
    """The student before its first stage, how it was initialised, and the run's inputs as it
    reads them: ``inp`` itself, or a copy in its own token ids (:meth:`RunInputs.with_tokenizer`)
    when it starts from a checkpoint, or an earlier student, whose tokenizer is not the teacher's."""
    if spec.init_from == "teacher":
        return copy.deepcopy(inp.teachers.finetuned), "the fine-tuned teacher", inp
    if spec.init_from in inp.students:
        own = inp.student_tokens.get(spec.init_from)
        view = inp if own is None else replace(inp, own=own)
        return copy.deepcopy(inp.students[spec.init_from]), f"student {spec.init_from}", view
    if spec.init_from:
        stages = spec.stage_specs()
        torch.manual_seed(stages[0].train.seed if stages else 0)  # a head it lacks starts the same every run
        data = inp.data
        # the student is trained on the task next: a trained head that does not fit it is replaced
        model, tok = load_for_head(resolve_model_dir(spec.init_from), data.labels, data.is_regression, data.head,
                                   replace_head=True)
        init = f"from {spec.init_from}" + _compared_as_judged(model, data.similarity)
        if token_id_mismatch(tok, inp.tokenizer) is None:
            return model, init, inp
        view = inp.with_tokenizer(tok)
        cut = "; ".join(c.sentence() for c in view.own.cut)  # the teacher's own count is the run's note
        if cut:
            log.warning("student %s: in its own tokenizer's pieces, task.max_length: %s", student_name(spec), cut)
        return model, f"{init}, its own tokenizer" + (f" (in its pieces {cut})" if cut else ""), view
    first = spec.stage_specs()[0]
    init = f"teacher layers {spec.teacher_layers}" if spec.teacher_layers else "random"
    # DistilBERT copies layers of the teacher it distils from first (the base model for general
    # distillation), not of the fine-tuned task teacher.
    finetuned = inp.teachers.finetuned
    source = inp.teachers.get(first.teacher, first.objective.masked_lm) if spec.teacher_layers else finetuned
    if spec.teacher_layers and first.teacher != "finetuned":
        init += f" of the {first.teacher} teacher"
    if spec.word_embeddings:
        init += ", the teacher's word table"
    model = build_student(spec, source, seed=first.train.seed, task_model=finetuned, arch=spec.arch,
                          word_embeddings=spec.word_embeddings)
    arch = model.config.model_type
    return model, init if arch == "bert" else f"{arch}, {init}", inp


def _compared_as_judged(model: torch.nn.Module, similarity: str | None) -> str:
    """Give a sentence model a student starts from (``layout``: its sentence-transformers layout)
    the similarity its run judges every model by (the teacher's, ``similarity``), so that it is
    saved declaring the comparison it was measured and chosen by (it was saved with its own: a
    dot-product run's student said cosine, and read otherwise in embed-eval and in
    sentence-transformers); -> the words for its report's init line ('' when nothing changed)."""
    layout = getattr(model, "layout", None)
    if layout is None or layout.similarity == similarity:
        return ""
    model.layout = replace(layout, similarity=similarity)
    return f" (compared by the teacher's {similarity or 'cosine'}, not its own {layout.similarity or 'cosine'})"


def run_student(spec: StudentSpec, inp: RunInputs) -> StudentOutcome:
    """Build (or reload) one student and run its stages in order (a classic student:
    :func:`tinyplm.run.classic.run_classic`)."""
    if spec.family is not None:
        return run_classic(spec, inp)
    name = student_name(spec)
    model, init, inp = initial_student(spec, inp)
    if spec.compress_only:  # a copy of its source, not saved or reported on its own
        return StudentOutcome(model, None, spec.init_from, inp)
    stages = spec.stage_specs()
    acc, infos = get_accelerator(), []
    for k, stage in enumerate(stages):
        label = stage.name or (f"stage-{k}" if len(stages) > 1 else "")
        stage_dir = inp.paths.student(name if k == len(stages) - 1 else f"{name}.stage-{k}")
        if (finished := inp.paths.finished(stage_dir)) is not None:
            model = reload_stage(model, stage, stage_dir, inp)
            infos.append(replace(training_from_saved(finished), reused=True))
            continue
        done = train_stage(model, stage, inp, f"{name}/{label}" if label else name, f"{name}.stage-{k}")
        model = done.model
        infos.append(replace(done.info, stage=label, data=stage.data, teacher=stage.teacher))
        if acc.is_main_process:
            stamp_task(done.saved, inp.task)
            save_model(done.saved, inp.student_tokenizer, stage_dir)
            inp.paths.save_info(stage_dir, infos[-1])
        acc.wait_for_everyone()
    result = StageResult(name, model, f"students/{name}", StageKind.STUDENT, shape_of(model),
                         info=StageInfo(init=init, training=infos), evals=inp.own.evals if inp.own else None)
    return StudentOutcome(model, result, name, inp)


def reload_stage(model: torch.nn.Module, stage: StageSpec, stage_dir: Path, inp: RunInputs) -> torch.nn.Module:
    """The student after a finished stage saved in ``stage_dir``, as a run that never stopped holds
    it. A masked-LM stage is saved with its masked-LM head and no task head: its encoder goes back
    into ``model`` (the student before that stage), whose task head the next stage trains on, as
    :func:`train_stage` hands it on. Raises ``ModelError`` for a saved stage missing encoder weights."""
    if not stage.objective.masked_lm:
        return load_for_head(stage_dir, inp.data.labels, inp.data.is_regression, inp.data.head)[0]
    from safetensors.torch import load_file

    encoder = roles.base_model(model)
    prefix = roles.roles_of(model).base + "."
    saved = {k.removeprefix(prefix): v for k, v in load_file(str(stage_dir / "model.safetensors")).items()
             if k.startswith(prefix)}
    missing = sorted(set(encoder.state_dict()) - set(saved))
    if missing:
        raise ModelError(f"{stage_dir}: the saved masked-LM stage lacks encoder weights {', '.join(missing[:3])}; "
                         "delete that folder and run again with --resume (the stages before it are kept)")
    encoder.load_state_dict(saved, strict=False)
    return model


def train_stage(model, stage: StageSpec, inp: RunInputs, log_name: str, ckpt_name: str,
                step_hook: Callable[[float], None] | None = None) -> TrainedStage:
    """Train one stage of ``model`` (continuing from its checkpoints, if any).

    A masked-LM stage (DistilBERT) trains the classifier's encoder through a masked-LM head
    shared with it and saves the student *with* that head (a reusable general student that
    ``fit-mlm-head``-style tools and augmentation can use too); the task head is untouched.
    """
    enc, teacher_enc = inp.stage_encodings(stage.data)  # one object unless the student has its own tokenizer
    masked_lm = stage.objective.masked_lm
    teacher = inp.teachers.get(stage.teacher, masked_lm)
    head = Head(inp.data.head) if stage.data != "corpus" else Head.SEQUENCE  # corpus text: no task labels
    objective = stage_objective(stage.objective, model, teacher, inp.data.is_regression, inp.student_tokenizer,
                                head, inp.data.class_weights if stage.data != "corpus" else None)
    if enc is not teacher_enc and objective.needs_teacher:
        objective.read_teacher_from(teacher_pieces(inp, enc, teacher_enc, log_name))
    trained = with_mlm_head(model, teacher) if masked_lm else model
    predicts = stage.objective.predicts
    spec = stage.train if predicts else stage.train.model_copy(update={"keep_best": False, "eval_every": 0})
    io = StageIO(log_name, inp.paths.checkpoints(ckpt_name), inp.paths.log, resume=True)
    result = train(trained, enc, objective, spec=spec, io=io, primary=selection_metric(inp.data),
                   evaluate=evaluator(inp, stage.train) if predicts else None,
                   teacher_logits=stage_targets(inp, stage, model, enc, teacher_enc) if objective.needs_teacher_logits
                   else None, teacher=teacher if objective.needs_teacher else None, step_hook=step_hook)
    shown = stage.objective.model_dump(exclude=None if masked_lm else {"mask_rate"})
    info = replace(train_info(result, stage.train, shown), examples=len(enc))
    return TrainedStage(model if masked_lm else result.model, result.model, info)


def teacher_pieces(inp: RunInputs, enc: Encoded, teacher_enc: Encoded, log_name: str) -> TeacherPieces:
    """The teacher's encoding of a stage's examples and its positions matched with the student's
    (another tokenizer's: ``distill.aligned_pieces``), with the share aligned in the run's log."""
    alignment = align(teacher_enc, inp.tokenizer, enc, inp.student_tokenizer)
    JsonlLog(inp.paths.log, log_name, get_accelerator().is_main_process).write(
        event="aligned_pieces", aligned=alignment.aligned, positions=alignment.total, share=round(alignment.share, 4))
    return TeacherPieces(teacher_enc, alignment)


def stage_targets(inp: RunInputs, stage: StageSpec, model: torch.nn.Module, enc: Encoded,
                  teacher_enc: Encoded) -> torch.Tensor:
    """What the stage's student learns towards: the teacher's logits or vectors of ``teacher_enc``
    (on the student's pieces when it reads another tokenizer: :meth:`RunInputs.targets`), with the
    student's own start vectors of ``enc`` beside them when the objective keeps a share of its
    start (``keep_start``, :func:`tinyplm.distill.embedding.with_start`)."""
    return with_start(inp.targets(enc, teacher_enc), model, enc, stage.objective.keep_start,
                      bf16=use_bf16(stage.train.eval_precision))


def evaluator(inp: RunInputs, spec: TrainSpec) -> Callable[[torch.nn.Module], dict[str, float]]:
    """Evaluation during training, which keeps the best checkpoint: on the held-out training
    examples when the task has them, else on dev (``tasks.holdout``); in the stage's
    ``eval_precision``, fp32 by default."""
    bf16 = use_bf16(spec.eval_precision)
    evals = selection_evals(inp.data, inp.student_evals)
    return lambda m: evaluate_model(m, inp.data, evals, bf16=bf16, batch_size=spec.eval_batch_size)
