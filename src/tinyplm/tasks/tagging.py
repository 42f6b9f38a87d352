"""Token tagging (CoNLL-2003 NER) -> model inputs: words split into pieces, one label per word.

Each word's label goes to its first word piece; its other pieces (and the special tokens) get
:data:`IGNORE`, so the loss and the predictions use one position per word (BERT's NER setup).
Sentences longer than ``max_length`` pieces are cut; :func:`tags_from_logits` counts the words
cut off as predicted ``O`` rather than dropping them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

IGNORE = -100


@dataclass(frozen=True)
class Tagged:
    """Tokenised sentences: ragged ids and token types, per-piece labels (``IGNORE`` off the first
    piece of a word), and for each sentence the piece index of each kept word's first piece."""

    input_ids: list[list[int]]
    token_type_ids: list[list[int]]
    piece_labels: list[list[int]]
    first_pieces: list[list[int]]
    pad_id: int

    def __len__(self) -> int:
        return len(self.input_ids)


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
    ids, types, labels, firsts = [], [], [], []
    for i, words in enumerate(sentences):
        if tags is not None and len(tags[i]) != len(words):
            raise ValueError(f"sentence {i}: {len(words)} words but {len(tags[i])} tags")
        word_ids = enc.word_ids(i)
        row, first, prev = [], [], None
        for p, w in enumerate(word_ids):
            if w is not None and w != prev:
                first.append(p)
                row.append(label_ids[tags[i][w]] if tags is not None else IGNORE)
            else:
                row.append(IGNORE)
            prev = w
        ids.append(list(enc["input_ids"][i]))
        types.append(list(enc["token_type_ids"][i]))
        labels.append(row)
        firsts.append(first)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    return Tagged(ids, types, labels, firsts, int(pad))


def tags_from_logits(tagged: Tagged, logits: Sequence, id_to_tag: Sequence[str],
                     n_words: Sequence[int]) -> list[list[str]]:
    """Per-sentence tag lists: the argmax at each word's first piece; words cut off are ``O``.

    ``logits`` holds one ``(pieces, labels)`` array per sentence."""
    out = []
    for i, firsts in enumerate(tagged.first_pieces):
        pred = [id_to_tag[int(logits[i][p].argmax())] for p in firsts]
        out.append(pred + ["O"] * (n_words[i] - len(pred)))
    return out
