"""Fit a masked-LM head on a frozen encoder, and load teachers that have one.

The packaged MiniLM is a bare ``BertModel``: it has no ``cls.predictions`` head, so it cannot
propose words for data augmentation. :func:`fit_mlm_head` loads it as ``BertForMaskedLM`` (the
head is newly initialised), freezes the encoder and the word embeddings (which the head's decoder
weight is tied to), and trains only the head's transform (dense + LayerNorm) and decoder bias with
standard BERT masking, in the one training loop (:class:`HeadMLMObjective`). The encoder runs
without gradients and the head is applied only at the masked positions, so one step costs about
one forward pass of the encoder.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from tinyplm.config.schema import TrainSpec
from tinyplm.errors import DataError, ModelError, TinyplmError
from tinyplm.files import write_json_atomic
from tinyplm.models.infer import autocast, use_bf16
from tinyplm.models.io import save_model
from tinyplm.models.loaded import loaded
from tinyplm.models.loading import check_model_dir, load_tokenizer, quiet_transformers
from tinyplm.models.roles import base_model, mlm_head
from tinyplm.pretrain.corpus import split_holdout
from tinyplm.pretrain.data import encode_texts
from tinyplm.tasks.encoding import Encoded, collate, model_inputs
from tinyplm.train import Batch, StageIO, train
from tinyplm.train.masking import IGNORE, Masking, mask_tokens

HEAD_KEY = "cls.predictions.transform.dense.weight"
#: Trainable parameter name prefixes (the tied decoder weight = word embeddings stays frozen).
HEAD_PARAMS = ("cls.predictions.transform.", "cls.predictions.bias")
METRICS_FILE = "mlm_head.json"


def weight_keys(model_dir: Path) -> list[str]:
    """Names of the tensors stored in a checkpoint dir (safetensors, sharded index or .bin)."""
    model_dir = Path(model_dir)
    single, index, legacy = (model_dir / n
                             for n in ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin"))
    if single.is_file():
        from safetensors import safe_open

        with safe_open(str(single), framework="pt") as fh:
            return list(fh.keys())
    if index.is_file():
        return list(json.loads(index.read_text(encoding="utf-8")).get("weight_map", {}))
    if legacy.is_file():
        return list(torch.load(legacy, map_location="cpu", weights_only=True))
    return []


def has_mlm_head(model_dir: Path) -> bool:
    """True when the checkpoint stores a BERT masked-LM head (``cls.predictions.transform``)."""
    return any(k.endswith(HEAD_KEY) for k in weight_keys(model_dir))


def check_bert(model_dir: Path, what: str) -> None:
    """``what`` (augmentation, head fitting) reads BERT's masked-LM head (``cls.predictions``): a
    checkpoint of another family is refused naming its ``model_type``, before anything is loaded
    (a RoBERTa ``lm_head`` was called missing by one command and unreadable by the other)."""
    kind = check_model_dir(Path(model_dir)).get("model_type")
    if kind != "bert":
        raise ModelError(f"{Path(model_dir) / 'config.json'}: model_type {kind!r}: {what} reads BERT checkpoints "
                         "and their masked-LM head (cls.predictions) only; give a BERT model (its vocabulary "
                         "the teacher's)")


def load_mlm(model_dir: Path):
    """Load a teacher with a masked-LM head -> ``(BertForMaskedLM in eval mode, tokenizer)``.

    Raises ``ModelError`` naming the directory when it is not a checkpoint or has no MLM head
    (then run ``tinyplm fit-mlm-head`` on it first).
    """
    from transformers import BertForMaskedLM

    model_dir = Path(model_dir)
    check_bert(model_dir, "TinyBERT augmentation")
    if not has_mlm_head(model_dir):
        raise ModelError(
            f"{model_dir}: has no masked-LM head (no {HEAD_KEY}); fit one first with "
            f"`tinyplm fit-mlm-head {model_dir} --corpus PATH --out DIR` and use DIR"
        )
    quiet_transformers()
    try:
        model = BertForMaskedLM.from_pretrained(str(model_dir), trust_remote_code=False)
    except (OSError, ValueError, RuntimeError) as exc:
        raise ModelError(f"{model_dir}: cannot load as BertForMaskedLM ({exc.__class__.__name__}: {exc})") from None
    model = loaded(model, Path(model_dir))
    return model.eval(), load_tokenizer(model_dir, model.config.vocab_size)


def freeze_all_but_head(model: torch.nn.Module) -> int:
    """Set ``requires_grad`` only on the head's transform and bias; returns trainable param count."""
    count = 0
    for name, param in model.named_parameters():
        param.requires_grad_(name.startswith(HEAD_PARAMS))
        count += param.numel() if param.requires_grad else 0
    return count


@dataclass
class HeadMLMObjective:
    """Masked-LM loss of the head alone, the encoder frozen: a training
    :class:`~tinyplm.train.objective.Objective` of the one loop. Batches are masked anew each
    step (15% of real, non-special tokens; 80/10/10) from the loop's checkpointed RNG."""

    masking: Masking
    needs_teacher = False
    needs_teacher_logits = False

    def check(self, model: nn.Module, teacher: nn.Module | None) -> None:
        """Only the head may train: anything else trainable would silently change the encoder."""
        moving = [n for n, p in model.named_parameters() if p.requires_grad and not n.startswith(HEAD_PARAMS)]
        if moving:
            raise ValueError(f"head-only MLM fitting: {moving[0]} is trainable; freeze all but the head first")

    def prepare(self, batch: dict[str, torch.Tensor]) -> Batch:
        inputs = model_inputs(batch)
        ids, labels = mask_tokens(inputs["input_ids"], inputs["attention_mask"], self.masking)
        return Batch({**inputs, "input_ids": ids}, labels, batch["index"])

    def teacher_outputs(self, teacher: nn.Module, batch: Batch) -> None:
        return None

    def loss(self, model: nn.Module, batch: Batch, teacher_out: None = None) -> torch.Tensor:
        return head_loss(model, batch.inputs, batch.targets)[0]


def head_loss(model, inputs: dict[str, torch.Tensor], labels: torch.Tensor) -> tuple[torch.Tensor, int, int]:
    """MLM loss at the masked positions (``labels != IGNORE``) -> (mean loss, correct, count).

    The encoder runs without gradients; the head only sees the masked positions
    ``(n_masked, hidden)`` and gives logits ``(n_masked, vocab)``.
    """
    where = labels != IGNORE
    with torch.no_grad():
        hidden = base_model(model)(**inputs).last_hidden_state[where]  # (n_masked, hidden)
    logits = mlm_head(model)(hidden.float()).float()  # (n_masked, vocab)
    target = labels[where]
    if target.numel() == 0:
        return logits.sum() * 0.0, 0, 0
    loss = torch.nn.functional.cross_entropy(logits, target)
    correct = int((logits.argmax(-1) == target).sum())
    return loss, correct, int(target.numel())


@torch.no_grad()
def evaluate_head(model, held: Encoded, masking: Masking, seed: int, batch_size: int, bf16: bool) -> dict[str, float]:
    """Token-weighted MLM loss and accuracy on ``held``, masked once with a seeded generator (the
    same positions before and after fitting)."""
    gen = torch.Generator().manual_seed(seed)
    total, correct, count = 0.0, 0, 0
    for start in range(0, len(held), batch_size):
        inputs = model_inputs(collate(held, range(start, min(start + batch_size, len(held)))))
        ids, labels = mask_tokens(inputs["input_ids"], inputs["attention_mask"], masking, gen)
        with autocast(bf16):
            loss, ok, n = head_loss(model, {**inputs, "input_ids": ids}, labels)
        total += float(loss) * n
        correct, count = correct + ok, count + n
    return {"loss": total / max(count, 1), "accuracy": correct / max(count, 1)}


def _setup(model_dir: Path, seed: int):
    """Load ``model_dir`` as BertForMaskedLM (new head seeded), freeze all but the head."""
    from transformers import BertForMaskedLM

    quiet_transformers()
    check_bert(Path(model_dir), "fit-mlm-head")
    torch.manual_seed(seed)
    try:
        model = BertForMaskedLM.from_pretrained(str(model_dir), trust_remote_code=False)
    except (OSError, ValueError, RuntimeError) as exc:
        raise ModelError(f"{model_dir}: cannot load as BertForMaskedLM ({exc.__class__.__name__}: {exc})") from None
    model = loaded(model, Path(model_dir))
    emb, dec = model.get_input_embeddings().weight, model.get_output_embeddings().weight
    if emb.data_ptr() != dec.data_ptr():
        raise ModelError(f"{model_dir}: the MLM decoder is not tied to the word embeddings")
    return model.eval(), load_tokenizer(Path(model_dir), model.config.vocab_size), freeze_all_but_head(model)


def _claim_checkpoints(out_dir: Path, options: dict, resume: bool) -> Path:
    """The checkpoint folder of a fit into ``out_dir`` (``.OUT.checkpoints`` beside it). An interrupted
    fit's checkpoints are resumed only by a fit of the same ``options`` (recorded beside them):
    ``resume`` with other options is refused naming them (``TinyplmError``); without ``resume`` the
    folder is cleared, so a later ``--resume`` cannot pick up an older fit's steps."""
    import shutil

    folder = out_dir.with_name(f".{out_dir.name}.checkpoints")
    record = folder / "fit.json"
    if resume and record.is_file():
        before = json.loads(record.read_text(encoding="utf-8"))
        changed = sorted(k for k in options if before.get(k) != options[k])
        if changed:
            raise TinyplmError(f"--resume: the checkpoints in {folder} are of a fit with other "
                               f"{', '.join(changed)} ({', '.join(f'{k} {before.get(k)!r}' for k in changed)}); "
                               "resume with those, or start over without --resume")
    elif not resume:
        shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    write_json_atomic(record, options)
    return folder


def head_train_spec(steps: int, batch_size: int, lr: float, seed: int, precision: str) -> TrainSpec:
    """The loop settings of head fitting: ``steps`` optimiser steps, linear warm-up over 10% of
    them (at most 100) then linear decay, no weight decay or clipping, no dev evaluation."""
    warmup = max(1, min(100, steps // 10)) / steps
    return TrainSpec(epochs=1e6, max_steps=steps, batch_size=batch_size, lr=lr, weight_decay=0.0,
                     warmup_ratio=min(warmup, 0.99), grad_clip=0.0, eval_every=0, checkpoint_every=0, log_every=1,
                     keep_best=False, precision=precision, seed=seed)


def _held_windows(texts: list[str], tok, max_length: int, most: int) -> Encoded:
    """The first ``most`` windows of ``texts`` (a long text is many windows, each scored twice)."""
    held = encode_texts(texts, tok, max_length)
    return held.subset(range(min(len(held), most)))


def fit_mlm_head(
    model_dir: Path,
    texts: list[str],
    out_dir: Path,
    *,
    steps: int,
    batch_size: int = 32,
    max_length: int = 128,
    lr: float = 1e-3,
    seed: int = 0,
    precision: str = "auto",
    eval_fraction: float = 0.02,
    eval_max: int = 256,
    log_path: Path | None = None,
    progress: bool = True,
    resume: bool = False,
) -> dict:
    """Train only the MLM head of ``model_dir`` on ``texts`` with the one training loop; save
    model + tokenizer to ``out_dir``.

    Masking: 15% of non-special tokens, of which 80% -> [MASK], 10% random, 10% unchanged. A
    held-out part of ``texts`` (``eval_fraction``, its first ``eval_max`` windows) is masked once and
    scored before and after. Returns metrics (eval loss/accuracy before and after, first/last
    train loss, seconds, ...), also written to ``out_dir/mlm_head.json``. The save is atomic. ``resume``:
    go on from an interrupted fit's checkpoints (:func:`_claim_checkpoints`); else they are cleared.
    Raises ``TinyplmError`` (bad arguments, diverged), ``ModelError``, ``DataError`` (< 2 texts).
    """
    if steps < 1 or batch_size < 1:
        raise TinyplmError(f"fit-mlm-head needs steps >= 1 and batch_size >= 1 (got {steps}, {batch_size})")
    if len(texts) < 2:
        raise DataError(f"fit-mlm-head needs at least 2 corpus texts, got {len(texts)}")
    start = time.perf_counter()
    model, tok, trainable = _setup(model_dir, seed)
    bf16 = use_bf16(precision)
    train_texts, held_texts = split_holdout(texts, eval_fraction, seed)
    held = _held_windows(held_texts[:eval_max] or train_texts[:eval_max], tok, max_length, eval_max)
    masking = Masking.from_tokenizer(tok, 0.15, vocab_size=model.config.vocab_size)
    before = evaluate_head(model, held, masking, seed + 1, batch_size, bf16)
    spec = head_train_spec(steps, batch_size, lr, seed, precision)
    options = {"model": str(Path(model_dir).resolve()), "steps": steps, "batch_size": batch_size,
               "max_length": max_length, "lr": lr, "seed": seed, "texts": len(texts)}
    io = StageIO("fit-mlm-head", _claim_checkpoints(Path(out_dir), options, resume), log_path,
                 show_progress=progress, resume=resume)
    result = train(model, encode_texts(train_texts, tok, max_length), HeadMLMObjective(masking), spec=spec, io=io)
    after = evaluate_head(result.model, held, masking, seed + 1, batch_size, bf16)
    losses = [loss for _, loss in result.losses]
    tail = losses[-min(10, len(losses)) :]
    if not all(math.isfinite(x) for x in (after["loss"], *tail)):
        raise TinyplmError(f"fit-mlm-head diverged (last loss {tail[-1]}); lower --lr (was {lr})")
    save_model(result.model, tok, Path(out_dir))
    metrics = {
        "source": str(model_dir), "steps": result.steps, "batch_size": batch_size, "lr": lr, "seed": seed,
        "bf16": bf16, "trainable_params": trainable, "train_texts": len(train_texts), "eval_windows": len(held),
        "eval_loss_before": before["loss"], "eval_accuracy_before": before["accuracy"],
        "eval_loss_after": after["loss"], "eval_accuracy_after": after["accuracy"],
        "train_loss_first": losses[0], "train_loss_last": sum(tail) / len(tail),
        "seconds": time.perf_counter() - start, "out_dir": str(out_dir),
    }
    write_json_atomic(Path(out_dir) / METRICS_FILE, metrics)
    return metrics
