"""An ELMo-style biLM (Peters et al. 2018) and the classifier that uses it frozen.

The biLM reads each word as its UTF-8 bytes (``[BOW] bytes [EOW]``, cut to ``max_chars``): a
character CNN (filters of several widths, max over positions, a highway layer, a projection to
``hidden``) gives a context-free word vector; a 2-layer forward LSTM and a 2-layer backward LSTM
(:class:`~tinyplm.models.classic.lstm.StackedLstm`, each direction on its own as in ELMo) read
them. The forward LM predicts word t+1 from its state at t, the backward LM word t-1, through
one softmax over the ``vocab_size`` most frequent corpus words (the rest are ``[UNK]``).

Its three layers, each ``(batch, seq, 2 * hidden)`` (the word vector twice, then
``[forward; backward]`` of LSTM layers 1 and 2), are mixed by :class:`ScalarMix`
(``gamma * sum_k softmax(s)_k h_k``) into a BiLSTM classifier (:class:`ElmoBiLstm`), the biLM frozen.

Word ids reach the characters through a table of the classifier's vocabulary (``char_table``,
one row of byte ids per word), so the char CNN sees every word of the task's vocabulary, whether
or not the LM's softmax knew it; a word outside that vocabulary is ``[UNK]``.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.modeling_outputs import SequenceClassifierOutput

from tinyplm.models.classic.config import FamilyConfig
from tinyplm.models.classic.lstm import FamilyModule, LstmHead, StackedLstm, reverse_within

PAD_CHAR, BOW, EOW, BYTE0 = 0, 1, 2, 3  # byte b is char id b + 3
CHAR_VOCAB = 256 + BYTE0
#: Bumped when the biLM's layers change, so a cached biLM of older layers is not reused.
BILM_VERSION = 2
#: biLM settings (the ``bilm`` dict of a FamilyConfig) and their defaults.
BILM_DEFAULTS = {"max_chars": 16, "char_dim": 16, "filters": [[1, 32], [2, 32], [3, 64], [4, 128]], "hidden": 128,
                 "vocab_size": 10000}


def char_table(words: list[str], max_chars: int) -> torch.Tensor:
    """Byte ids of each word ``(len(words), max_chars)``; the special tokens ([PAD] ...) in
    brackets get all-padding rows except ``[UNK]``, which is ``[BOW] [EOW]``."""
    table = torch.zeros(len(words), max_chars, dtype=torch.long)
    for i, w in enumerate(words):
        if w.startswith("[") and w.endswith("]") and w != "[UNK]":
            continue
        body = [] if w == "[UNK]" else [b + BYTE0 for b in w.encode("utf-8")][: max_chars - 2]
        row = [BOW, *body, EOW]
        table[i, : len(row)] = torch.tensor(row)
    return table


class CharCnn(nn.Module):
    """Byte ids ``(batch, seq, chars)`` -> word vectors ``(batch, seq, out_dim)``, batch-normalised
    per channel (running statistics once the biLM is frozen)."""

    def __init__(self, char_dim: int, filters: list[list[int]], out_dim: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(CHAR_VOCAB, char_dim, padding_idx=PAD_CHAR)
        self.convs = nn.ModuleList(nn.Conv1d(char_dim, channels, width) for width, channels in filters)
        total = sum(channels for _, channels in filters)
        self.highway = nn.Linear(total, 2 * total)
        self.proj = nn.Linear(total, out_dim)
        # Without it the LM sat on a unigram model's perplexity (389.6 against 401.6 after 8 minutes):
        # max-pooled ReLU features share most of their value across words (mean cosine 0.89 at
        # initialisation, each channel's spread across words a tenth of a word embedding's), so the
        # LSTMs barely saw which word came in. Normalised per channel over the batch's words, the
        # LM leaves the unigram plateau within the first 600 steps, as a word-embedding LM does.
        self.norm = nn.BatchNorm1d(out_dim)

    def forward(self, chars: torch.Tensor) -> torch.Tensor:
        b, s, c = chars.shape
        x = self.embed(chars.reshape(b * s, c)).transpose(1, 2)  # (words, char_dim, chars)
        h = torch.cat([torch.relu(conv(x)).max(dim=-1).values for conv in self.convs], dim=-1)
        carry, gate = self.highway(h).chunk(2, dim=-1)
        g = torch.sigmoid(gate)
        h = g * torch.relu(carry) + (1 - g) * h
        v = self.proj(h)
        if not self.training:
            return self.norm(v).reshape(b, s, -1)
        real = chars.reshape(b * s, c)[:, 0] != PAD_CHAR  # padding and [SEP] rows have no bytes
        out = torch.zeros_like(v)
        if int(real.sum()) > 1:  # batch statistics of the real words only
            out[real] = self.norm(v[real])
        else:  # one word has no spread to measure: the running statistics, left unchanged
            n = self.norm
            out[real] = nn.functional.batch_norm(v[real], n.running_mean, n.running_var, n.weight, n.bias,
                                                 training=False, eps=n.eps)
        return out.reshape(b, s, -1)


class BiLMEncoder(nn.Module):
    """Char CNN + 2-layer forward and backward LSTMs -> the biLM's three layers."""

    def __init__(self, bilm: dict) -> None:
        super().__init__()
        d = {**BILM_DEFAULTS, **bilm}
        self.chars = CharCnn(d["char_dim"], d["filters"], d["hidden"])
        self.forward_lm = StackedLstm(d["hidden"], d["hidden"], 2, False, 0.0)
        self.backward_lm = StackedLstm(d["hidden"], d["hidden"], 2, False, 0.0)

    def forward(self, chars: torch.Tensor, mask: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """-> (forward states of layers 0..2, backward states of layers 0..2), each ``(batch, seq,
        hidden)``; layer 0 is the char CNN's word vector in both lists."""
        x = self.chars(chars)
        lengths = mask.long().sum(1).clamp(min=1)
        fwd = self.forward_lm(x, mask)
        bwd = [reverse_within(h, lengths) for h in self.backward_lm(reverse_within(x, lengths), mask)]
        return [x, *fwd], [x, *bwd]

    def layers(self, chars: torch.Tensor, mask: torch.Tensor) -> list[torch.Tensor]:
        """The three ELMo layers, each ``(batch, seq, 2 * hidden)``."""
        fwd, bwd = self(chars, mask)
        return [torch.cat([f, b], dim=-1) for f, b in zip(fwd, bwd, strict=True)]


class BiLM(nn.Module):
    """The biLM being pre-trained: encoder + one softmax over its output words (``words``, the
    LM's vocabulary; ids as its WordTokenizer gives them)."""

    def __init__(self, bilm: dict, words: list[str]) -> None:
        super().__init__()
        d = {**BILM_DEFAULTS, **bilm}
        self.settings = {**d, "vocab_size": len(words)}
        self.encoder = BiLMEncoder(d)
        self.register_buffer("char_table", char_table(words, d["max_chars"]), persistent=False)
        self.softmax = nn.Linear(d["hidden"], len(words))

    def token_losses(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Summed cross-entropy of both LMs and the number of predictions -> tensor [sum, count]."""
        fwd, bwd = self.encoder(self.char_table[input_ids], attention_mask)
        real = attention_mask.bool()
        ce = nn.functional.cross_entropy
        nxt = real[:, 1:] & real[:, :-1]  # forward: position t predicts t + 1
        f = ce(self.softmax(fwd[-1][:, :-1][nxt]), input_ids[:, 1:][nxt], reduction="sum")
        b = ce(self.softmax(bwd[-1][:, 1:][nxt]), input_ids[:, :-1][nxt], reduction="sum")
        return torch.stack([f + b, 2 * nxt.sum().to(f.dtype)])

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **_) -> torch.Tensor:
        """Mean cross-entropy per prediction (both directions)."""
        mask = attention_mask if attention_mask is not None else torch.ones_like(input_ids)
        total, count = self.token_losses(input_ids, mask)
        return total / count.clamp(min=1)


class ScalarMix(nn.Module):
    """``gamma * sum_k softmax(s)_k * layers[k]`` (ELMo's task-specific mix of the biLM layers)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.scalars = nn.Parameter(torch.zeros(n))
        self.gamma = nn.Parameter(torch.ones(1))

    def weights(self) -> torch.Tensor:
        return torch.softmax(self.scalars, dim=0)

    def forward(self, layers: list[torch.Tensor]) -> torch.Tensor:
        w = self.weights()
        return self.gamma * sum(w[k] * h for k, h in enumerate(layers))


class ElmoBiLstm(FamilyModule):
    """Word ids -> their bytes (``char_table`` of the classifier's vocabulary) -> the frozen biLM's
    three layers -> :class:`ScalarMix` -> :class:`LstmHead` -> ``.logits (batch, labels)``."""

    def __init__(self, config: FamilyConfig, words: list[str] | None = None) -> None:
        super().__init__()
        self.config = config
        d = {**BILM_DEFAULTS, **(config.bilm or {})}
        table = char_table(words, d["max_chars"]) if words is not None else torch.zeros(
            config.vocab_size, d["max_chars"], dtype=torch.long)
        self.register_buffer("char_table", table)
        self.bilm = BiLMEncoder(d)
        self.bilm.requires_grad_(False)
        self.mix = ScalarMix(3)
        self.head = LstmHead(config, 2 * d["hidden"])

    def train(self, mode: bool = True) -> ElmoBiLstm:
        super().train(mode)
        self.bilm.eval()
        return self

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, **_) -> SequenceClassifierOutput:
        mask = attention_mask if attention_mask is not None else torch.ones_like(input_ids)
        with torch.no_grad():
            layers = self.bilm.layers(self.char_table[input_ids], mask)
        return SequenceClassifierOutput(logits=self.head(self.mix(layers), mask))
