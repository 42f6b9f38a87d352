"""Fit a masked-LM head on a frozen encoder, and load teachers that have one.

The packaged MiniLM is a bare ``BertModel``: it has no ``cls.predictions`` head, so it cannot
propose words for data augmentation. :func:`fit_mlm_head` loads it as ``BertForMaskedLM`` (the
head is newly initialised), freezes the encoder and the word embeddings (which the head's decoder
weight is tied to), and trains only the head's transform (dense + LayerNorm) and decoder bias with
standard BERT masking. The encoder runs without gradients and the head is applied only at the
masked positions, so one step costs about one forward pass of the encoder.
"""

from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path

import torch

from tinyplm.train.progress import JsonlLog, make_progress
from tinyplm.errors import DataError, ModelError, TinyplmError
from tinyplm.models.infer import autocast, use_bf16
from tinyplm.models.io import save_model
from tinyplm.models.loading import check_model_dir, load_tokenizer, quiet_transformers
from tinyplm.pretrain.corpus import split_holdout

HEAD_KEY = "cls.predictions.transform.dense.weight"
#: Trainable parameter name prefixes (the tied decoder weight = word embeddings stays frozen).
HEAD_PARAMS = ("cls.predictions.transform.", "cls.predictions.bias")
METRICS_FILE = "mlm_head.json"


def weight_keys(model_dir: Path) -> list[str]:
    """Names of the tensors stored in a checkpoint dir (safetensors, sharded index or .bin)."""
    model_dir = Path(model_dir)
    single, index, legacy = (model_dir / n for n in ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin"))
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


def load_mlm(model_dir: Path):
    """Load a teacher with a masked-LM head -> ``(BertForMaskedLM in eval mode, tokenizer)``.

    Raises ``ModelError`` naming the directory when it is not a checkpoint or has no MLM head
    (then run ``tinyplm fit-mlm-head`` on it first).
    """
    from transformers import BertForMaskedLM

    model_dir = Path(model_dir)
    check_model_dir(model_dir)
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
    return model.eval(), load_tokenizer(model_dir, model.config.vocab_size)


def freeze_all_but_head(model: torch.nn.Module) -> int:
    """Set ``requires_grad`` only on the head's transform and bias; returns trainable param count."""
    count = 0
    for name, param in model.named_parameters():
        param.requires_grad_(name.startswith(HEAD_PARAMS))
        count += param.numel() if param.requires_grad else 0
    return count


def mask_batch(collator, tokenizer, texts: list[str], max_length: int) -> dict[str, torch.Tensor]:
    """Tokenise ``texts`` and apply BERT masking -> input_ids, attention_mask, token_type_ids,
    labels ``(batch, seq)`` (labels are -100 except at the ~15% selected positions)."""
    enc = tokenizer(texts, truncation=True, max_length=max_length, return_special_tokens_mask=True)
    rows = [{k: enc[k][i] for k in enc.keys()} for i in range(len(texts))]
    return dict(collator(rows))


def head_loss(model, batch: dict[str, torch.Tensor], bf16: bool) -> tuple[torch.Tensor, int, int]:
    """MLM loss at the masked positions -> (mean loss, correct, count).

    The encoder runs without gradients; the head only sees the masked positions
    ``(n_masked, hidden)`` and gives logits ``(n_masked, vocab)``.
    """
    labels = batch["labels"]
    where = labels != -100
    with torch.no_grad(), autocast(bf16):
        hidden = model.bert(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            token_type_ids=batch.get("token_type_ids"),
        ).last_hidden_state[where]  # (n_masked, hidden)
    with autocast(bf16):
        logits = model.cls(hidden.float()).float()  # (n_masked, vocab)
    target = labels[where]
    if target.numel() == 0:
        return logits.sum() * 0.0, 0, 0
    loss = torch.nn.functional.cross_entropy(logits, target)
    correct = int((logits.argmax(-1) == target).sum())
    return loss, correct, int(target.numel())


@torch.no_grad()
def evaluate_head(model, batches: list[dict[str, torch.Tensor]], bf16: bool) -> dict[str, float]:
    """Token-weighted MLM loss and accuracy over pre-masked batches."""
    total, correct, count = 0.0, 0, 0
    for batch in batches:
        loss, ok, n = head_loss(model, batch, bf16)
        total += float(loss) * n
        correct, count = correct + ok, count + n
    return {"loss": total / max(count, 1), "accuracy": correct / max(count, 1)}


def _lr_factor(step: int, steps: int) -> float:
    """Linear warm-up over the first 10% of steps (at most 100), then linear decay to 0."""
    warm = max(1, min(100, steps // 10))
    if step < warm:
        return (step + 1) / warm
    return max(0.0, (steps - step) / max(1, steps - warm))


def _setup(model_dir: Path, seed: int):
    """Load ``model_dir`` as BertForMaskedLM (new head seeded), freeze all but the head."""
    from transformers import BertForMaskedLM

    quiet_transformers()
    check_model_dir(Path(model_dir))
    torch.manual_seed(seed)
    try:
        model = BertForMaskedLM.from_pretrained(str(model_dir), trust_remote_code=False)
    except (OSError, ValueError, RuntimeError) as exc:
        raise ModelError(f"{model_dir}: cannot load as BertForMaskedLM ({exc.__class__.__name__}: {exc})") from None
    emb, dec = model.get_input_embeddings().weight, model.get_output_embeddings().weight
    if emb.data_ptr() != dec.data_ptr():
        raise ModelError(f"{model_dir}: the MLM decoder is not tied to the word embeddings")
    return model.eval(), load_tokenizer(Path(model_dir), model.config.vocab_size), freeze_all_but_head(model)


def _train_head(model, tok, train: list[str], *, steps: int, batch_size: int, max_length: int, lr: float,
                seed: int, bf16: bool, log: JsonlLog | None, progress: bool) -> list[float]:
    """The training loop over randomly drawn, freshly masked batches -> loss per step."""
    from transformers import DataCollatorForLanguageModeling

    collator = DataCollatorForLanguageModeling(tok, mlm_probability=0.15, seed=seed)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: _lr_factor(s, steps))
    rng, losses, start = random.Random(seed), [], time.perf_counter()
    with make_progress(progress) as bar:
        task = bar.add_task("fit-mlm-head", total=steps, loss=float("nan"), eps=0.0)
        for step in range(steps):
            batch = mask_batch(collator, tok, rng.sample(train, min(batch_size, len(train))), max_length)
            loss, _, _ = head_loss(model, batch, bf16)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
            eps = (step + 1) * batch_size / (time.perf_counter() - start)
            bar.update(task, advance=1, loss=losses[-1], eps=eps)
            if log is not None and (step % 50 == 0 or step == steps - 1):
                log.write(event="mlm_head_step", step=step, loss=losses[-1], lr=sched.get_last_lr()[0])
    return losses


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
    log: JsonlLog | None = None,
    progress: bool = True,
) -> dict:
    """Train only the MLM head of ``model_dir`` on ``texts``; save model + tokenizer to ``out_dir``.

    Masking: 15% of non-special tokens, of which 80% -> [MASK], 10% random, 10% unchanged
    (``transformers.DataCollatorForLanguageModeling``, seeded). A held-out part of ``texts``
    (``eval_fraction``, at most ``eval_max`` texts) is masked once and scored before and after.
    Returns metrics (eval loss/accuracy before and after, first/last train loss, seconds, ...),
    also written to ``out_dir/mlm_head.json``. The save is atomic (``models.io.save_model``).
    Raises ``TinyplmError`` (bad arguments, diverged), ``ModelError``, ``DataError`` (< 2 texts).
    """
    from transformers import DataCollatorForLanguageModeling

    if steps < 1 or batch_size < 1:
        raise TinyplmError(f"fit-mlm-head needs steps >= 1 and batch_size >= 1 (got {steps}, {batch_size})")
    if len(texts) < 2:
        raise DataError(f"fit-mlm-head needs at least 2 corpus texts, got {len(texts)}")
    start = time.perf_counter()
    model, tok, trainable = _setup(model_dir, seed)
    bf16 = use_bf16(precision)
    train, held = split_holdout(texts, eval_fraction, seed)
    held = held[:eval_max] or train[:eval_max]
    eval_collator = DataCollatorForLanguageModeling(tok, mlm_probability=0.15, seed=seed + 1)
    eval_batches = [mask_batch(eval_collator, tok, held[i : i + batch_size], max_length) for i in range(0, len(held), batch_size)]
    before = evaluate_head(model, eval_batches, bf16)
    losses = _train_head(model, tok, train, steps=steps, batch_size=batch_size, max_length=max_length, lr=lr,
                         seed=seed, bf16=bf16, log=log, progress=progress)
    after = evaluate_head(model, eval_batches, bf16)
    tail = losses[-min(10, len(losses)) :]
    if not all(math.isfinite(x) for x in (after["loss"], *tail)):
        raise TinyplmError(f"fit-mlm-head diverged (last loss {tail[-1]}); lower --lr (was {lr})")
    save_model(model, tok, Path(out_dir))
    metrics = {
        "source": str(model_dir), "steps": steps, "batch_size": batch_size, "lr": lr, "seed": seed,
        "bf16": bf16, "trainable_params": trainable, "train_texts": len(train), "eval_texts": len(held),
        "eval_loss_before": before["loss"], "eval_accuracy_before": before["accuracy"],
        "eval_loss_after": after["loss"], "eval_accuracy_after": after["accuracy"],
        "train_loss_first": losses[0], "train_loss_last": sum(tail) / len(tail),
        "seconds": time.perf_counter() - start, "out_dir": str(out_dir),
    }
    (Path(out_dir) / METRICS_FILE).write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    if log is not None:
        log.write(event="mlm_head", **{k: v for k, v in metrics.items() if k != "source"})
    return metrics
