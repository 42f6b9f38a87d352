"""Static students over the teacher's own word pieces: one vector per piece, no attention.

Both read the teacher tokenizer's ids. ``row_of`` ``(vocab_size,)`` maps each id to a row of the
table ``(table_rows, dims)`` (a table of the pieces the training data uses sends the others to
``[UNK]``'s row); the table is made from the teacher by :mod:`tinyplm.models.classic.static_init`
and trains with the classifier unless frozen.

- :class:`StaticBag` (``static``): the sentence is ``(1 / n) sum_i w(t_i) v(t_i)`` over its ``n``
  pieces that are not special tokens (``token_weights``: 1 for a plain mean, ``a / (a + p(t))`` for
  SIF or Zipf weighting, 0 for every special token, so a piece read as ``[UNK]`` is left out),
  optionally ReLU hidden layers (one, or a stack: Iyyer et al. 2015's deep averaging network),
  then a linear classifier.
- :class:`StaticCnn` (``static_cnn``): Kim (2014)'s CNN over the vectors: wide 1-D convolutions of
  a few widths (zero padding ``width - 1`` on each side, so a sentence shorter than a filter is
  read too), ReLU, max over the positions that touch a real token, concatenated, a linear
  classifier. Every position of a convolution runs at once, so it is the faster of the two
  sequence students.
- :class:`StaticBiLstm` (``static_bilstm``): a BiLSTM over the vectors (Tang et al. 2019's student,
  here over the teacher's own pieces), the head of the word-vector ``bilstm``
  (:class:`tinyplm.models.classic.lstm.LstmHead`: its backward direction reads each sentence
  reversed within its length, max, mean or attention pooling). It steps through a sentence one
  piece at a time, so it is slower than the CNN at the same width, but it reads the whole sentence
  in order, which a CNN's few-piece windows do not (negation and "but" clauses of SST-2's whole
  sentences).

While training, ``word_dropout`` leaves each piece out of its sentence with that probability (Iyyer
et al. 2015): the bag weighs it 0 and counts it out of ``n``, the CNN and the BiLSTM read zeros in
its place; in eval mode every piece is read.

The table is stored as the recipe's ``table_dtype`` says: fp32, fp16, or int8 with one fp32 scale
per row (``max |row| / 127``, rounded to nearest): :func:`pack_table` / :func:`unpack_table`.
Saving rounds the table the model holds to the stored values first, so the model kept after a run
and the one loaded from its dir give the same logits.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.modeling_outputs import SequenceClassifierOutput

from tinyplm.models.classic.config import FamilyConfig
from tinyplm.models.classic.lstm import FamilyModule, LstmHead

TABLE = "table.weight"
QWEIGHT, SCALE = "table.qweight", "table.scale"


def pack_table(weight: torch.Tensor, dtype: str) -> dict[str, torch.Tensor]:
    """The tensors that store ``weight`` ``(rows, dims)`` as ``dtype``: fp32 or fp16 as
    ``table.weight``; int8 as ``table.qweight`` ``(rows, dims)`` int8 and ``table.scale`` ``(rows,)``
    fp32, ``row = qweight * scale``."""
    w = weight.detach().float().contiguous()
    if dtype == "fp32":
        return {TABLE: w}
    if dtype == "fp16":
        return {TABLE: w.half()}
    if dtype != "int8":
        raise ValueError(f"table dtype {dtype!r} is not fp32, fp16 or int8")
    scale = w.abs().amax(dim=1) / 127.0  # (rows,)
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    q = torch.round(w / safe.unsqueeze(1)).clamp(-127, 127).to(torch.int8)
    return {QWEIGHT: q.contiguous(), SCALE: scale.contiguous()}


def unpack_table(state: dict[str, torch.Tensor], dtype: str) -> torch.Tensor:
    """The float32 table ``(rows, dims)`` from what :func:`pack_table` wrote; raises
    ``RuntimeError`` naming a missing tensor."""
    names = (QWEIGHT, SCALE) if dtype == "int8" else (TABLE,)
    missing = [n for n in names if n not in state]
    if missing:
        raise RuntimeError(f"no tensor {missing[0]!r} (the table is stored as {dtype})")
    if dtype == "int8":
        return state[QWEIGHT].float() * state[SCALE].float().unsqueeze(1)
    return state[TABLE].float()


class StaticModule(FamilyModule):
    """What both static students share: ``row_of`` and the table, and its storage."""

    def __init__(self, config: FamilyConfig) -> None:
        super().__init__()
        self.config = config
        self.register_buffer("row_of", torch.zeros(config.vocab_size, dtype=torch.int32))
        self.table = nn.Embedding(config.table_rows, config.embed_dim)

    def kept(self, mask: torch.Tensor) -> torch.Tensor:
        """``mask`` ``(batch, seq)`` with each piece also dropped with probability ``word_dropout``
        while training (unchanged in eval mode), as float."""
        keep = mask.float()
        if self.training and self.config.word_dropout > 0:
            keep = keep * (torch.rand(keep.shape, device=keep.device) >= self.config.word_dropout).float()
        return keep

    def vectors(self, input_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Word-piece ids ``(batch, seq)`` -> their table rows' ids ``(batch, seq)`` and vectors
        ``(batch, seq, dims)``."""
        rows = self.row_of[input_ids].long()
        return rows, self.table(rows)

    def saved_state(self) -> dict[str, torch.Tensor]:
        """The state with the table as ``table_dtype`` stores it; the table held is set to the
        stored values (see the module docstring)."""
        packed = pack_table(self.table.weight, self.config.table_dtype)
        with torch.no_grad():
            self.table.weight.copy_(unpack_table(packed, self.config.table_dtype))
        state = {k: v for k, v in super().saved_state().items() if k != TABLE}
        return {**state, **packed}

    def load_saved_state(self, state: dict[str, torch.Tensor]) -> None:
        rest = {k: v for k, v in state.items() if k not in (TABLE, QWEIGHT, SCALE)}
        super().load_saved_state({**rest, TABLE: unpack_table(state, self.config.table_dtype)})


def _classifier(config: FamilyConfig, width: int) -> nn.Sequential:
    """Dropout, ``config.hidden_layers`` ReLU layers of ``config.hidden`` units (none when ``hidden``
    is 0), each followed by dropout, and the linear classifier."""
    layers: list[nn.Module] = [nn.Dropout(config.dropout)]
    for _ in range(config.hidden_layers if config.hidden else 0):
        layers += [nn.Linear(width, config.hidden), nn.ReLU(), nn.Dropout(config.dropout)]
        width = config.hidden
    return nn.Sequential(*layers, nn.Linear(width, config.num_labels))


class StaticBag(StaticModule):
    """Weighted mean of the pieces' vectors -> classifier (see the module docstring).

    ``forward(input_ids (batch, seq), attention_mask (batch, seq))`` -> ``.logits (batch, labels)``.

    Inference runs it on one torch thread (``forward_threads``,
    :func:`tinyplm.models.infer.model_threads`): its pass is a gather and a mean, too small to gain
    from more threads, whose idle spinning slowed the tokenizer beside it (now mostly a memo,
    ``tasks.piece_cache``). The CNN's convolutions do gain from them, so it keeps the process's
    threads."""

    forward_threads = 1

    def __init__(self, config: FamilyConfig) -> None:
        super().__init__(config)
        self.register_buffer("token_weights", torch.ones(config.table_rows))
        self.head = _classifier(config, config.embed_dim)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, **_) -> SequenceClassifierOutput:
        mask = attention_mask if attention_mask is not None else torch.ones_like(input_ids)
        rows, v = self.vectors(input_ids)
        w = self.token_weights[rows] * self.kept(mask).to(v.dtype)  # (batch, seq); specials, padding, dropped 0
        n = (w > 0).sum(dim=1, keepdim=True).clamp(min=1).to(v.dtype)  # (batch, 1)
        pooled = (w.unsqueeze(-1) * v).sum(dim=1) / n  # (batch, dims)
        return SequenceClassifierOutput(logits=self.head(pooled))


class StaticCnn(StaticModule):
    """Wide 1-D convolutions over the pieces' vectors, max over time -> classifier (see the module
    docstring). ``forward`` as :class:`StaticBag`'s."""

    def __init__(self, config: FamilyConfig) -> None:
        super().__init__(config)
        if not config.filters:
            raise ValueError("a static_cnn config needs filters: [[width, channels], ...]")
        self.convs = nn.ModuleList(nn.Conv1d(config.embed_dim, c, w, padding=w - 1) for w, c in config.filters)
        self.head = _classifier(config, sum(c for _, c in config.filters))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, **_) -> SequenceClassifierOutput:
        mask = attention_mask if attention_mask is not None else torch.ones_like(input_ids)
        _, v = self.vectors(input_ids)
        x = (v * self.kept(mask).unsqueeze(-1).to(v.dtype)).transpose(1, 2)  # (batch, dims, seq); padding 0
        lengths = mask.long().sum(dim=1, keepdim=True)  # (batch, 1)
        pooled = []
        for conv in self.convs:
            h = torch.relu(conv(x))  # (batch, channels, seq + width - 1)
            width = conv.kernel_size[0]
            reach = torch.arange(h.shape[-1], device=h.device).unsqueeze(0) < lengths + width - 1  # (batch, out)
            # ReLU outputs are >= 0, so the zeros put past the sentence never beat a real position
            pooled.append(h.masked_fill(~reach.unsqueeze(1), 0.0).max(dim=-1).values)
        return SequenceClassifierOutput(logits=self.head(torch.cat(pooled, dim=-1)))


class StaticBiLstm(StaticModule):
    """A BiLSTM over the pieces' vectors, pooled -> classifier (see the module docstring).
    ``forward`` as :class:`StaticBag`'s; ``config.hidden`` is the LSTM's width per direction,
    ``config.layers`` its layers, ``config.pooling`` how its states become one vector."""

    def __init__(self, config: FamilyConfig) -> None:
        super().__init__(config)
        if config.layers < 1:
            raise ValueError(f"a static_bilstm config needs layers >= 1, got {config.layers}")
        self.head = LstmHead(config, config.embed_dim)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, **_) -> SequenceClassifierOutput:
        mask = attention_mask if attention_mask is not None else torch.ones_like(input_ids)
        _, v = self.vectors(input_ids)
        x = v * self.kept(mask).unsqueeze(-1).to(v.dtype)  # (batch, seq, dims); dropped pieces read 0
        return SequenceClassifierOutput(logits=self.head(x, mask))
