"""Encoding and collation in one place: examples -> token ids -> padded batches.

Examples are tokenised once (fast tokenizer, whole split per call) and padded per batch to the
longest sequence in it (dynamic padding: a batch of short sentences is not padded to the max
length; what it gained on SST-2: docs/results/serve-load.md, "Figures measured earlier").

The split's head decides the labels: ``sequence`` one class id (or score) per example, ``span``
the (start, end) token of the answer per SQuAD window (``tasks.squad_features``), ``token`` one
label per word piece with ``IGNORE`` off first pieces (``tasks.tagging``), padded to the widest
example and cut to each batch's width by :func:`collate`, ``embedding`` none (``(N, 0)``: the
targets are a teacher's vectors). Each head's encoder is its entry of :data:`ENCODERS`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from tinyplm.errors import TinyplmError
from tinyplm.tasks.base import Split
from tinyplm.tasks.heads import Head, PerHead
from tinyplm.tasks.piece_cache import PieceCache
from tinyplm.tasks.retrieval import GROUPS_OPTION, MAX_LENGTH_OPTION


@dataclass(frozen=True)
class Encoded:
    """A tokenised split: ragged id lists and labels (long for classes, float for regression).

    ``word_starts`` (pre-training text only) marks with 1 each token that begins a word, for
    whole-word and span masking; :func:`collate` pads it like the ids.
    ``head`` says what ``labels`` hold (see the module docstring); ``meta`` is what turns logits
    back into answers: the ``QAFeatures`` (span) or ``Tagged`` (token) the ids came from.
    ``groups`` (``(N,)`` ids, or None): examples sharing an id are trained in one batch
    (``train.schedule.epoch_batches``): an embedding task's question beside its passage.
    ``max_width`` (the max length it was encoded at, or None): :func:`collate` never pads past it
    by rounding up, so a model whose positions are not a multiple of the rounding reads them all.
    """

    input_ids: list[list[int]]
    token_type_ids: list[list[int]]
    labels: torch.Tensor  # (N,) sequence, (N, 2) span, (N, width) token, (N, 0) embedding
    pad_id: int
    word_starts: list[list[int]] | None = None
    head: Head = Head.SEQUENCE
    meta: Any = None
    groups: np.ndarray | None = None
    max_width: int | None = None

    def __len__(self) -> int:
        return len(self.input_ids)

    def fingerprint(self) -> str:
        """sha256 of the token ids and labels: changes with the data, tokenizer or max length."""
        h = hashlib.sha256()
        for ids in self.input_ids:
            h.update(np.asarray(ids, dtype=np.int32).tobytes())
            h.update(b"|")
        h.update(self.labels.numpy().tobytes())
        return h.hexdigest()

    def lengths(self) -> np.ndarray:
        return np.fromiter((len(x) for x in self.input_ids), dtype=np.int64, count=len(self))

    def subset(self, indices: Sequence[int]) -> Encoded:
        """The examples at ``indices`` (in that order) as their own ``Encoded``; heads whose row has
        ``subset`` only (span and token encodings carry per-window metadata that a subset would not match)."""
        if not Head(self.head).row.subset:
            raise ValueError(f"a subset of a {self.head} encoding would not match its metadata")
        return self.rows(indices)

    def rows(self, indices: Sequence[int]) -> Encoded:
        """The examples at ``indices`` (ids, token types, labels) without the metadata that turns a
        span or token head's logits into answers: for comparing two models' outputs row by row (a
        runtime against its PyTorch parent), never for decoding. Any head; :meth:`subset` where
        the result is decoded or evaluated."""
        idx = list(indices)
        groups = self.groups[idx] if self.groups is not None else None
        starts = [self.word_starts[i] for i in idx] if self.word_starts is not None else None
        return Encoded([self.input_ids[i] for i in idx], [self.token_type_ids[i] for i in idx], self.labels[idx],
                       self.pad_id, starts, self.head, groups=groups, max_width=self.max_width)


def padded_width(longest: int, multiple: int = 8) -> int:
    """``longest`` rounded up to ``multiple`` (the padded width of a batch)."""
    return -(-longest // multiple) * multiple


def encode_split(split: Split, tokenizer, max_length: int, limit: int | None = None,
                 pieces: PieceCache | None = None) -> Encoded:
    """Tokenise a split (truncating to ``max_length``) by its head's encoder (:data:`ENCODERS`);
    ``limit`` keeps the first N examples (SQuAD: questions, each giving one or more windows).
    ``pieces``, a memo of ``tokenizer`` (``tasks.piece_cache``), tokenises single texts of a head
    whose row has ``piece_memo``: the same ids, faster."""
    examples = split.examples[:limit] if limit else split.examples
    return replace(ENCODERS[split.head](examples, tokenizer, max_length, split.options, pieces), max_width=max_length)


def _encode_sequence(examples, tokenizer, max_length: int, options: dict, pieces: PieceCache | None) -> Encoded:
    """Texts (or text pairs) and their class ids or scores ``(N,)``."""
    ids, types = _encode_texts([ex.text for ex in examples], [ex.text_pair for ex in examples], tokenizer,
                               max_length, pieces)
    return Encoded(ids, types, _labels(examples), _pad_id(tokenizer))


def _encode_embedding(examples, tokenizer, max_length: int, options: dict, pieces: PieceCache | None) -> Encoded:
    """Single texts and no labels: ``(N, 0)``, at the split's own ``max_length`` option when it has one
    (an embedding task's eval sets). Raises ``TinyplmError`` for an example with a second text (an
    embedding model reads one text per example)."""
    paired = next((i for i, ex in enumerate(examples) if ex.text_pair is not None), None)
    if paired is not None:
        raise TinyplmError(f"the embedding head reads one text per example; example {paired + 1} has a second text")
    width = int(options.get(MAX_LENGTH_OPTION, max_length))
    ids, types = _encode_texts([ex.text for ex in examples], [None] * len(examples), tokenizer, width, pieces)
    groups = options.get(GROUPS_OPTION)
    groups = np.asarray(groups[: len(ids)], dtype=np.int64) if groups is not None else None
    return Encoded(ids, types, torch.empty((len(ids), 0)), _pad_id(tokenizer), head=Head.EMBEDDING, groups=groups)


def _encode_texts(texts: list[str], pairs: list[str | None], tokenizer, max_length: int,
                  pieces: PieceCache | None) -> tuple[list[list[int]], list[list[int]]]:
    """(token ids, token type ids) of ``texts`` (with their ``pairs`` when any is given)."""
    has_pairs = any(p is not None for p in pairs)
    if pieces is not None and not has_pairs and max_length:
        ids = pieces.encode(texts, max_length)
        return ids, [[0] * len(i) for i in ids]
    out = tokenizer(
        texts,
        [p or "" for p in pairs] if has_pairs else None,
        truncation=True,
        max_length=max_length,
        return_token_type_ids=True,
    )
    ids = [list(x) for x in out["input_ids"]]
    return ids, [list(x) for x in out.get("token_type_ids", [[0] * len(i) for i in ids])]


def _labels(examples) -> torch.Tensor:
    regression = any(isinstance(ex.label, float) for ex in examples)
    return torch.tensor([ex.label for ex in examples], dtype=torch.float32 if regression else torch.long)


def _pad_id(tokenizer) -> int:
    return int(tokenizer.pad_token_id) if tokenizer.pad_token_id is not None else 0


def _encode_span(examples, tokenizer, max_length: int, options: dict, pieces: PieceCache | None) -> Encoded:
    """SQuAD windows and each window's answer (start, end) token ``(N, 2)``."""
    from tinyplm.tasks.squad_features import build_features

    feats = build_features(examples, tokenizer, max_length, options.get("doc_stride", 128),
                           options.get("max_query_length", 64))
    return Encoded(feats.input_ids, feats.token_type_ids, feats.labels, feats.pad_id, head=Head.SPAN, meta=feats)


def _encode_token(sentences, tokenizer, max_length: int, options: dict, pieces: PieceCache | None) -> Encoded:
    """Sentences of words and a tag id per piece ``(N, width)`` (``IGNORE`` off first pieces)."""
    from tinyplm.tasks.tagging import IGNORE, encode_tagged

    label_ids = {tag: i for i, tag in enumerate(options["tags"])}
    tagged = encode_tagged([s.tokens for s in sentences], [s.tags for s in sentences], tokenizer, label_ids, max_length)
    width = padded_width(max((len(x) for x in tagged.input_ids), default=1))
    labels = torch.full((len(tagged), width), IGNORE, dtype=torch.long)
    for i, row in enumerate(tagged.piece_labels):
        labels[i, : len(row)] = torch.tensor(row, dtype=torch.long)
    return Encoded(tagged.input_ids, tagged.token_type_ids, labels, tagged.pad_id, head=Head.TOKEN, meta=tagged)


#: The encoder of each head: (examples, tokenizer, max_length, options, pieces) -> Encoded.
ENCODERS: PerHead = PerHead("encoder", {Head.SEQUENCE: _encode_sequence, Head.SPAN: _encode_span,
                                        Head.TOKEN: _encode_token, Head.EMBEDDING: _encode_embedding})


PAD_MULTIPLE = 8


def collate(enc: Encoded, indices: Sequence[int], multiple: int = PAD_MULTIPLE) -> dict[str, torch.Tensor]:
    """Pad the examples at ``indices`` to the longest one, rounded up to ``multiple`` tokens.

    Rounding keeps the number of distinct shapes small, so oneDNN reuses its compiled kernels
    instead of building new ones for every sequence length.
    Returns input_ids, attention_mask, token_type_ids ``(batch, seq)``; index ``(batch,)``; labels
    ``(batch,)`` (span: ``(batch, 2)``, token: ``(batch, seq)``, embedding: ``(batch, 0)``); and
    word_starts ``(batch, seq)`` when the encoding has them.
    """
    idx = list(indices)
    longest = max(len(enc.input_ids[i]) for i in idx)
    width = padded_width(longest, multiple)
    if enc.max_width is not None:  # rounding up never past the max length: it may be all the positions there are
        width = min(width, max(enc.max_width, longest))
    # filled as numpy arrays, row by row (a torch.tensor per row cost ~15 us each: a third of a
    # served batch's collate time), then shared with torch without a copy
    ids = np.full((len(idx), width), enc.pad_id, dtype=np.int64)
    types = np.zeros((len(idx), width), dtype=np.int64)
    mask = np.zeros((len(idx), width), dtype=np.int64)
    starts = np.zeros((len(idx), width), dtype=np.int64) if enc.word_starts is not None else None
    for row, i in enumerate(idx):
        n = len(enc.input_ids[i])
        ids[row, :n] = enc.input_ids[i]
        types[row, :n] = enc.token_type_ids[i]
        mask[row, :n] = 1
        if starts is not None:
            starts[row, :n] = enc.word_starts[i]
    ids, types, mask = torch.from_numpy(ids), torch.from_numpy(types), torch.from_numpy(mask)
    starts = torch.from_numpy(starts) if starts is not None else None
    labels = enc.labels[idx]
    if Head(enc.head).row.piece_labels:  # per-piece labels: cut (or pad) to this batch's width
        from tinyplm.tasks.tagging import IGNORE

        cut = labels[:, :width]
        labels = torch.full((len(idx), width), IGNORE, dtype=torch.long)
        labels[:, : cut.shape[1]] = cut
    out = {
        "input_ids": ids,
        "attention_mask": mask,
        "token_type_ids": types,
        "labels": labels,
        "index": torch.tensor(idx, dtype=torch.long),
    }
    if starts is not None:
        out["word_starts"] = starts
    return out


def length_sorted_batches(enc: Encoded, batch_size: int) -> list[list[int]]:
    """Index batches of similar length (for inference: least padding). Order is deterministic."""
    order = np.argsort(enc.lengths(), kind="stable")
    return [order[i : i + batch_size].tolist() for i in range(0, len(order), batch_size)]


def model_inputs(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The keys a HF encoder takes (drops labels and index)."""
    return {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
