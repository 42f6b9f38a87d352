"""A student's compression steps, in order, each on a copy of the previous stage's model.

Each step is optionally recovered by distillation from the teacher and saved
(``students/<student>.<step>``); a resumed run reloads finished steps. The steps themselves are
``tinyplm.compress``; the recovery training is a stage like any other (``students.train_stage``).
"""

from __future__ import annotations

import copy
import shutil
import time
from dataclasses import replace
from pathlib import Path

from torch import nn

from tinyplm.compress import CompressContext, apply_step, controller
from tinyplm.compress.sparse import csr_bytes
from tinyplm.config.compress import SCHEDULED_KINDS, TERMINAL_KINDS, CompressStep, step_name
from tinyplm.config.schema import MeasureSpec, StageSpec, StudentSpec, student_name
from tinyplm.evaluate.agreement import prediction_agreement
from tinyplm.evaluate.model_eval import encode_evals
from tinyplm.evaluate.speed import measure_speed
from tinyplm.models import save_model, shape_of
from tinyplm.models.classic.config import FamilyConfig, family_shape
from tinyplm.models.head_loading import load_for_head
from tinyplm.report.info import CompressInfo, StageInfo
from tinyplm.report.records import StageKind
from tinyplm.run.inputs import RunInputs, stamp_task
from tinyplm.run.results import StageResult
from tinyplm.run.students import train_stage
from tinyplm.tasks.encoding import Encoded, encode_split
from tinyplm.train import get_accelerator


def run_compress(spec: StudentSpec, model: nn.Module, inp: RunInputs, parent: str | None) -> list[StageResult]:
    """The student's compression steps in order; ``parent`` is the reported stage the first step
    starts from (the student itself, or for a compress-only student the stage it copies)."""
    name = student_name(spec)
    results: list[StageResult] = []
    ctx = _context(inp, spec.train.seed) if spec.compress else None
    for step in spec.compress:
        stage = f"{name}.{step_name(step)}"
        out = inp.paths.student(stage)
        ctx.work_dir = inp.paths.work(stage)
        if (finished := inp.paths.finished(out)) is not None:
            model, tok = load_for_head(out, inp.data.labels, inp.data.is_regression, inp.data.head)
            if len(tok) != len(ctx.tokenizer):  # a trimmed vocabulary: its own encodings from here on
                ctx.tokenizer = tok
                ctx.train, ctx.evals = ctx.reencode(tok)
            info = replace(StageInfo.from_saved(finished, compressed=True), reused=True)
        else:
            parent_model = model
            model, info = _compress_step(copy.deepcopy(model), step, stage, out, ctx, inp)
            if step.kind in TERMINAL_KINDS:  # another runtime or precision: how often it predicts the same
                info.compress.agreement = prediction_agreement(
                    parent_model, model, ctx.evals, inp.data.is_regression, inp.data.head)
            if get_accelerator().is_main_process:
                inp.paths.save_info(out, info)
        own = ctx.evals if ctx.tokenizer is not inp.tokenizer else None
        results.append(StageResult(stage, model, f"students/{stage}", StageKind.COMPRESSED, _shape(model),
                                   parent=parent, compress_step=step.kind, info=info, evals=own))
        parent = stage
    return results


def _shape(model) -> dict:
    """The shape a report shows: a classic student's own (its arch and sizes; a static student on
    another runtime), else the encoder's."""
    return family_shape(model.config) if isinstance(model.config, FamilyConfig) else shape_of(model)


def _context(inp: RunInputs, seed: int) -> CompressContext:
    task = inp.task

    def reencode(tok):
        train = encode_split(inp.data.train, tok, task.max_length, task.max_train_examples)
        return train, encode_evals(inp.data, tok, task.max_length, task.max_eval_examples)

    # every encoded example's text (trim_vocab keeps what a window's cut or a pair's shared cut needs
    # from the whole text, so a text it is not shown may be refused): the encoded ones only, as their
    # pieces are the ones kept
    texts = [_text_pair(e) for e in inp.data.train.examples[:task.max_train_examples]]
    texts += [_text_pair(e) for split in inp.data.evals.values() for e in split.examples[:task.max_eval_examples]]
    # the student's ids (its own tokenizer's, if it has one); the teacher's logits on its own ids of
    # the same examples, carried to the student's rows and positions
    return CompressContext(inp.student_train, lambda: inp.targets(inp.student_train, inp.train),
                           inp.data.is_regression,
                           inp.paths.root / "work", seed=seed, head=inp.data.head, tokenizer=inp.student_tokenizer,
                           evals=inp.student_evals, texts=texts, reencode=reencode, timer=_timer(inp.measure))


def _timer(spec: MeasureSpec):
    """Sentences/s of models timed side by side by the run's own speed code (throughput only)."""
    quick = spec.model_copy(update={"latency_sentences": 1,
                                    "throughput_sentences": min(spec.throughput_sentences, 512)})

    def timer(models: dict[str, nn.Module], enc: Encoded) -> dict[str, float]:
        return {name: r.throughput_sent_per_s for name, r in measure_speed(models, enc, quick).items()}

    return timer


def _text_pair(example) -> tuple[str, str | None]:
    """An example of any head as the (text, pair) it is tokenised from."""
    if hasattr(example, "question"):  # SQuAD
        return example.question, example.context
    if hasattr(example, "tokens"):  # CoNLL
        return " ".join(example.tokens), None
    return example.text, example.text_pair


def _compress_step(model: nn.Module, step: CompressStep, stage: str, out: Path, ctx: CompressContext,
                   inp: RunInputs) -> tuple[nn.Module, StageInfo]:
    """Apply one compress step (with its recovery), save it -> (model, info for the report)."""
    acc = get_accelerator()
    t0 = time.perf_counter()
    model, done = apply_step(model, step, ctx)
    seconds = round(time.perf_counter() - t0, 1)  # the step itself, its recovery not counted
    during = controller(model, step, ctx) if step.kind in SCHEDULED_KINDS else None
    if step.recover is not None:
        r = step.recover  # a step acting during training must end at its final state: no best-checkpoint restore
        train_spec = r.train if during is None else r.train.model_copy(update={"keep_best": False})
        recovery = StageSpec(name="recover", data=r.data, objective=r.objective, train=train_spec)
        trained = train_stage(model, recovery, inp, f"{stage}/recover", f"{stage}.recover",
                              during.on_step if during else None)
        model, recovered = trained.model, trained.info
    else:
        recovered = None
    if during is not None:  # sparsity made permanent (saved dense) / QAT converted to int8
        model, finished = during.finish(model)
        done = {**done, **finished}
    made = CompressInfo.from_step(step.model_dump(exclude={"recover"}, exclude_none=True), done,
                                  step_seconds=seconds, recover=recovered)
    if acc.is_main_process:
        stamp_task(model, inp.task)
        save_model(model, ctx.tokenizer, out)
        shutil.rmtree(ctx.work_dir, ignore_errors=True)
        if made.sparsity is not None:  # the CSR form, written beside the model to measure sparse storage
            made.sparse_bytes = csr_bytes(model, out / "sparse" / "model.csr.safetensors")
    acc.wait_for_everyone()
    return model, StageInfo(compress=made)
