"""ELECTRA (Clark et al. 2020): a small generator fills masked positions, the discriminator
(the model kept) tells which tokens were replaced.

The generator is a BERT encoder ``generator_fraction`` as wide as the discriminator (ELECTRA:
1/4 to 1/2 works best) with the same depth by default. Embeddings are tied: the generator reads
the discriminator's token embeddings through a linear projection to its width, and predicts
tokens with the same matrix (through the projection's transpose), so no second vocabulary matrix
exists. Its masked-LM loss and the discriminator's replaced-token-detection loss (weighted by
``disc_weight`` = lambda, 50 in the paper) are summed; samples are drawn from the generator
without gradient, as in the paper. A sampled token equal to the original counts as original.

Deliberately built from BERT parts rather than ``transformers``' Electra classes: the kept
discriminator is then a plain ``BertModel`` that every other tinyplm stage (fine-tuning,
distillation, compression) takes as it is.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tinyplm.config.pretrain import ElectraSpec


def generator_config(disc_config, spec: ElectraSpec):
    """The generator's ``BertConfig``: ``generator_fraction`` of the width, heads and FFN."""
    cfg = copy.deepcopy(disc_config)
    heads = max(1, round(disc_config.num_attention_heads * spec.generator_fraction))
    per_head = max(8, round(disc_config.hidden_size * spec.generator_fraction / heads))
    cfg.hidden_size = heads * per_head
    cfg.num_attention_heads = heads
    cfg.intermediate_size = max(8, round(disc_config.intermediate_size * spec.generator_fraction))
    cfg.num_hidden_layers = spec.generator_layers or disc_config.num_hidden_layers
    cfg.vocab_size = 1  # token embeddings come from the discriminator (tied), not from this encoder
    return cfg


class ElectraGenerator(nn.Module):
    """A small masked-LM whose token embeddings are the discriminator's (see module docstring)."""

    def __init__(self, disc_config, spec: ElectraSpec) -> None:
        super().__init__()
        from transformers import BertModel
        from transformers.models.bert.modeling_bert import BertPredictionHeadTransform

        cfg = generator_config(disc_config, spec)
        self.config = cfg
        self.project = nn.Linear(disc_config.hidden_size, cfg.hidden_size)
        self.encoder = BertModel(cfg, add_pooling_layer=False)
        self.transform = BertPredictionHeadTransform(cfg)
        self.bias = nn.Parameter(torch.zeros(disc_config.vocab_size))

    def forward(self, word_embeddings: nn.Embedding, inputs: dict[str, Tensor], selected: Tensor) -> Tensor:
        """Logits ``(n_selected, vocab)`` at the ``selected`` positions of the masked ``inputs``."""
        embeds = self.project(word_embeddings(inputs["input_ids"]))
        hidden = self.encoder(inputs_embeds=embeds, attention_mask=inputs["attention_mask"],
                              token_type_ids=inputs.get("token_type_ids")).last_hidden_state
        h = self.transform(hidden[selected])
        return (h @ self.project.weight) @ word_embeddings.weight.t() + self.bias


class DiscriminatorHead(nn.Module):
    """ELECTRA's per-token head: dense, GELU, one logit ("replaced")."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.dense = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, 1)

    def forward(self, hidden: Tensor) -> Tensor:
        return self.out(F.gelu(self.dense(hidden))).squeeze(-1)


def sample_replacements(logits: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """One token id per row of ``logits`` ``(n, vocab)``, drawn from its softmax (no gradient)."""
    with torch.no_grad():
        if logits.shape[0] == 0:
            return torch.zeros(0, dtype=torch.long)
        probs = torch.softmax(logits.float(), dim=-1)
        return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def rtd_loss(disc_logits: Tensor, replaced: Tensor, counted: Tensor) -> tuple[Tensor, Tensor]:
    """Binary cross-entropy of ``disc_logits`` ``(batch, seq)`` against ``replaced`` over the
    ``counted`` positions -> (mean loss, number of correct predictions)."""
    logits, target = disc_logits[counted].float(), replaced[counted].float()
    if logits.numel() == 0:
        return disc_logits.sum() * 0.0, torch.zeros((), dtype=torch.long)
    loss = F.binary_cross_entropy_with_logits(logits, target)
    correct = ((logits > 0) == target.bool()).sum()
    return loss, correct
