"""Replacement candidates for each word of a sentence (TinyBERT augmentation).

A single-piece word gets the masked LM's top-K predictions at its position when it alone is
masked; a multi-piece word gets its nearest neighbours from a :class:`NeighbourSource`; special
and bracketed tokens, and words holding a special id such as ``[UNK]``, get none. The masked-LM
rows of many sentences run together in length-sorted batches, and the prediction head runs only
at the masked positions.

With ``same_kind`` a candidate must be of the replaced word's kind (:func:`has_letter`): words
with letters get only candidates with letters, punctuation and numbers only candidates without.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from tinyplm.distill.neighbours import NeighbourSource
from tinyplm.errors import ModelError
from tinyplm.models import roles
from tinyplm.models.infer import autocast

_BRACKETED = re.compile(r"^\[[^\]\s]+\]$")


def banned_tokens(tokenizer, size: int) -> torch.Tensor:
    """``(size,)`` bool: ids never proposed (specials, bracketed ``[..]``, ``##`` pieces, ids
    the tokenizer lacks)."""
    banned = torch.ones(size, dtype=torch.bool)
    for tok, i in tokenizer.get_vocab().items():
        if i < size:
            banned[i] = tok.startswith("##") or bool(_BRACKETED.match(tok))
    banned[[i for i in tokenizer.all_special_ids if i < size]] = True
    return banned


def has_letter(text: str) -> bool:
    """The kind of a word or token for ``same_kind`` candidates: True when it holds a letter."""
    return any(ch.isalpha() for ch in text)


def lettered_tokens(tokenizer, size: int) -> torch.Tensor:
    """``(size,)`` bool: which ids are tokens holding a letter (``##`` marks not counted)."""
    out = torch.zeros(size, dtype=torch.bool)
    for tok, i in tokenizer.get_vocab().items():
        if i < size:
            out[i] = has_letter(tok.removeprefix("##"))
    return out


@dataclass
class Sentence:
    """A sentence's words, their WordPiece ids, and (filled later) each word's candidates."""

    words: list[str]
    pieces: list[list[int]]
    candidates: list[list[str]]


class Vocabulary:
    """Per-word WordPiece ids (cached) and which words must never change."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.special_ids = set(tokenizer.all_special_ids)
        vocab = tokenizer.get_vocab()
        self.protected = set(tokenizer.all_special_tokens) | {t for t in vocab if _BRACKETED.match(t)}
        self._pieces: dict[str, list[int]] = {}

    def sentence(self, text: str) -> Sentence:
        words = text.split()
        new = [w for w in dict.fromkeys(words) if w not in self._pieces]
        if new:
            ids = self.tokenizer(new, add_special_tokens=False)["input_ids"]
            self._pieces.update(zip(new, (list(x) for x in ids), strict=True))
        pieces = [self._pieces[w] for w in words]
        return Sentence(words, pieces, [[] for _ in words])

    def frozen(self, word: str, pieces: list[int]) -> bool:
        """True for special tokens and words that cannot be changed."""
        return not pieces or word in self.protected or any(i in self.special_ids for i in pieces)


def mlm_rows(sent: Sentence, vocab: Vocabulary, tokenizer, max_length: int) -> list[tuple[int, list[int], int, int]]:
    """One row per single-piece word: (word index, ids with that word as [MASK] between [CLS] and
    [SEP], mask position, original id). Long sentences are windowed around the word."""
    flat = [i for p in sent.pieces for i in p]
    room, rows, offset = max_length - 2, [], 0
    for w, (word, pieces) in enumerate(zip(sent.words, sent.pieces, strict=True)):
        if len(pieces) == 1 and not vocab.frozen(word, pieces):
            start = min(max(0, offset - room // 2), max(0, len(flat) - room))
            window = flat[start : start + room]
            window[offset - start] = tokenizer.mask_token_id
            rows.append((w, [tokenizer.cls_token_id, *window, tokenizer.sep_token_id], offset - start + 1, pieces[0]))
        offset += len(pieces)
    return rows


def _encoder_and_head(mlm) -> tuple[torch.nn.Module, torch.nn.Module] | None:
    """(bare encoder, masked-LM prediction head) of ``mlm``, or None when the role table does not
    know the model or it has no such head."""
    if not roles.is_encoder(mlm):
        return None
    try:
        return roles.base_model(mlm), roles.mlm_predictions(mlm)
    except ModelError:
        return None


@torch.inference_mode()
def mlm_top_k(mlm, rows: list[list[int]], positions: list[int], originals: list[int], banned: torch.Tensor,
              k: int, batch_size: int, bf16: bool, pad_id: int,
              lettered: torch.Tensor | None = None) -> list[list[int]]:
    """Top-``k`` ids at one masked position per row, in row order (length-sorted batches).

    With ``lettered`` (:func:`lettered_tokens`) a row's candidates are of its original token's kind
    only, and fewer than ``k`` where the vocabulary holds fewer allowed ones.

    For a masked LM of a family in the role table (encoder + prediction head) the head runs only at
    the masked positions ``(batch, hidden) -> (batch, vocab)``; other models fall back to full
    ``logits``.
    """
    split = _encoder_and_head(mlm)
    order = sorted(range(len(rows)), key=lambda r: len(rows[r]))
    out: list[list[int]] = [[] for _ in rows]
    for b in range(0, len(order), batch_size):
        idx = order[b : b + batch_size]
        width = max(len(rows[r]) for r in idx)
        ids = torch.full((len(idx), width), pad_id, dtype=torch.long)  # (batch, seq)
        mask = torch.zeros((len(idx), width), dtype=torch.long)  # a [PAD] word in a text stays visible
        for j, r in enumerate(idx):
            ids[j, : len(rows[r])] = torch.tensor(rows[r])
            mask[j, : len(rows[r])] = 1
        arange = torch.arange(len(idx))
        pos = torch.tensor([positions[r] for r in idx])
        with autocast(bf16):
            if split is not None:
                hidden = split[0](input_ids=ids, attention_mask=mask).last_hidden_state[arange, pos]
                logits = split[1](hidden).float()  # (batch, vocab)
            else:
                logits = mlm(input_ids=ids, attention_mask=mask).logits[arange, pos].float()
        vocab = logits.shape[-1]
        orig = torch.tensor([originals[r] for r in idx])
        logits[:, banned[:vocab]] = float("-inf")
        logits[arange, orig] = float("-inf")
        if lettered is not None:  # (batch, vocab): True where the candidate's kind differs from the original's
            logits[lettered[:vocab][None, :] != lettered[orig][:, None]] = float("-inf")
        allowed = int((~banned[:vocab]).sum()) - 1
        values, top = logits.topk(max(0, min(k, allowed)), dim=-1)
        for j, r in enumerate(idx):
            out[r] = [i for i, v in zip(top[j].tolist(), values[j].tolist(), strict=True) if v != float("-inf")]
    return out


def fill_candidates(sents: list[Sentence], mlm, tokenizer, vocab: Vocabulary, neighbours: NeighbourSource,
                    banned: torch.Tensor, *, top_k: int, batch_size: int, max_length: int, bf16: bool,
                    lettered: torch.Tensor | None = None) -> int:
    """Fill every sentence's per-word candidates (``top_k`` MLM predictions for single-piece words,
    rows of at most ``max_length`` ids in batches of ``batch_size``; neighbours for multi-piece
    words; with ``lettered`` (:func:`lettered_tokens`, for ``same_kind``) only those of the word's
    kind, see :func:`has_letter`) in place; returns the number of MLM rows run."""
    rows = [(s, row) for s in sents for row in mlm_rows(s, vocab, tokenizer, max_length)]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    top = mlm_top_k(mlm, [r[1] for _, r in rows], [r[2] for _, r in rows], [r[3] for _, r in rows],
                    banned, top_k, batch_size, bf16, pad, lettered) if rows else []
    for (sent, row), ids in zip(rows, top, strict=True):
        sent.candidates[row[0]] = tokenizer.convert_ids_to_tokens(ids)
    for sent in sents:
        for w, (word, pieces) in enumerate(zip(sent.words, sent.pieces, strict=True)):
            if len(pieces) > 1 and not vocab.frozen(word, pieces):
                near = list(neighbours.neighbours(word))
                same = has_letter(word)
                sent.candidates[w] = near if lettered is None else [c for c in near if has_letter(c) == same]
    return len(rows)
