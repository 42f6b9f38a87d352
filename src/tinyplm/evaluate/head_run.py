"""Attention-head analysis of a model on a task's dev sentences, and its stored form.

:func:`analyse_heads` runs the model over dev sentences (attention recomputed from Q and K by
:func:`~tinyplm.models.features.forward_features`, so any attention implementation works), marks
each position (``[CLS]``, ``[SEP]``, punctuation, the sentence's rarest piece by the training
split's counts) and accumulates :mod:`tinyplm.evaluate.heads` statistics. It also keeps the
attention maps of a few heads on one sentence, for pictures. :class:`HeadsReport` is what
``analysis/heads-<task>.json`` holds: one :class:`StageHeads` per model.
"""

from __future__ import annotations

import time
import unicodedata
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from tinyplm.evaluate.encoder import batches
from tinyplm.evaluate.heads import KINDS, THRESHOLD, HeadAccumulator, TokenMarks, pattern_heads, rarest_positions
from tinyplm.evaluate.probe_data import EncodedItems, Level, encode_items
from tinyplm.models import roles
from tinyplm.models.features import forward_features
from tinyplm.models.widths import attention_heads


@dataclass(frozen=True)
class HeadSettings:
    """How heads are analysed: dev ``sentences`` sampled, pieces per sentence, the ``example``
    sentence (an index into the sample; None: the first of 10 to 24 pieces) and the ``show`` heads
    drawn on it (``(layer, head)``; empty: one per kind, chosen from the statistics)."""

    sentences: int = 200
    max_length: int = 64
    batch_size: int = 16
    example: int | None = None
    show: tuple[tuple[int, int], ...] = ()
    importance_batches: int = 8
    threshold: float = THRESHOLD
    seed: int = 0


@dataclass
class AttentionExample:
    """One sentence's pieces and the attention maps of chosen heads on it: each map is
    ``{"layer", "head", "why", "weights": (pieces, pieces) as nested lists}``."""

    sentence: int
    tokens: list[str]
    maps: list[dict[str, Any]]


@dataclass
class StageHeads:
    """One model's head statistics: ``stats[name][layer][head]`` (see :mod:`tinyplm.evaluate.heads`,
    plus ``importance`` when measured). ``original[layer]`` is each head's index before pruning and
    ``original_heads`` the heads per layer then (both None for an unpruned model)."""

    name: str
    heads_per_layer: list[int]
    stats: dict[str, list[list[float]]]
    sentences: int
    tokens: int
    importance_note: str | None = None
    original: list[list[int]] | None = None
    original_heads: list[int] | None = None
    example: AttentionExample | None = None
    seconds: float = 0.0
    model_dir: str | None = None

    def head_name(self, layer: int, head: int) -> str:
        """``L<layer from 1>H<head>``, and the head's index before pruning when the model was pruned
        (``L2H7 (was 8)``), so a pruned stage's heads can be matched with its parent's."""
        was = f" (was {self.original[layer][head]})" if self.original else ""
        return f"L{layer + 1}H{head}{was}"

    def patterns(self, threshold: float = THRESHOLD, kinds=KINDS):
        """The heads meeting the ``argmax`` rule (:func:`~tinyplm.evaluate.heads.pattern_heads`)."""
        return pattern_heads(self.stats, threshold, kinds)


HEADS_SCHEMA = 1


@dataclass
class HeadsReport:
    """Head statistics of several models on one task, as stored in ``analysis/heads-<task>.json``."""

    task: str
    settings: dict[str, Any]
    threshold: float
    stages: list[StageHeads] = field(default_factory=list)

    def put(self, stage: StageHeads) -> None:
        """Add ``stage``, replacing the one of the same name in place."""
        at = next((i for i, s in enumerate(self.stages) if s.name == stage.name), None)
        if at is None:
            self.stages.append(stage)
        else:
            self.stages[at] = stage

    def to_dict(self) -> dict[str, Any]:
        return {"schema": HEADS_SCHEMA, "kind": "heads", **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HeadsReport:
        """Raises ``ValueError`` naming what is missing or of the wrong type."""
        if not isinstance(data, dict) or data.get("kind") != "heads":
            raise ValueError("not a head analysis (expected an object with kind: heads)")
        stages = []
        for i, s in enumerate(data.get("stages") or []):
            if not isinstance(s, dict) or not isinstance(s.get("stats"), dict):
                raise ValueError(f"stages[{i}] must be an object with stats")
            fields = {k: s[k] for k in StageHeads.__dataclass_fields__ if k in s}
            if isinstance(fields.get("example"), dict):
                fields["example"] = AttentionExample(**fields["example"])
            try:
                stages.append(StageHeads(**fields))
            except TypeError as exc:
                raise ValueError(f"stages[{i}]: {exc}") from None
        try:
            return cls(task=str(data["task"]), settings=dict(data.get("settings") or {}),
                       threshold=float(data.get("threshold", THRESHOLD)), stages=stages)
        except KeyError as exc:
            raise ValueError(f"lacks key {exc}") from None


def punctuation_table(tokenizer) -> Tensor:
    """``(vocab,)`` bool: the word pieces made only of punctuation characters (``##`` stripped)."""
    pieces = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    def is_punct(piece: str) -> bool:
        text = (piece or "").removeprefix("##")
        return bool(text) and all(unicodedata.category(ch).startswith("P") for ch in text)
    return torch.tensor([is_punct(p) for p in pieces], dtype=torch.bool)


@dataclass(frozen=True)
class Vocabulary:
    """What marking positions needs from a tokenizer: ``[CLS]``/``[SEP]`` ids, special ids,
    punctuation per id and the training split's piece counts ``(vocab,)``."""

    cls_id: int
    sep_id: int
    special: Tensor
    punct: Tensor
    counts: Tensor

    def marks(self, input_ids: Tensor, attention_mask: Tensor) -> TokenMarks:
        """The :class:`TokenMarks` of a batch ``(batch, seq)``."""
        real = attention_mask.bool()
        ids = input_ids.clamp(0, len(self.punct) - 1)
        special = torch.isin(input_ids, self.special)
        rare = rarest_positions(input_ids, real & ~special, self.counts)
        return TokenMarks(real=real, cls=real & (input_ids == self.cls_id), sep=real & (input_ids == self.sep_id),
                          punct=real & self.punct[ids], rare=rare)


def vocabulary(tokenizer, counts: np.ndarray) -> Vocabulary:
    """A :class:`Vocabulary` of ``tokenizer`` with training-split piece ``counts``."""
    size = len(tokenizer)
    padded = np.zeros(size, dtype=np.int64)
    padded[: min(size, len(counts))] = counts[:size]
    special = torch.tensor(sorted(set(tokenizer.all_special_ids)), dtype=torch.long)
    return Vocabulary(int(tokenizer.cls_token_id), int(tokenizer.sep_token_id), special,
                      punctuation_table(tokenizer), torch.from_numpy(padded))


def heads_per_layer(model: nn.Module) -> list[int]:
    """The attention heads of each encoder layer (a pruned model's differ)."""
    return [attention_heads(layer) for layer in roles.layers(model)]


@torch.inference_mode()
def accumulate(model: nn.Module, items: EncodedItems, vocab: Vocabulary, batch_size: int) -> tuple[dict, int]:
    """(stat -> per layer, per head, means) over every item, and the number of real tokens seen."""
    acc = HeadAccumulator(heads_per_layer(model))
    tokens = 0
    for _idx, inputs in batches(items.enc, batch_size):
        feats = forward_features(model, inputs, ("attn_probs",))
        marks = vocab.marks(inputs["input_ids"], inputs["attention_mask"])
        tokens += int(marks.real.sum())
        for layer, probs in enumerate(feats.attn_probs):  # each (batch, heads, seq, seq)
            acc.add(layer, probs, marks)
    return acc.result(), tokens


def choose_shown(stats: dict[str, list[list[float]]], limit: int = 6) -> list[tuple[int, int, str]]:
    """(layer, head, why) of up to ``limit`` heads worth drawing: for each kind the head with the most
    attention there, then the most confident head; each head once."""
    out: list[tuple[int, int, str]] = []
    for stat in (*KINDS, "confidence"):
        per_layer = stats[stat]
        layer, head = max(((i, h) for i, row in enumerate(per_layer) for h in range(len(row))),
                          key=lambda lh: per_layer[lh[0]][lh[1]])
        if all((layer, head) != (x[0], x[1]) for x in out):
            out.append((layer, head, f"most {stat} ({per_layer[layer][head]:.2f})"))
    return out[:limit]


def example_index(items: EncodedItems, asked: int | None) -> int:
    """The asked sentence, or the first of 10 to 24 pieces (else the first). Raises ``ValueError``
    for an index outside the sample."""
    n = len(items.enc)
    if asked is not None:
        if not 0 <= asked < n:
            raise ValueError(f"example sentence {asked} is outside the {n} sentences analysed (0..{n - 1})")
        return asked
    lengths = items.enc.lengths()
    return next((i for i in range(n) if 10 <= lengths[i] <= 24), 0)


@torch.inference_mode()
def attention_example(model: nn.Module, tokenizer, items: EncodedItems, index: int,
                      shown: list[tuple[int, int, str]]) -> AttentionExample:
    """The attention maps of the ``shown`` heads on sentence ``index`` (weights rounded to 4 places).

    Raises ``ValueError`` naming a layer or head the model does not have."""
    counts = heads_per_layer(model)
    for layer, head, _ in shown:
        if not (0 <= layer < len(counts) and 0 <= head < counts[layer]):
            raise ValueError(f"head {layer + 1}:{head} does not exist: the model has layers 1..{len(counts)} "
                             f"(counted from 1, as --show counts them) with {counts} heads")
    _, inputs = next(batches(items.enc.subset([index]), 1))
    probs = forward_features(model, inputs, ("attn_probs",)).attn_probs
    n = int(inputs["attention_mask"].sum())
    maps = [{"layer": layer, "head": head, "why": why,
             "weights": np.round(probs[layer][0, head, :n, :n].numpy(), 4).tolist()} for layer, head, why in shown]
    tokens = tokenizer.convert_ids_to_tokens(items.enc.input_ids[index][:n])
    return AttentionExample(sentence=index, tokens=list(tokens), maps=maps)


def analyse_heads(model: nn.Module, tokenizer, level: Level, texts: list, counts: np.ndarray,
                  settings: HeadSettings, name: str) -> StageHeads:
    """Head statistics of ``model`` over ``texts`` (already sampled) and the example maps.

    ``counts``: the training split's piece counts by id (:func:`~tinyplm.evaluate.heads.piece_counts`).
    Raises ``ValueError`` for an example sentence or shown head that does not exist."""
    start = time.perf_counter()
    items = encode_items(level, texts, tokenizer, settings.max_length)
    stats, tokens = accumulate(model, items, vocabulary(tokenizer, counts), settings.batch_size)
    shown = [(layer, head, "asked for") for layer, head in settings.show] or choose_shown(stats)
    example = attention_example(model, tokenizer, items, example_index(items, settings.example), shown)
    return StageHeads(name=name, heads_per_layer=heads_per_layer(model), stats=stats, sentences=len(texts),
                      tokens=tokens, example=example, seconds=time.perf_counter() - start)

