"""Held-out evaluation of a pre-trained model: masked-LM loss/accuracy against the unigram
baseline, NSP/SOP accuracy, ELECTRA detection accuracy, and pseudo-perplexity.

* **MLM loss and accuracy** on held-out texts masked once with a fixed seed (the same positions
  for every model and every evaluation, so figures are comparable along training and across
  objectives). Selection follows the run's strategy; the 80/10/10 replacement too.
* **Unigram baseline**: the cross-entropy of predicting each of those positions with the
  training tokens' unigram distribution (add-one smoothed). A model below it has learned
  something from context.
* **Pseudo-perplexity** (Salazar et al. 2020): each real token masked alone, in turn;
  ``exp(mean -log p(token | rest))``. One pass per token, so computed on ``pppl_texts`` texts.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tinyplm.models.infer import autocast
from tinyplm.models.roles import base_model, mlm_predictions, pair_head, word_embeddings
from tinyplm.tasks.encoding import Encoded, collate, length_sorted_batches
from tinyplm.train.masking import IGNORE, Masking, eligible_tokens, replace_selected, select

EVAL_SEED = 1234


def unigram_log_probs(enc: Encoded, vocab_size: int, special_ids: tuple[int, ...]) -> Tensor:
    """log p(token) from the token counts of ``enc`` (specials excluded, add-one smoothed)."""
    import numpy as np

    flat = np.fromiter((i for ids in enc.input_ids for i in ids), dtype=np.int64)
    counts = torch.ones(vocab_size, dtype=torch.float64)
    counts += torch.from_numpy(np.bincount(flat[flat < vocab_size], minlength=vocab_size)).double()
    counts[list(special_ids)] = 0
    return torch.log(counts / counts.sum())


def _masked_batches(enc: Encoded, masking: Masking, batch_size: int):
    gen = torch.Generator().manual_seed(EVAL_SEED)
    for idx in length_sorted_batches(enc, batch_size):
        batch = collate(enc, idx)
        chosen = select(batch["input_ids"], batch["attention_mask"], masking, gen, batch.get("word_starts"))
        masked, labels = replace_selected(batch["input_ids"], chosen, masking, gen)
        yield batch, masked, labels


def held_out_targets(enc: Encoded, masking: Masking, batch_size: int = 64) -> int:
    """How many tokens of ``enc`` the held-out evaluation masks (the same draw as its metrics): with
    none, its loss and accuracy would read 0 for any model."""
    return sum(int((labels != IGNORE).sum()) for _, _, labels in _masked_batches(enc, masking, batch_size))


@torch.inference_mode()
def evaluate_mlm(model: nn.Module, enc: Encoded, masking: Masking, unigram: Tensor | None = None,
                 pairs: str | None = None, batch_size: int = 64, bf16: bool = False) -> dict[str, float]:
    """Held-out masked-LM loss and accuracy (and ``unigram_loss``, ``<pairs>_accuracy``) of a BERT
    with an MLM head (``BertForMaskedLM`` / ``BertForPreTraining``)."""
    model.eval()
    nll, correct, n, uni, pair_ok = 0.0, 0, 0, 0.0, 0
    for batch, masked, labels in _masked_batches(enc, masking, batch_size):
        inputs = {"input_ids": masked, "attention_mask": batch["attention_mask"],
                  "token_type_ids": batch["token_type_ids"]}
        with autocast(bf16):
            out = base_model(model)(**inputs)
            sel = labels != IGNORE
            logits = mlm_predictions(model)(out.last_hidden_state[sel]).float()
            pair_logits = pair_head(model)(out.pooler_output).float() if pairs else None
        target = labels[sel]
        nll += float(F.cross_entropy(logits, target, reduction="sum"))
        correct += int((logits.argmax(-1) == target).sum())
        n += int(target.numel())
        if unigram is not None:
            uni += float(-unigram[target].sum())
        if pair_logits is not None:
            pair_ok += int((pair_logits.argmax(-1) == batch["labels"]).sum())
    out: dict[str, float] = {"mlm_loss": nll / max(1, n), "mlm_accuracy": correct / max(1, n)}
    if unigram is not None:
        out["unigram_loss"] = uni / max(1, n)
    if pairs:
        out[f"{pairs}_accuracy"] = pair_ok / max(1, len(enc))
    return out


@torch.inference_mode()
def evaluate_electra(model: nn.Module, objective, enc: Encoded, batch_size: int = 64,
                     bf16: bool = False) -> dict[str, float]:
    """Held-out generator MLM loss/accuracy and the discriminator's replaced-token detection
    accuracy (all real tokens) and its recall on the replaced ones."""
    from tinyplm.pretrain.electra import rtd_loss, sample_replacements

    model.eval()
    objective.eval()
    gen = torch.Generator().manual_seed(EVAL_SEED + 1)
    nll, g_ok, n, d_ok, d_n, rep_hit, rep_n, d_loss = 0.0, 0, 0, 0, 0, 0, 0, 0.0
    for batch, masked, labels in _masked_batches(enc, objective.masking, batch_size):
        inputs = {"input_ids": masked, "attention_mask": batch["attention_mask"],
                  "token_type_ids": batch["token_type_ids"]}
        sel = labels != IGNORE
        with autocast(bf16):
            g_logits = objective.generator(word_embeddings(model), inputs, sel).float()
            corrupted = batch["input_ids"].clone()
            corrupted[sel] = sample_replacements(g_logits, gen)
            replaced = corrupted != batch["input_ids"]
            d_logits = objective.disc_head(model(**{**inputs, "input_ids": corrupted}).last_hidden_state).float()
        counted = batch["attention_mask"].bool()
        loss, ok = rtd_loss(d_logits, replaced, counted)
        d_loss += float(loss) * int(counted.sum())
        d_ok, d_n = d_ok + int(ok), d_n + int(counted.sum())
        rep_hit += int(((d_logits > 0) & replaced).sum())
        rep_n += int(replaced.sum())
        target = labels[sel]
        nll += float(F.cross_entropy(g_logits, target, reduction="sum"))
        g_ok += int((g_logits.argmax(-1) == target).sum())
        n += int(target.numel())
    objective.train()
    return {"generator_mlm_loss": nll / max(1, n), "generator_mlm_accuracy": g_ok / max(1, n),
            "rtd_loss": d_loss / max(1, d_n), "rtd_accuracy": d_ok / max(1, d_n),
            "replaced_recall": rep_hit / max(1, rep_n), "replaced_share": rep_n / max(1, d_n)}


@torch.inference_mode()
def pseudo_perplexity(model: nn.Module, enc: Encoded, masking: Masking, max_texts: int, max_length: int = 64,
                      bf16: bool = False) -> float:
    """Pseudo-perplexity of a BERT with an MLM head on the first ``max_texts`` texts of ``enc``
    (each cut to ``max_length`` tokens, its last token kept as the closing special)."""
    model.eval()
    nll, n = 0.0, 0
    for i in range(min(max_texts, len(enc))):
        ids = enc.input_ids[i]
        if len(ids) > max_length:
            ids = ids[: max_length - 1] + ids[-1:]
        row = torch.tensor([ids])
        attn = torch.ones_like(row)
        positions = eligible_tokens(row, attn, masking)[0].nonzero().squeeze(-1)
        if positions.numel() == 0:
            continue
        batch = row.repeat(len(positions), 1)
        batch[torch.arange(len(positions)), positions] = masking.mask_id
        types = torch.tensor([enc.token_type_ids[i][: len(ids) - 1]
                              + enc.token_type_ids[i][-1:]]).repeat(len(positions), 1)
        with autocast(bf16):
            hidden = base_model(model)(input_ids=batch, attention_mask=attn.repeat(len(positions), 1),
                                token_type_ids=types).last_hidden_state
            logits = mlm_predictions(model)(hidden[torch.arange(len(positions)), positions]).float()
        nll += float(F.cross_entropy(logits, row[0, positions], reduction="sum"))
        n += len(positions)
    return math.exp(nll / max(1, n))
