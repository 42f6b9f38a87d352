"""The table of a static student, made from the teacher the way Model2Vec makes its tables
(Tulkens and van Dongen 2024), by tinyplm itself:

1. each word piece kept goes through the teacher encoder alone, framed by the tokenizer's own
   special tokens (``[CLS] piece [SEP]`` for BERT), in batches; its vector is the output state at
   the piece's position (:func:`passthrough_vectors`). (Model2Vec 0.4 frames a piece as
   ``[SEP] piece [CLS]`` and averages all three output states.) With ``vectors: contextual`` a
   piece's vector is instead the mean of the encoder's output states at that piece over the
   training texts that use it (:func:`contextual_vectors`; Bommasani et al. 2020 pool a word's
   contextual states the same way), so it carries what the teacher reads into the piece in this
   task's sentences; a piece those texts never use keeps its passthrough vector.
2. PCA (scikit-learn; centred, not whitened) to ``dims`` components (:func:`pca_table`).
3. the bag's weight of each piece (:func:`piece_weights`): 1 (``mean``); ``a / (a + p(t))`` with
   ``p`` the piece's frequency in the task's training text (``sif``, Arora et al. 2017); or the
   same with ``p`` from Zipf's law over the vocabulary order, taken as frequency rank, as Model2Vec
   does (``zipf``; BERT's ``[unused..]`` placeholders, :func:`placeholder_pieces`, take no rank).
   Special tokens weigh 0.

An embedding task's static student (``static_sentence``) takes each piece's vector from the teacher's
whole sentence pipeline instead (:func:`sentence_piece_vectors`: its pooling and Dense layers over
``[CLS] piece [SEP]``, before the final normalisation, as Model2Vec 0.8 averages all three states).

The pieces kept are the whole vocabulary (``tokens: all``) or the ones the training data uses
plus the specials (``used``: far fewer teacher passes and a smaller file; an unseen piece reads
``[UNK]``'s row).

We do not call the ``model2vec`` package for this: it is the reference peer that a benchmark
measures tinyplm's static students against, installed as an optional extra and never a dependency
of tinyplm, so tinyplm must build (and be tested) without it; and the steps are few, each tested
here on a tiny teacher.
"""

from __future__ import annotations

import re
import time
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from tinyplm.config.classic import StaticSpec
from tinyplm.errors import TinyplmError
from tinyplm.models.classic.config import WEIGHTINGS, FamilyConfig
from tinyplm.models.classic.io import build_module
from tinyplm.models.classic.static import StaticModule


@dataclass(frozen=True)
class TrainingPieces:
    """The teacher tokenizer's ids of what the student trains on: ``task`` (the task's training
    texts: the pieces kept, and the frequencies SIF weighs by) and ``extra`` (other data it trains
    on, such as augmented copies: pieces kept only)."""

    task: Sequence[Sequence[int]]
    extra: Sequence[Sequence[int]] = ()


def frame(tokenizer) -> tuple[list[int], list[int]]:
    """The ids ``tokenizer`` puts before and after one text (``[CLS]``, ``[SEP]`` for BERT);
    raises ``ValueError`` when a text's own ids do not appear inside its framed ids."""
    full = list(tokenizer("a")["input_ids"])
    plain = list(tokenizer("a", add_special_tokens=False)["input_ids"])
    for start in range(len(full) - len(plain) + 1):
        if full[start:start + len(plain)] == plain:
            return full[:start], full[start + len(plain):]
    raise ValueError(f"cannot find the ids of a text ({plain}) inside its encoding with special tokens ({full})")


def framed_batches(tokenizer, ids: Sequence[int], batch_size: int) -> Iterator[torch.Tensor]:
    """``ids`` in batches of ``batch_size``, each piece alone between the tokenizer's own specials
    (:func:`frame`) -> token ids ``(n, len(before) + 1 + len(after))`` per batch."""
    before, after = frame(tokenizer)
    for k in range(0, len(ids), batch_size):
        chunk = torch.tensor(list(ids[k:k + batch_size]), dtype=torch.long).unsqueeze(1)  # (n, 1)
        n = chunk.shape[0]
        yield torch.cat([torch.tensor([before] * n, dtype=torch.long).reshape(n, len(before)), chunk,
                         torch.tensor([after] * n, dtype=torch.long).reshape(n, len(after))], dim=1)


@torch.no_grad()
def passthrough_vectors(encoder: nn.Module, tokenizer, ids: Sequence[int], batch_size: int = 512) -> np.ndarray:
    """Each piece of ``ids`` through ``encoder`` (a bare ``transformers`` encoder) alone, framed as
    :func:`frame` says -> its output state ``(len(ids), hidden)`` float32. The encoder runs in eval
    mode (its mode is restored after)."""
    before = frame(tokenizer)[0]
    was_training = encoder.training
    encoder.eval()
    out = []
    try:
        for x in framed_batches(tokenizer, ids, batch_size):
            states = encoder(input_ids=x, attention_mask=torch.ones_like(x)).last_hidden_state  # (n, 3, hidden)
            out.append(states[:, len(before)].float().numpy())
    finally:
        encoder.train(was_training)
    return np.concatenate(out) if out else np.zeros((0, encoder.config.hidden_size), np.float32)


@torch.no_grad()
def contextual_vectors(encoder: nn.Module, texts: Sequence[Sequence[int]], kept: Sequence[int],
                       batch_size: int = 64, max_texts: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The mean output state of ``encoder`` at each piece of ``kept`` over ``texts`` (encoded ids,
    the tokenizer's special tokens included, read whole in one pass each) -> (``(len(kept),
    hidden)`` float32 means, ``(len(kept),)`` int64 counts; a piece no text uses has count 0 and a
    zero row). ``max_texts``: only the first that many texts. Texts go through in batches of
    similar length; the encoder runs in eval mode (its mode is restored after)."""
    hidden, vocab = int(encoder.config.hidden_size), int(encoder.config.vocab_size)
    row_of = torch.full((vocab,), -1, dtype=torch.long)  # piece id -> its row in kept, -1: not kept
    row_of[torch.tensor(list(kept), dtype=torch.long)] = torch.arange(len(kept))
    sums = torch.zeros(len(kept), hidden, dtype=torch.float64)
    counts = torch.zeros(len(kept), dtype=torch.int64)
    chosen = [list(t) for t in (texts[:max_texts] if max_texts else texts) if len(t)]
    order = sorted(range(len(chosen)), key=lambda i: len(chosen[i]))
    was_training = encoder.training
    encoder.eval()
    try:
        for k in range(0, len(order), batch_size):
            batch = [chosen[i] for i in order[k:k + batch_size]]
            width = max(len(t) for t in batch)
            ids = torch.zeros(len(batch), width, dtype=torch.long)
            mask = torch.zeros(len(batch), width, dtype=torch.long)
            for b, t in enumerate(batch):
                ids[b, :len(t)] = torch.tensor(t, dtype=torch.long)
                mask[b, :len(t)] = 1
            states = encoder(input_ids=ids, attention_mask=mask).last_hidden_state.double()  # (b, width, hidden)
            rows = row_of[ids]
            take = (rows >= 0) & (mask > 0)
            sums.index_add_(0, rows[take], states[take])
            counts += torch.bincount(rows[take], minlength=len(kept))
    finally:
        encoder.train(was_training)
    means = sums / counts.clamp(min=1).unsqueeze(1).double()
    return means.float().numpy(), counts.numpy()


def pca_table(vectors: np.ndarray, dims: int) -> tuple[np.ndarray, float]:
    """``vectors`` ``(n, hidden)`` -> (their first ``dims`` principal components ``(n, dims)``
    float32, the share of the variance they keep). Raises ``ValueError`` when ``dims`` exceeds
    ``n`` or ``hidden``."""
    from sklearn.decomposition import PCA

    n, hidden = vectors.shape
    if dims > min(n, hidden):
        raise ValueError(f"dims {dims}: PCA of {n} vectors of width {hidden} gives at most {min(n, hidden)} components")
    pca = PCA(n_components=dims, svd_solver="full")
    table = pca.fit_transform(vectors.astype(np.float64)).astype(np.float32)
    return table, float(pca.explained_variance_ratio_.sum())


def piece_counts(texts: Sequence[Sequence[int]], vocab_size: int) -> np.ndarray:
    """How often each id occurs in ``texts`` -> ``(vocab_size,)`` int64."""
    flat = np.fromiter((i for ids in texts for i in ids), dtype=np.int64)
    return np.bincount(flat, minlength=vocab_size)[:vocab_size]


def piece_weights(kind: str, kept: Sequence[int], counts: np.ndarray, specials: set[int], a: float,
                  unranked: Collection[int] = ()) -> np.ndarray:
    """The bag's weight of each kept piece ``(len(kept),)`` float32 (see the module docstring);
    ``counts`` ``(vocab_size,)`` are the training text's (for ``sif``). ``unranked``: placeholder
    pieces no text gives (BERT's ``[unused..]``), which weigh 0 and take no place in ``zipf``'s
    ranking, as Model2Vec leaves them out of its vocabulary before ranking."""
    ids = np.asarray(kept, dtype=np.int64)
    if kind == "mean":
        w = np.ones(len(ids))
    elif kind == "sif":
        plain = np.ones(len(counts), dtype=bool)
        plain[[i for i in specials if i < len(counts)]] = False
        p = counts / max(1, int(counts[plain].sum()))
        w = a / (a + p[ids])  # a piece the text never uses weighs 1
    elif kind == "zipf":  # the vocabulary's order taken as frequency rank, placeholders not counted
        ranked = np.ones(len(counts), dtype=bool)
        ranked[[i for i in unranked if i < len(counts)]] = False
        rank = np.cumsum(ranked) - 1
        inv_rank = np.where(ranked, 1.0 / (rank + 2), 0.0)
        w = a / (a + (inv_rank / inv_rank.sum())[ids])
    else:
        raise ValueError(f"weighting {kind!r} is not mean, sif or zipf")
    w[np.isin(ids, [*specials, *unranked])] = 0.0
    return w.astype(np.float32)


def kept_pieces(tokenizer, vocab_size: int, tokens: str, pieces: TrainingPieces) -> list[int]:
    """The ids that get a row, ascending: every piece (``all``) or the specials and the pieces the
    training data uses (``used``)."""
    n = min(len(tokenizer), vocab_size)
    if tokens == "all":
        return list(range(n))
    seen = {i for ids in (*pieces.task, *pieces.extra) for i in ids}
    return sorted(i for i in seen | set(tokenizer.all_special_ids) if 0 <= i < n)


@dataclass(frozen=True)
class LstmShape:
    """The LSTM of a ``static_bilstm`` student: width per direction, layers, and how its states
    are pooled (max, mean or attention)."""

    hidden: int = 128
    layers: int = 1
    pooling: str = "max"


def static_student(encoder: nn.Module, tokenizer, arch: str, spec: StaticSpec, pieces: TrainingPieces,
                   num_labels: int, dropout: float = 0.1, id2label: dict[int, str] | None = None,
                   lstm: LstmShape | None = None) -> tuple[StaticModule, dict]:
    """A new ``static``, ``static_cnn`` or ``static_bilstm`` student over ``encoder``'s pieces (see
    the module docstring; ``lstm``: the BiLSTM's shape, default :class:`LstmShape`) -> (model, how
    its table was made). Raises ``ValueError`` when ``spec.dims`` is more than the pieces kept or
    the encoder's width."""
    vocab_size = int(encoder.config.vocab_size)
    kept = kept_pieces(tokenizer, vocab_size, spec.tokens, pieces)
    t0 = time.perf_counter()
    vectors = passthrough_vectors(encoder, tokenizer, kept, spec.batch_size)
    pooled = 0
    if spec.vectors == "contextual":
        means, seen = contextual_vectors(encoder, [*pieces.task, *pieces.extra], kept, max_texts=spec.contextual_texts)
        vectors = np.where((seen > 0)[:, None], means, vectors)
        pooled = int((seen > 0).sum())
    table, kept_variance = pca_table(vectors, spec.dims)
    specials = set(tokenizer.all_special_ids)
    counts = piece_counts(pieces.task, vocab_size)
    row = {piece: r for r, piece in enumerate(kept)}
    unseen = row.get(tokenizer.unk_token_id, row.get(tokenizer.pad_token_id, 0))
    row_of = torch.full((vocab_size,), unseen, dtype=torch.int32)
    row_of[torch.tensor(kept, dtype=torch.long)] = torch.arange(len(kept), dtype=torch.int32)
    if arch == "static_bilstm":
        shape = lstm or LstmShape()
        hidden, layers, pooling = shape.hidden, shape.layers, shape.pooling
    else:
        hidden, layers, pooling = spec.hidden, 0, "mean" if arch == "static" else "max"
    config = FamilyConfig(arch=arch, vocab_size=vocab_size, embed_dim=spec.dims, hidden=hidden, layers=layers,
                          pooling=pooling, dropout=dropout, table_rows=len(kept),
                          table_dtype=spec.table_dtype, weighting=spec.weighting if arch == "static" else "mean",
                          filters=[list(f) for f in spec.filters] if arch == "static_cnn" else None,
                          word_dropout=spec.word_dropout, hidden_layers=spec.hidden_layers, num_labels=num_labels,
                          id2label=id2label)
    model = build_module(config)
    with torch.no_grad():
        model.table.weight.copy_(torch.from_numpy(table))
        model.row_of.copy_(row_of)
        if arch == "static":
            model.token_weights.copy_(torch.from_numpy(piece_weights(spec.weighting, kept, counts, specials,
                                                                     spec.sif_a)))
    model.table.weight.requires_grad_(not spec.freeze)
    info = {"pieces": len(kept), "vocabulary": vocab_size, "pca_variance_kept": round(kept_variance, 4),
            "table_seconds": round(time.perf_counter() - t0, 1), "contextual_pieces": pooled}
    return model, info


#: Placeholder pieces a vocabulary reserves and no text gives (BERT's ``[unused0]``..): Model2Vec's
#: default ``token_remove_pattern``, which it drops before ranking pieces by Zipf's law.
PLACEHOLDER = re.compile(r"\[unused\d+\]")


def placeholder_pieces(tokenizer, ids: Sequence[int]) -> list[int]:
    """The ids among ``ids`` whose piece is a placeholder (:data:`PLACEHOLDER`)."""
    return [i for i, piece in zip(ids, tokenizer.convert_ids_to_tokens(list(ids)), strict=True)
            if piece and PLACEHOLDER.fullmatch(piece)]


@torch.inference_mode()
def sentence_piece_vectors(model: nn.Module, tokenizer, ids: Sequence[int], batch_size: int = 512) -> np.ndarray:
    """Each piece of ``ids`` through the sentence model ``model`` alone, framed by ``tokenizer``'s
    specials (``[CLS] piece [SEP]``) -> ``(len(ids), dim)`` float32: the ``embed_pieces`` of
    :func:`static_sentence_student`. A :class:`~tinyplm.models.sentence.SentenceEncoder` gives its
    ``features`` (pooling and Dense layers, not the final normalisation: as Model2Vec keeps each
    piece's output unnormalised, its length weighs the piece in a text's mean); another model its
    ``forward(input_ids, attention_mask)`` -> ``(batch, dim)``. The model runs in eval mode (its
    mode is restored after)."""
    was_training = model.training
    model.eval()
    out = []
    try:
        for x in framed_batches(tokenizer, ids, batch_size):
            run = getattr(model, "features", model)  # before the final normalisation, when the model has one
            out.append(run(input_ids=x, attention_mask=torch.ones_like(x)).float().numpy())  # (n, dim)
    finally:
        model.train(was_training)
    return np.concatenate(out) if out else np.zeros((0, int(getattr(model, "dim", 0))), np.float32)


def checked_student_arguments(ids: list[int], vocab_size: int, dims: int, weighting: str,
                              counts: np.ndarray | None) -> np.ndarray:
    """The checks of :func:`~tinyplm.models.classic.static_sentence.static_sentence_student`'s
    arguments, before any teacher pass (``ids``: the pieces kept and the specials); returns the piece
    counts ``(vocab_size,)`` (zeros without ``counts``). Raises ``TinyplmError`` naming the argument."""
    outside = [i for i in ids if not 0 <= i < vocab_size]
    if outside:
        raise TinyplmError(f"kept: id {outside[0]} is not a piece of the tokenizer (ids 0..{vocab_size - 1})")
    if dims > len(ids):
        raise TinyplmError(f"dims {dims} is more than the {len(ids)} pieces kept (specials included): PCA of "
                           f"{len(ids)} vectors gives at most {len(ids)} components; lower dims or keep more pieces")
    if weighting not in WEIGHTINGS:
        raise TinyplmError(f"weighting {weighting!r} is not one of {', '.join(WEIGHTINGS)}")
    if weighting == "sif" and counts is None:
        raise TinyplmError("weighting sif needs counts: each piece's count in a corpus, (vocab_size,)")
    freq = np.zeros(vocab_size, np.int64) if counts is None else np.asarray(counts)
    if freq.ndim != 1 or len(freq) < vocab_size:
        raise TinyplmError(f"counts: shape {freq.shape}, expected ({vocab_size},), one count per piece")
    return freq
