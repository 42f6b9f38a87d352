"""LSTM and BiLSTM classifiers over word embeddings (or any per-token features).

:class:`StackedLstm` runs each direction as its own one-layer ``nn.LSTM``; the backward direction
reads every sequence reversed *within its length* (:func:`reverse_within`), so right padding never
reaches a real token's state. That is what ``pack_padded_sequence`` computes, written with a
gather instead: the TorchScript ONNX exporter handles it, and ONNX Runtime gives the same logits.
(States at padded positions are computed and then ignored by the pooling.)

:class:`LstmHead` is the part every LSTM-based classic model shares: LSTM layers, pooling (max,
mean, or attention: a learned score per position, softmax over real tokens), dropout and a linear
classifier. :class:`LstmClassifier` puts a word-embedding table in front of it.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.modeling_outputs import SequenceClassifierOutput

from tinyplm.models.classic.config import FamilyConfig


def reverse_within(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """``x`` ``(batch, seq, dim)`` with each row's first ``lengths[b]`` positions reversed (the
    padding after them stays in place). Its own inverse."""
    pos = torch.arange(x.shape[1], device=x.device).unsqueeze(0)  # (1, seq)
    last = (lengths - 1).unsqueeze(1)  # (batch, 1)
    idx = torch.where(pos <= last, last - pos, pos)  # (batch, seq)
    return x.gather(1, idx.unsqueeze(-1).expand(-1, -1, x.shape[2]))


class StackedLstm(nn.Module):
    """``layers`` LSTM layers, uni- or bidirectional, dropout between layers.

    ``forward(x (batch, seq, in_dim), mask (batch, seq))`` -> every layer's outputs, each
    ``(batch, seq, hidden * directions)``."""

    def __init__(self, in_dim: int, hidden: int, layers: int, bidirectional: bool, dropout: float) -> None:
        super().__init__()
        dirs = 2 if bidirectional else 1
        self.forward_layers = nn.ModuleList(
            nn.LSTM(in_dim if i == 0 else hidden * dirs, hidden, batch_first=True) for i in range(layers))
        self.backward_layers = nn.ModuleList(
            nn.LSTM(in_dim if i == 0 else hidden * dirs, hidden, batch_first=True) for i in range(layers)
        ) if bidirectional else None
        self.dropout = nn.Dropout(dropout)
        self.out_dim = hidden * dirs

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> list[torch.Tensor]:
        lengths = mask.long().sum(1).clamp(min=1)  # (batch,)
        outputs = []
        for i, fwd in enumerate(self.forward_layers):
            if i:
                x = self.dropout(x)
            h = fwd(x)[0]
            if self.backward_layers is not None:
                back = self.backward_layers[i](reverse_within(x, lengths))[0]
                h = torch.cat([h, reverse_within(back, lengths)], dim=-1)
            outputs.append(h)
            x = h
        return outputs


class Pooling(nn.Module):
    """Token states ``(batch, seq, dim)`` and mask ``(batch, seq)`` -> one vector ``(batch, dim)``
    per sequence: ``max``, ``mean`` or ``attention`` (softmax over real tokens of a learned score)."""

    def __init__(self, kind: str, dim: int) -> None:
        super().__init__()
        self.kind = kind
        self.score = nn.Linear(dim, 1) if kind == "attention" else None

    def forward(self, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        real = mask.unsqueeze(-1).to(h.dtype)  # (batch, seq, 1)
        if self.kind == "max":
            return h.masked_fill(real == 0, torch.finfo(h.dtype).min).max(dim=1).values
        if self.kind == "mean":
            return (h * real).sum(1) / real.sum(1).clamp(min=1.0)
        scores = self.score(h).squeeze(-1).masked_fill(mask == 0, torch.finfo(h.dtype).min)  # (batch, seq)
        weights = torch.softmax(scores, dim=1).unsqueeze(-1)
        return (weights * h).sum(1)


class LstmHead(nn.Module):
    """Features ``(batch, seq, in_dim)`` -> logits ``(batch, num_labels)``: LSTM layers, pooling,
    dropout, a linear classifier (see the module docstring)."""

    def __init__(self, config: FamilyConfig, in_dim: int) -> None:
        super().__init__()
        self.lstm = StackedLstm(in_dim, config.hidden, config.layers, config.bidirectional, config.dropout)
        self.pool = Pooling(config.pooling, self.lstm.out_dim)
        self.dropout = nn.Dropout(config.dropout)
        self.classifier = nn.Linear(self.lstm.out_dim, config.num_labels)

    def forward(self, features: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.lstm(self.dropout(features), mask)[-1]
        return self.classifier(self.dropout(self.pool(h, mask)))


class FamilyModule(nn.Module):
    """What the classic students share: their config, ``num_parameters`` like a
    ``transformers`` model (``exclude_embeddings`` leaves out ``nn.Embedding`` tables), and the
    ``transformers`` calling convention (``model(input_ids, attention_mask, token_type_ids)`` ->
    an output with ``.logits``)."""

    config: FamilyConfig

    def record_params(self) -> None:
        """Record the parameter counts in the config (an ONNX graph of the model reports them)."""
        from tinyplm.models.onnx import PARAMS_KEY

        setattr(self.config, PARAMS_KEY, [self.num_parameters(), self.num_parameters(exclude_embeddings=True)])

    def saved_state(self) -> dict[str, torch.Tensor]:
        """The tensors model.safetensors holds (``models.classic.io.save_family``): the state dict,
        unless a model stores some tensor otherwise (a static table in fp16 or int8)."""
        return {k: v.detach().contiguous() for k, v in self.state_dict().items()}

    def load_saved_state(self, state: dict[str, torch.Tensor]) -> None:
        """Load what :meth:`saved_state` wrote, strictly; raises ``RuntimeError`` when it does not fit."""
        self.load_state_dict(state, strict=True)

    def num_parameters(self, exclude_embeddings: bool = False) -> int:
        skip = {id(m.weight) for m in self.modules() if isinstance(m, nn.Embedding)} if exclude_embeddings else set()
        seen: set[int] = set()
        total = 0
        for p in self.parameters():
            if id(p) not in seen and id(p) not in skip:
                seen.add(id(p))
                total += p.numel()
        return total


class LstmClassifier(FamilyModule):
    """An (Bi)LSTM classifier over word embeddings (``arch`` lstm or bilstm).

    ``forward(input_ids (batch, seq), attention_mask (batch, seq))`` -> ``.logits (batch, labels)``."""

    def __init__(self, config: FamilyConfig) -> None:
        super().__init__()
        self.config = config
        self.embeddings = nn.Embedding(config.vocab_size, config.embed_dim, padding_idx=0)
        self.head = LstmHead(config, config.embed_dim)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, **_) -> SequenceClassifierOutput:
        mask = attention_mask if attention_mask is not None else torch.ones_like(input_ids)
        return SequenceClassifierOutput(logits=self.head(self.embeddings(input_ids), mask))
