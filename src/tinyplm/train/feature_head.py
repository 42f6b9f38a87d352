"""A classifier on a frozen encoder's last four layers (Devlin et al. 2019, feature-based: the
[CLS] vectors of the top four layers concatenated were their best frozen setting).

Only for ``method: frozen`` with ``features: last4``. Its output is ``transformers``' sequence-
classifier output, so the loop, evaluation and distillation (``model(**inputs).logits``) take it
as they take a task model; it is not a Hugging Face checkpoint, so a run cannot save it as one.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.modeling_outputs import SequenceClassifierOutput

from tinyplm.models import roles

LAST_LAYERS = 4


class LastLayersClassifier(nn.Module):
    """``(batch, seq)`` token ids -> ``(batch, num_labels)`` logits from the frozen encoder of
    ``model`` (a sequence-classification task model): dropout then Linear over the [CLS] vectors of
    its last ``LAST_LAYERS`` layers concatenated ``(batch, LAST_LAYERS * hidden)``.

    Raises ``ValueError`` when the model has fewer layers."""

    def __init__(self, model: nn.Module, layers: int = LAST_LAYERS) -> None:
        super().__init__()
        count = len(roles.layer_steps(model))  # ALBERT's shared group counted per step, not copied
        if count < layers:
            raise ValueError(f"method_options.features=last4 needs {layers} encoder layers; the model has {count}")
        self.encoder = roles.base_model(model)
        self.config = model.config
        self.layers = layers
        for p in self.encoder.parameters():
            p.requires_grad_(False)
        self.dropout = nn.Dropout(getattr(model.config, "hidden_dropout_prob", 0.1))
        self.head = nn.Linear(layers * model.config.hidden_size, model.config.num_labels)

    def train(self, mode: bool = True) -> LastLayersClassifier:
        """Train the head; the frozen encoder stays in eval mode (no dropout in its features)."""
        super().train(mode)
        self.encoder.train(False)
        return self

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, **_: object) -> SequenceClassifierOutput:
        with torch.no_grad():
            out = self.encoder(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                               output_hidden_states=True)
        cls = torch.cat([h[:, 0] for h in out.hidden_states[-self.layers:]], dim=-1)  # (batch, layers * hidden)
        return SequenceClassifierOutput(logits=self.head(self.dropout(cls)))
