"""The stages of one student: build or load it, then run its distillation stages in order.

A student has one stage (its ``objective`` and ``train``) or a list of ``stages``; each stage's
output is saved (``students/<name>/stage-<k>/``) and is where the next one starts, so a resumed
run skips finished stages. Stage data is the task's training set, its TinyBERT augmentation, or
unlabelled corpus text (general distillation with the teacher's base checkpoint).
"""

from __future__ import annotations

import copy
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from tinyplm.config.schema import RunConfig, StageSpec, StudentSpec, TrainSpec, student_name
from tinyplm.distill import cached_teacher_logits, default_cache_dir
from tinyplm.train import StageIO, get_accelerator, train
from tinyplm.distill.mlm import with_mlm_head
from tinyplm.distill.objective import build_objective
from tinyplm.evaluate.model_eval import evaluate_model
from tinyplm.models import build_student, fingerprint, is_complete, load_classifier, save_model, shape_of
from tinyplm.models.infer import use_bf16
from tinyplm.tasks.base import Example, Split, TaskData
from tinyplm.tasks.encoding import Encoded, encode_split


@dataclass
class StageInputs:
    """What stages of a run share: task data, both teachers, encodings (made once, on demand)."""

    cfg: RunConfig
    data: TaskData
    teacher: torch.nn.Module
    teacher_dir: Path
    teacher_src: Path
    tokenizer: object
    train_enc: Encoded
    evals: dict[str, Encoded]
    run_dir: Path
    students: dict[str, torch.nn.Module] = field(default_factory=dict)  # finished students, by name
    _cache: dict = field(default_factory=dict)

    @property
    def cache_dir(self) -> Path:
        return Path(self.cfg.cache_dir) if self.cfg.cache_dir else default_cache_dir()

    def encoded(self, kind: str) -> Encoded:
        """Training data of a stage: ``task``, ``augmented`` or ``corpus`` (each built once)."""
        if kind not in self._cache:
            self._cache[kind] = {"task": lambda: self.train_enc, "augmented": self._augmented,
                                 "corpus": self._corpus}[kind]()
        return self._cache[kind]

    def stage_teacher(self, which: str, masked_lm: bool = False) -> torch.nn.Module:
        """A stage's teacher: ``finetuned`` (the task teacher), ``base`` (its source checkpoint
        before fine-tuning) or a model dir/alias; with ``masked_lm`` loaded with its MLM head.
        Each is loaded once per run."""
        if which == "finetuned":
            return self.teacher
        key = f"{'mlm' if masked_lm else 'encoder'}:{which}"
        if key not in self._cache:
            from transformers import AutoModel

            from tinyplm.models import resolve_model_dir
            from tinyplm.pretrain.mlm_head import load_mlm

            path = self.teacher_src if which == "base" else resolve_model_dir(which)
            self._cache[key] = load_mlm(path)[0] if masked_lm else AutoModel.from_pretrained(str(path)).eval()
        return self._cache[key]

    def teacher_logits(self, enc: Encoded) -> torch.Tensor:
        """Fine-tuned teacher logits on ``enc``, from the on-disk cache when present."""
        acc = get_accelerator()
        bf16 = use_bf16(self.cfg.teacher.finetune.precision if self.cfg.teacher.finetune else "auto")
        if "fingerprint" not in self._cache:  # hashing the teacher's weights once per run is enough
            self._cache["fingerprint"] = fingerprint(self.teacher_dir)
        with acc.main_process_first():
            logits, _ = cached_teacher_logits(self.teacher, self._cache["fingerprint"], enc, self.cache_dir, bf16=bf16)
        return logits

    def _augmented(self) -> Encoded:
        from tinyplm.distill.augment import AugmentSpec, augment
        from tinyplm.train.progress import JsonlLog
        from tinyplm.pretrain.mlm_head import load_mlm

        a = self.cfg.augment
        mlm, tok = load_mlm(Path(a.mlm))
        examples = self.data.train.examples[: a.max_examples] if a.max_examples else self.data.train.examples
        spec = AugmentSpec(copies=a.copies, p=a.p, top_k=a.top_k, neighbours=a.neighbours, seed=a.seed,
                           max_length=self.cfg.task.max_length)
        neighbours = self._neighbours(mlm, tok)
        log = JsonlLog(self.run_dir / "logs" / "train.jsonl", "augment", get_accelerator().is_main_process)
        with get_accelerator().main_process_first():
            result = augment(examples, mlm, tok, spec, neighbours, self.cache_dir, log,
                             progress=get_accelerator().is_main_process, mlm_fingerprint=fingerprint(Path(a.mlm)))
        rest = self.data.train.examples[len(examples):]  # the examples not augmented still train, once each
        split = Split("train-augmented", result.examples + rest, self.data.train.source)
        return encode_split(split, self.tokenizer, self.cfg.task.max_length)

    def _neighbours(self, mlm, tok):
        """Neighbours of multi-piece words: the MLM's input embeddings, or word2vec on a corpus."""
        from tinyplm.distill.augment import EmbeddingNeighbours, word2vec_neighbours
        from tinyplm.pretrain.corpus import read_corpus

        a = self.cfg.augment
        if a.neighbours_from == "embeddings":
            return EmbeddingNeighbours(tok, mlm.get_input_embeddings().weight, k=a.neighbours)
        paths = a.word2vec_corpus or self.cfg.corpus.paths
        texts = read_corpus([Path(p) for p in paths], max_docs=a.word2vec_max_docs)
        with get_accelerator().main_process_first():
            return word2vec_neighbours(texts, k=a.neighbours, seed=a.seed, cache_dir=self.cache_dir)

    def _corpus(self) -> Encoded:
        from tinyplm.pretrain.corpus import read_corpus

        c = self.cfg.corpus
        texts = read_corpus([Path(p) for p in c.paths], max_docs=c.max_docs)
        label: int | float = 0.0 if self.data.is_regression else 0
        split = Split("corpus", [Example(t, None, label, i) for i, t in enumerate(texts)], Path(c.paths[0]))
        return encode_split(split, self.tokenizer, c.max_length)


def stage_list(spec: StudentSpec) -> list[StageSpec]:
    """The student's stages: its ``stages`` or one stage from its ``objective`` and ``train``."""
    return list(spec.stages) if spec.stages is not None else [StageSpec(objective=spec.objective, train=spec.train)]


def initial_student(spec: StudentSpec, inp: StageInputs) -> tuple[torch.nn.Module, str]:
    """The student before its first stage, and how it was initialised."""
    if spec.init_from == "teacher":
        return copy.deepcopy(inp.teacher), "the fine-tuned teacher"
    if spec.init_from in inp.students:
        return copy.deepcopy(inp.students[spec.init_from]), f"student {spec.init_from}"
    if spec.init_from:
        model, _ = load_classifier(Path(spec.init_from), inp.data.labels, inp.data.is_regression, inp.data.head)
        return model, f"from {spec.init_from}"
    first = stage_list(spec)[0]
    init = f"teacher layers {spec.teacher_layers}" if spec.teacher_layers else "random"
    # DistilBERT copies layers of the teacher it distils from first (the base model for general
    # distillation), not of the fine-tuned task teacher.
    source = inp.stage_teacher(first.teacher, first.objective.masked_lm) if spec.teacher_layers else inp.teacher
    if spec.teacher_layers and first.teacher != "finetuned":
        init += f" of the {first.teacher} teacher"
    return build_student(spec, source, seed=first.train.seed, task_model=inp.teacher), init


def run_student(spec: StudentSpec, inp: StageInputs) -> tuple[torch.nn.Module, dict]:
    """Build (or reload) one student and run its stages; returns (model, info for the report)."""
    name = student_name(spec)
    out = inp.run_dir / "students" / name
    acc = get_accelerator()
    model, init = initial_student(spec, inp)
    stages = stage_list(spec)
    infos = []
    if not stages:  # only compressed: a copy of its source, not saved or reported on its own
        return model, {"init": init, "shape": shape_of(model)}
    for k, stage in enumerate(stages):
        label = stage.name or (f"stage-{k}" if len(stages) > 1 else "")
        stage_dir = out if k == len(stages) - 1 else out.parent / f"{name}.stage-{k}"
        if is_complete(stage_dir):
            model, _ = load_classifier(stage_dir, inp.data.labels, inp.data.is_regression, inp.data.head)
            infos.append({"stage": label, "reused": True})
            continue
        model, saved, info = _run_stage(model, stage, inp, f"{name}/{label}" if label else name, f"{name}.stage-{k}")
        if acc.is_main_process:
            save_model(saved, inp.tokenizer, stage_dir)
        acc.wait_for_everyone()
        infos.append({"stage": label, "data": stage.data, "teacher": stage.teacher, **info})
    info = {"model_dir": f"students/{name}", "init": init, "shape": shape_of(model)}
    info.update(infos[-1] if len(infos) == 1 else {"stages": infos})
    return model, info


def _run_stage(model, stage: StageSpec, inp: StageInputs, log_name: str, ckpt_name: str, step_hook=None):
    """Train one stage -> (the classifier, the model to save, info).

    A masked-LM stage (DistilBERT) trains the classifier's encoder through a masked-LM head
    shared with it and saves the student *with* that head (a reusable general student that
    ``fit-mlm-head``-style tools and augmentation can use too); the task head is untouched.
    """
    enc = inp.encoded(stage.data)
    masked_lm = stage.objective.masked_lm
    teacher = inp.stage_teacher(stage.teacher, masked_lm)
    objective = build_objective(stage.objective, model.config, teacher.config, inp.data.is_regression, inp.tokenizer,
                                inp.data.head if stage.data != "corpus" else "sequence")
    trained = with_mlm_head(model, teacher) if masked_lm else model
    logits = inp.teacher_logits(enc) if objective.needs_teacher else None
    predicts = stage.objective.kd_weight > 0 or stage.objective.hard_weight > 0
    evaluate = _evaluator(inp, stage.train) if predicts else None
    spec = stage.train if predicts else stage.train.model_copy(update={"keep_best": False, "eval_every": 0})
    io = StageIO(log_name, inp.run_dir / "checkpoints" / ckpt_name, inp.run_dir / "logs" / "train.jsonl", resume=True)
    result = train(trained, enc, objective, spec, io, evaluate, inp.data.primary_metric, logits, teacher, step_hook)
    info = {**train_info(result, stage.train, stage.objective.model_dump(exclude=None if masked_lm else {"mask_rate"})), "examples": len(enc)}
    if masked_lm:
        return model, result.model, info
    return result.model, result.model, info


def run_compress(spec: StudentSpec, model: torch.nn.Module, inp: StageInputs,
                 source: str | None = None) -> list[tuple[str, torch.nn.Module, dict, dict[str, Encoded] | None]]:
    """The student's compression steps in order, each on a copy of the previous stage's model,
    each optionally recovered by distillation and saved (``students/<student>.<step>``); a
    resumed run reloads finished steps. ``source`` is the reported stage the first step starts
    from (the student itself, or for a compress-only student the stage it copies). Returns
    ``[(stage name, model, info, eval encodings)]``; the encodings are None unless the step
    left the model with its own tokenizer (vocabulary trimming)."""
    from tinyplm.config.compress import step_name

    name = student_name(spec)
    acc = get_accelerator()
    results, previous = [], source
    ctx = None
    for step in spec.compress:
        stage = f"{name}.{step_name(step)}"
        out = inp.run_dir / "students" / stage
        if ctx is None:
            ctx = _compress_context(inp, spec.train.seed)
        ctx.work_dir = inp.run_dir / "work" / stage
        if is_complete(out):
            model, tok = load_classifier(out, inp.data.labels, inp.data.is_regression, inp.data.head)
            if len(tok) != len(ctx.tokenizer):  # a trimmed vocabulary: its own encodings from here on
                ctx.tokenizer = tok
                ctx.train, ctx.evals = ctx.reencode(tok)
            info: dict = {"reused": True}
        else:
            model, info = _compress_step(copy.deepcopy(model), step, stage, out, ctx, inp)
        info.update({"model_dir": f"students/{stage}", "from": previous, "kind": step.kind, "shape": shape_of(model)})
        own = ctx.evals if ctx.tokenizer is not inp.tokenizer else None
        results.append((stage, model, info, own))
        previous = stage
    return results


def _compress_context(inp: StageInputs, seed: int):
    from tinyplm.compress import CompressContext
    from tinyplm.evaluate.model_eval import encode_evals

    cfg = inp.cfg.task

    def reencode(tok):
        train = encode_split(inp.data.train, tok, cfg.max_length, cfg.max_train_examples)
        return train, encode_evals(inp.data, tok, cfg.max_length, cfg.max_eval_examples)

    # the check sample comes from the encoded examples only: their pieces are the ones kept
    texts = [_text_pair(e) for e in inp.data.train.examples[:min(200, cfg.max_train_examples or 200)]]
    return CompressContext(inp.train_enc, lambda: inp.teacher_logits(inp.train_enc), inp.data.is_regression,
                           inp.run_dir / "work", seed=seed, head=inp.data.head, tokenizer=inp.tokenizer,
                           evals=inp.evals, texts=texts, reencode=reencode)


def _text_pair(example) -> tuple[str, str | None]:
    """An example of any head as the (text, pair) it is tokenised from."""
    if hasattr(example, "question"):  # SQuAD
        return example.question, example.context
    if hasattr(example, "tokens"):  # CoNLL
        return " ".join(example.tokens), None
    return example.text, example.text_pair


def _compress_step(model, step, stage: str, out: Path, ctx, inp: StageInputs):
    """Apply one compress step (with its recovery), save it -> (model, info)."""
    from tinyplm.compress import apply_step, controller
    from tinyplm.compress.sparse import csr_bytes
    from tinyplm.config.compress import SCHEDULED_KINDS

    acc = get_accelerator()
    t0 = time.perf_counter()
    model, done = apply_step(model, step, ctx)
    info = {"step": step.model_dump(exclude={"recover"}, exclude_none=True), **done}
    info["step_seconds"] = round(time.perf_counter() - t0, 1)
    during = controller(model, step, ctx) if step.kind in SCHEDULED_KINDS else None
    if step.recover is not None:
        r = step.recover  # a step acting during training must end at its final state: no best-checkpoint restore
        train_spec = r.train if during is None else r.train.model_copy(update={"keep_best": False})
        recovery = StageSpec(name="recover", data=r.data, objective=r.objective, train=train_spec)
        model, _, rinfo = _run_stage(model, recovery, inp, f"{stage}/recover", f"{stage}.recover",
                                     during.on_step if during else None)
        info["recover"] = rinfo
    if during is not None:  # sparsity made permanent (saved dense) / QAT converted to int8
        model, done = during.finish(model)
        info.update(done)
    if acc.is_main_process:
        save_model(model, ctx.tokenizer, out)
        shutil.rmtree(ctx.work_dir, ignore_errors=True)
        if "sparsity" in info:  # the CSR form, written beside the model to measure sparse storage
            info["sparse_bytes"] = csr_bytes(model, out / "sparse" / "model.csr.safetensors")
    acc.wait_for_everyone()
    return model, info


def train_info(result, spec: TrainSpec, objective: dict) -> dict:
    """What the report shows about one training stage (its non-zero objective terms included)."""
    return {
        "train_seconds": round(result.seconds, 1), "steps": result.steps, "stopped_by": result.stopped_by,
        "best_step": result.best_step, "budget_minutes": spec.budget_minutes,
        "precision": "bf16" if use_bf16(spec.precision) else "fp32",
        "objective": {k: v for k, v in objective.items() if v not in (0, 0.0, None)},
        "history": result.history,
    }


def _evaluator(inp: StageInputs, spec: TrainSpec) -> Callable[[torch.nn.Module], dict[str, float]]:
    bf16 = use_bf16(spec.precision)
    return lambda m: evaluate_model(m, inp.data, inp.evals, bf16=bf16, batch_size=spec.eval_batch_size)
