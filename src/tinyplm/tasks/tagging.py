"""Token tagging (CoNLL-2003 NER) -> model inputs: words split into pieces, one label per word.

Each word's label goes to its first word piece; its other pieces (and the special tokens) get
:data:`IGNORE`, so the loss and the predictions use one position per word (BERT's NER setup).
Sentences longer than ``max_length`` pieces are cut; :func:`tags_from_logits` counts the words
cut off (and any word the tokenizer gives no piece) as predicted ``O`` rather than dropping them
or shifting the words after it.
"""

from __future__ import annotations

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
    enc = tokenizer([list(s) for s in sentences], is_split_into_words=True, truncation=True, max_length=max_length,
                    return_token_type_ids=True)
    ids, types, labels, firsts, starts = [], [], [], [], []
    for i, words in enumerate(sentences):
        if tags is not None and len(tags[i]) != len(words):
            raise ValueError(f"sentence {i}: {len(words)} words but {len(tags[i])} tags")
        word_ids = enc.word_ids(i)
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
