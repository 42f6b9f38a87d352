"""The embedding task's static student in the run (``family.arch: static_sentence``): made as
Model2Vec makes one, trained on the teacher's sentence vectors, saved, measured.

1. The table (:func:`sentence_student`): each piece kept goes through the teacher's whole sentence
   pipeline alone (``[CLS] piece [SEP]``: its pooling, Dense layers and normalisation included,
   :func:`~tinyplm.models.classic.static_init.sentence_piece_vectors`), PCA to
   ``family.static.dims``, Zipf or SIF weights
   (:func:`~tinyplm.models.classic.static_sentence.static_sentence_student`). The pieces kept are the
   whole vocabulary by default (``tokens: all``): an embedding model meets any text, and a piece the
   training texts never use keeps its Model2Vec vector instead of reading ``[UNK]``'s row, weight 0;
   ``tokens: used`` keeps the training texts' pieces only (a smaller file).
2. Training (:func:`train_sentence_stage`): the one loop (:func:`tinyplm.train.train`: checkpoints,
   resume, keep-best on the held-out split's metric) with the stage's vector terms
   (:func:`tinyplm.distill.objective.stage_objective`: an
   :class:`~tinyplm.distill.embedding.EmbeddingObjective`, whose projection to the teacher's width
   trains beside the table and is never saved). The texts reach the student in the teacher's token
   ids, so row i of the task's training encoding is row i of the teacher's vectors. The table
   trains in fp32 whatever ``train.precision`` says (a lookup and a mean gain nothing from bf16,
   and bf16 steps would round small updates of the table away).
3. Saved by :func:`tinyplm.models.save_model` (the model's ``save_to``: the static sentence layout,
   which sentence-transformers loads too), the table stored as ``family.static.table_dtype``.

The vectors are always L2-normalised: the task's metrics are cosines, and the teacher's encodings
hand the student ``[CLS]``/``[SEP]``, which weigh 0 but count in the mean's ``n``; normalised, the
vector of those ids is the one the saved model gives for the text (in tinyplm and in ST).
"""

from __future__ import annotations

import time
from dataclasses import replace

import torch
from torch import nn

from tinyplm.config.base import VECTOR_TERMS
from tinyplm.config.classic import FamilySpec
from tinyplm.config.schema import StageSpec, StudentSpec, student_name
from tinyplm.distill.embedding import with_start
from tinyplm.distill.objective import stage_objective
from tinyplm.errors import RecipeError, TinyplmError
from tinyplm.evaluate.model_eval import evaluate_model
from tinyplm.models import resolve_model_dir, save_model
from tinyplm.models.classic.static_init import TrainingPieces, kept_pieces, piece_counts, sentence_piece_vectors
from tinyplm.models.classic.static_sentence import (
    StaticSentenceEncoder,
    static_sentence_shape,
    static_sentence_student,
)
from tinyplm.models.head_loading import load_for_head
from tinyplm.models.infer import use_bf16
from tinyplm.report.info import ClassicInfo, StageInfo, StaticTableInfo, TrainingInfo, training_from_saved
from tinyplm.report.records import StageKind
from tinyplm.run.inputs import RunInputs, stamp_task
from tinyplm.run.results import StageResult, StudentOutcome, train_info
from tinyplm.tasks.holdout import selection_evals, selection_metric
from tinyplm.train import StageIO, get_accelerator, train


def run_static_sentence(spec: StudentSpec, inp: RunInputs) -> StudentOutcome:
    """Build, train and save one static sentence student -> its outcome (reloaded when a finished
    one is in the run dir). ``run.preflight`` has checked that the task is the embedding task."""
    name, acc = student_name(spec), get_accelerator()
    out = inp.paths.student(name)
    if (finished := inp.paths.finished(out)) is not None:
        model, _ = load_for_head(out, inp.data.labels, False, inp.data.head)
        return _outcome(name, model, replace(StageInfo.from_saved(finished), reused=True))
    model, info = _train_stages(spec, inp)
    if acc.is_main_process:
        stamp_task(model, inp.task)
        save_model(model, inp.tokenizer, out)
        inp.paths.save_info(out, info)
    acc.wait_for_everyone()
    return _outcome(name, model, info)


def _outcome(name: str, model: nn.Module, info: StageInfo) -> StudentOutcome:
    """Scored and timed on the teacher's encodings of the eval sets (the student reads its ids)."""
    result = StageResult(name, model, f"students/{name}", StageKind.STUDENT, static_sentence_shape(model.config),
                         info=info)
    return StudentOutcome(model, result, name)


def _train_stages(spec: StudentSpec, inp: RunInputs) -> tuple[StaticSentenceEncoder, StageInfo]:
    """The student's stages in order (each saved as ``students/<name>.stage-<k>`` when there are
    several, so a resumed run skips finished ones) -> (model, info)."""
    name, stages = student_name(spec), spec.stage_specs()
    torch.manual_seed(stages[0].train.seed)
    model, made = sentence_student(spec.family, inp)
    infos = []
    for k, stage in enumerate(stages):
        last = k == len(stages) - 1
        label = stage.name or (f"stage-{k}" if len(stages) > 1 else "")
        stage_dir = inp.paths.student(f"{name}.stage-{k}")
        if not last and (finished := inp.paths.finished(stage_dir)) is not None:
            model, _ = load_for_head(stage_dir, inp.data.labels, False, inp.data.head)
            infos.append(replace(training_from_saved(finished), reused=True))
            continue
        model, info = train_sentence_stage(model, stage, inp, f"{name}/{label}" if label else name,
                                           f"{name}.stage-{k}")
        infos.append(replace(info, stage=label, data=stage.data))
        if not last and get_accelerator().is_main_process:
            save_model(model, inp.tokenizer, stage_dir)
            inp.paths.save_info(stage_dir, infos[-1])
    return model, replace(made, training=infos)


def sentence_student(fam: FamilySpec, inp: RunInputs) -> tuple[StaticSentenceEncoder, StageInfo]:
    """The untrained student (see the module docstring, step 1) and how it was made. The pieces
    go through ``fam.encoder``: the run's teacher (``base``, ``finetuned``) or a sentence model dir.
    Raises ``RecipeError`` naming ``family.static`` when the table cannot have ``dims`` columns."""
    from tinyplm.models.embedder import load_embedder

    s, tok = fam.static, inp.tokenizer
    source = inp.teachers.finetuned if fam.encoder in ("base", "finetuned") else \
        load_embedder(resolve_model_dir(fam.encoder)).model
    texts = inp.stage_data.get("task").input_ids
    kept = kept_pieces(tok, len(tok), s.tokens, TrainingPieces(texts))
    t0 = time.perf_counter()
    try:
        model = static_sentence_student(lambda ids: sentence_piece_vectors(source, tok, ids, s.batch_size), tok,
                                        s.dims, s.weighting, kept, piece_counts(texts, len(tok)), True,
                                        table_dtype=s.table_dtype, a=s.sif_a)
    except TinyplmError as exc:
        raise RecipeError(f"family.static: {exc} (fewer dims, or static.tokens: all)") from None
    table = StaticTableInfo(pieces=model.config.table_rows, vocabulary=len(tok),
                            table_seconds=round(time.perf_counter() - t0, 1))
    init = f"{fam.encoder} sentence model's piece vectors, PCA {s.dims}, {s.weighting} weights"
    return model, StageInfo(init=init, classic=ClassicInfo(table=table))


def train_sentence_stage(model: StaticSentenceEncoder, stage: StageSpec, inp: RunInputs, log_name: str,
                         ckpt_name: str) -> tuple[StaticSentenceEncoder, TrainingInfo]:
    """One stage by the one training loop (see the module docstring, step 2) -> (trained model,
    info for the report)."""
    enc = inp.stage_data.get(stage.data)
    objective = stage_objective(stage.objective, model, inp.teachers.finetuned, False, inp.tokenizer, inp.data.head)
    spec = stage.train.model_copy(update={"precision": "fp32"})
    bf16, chosen_on = use_bf16(spec.eval_precision), selection_evals(inp.data, inp.evals)
    result = train(model, enc, objective, spec=spec, primary=selection_metric(inp.data),
                   io=StageIO(log_name, inp.paths.checkpoints(ckpt_name), inp.paths.log, resume=True),
                   evaluate=lambda m: evaluate_model(m, inp.data, chosen_on, bf16=bf16,
                                                     batch_size=spec.eval_batch_size),
                   teacher_logits=with_start(inp.teachers.logits(enc), model, enc, stage.objective.keep_start,
                                             bf16=bf16))
    shown = stage.objective.model_dump(include={*VECTOR_TERMS, "keep_start", "similarity_memory"})
    return result.model, replace(train_info(result, spec, shown, method=False), examples=len(enc))
