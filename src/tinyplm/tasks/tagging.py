"""Token tagging (CoNLL-2003 NER) -> model inputs: words split into pieces, one label per word.

Each word's label goes to its first word piece; its other pieces (and the special tokens) get
:data:`IGNORE`, so the loss and the predictions use one position per word (BERT's NER setup).
Sentences longer than ``max_length`` pieces are cut; :func:`tags_from_logits` counts the words
cut off (and any word the tokenizer gives no piece) as predicted ``O`` rather than dropping them
or shifting the words after it.

The words are read as running text, joined by single spaces, and each piece is given to the word its
characters fall in (the offsets of a fast tokenizer): so a tokenizer that marks a word's start in
its pieces (byte-level BPE's ``Ġ``, as RoBERTa and ModernBERT ship it, ``add_prefix_space`` off)
gives each word the pieces the model read in pre-training. Its pre-split mode
(``is_split_into_words``) read every word as if it followed no space there: ``movie`` rather than
``Ġmovie``, pieces such a model never saw at the start of a word.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

IGNORE = -100


@dataclass(frozen=True)
class Tagged:
    """Tokenised sentences: ragged ids and token types, per-piece labels (``IGNORE`` off the first
    piece of a word), for each sentence the piece index of each kept word's first piece, and
    (``first_words``) the word each of those pieces starts: a word the tokenizer gives no piece
    (an empty or whitespace-only one) has none, so the k-th first piece need not be word k. None
    where the caller did not record them (then it is)."""

    input_ids: list[list[int]]
    token_type_ids: list[list[int]]
    piece_labels: list[list[int]]
    first_pieces: list[list[int]]
    pad_id: int
    first_words: list[list[int]] | None = None

    def __len__(self) -> int:
        return len(self.input_ids)

    def words_of(self, i: int) -> list[int]:
        """The word index (in sentence ``i``'s word list) that each of its first pieces starts."""
        if self.first_words is None:
            return list(range(len(self.first_pieces[i])))
        return self.first_words[i]


def encode_tagged(sentences: Sequence[Sequence[str]], tags: Sequence[Sequence[str]] | None, tokenizer,
                  label_ids: dict[str, int], max_length: int = 128) -> Tagged:
    """Tokenise pre-split ``sentences`` and align ``tags`` (or none, for prediction) to first pieces.

    Raises ``ValueError`` for a tokenizer that is not fast (word ids need one) or a sentence whose
    tag count differs from its word count.
    """
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(f"{type(tokenizer).__name__} is not a fast tokenizer: word alignment needs one")
    enc = word_pieces(sentences, tokenizer, max_length)
    ids, types, labels, firsts, starts = [], [], [], [], []
    for i, words in enumerate(sentences):
        if tags is not None and len(tags[i]) != len(words):
            raise ValueError(f"sentence {i}: {len(words)} words but {len(tags[i])} tags")
        word_ids = piece_words(enc["offset_mapping"][i], enc["special_tokens_mask"][i], words)
        row, first, started, prev = [], [], [], None
        for p, w in enumerate(word_ids):
            if w is not None and w != prev:
                first.append(p)
                started.append(w)
                row.append(label_ids[tags[i][w]] if tags is not None else IGNORE)
            else:
                row.append(IGNORE)
            prev = w
        ids.append(list(enc["input_ids"][i]))
        types.append(list(enc["token_type_ids"][i]))
        labels.append(row)
        firsts.append(first)
        starts.append(started)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    return Tagged(ids, types, labels, firsts, int(pad), starts)


def from_the_start(tokenizer):
    """``tokenizer``, cutting a long text at its end whatever its ``truncation_side``: a tagger reads a
    sentence's words from the first (the words past a cut are tagged ``O`` in evaluation and read in
    the next window by ``predict``), so a tokenizer saved with ``truncation_side: left`` would drop
    the first words unread. A shallow copy: the caller's tokenizer is left as it is."""
    if getattr(tokenizer, "truncation_side", "right") == "right":
        return tokenizer
    turned = copy.copy(tokenizer)
    turned.truncation_side = "right"
    return turned


def word_pieces(sentences: Sequence[Sequence[str]], tokenizer, max_length: int | None = None):
    """``tokenizer``'s encoding of each sentence's words joined by single spaces (running text), with
    offsets and the special-tokens mask for :func:`piece_words`; cut to ``max_length`` when given."""
    cut = {"truncation": True, "max_length": max_length} if max_length else {}
    return from_the_start(tokenizer)([" ".join(s) for s in sentences], return_token_type_ids=True,
                                     return_offsets_mapping=True, return_special_tokens_mask=True, **cut)


def piece_words(offsets: Sequence[Sequence[int]], special: Sequence[int], words: Sequence[str]) -> list[int | None]:
    """For each piece of ``words`` read as by :func:`word_pieces`, the index of the word its characters
    fall in (a piece of only the space before a word, SentencePiece's lone ``▁``, is that word's, as in
    the pre-split mode); None for a special token."""
    ends, at = [], 0
    for word in words:
        ends.append((at, at + len(word)))
        at += len(word) + 1
    out: list[int | None] = []
    k = 0
    for (start, end), is_special in zip(offsets, special, strict=True):
        while k < len(ends) and (ends[k][1] <= start or not words[k].strip()):  # a blank word has no piece
            k += 1
        out.append(k if not is_special and end > start and k < len(ends) else None)
    return out


def tags_from_logits(tagged: Tagged, logits: Sequence, id_to_tag: Sequence[str],
                     n_words: Sequence[int]) -> list[list[str]]:
    """Per-sentence tag lists: the argmax at each word's first piece; words cut off (or given no
    piece by the tokenizer) are ``O``.

    ``logits`` holds one ``(pieces, labels)`` array per sentence."""
    out = []
    for i, firsts in enumerate(tagged.first_pieces):
        tags = ["O"] * n_words[i]
        for word, piece in zip(tagged.words_of(i), firsts, strict=True):
            tags[word] = id_to_tag[int(logits[i][piece].argmax())]
        out.append(tags)
    return out
