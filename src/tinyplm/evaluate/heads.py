"""Statistics of attention heads, from attention tensors alone (no model is run here).

Input, one layer and batch at a time: attention probabilities ``(batch, heads, seq, seq)`` (rows are
queries, columns keys; padded keys carry 0) and :class:`TokenMarks` saying which positions are
real tokens, ``[CLS]``, ``[SEP]``, punctuation and the sentence's rarest word piece. Per head, over
every real query token of every sentence, :class:`HeadAccumulator` averages

- ``entropy``: ``-sum_j p_ij ln p_ij`` of the query's attention (nats);
- ``confidence``: ``max_j p_ij`` (Voita et al., 2019);
- ``cls``, ``sep``, ``punct``, ``rare``: the attention mass on those positions;
- ``prev``, ``next``: the mass on position ``i-1`` / ``i+1`` (over queries that have that real
  neighbour);

and for each of those six kinds, ``argmax_<kind>``: the share of queries whose *maximum* weight
lands on such a token. Voita et al. call a head positional when at least 90% of its queries put
their maximum attention on the previous (or next) token; :func:`pattern_heads` applies that rule
to every kind (``prev``/``next``: positional heads; ``sep``: heads that park on ``[SEP]``, ...).

Rarity (:func:`piece_counts`, :func:`rarest_positions`) comes from word-piece counts of a training
split: a sentence's rarest piece is its real, non-special piece with the fewest occurrences.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

#: Kinds of key a head can attend to; each has a mean-mass and an argmax-share statistic.
KINDS: tuple[str, ...] = ("prev", "next", "cls", "sep", "punct", "rare")
#: Every statistic :class:`HeadAccumulator` returns, in display order.
STATS: tuple[str, ...] = ("entropy", "confidence", *KINDS, *(f"argmax_{k}" for k in KINDS))
#: Voita et al.'s threshold: the share of queries whose maximum goes to one kind of token.
THRESHOLD = 0.9


@dataclass(frozen=True)
class TokenMarks:
    """Which positions of a batch are what; each ``(batch, seq)`` bool. ``rare`` has at most one
    True per sentence."""

    real: Tensor
    cls: Tensor
    sep: Tensor
    punct: Tensor
    rare: Tensor


@dataclass(frozen=True)
class PatternHead:
    """A head that meets the rule for ``kind``: ``share`` of its queries put their maximum there."""

    layer: int
    head: int
    kind: str
    share: float


class HeadAccumulator:
    """Sums of every statistic per layer and head over batches; :meth:`result` gives the means.

    ``heads_per_layer`` may differ between layers (a pruned model)."""

    def __init__(self, heads_per_layer: Sequence[int]) -> None:
        self.heads = list(heads_per_layer)
        self.sums = {s: [torch.zeros(h, dtype=torch.float64) for h in self.heads] for s in STATS}
        self.counts = {k: [0] * len(self.heads) for k in ("query", "prev", "next")}

    def add(self, layer: int, probs: Tensor, marks: TokenMarks) -> None:
        """Add one batch of layer ``layer``: ``probs`` (batch, heads, seq, seq).

        Raises ``ValueError`` when the head count or the sequence length does not fit."""
        b, h, s, s2 = probs.shape
        if h != self.heads[layer] or s != s2 or marks.real.shape != (b, s):
            raise ValueError(f"layer {layer}: attention {tuple(probs.shape)} does not fit {self.heads[layer]} heads "
                             f"and marks {tuple(marks.real.shape)}")
        p = probs.detach().double()
        q = marks.real[:, None, :].double()  # (batch, 1, seq): real queries
        top, arg = p.max(-1)  # (batch, heads, seq)
        add = self._adder(layer)
        add("entropy", -(p * p.clamp_min(1e-12).log()).sum(-1), q)
        add("confidence", top, q)
        for kind in ("cls", "sep", "punct", "rare"):
            key = getattr(marks, kind)[:, None, :].expand(b, h, s)  # (batch, heads, seq) over keys
            add(kind, (p * key[:, :, None, :].double()).sum(-1), q)
            add(f"argmax_{kind}", torch.gather(key, 2, arg).double(), q)
        self.counts["query"][layer] += int(marks.real.sum())
        pairs = (marks.real[:, 1:] & marks.real[:, :-1])[:, None, :].double()  # (batch, 1, seq-1)
        steps = torch.arange(s - 1)
        # prev: query i >= 1, key i-1 (the -1 diagonal); next: query i < seq-1, key i+1 (the +1 diagonal)
        add("prev", torch.diagonal(p, offset=-1, dim1=-2, dim2=-1), pairs)
        add("argmax_prev", (arg[:, :, 1:] == steps).double(), pairs)
        add("next", torch.diagonal(p, offset=1, dim1=-2, dim2=-1), pairs)
        add("argmax_next", (arg[:, :, :-1] == steps + 1).double(), pairs)
        for kind in ("prev", "next"):
            self.counts[kind][layer] += int(pairs.sum())

    def _adder(self, layer: int):
        def add(stat: str, values: Tensor, weights: Tensor) -> None:  # values (batch, heads, n), weights (batch, 1, n)
            self.sums[stat][layer] += (values * weights).sum(dim=(0, 2))
        return add

    def result(self) -> dict[str, list[list[float]]]:
        """stat -> per layer, per head, the mean over the queries seen (0 where none was)."""
        out: dict[str, list[list[float]]] = {}
        for stat, sums in self.sums.items():
            base = stat.removeprefix("argmax_")
            key = base if base in ("prev", "next") else "query"
            out[stat] = [(s / max(1, self.counts[key][i])).tolist() for i, s in enumerate(sums)]
        return out


def pattern_heads(stats: dict[str, list[list[float]]], threshold: float = THRESHOLD,
                  kinds: Iterable[str] = KINDS) -> list[PatternHead]:
    """Heads whose ``argmax_<kind>`` share is at least ``threshold``, by layer, head and kind.
    With ``kinds=("prev", "next")`` these are Voita et al.'s positional heads."""
    found = []
    for kind in kinds:
        for layer, shares in enumerate(stats.get(f"argmax_{kind}", [])):
            found += [PatternHead(layer, h, kind, float(v)) for h, v in enumerate(shares) if v >= threshold]
    return sorted(found, key=lambda x: (x.layer, x.head, KINDS.index(x.kind)))


def piece_counts(ids: Iterable[Sequence[int]], vocab_size: int) -> np.ndarray:
    """How often each id occurs in ``ids`` (lists of word-piece ids) -> ``(vocab_size,)`` int64;
    ids beyond ``vocab_size`` are ignored."""
    counts = np.zeros(vocab_size, dtype=np.int64)
    for row in ids:
        arr = np.asarray(row, dtype=np.int64)
        np.add.at(counts, arr[(arr >= 0) & (arr < vocab_size)], 1)
    return counts


def rarest_positions(input_ids: Tensor, candidates: Tensor, counts: Tensor) -> Tensor:
    """One-hot ``(batch, seq)`` bool: each sentence's candidate position with the lowest count
    (the first on ties; none for a sentence without candidates). ``input_ids`` (batch, seq),
    ``candidates`` (batch, seq) bool, ``counts`` (vocab,)."""
    ids = input_ids.clamp(0, len(counts) - 1)
    c = counts.double()[ids].masked_fill(~candidates, float("inf"))
    pos = c.argmin(dim=1)
    out = torch.zeros_like(candidates)
    rows = torch.nonzero(candidates.any(dim=1)).flatten()
    out[rows, pos[rows]] = True
    return out
