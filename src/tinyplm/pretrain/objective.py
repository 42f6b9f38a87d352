"""The pre-training objective: masks (and pairs) each batch, and computes its loss from the model.

:class:`PretrainObjective` is a training :class:`~tinyplm.train.objective.Objective` of the one
loop: :meth:`prepare` masks (and pairs) each collated batch (masking draws from the loop's
checkpointed RNG, so a resumed run masks as an uninterrupted one) and :meth:`loss` runs the model.
Its own parameters (ELECTRA's generator and discriminator head) train and checkpoint with the
model, as distillation projections do.

* ``mlm``: masked-LM cross-entropy at the selected positions (the vocabulary projection runs only
  there), plus ``pair_weight`` x cross-entropy of the NSP/SOP head when ``pairs`` is set (the
  model is then a ``BertForPreTraining``; otherwise a ``BertForMaskedLM``).
* ``electra``: generator MLM loss + ``disc_weight`` x replaced-token detection (model: ``BertModel``).

Static masking (``static_copies`` N): each text has N fixed masks, seeded by (text, copy); every
time a text is drawn one of its N masks is picked at random (BERT duplicated its data N times
with different masks). Dynamic masking draws a new mask each time (RoBERTa).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tinyplm.config.pretrain import PretrainObjectiveSpec
from tinyplm.errors import ModelError
from tinyplm.models import roles
from tinyplm.models.roles import base_model, mlm_predictions, pair_head
from tinyplm.pretrain.electra import DiscriminatorHead, ElectraGenerator, rtd_loss, sample_replacements
from tinyplm.train.masking import IGNORE, Masking, replace_selected, select
from tinyplm.train.objective import Batch

STATIC_SEED = 1_000_003  # mixes (text index, copy) into one generator seed


@dataclass
class Targets:
    """What a batch is scored against: masked-LM labels ``(batch, seq)``, pair labels ``(batch,)``
    and, for ELECTRA, the original ids."""

    mlm: Tensor
    pair: Tensor | None = None
    original: Tensor | None = None


class PretrainObjective(nn.Module):
    """See the module docstring. ``model`` is the model being pre-trained (its config sizes the
    ELECTRA parts); ``seed`` fixes the static masks."""

    needs_teacher = False  # self-supervised: no teacher model, no teacher logits
    needs_teacher_logits = False

    def __init__(self, spec: PretrainObjectiveSpec, masking: Masking, model: nn.Module, seed: int = 0) -> None:
        super().__init__()
        self.spec, self.masking, self.seed = spec, masking, seed
        self.kind = spec.kind
        self.generator: ElectraGenerator | None = None
        self.disc_head: DiscriminatorHead | None = None
        if spec.kind == "electra":
            self.generator = ElectraGenerator(model.config, spec.electra)
            self.disc_head = DiscriminatorHead(model.config.hidden_size)

    # -- batches -----------------------------------------------------------------------------
    def check(self, model: nn.Module, teacher: nn.Module | None) -> None:
        """The model must have the head its objective trains (MLM, MLM + pairs, or a bare encoder)."""
        if self.kind == "mlm":
            try:
                mlm_predictions(model)
            except ModelError:
                raise ValueError(f"{type(model).__name__} has no masked-LM head to pre-train") from None

    def teacher_outputs(self, teacher: nn.Module, batch: Batch) -> None:
        return None

    def prepare(self, batch: dict[str, Tensor]) -> Batch:
        """Model inputs with masked ids, and the :class:`Targets` (torch's RNG, or static masks)."""
        inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
        ids = inputs["input_ids"]
        if self.spec.masking.static_copies:
            masked, labels = self._static(batch)
        else:
            chosen = select(ids, inputs["attention_mask"], self.masking, None, batch.get("word_starts"))
            masked, labels = replace_selected(ids, chosen, self.masking)
        pair = batch["labels"] if self.spec.pairs else None
        targets = Targets(labels, pair, ids if self.kind == "electra" else None)
        return Batch({**inputs, "input_ids": masked}, targets, batch["index"])

    def _static(self, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        ids, attn, starts = batch["input_ids"], batch["attention_mask"], batch.get("word_starts")
        copies = torch.randint(self.spec.masking.static_copies, (ids.shape[0],))  # the loop's RNG
        masked, labels = ids.clone(), torch.full_like(ids, IGNORE)
        for row, (index, copy) in enumerate(zip(batch["index"].tolist(), copies.tolist(), strict=True)):
            # room for 64 copies a text: masking.static_copies is capped there (config/pretrain.py)
            gen = torch.Generator().manual_seed((self.seed * STATIC_SEED + index) * 64 + copy)
            row_starts = starts[row : row + 1] if starts is not None else None
            chosen = select(ids[row : row + 1], attn[row : row + 1], self.masking, gen, row_starts)
            m, lab = replace_selected(ids[row : row + 1], chosen, self.masking, gen)
            masked[row], labels[row] = m[0], lab[0]
        return masked, labels

    # -- losses ------------------------------------------------------------------------------
    def loss(self, model: nn.Module, batch: Batch, teacher_out: None = None) -> Tensor:
        """The batch's total loss (its parts: :meth:`_mlm` / :meth:`_electra`)."""
        if self.kind == "electra":
            return self._electra(model, batch.inputs, batch.targets)[0]
        return self._mlm(model, batch.inputs, batch.targets)[0]

    def _mlm(self, model: nn.Module, inputs: dict[str, Tensor], t: Targets) -> tuple[Tensor, dict[str, Tensor]]:
        out = base_model(model)(**inputs)
        selected = t.mlm != IGNORE
        logits = mlm_predictions(model)(out.last_hidden_state[selected])
        parts = {"mlm": _ce(logits, t.mlm[selected])}
        total = parts["mlm"]
        if self.spec.pairs:
            pair_logits = pair_head(model)(out.pooler_output)
            parts[self.spec.pairs] = F.cross_entropy(pair_logits.float(), t.pair)
            total = total + self.spec.pair_weight * parts[self.spec.pairs]
        return total, parts

    def _electra(self, model: nn.Module, inputs: dict[str, Tensor], t: Targets) -> tuple[Tensor, dict[str, Tensor]]:
        assert self.generator is not None and self.disc_head is not None and t.original is not None
        selected = t.mlm != IGNORE
        word_embeddings = roles.word_embeddings(model)
        gen_logits = self.generator(word_embeddings, inputs, selected)
        gen_loss = _ce(gen_logits, t.mlm[selected])
        corrupted = t.original.clone()
        corrupted[selected] = sample_replacements(gen_logits)
        replaced = corrupted != t.original
        hidden = model(**{**inputs, "input_ids": corrupted}).last_hidden_state
        counted = inputs["attention_mask"].bool()
        disc_loss, _ = rtd_loss(self.disc_head(hidden), replaced, counted)
        parts = {"generator_mlm": gen_loss, "rtd": disc_loss}
        return gen_loss + self.spec.electra.disc_weight * disc_loss, parts


def _ce(logits: Tensor, target: Tensor) -> Tensor:
    if target.numel() == 0:
        return logits.sum() * 0.0
    return F.cross_entropy(logits.float(), target)
