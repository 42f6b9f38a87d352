"""The feature-based use of a transformer (Devlin et al. 2019, section 5.3): the encoder frozen, its
last ``feature_layers`` hidden layers concatenated per token, into a 2-layer BiLSTM classifier.

The encoder's config travels in the student's config (``encoder``: its ``to_dict()``) and its
weights in the student's safetensors file, so the saved dir is self-contained; its tokenizer is
the transformer's. Only the BiLSTM head trains (the encoder's parameters have
``requires_grad=False`` and it runs without gradients).
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.modeling_outputs import SequenceClassifierOutput

from tinyplm.models.classic.config import FamilyConfig
from tinyplm.models.classic.lstm import FamilyModule, LstmHead


def encoder_from_config(d: dict) -> nn.Module:
    """A bare ``transformers`` encoder from its config dict (random weights; loaded afterwards)."""
    from transformers import AutoConfig, AutoModel

    conf = AutoConfig.for_model(**d)
    return AutoModel.from_config(conf)


class FeatureBiLstm(FamilyModule):
    """Frozen transformer -> last ``feature_layers`` hidden states concatenated ``(batch, seq,
    layers * hidden)`` -> :class:`LstmHead` -> ``.logits (batch, labels)``."""

    def __init__(self, config: FamilyConfig, encoder: nn.Module | None = None) -> None:
        super().__init__()
        self.config = config
        self.encoder = encoder if encoder is not None else encoder_from_config(config.encoder)
        self.encoder.requires_grad_(False)
        width = self.encoder.config.hidden_size * config.feature_layers
        self.head = LstmHead(config, width)

    def train(self, mode: bool = True) -> FeatureBiLstm:
        super().train(mode)
        self.encoder.eval()  # frozen: no dropout inside it either
        return self

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, **_) -> SequenceClassifierOutput:
        mask = attention_mask if attention_mask is not None else torch.ones_like(input_ids)
        with torch.no_grad():
            out = self.encoder(input_ids=input_ids, attention_mask=mask, token_type_ids=token_type_ids,
                               output_hidden_states=True)
        features = torch.cat(out.hidden_states[-self.config.feature_layers:], dim=-1)
        return SequenceClassifierOutput(logits=self.head(features, mask))


def feature_bilstm(encoder: nn.Module, num_labels: int, *, hidden: int = 128, layers: int = 2,
                   feature_layers: int = 4, pooling: str = "max", dropout: float = 0.1,
                   id2label: dict[int, str] | None = None) -> FeatureBiLstm:
    """A new feature-based BiLSTM on a copy of ``encoder`` (a bare ``transformers`` encoder).
    Raises ``ValueError`` when the encoder has fewer than ``feature_layers`` layers."""
    import copy

    n = encoder.config.num_hidden_layers
    if feature_layers > n:
        raise ValueError(f"feature_layers {feature_layers} > the encoder's {n} layers")
    config = FamilyConfig(arch="feature_bilstm", vocab_size=encoder.config.vocab_size, embed_dim=0, hidden=hidden,
                          layers=layers, pooling=pooling, dropout=dropout, encoder=encoder.config.to_dict(),
                          feature_layers=feature_layers, num_labels=num_labels, id2label=id2label)
    model = FeatureBiLstm(config, copy.deepcopy(encoder))
    model.record_params()
    return model
