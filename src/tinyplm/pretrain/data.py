"""Pre-training text -> :class:`~tinyplm.tasks.encoding.Encoded` with word boundaries.

Single texts (MLM, ELECTRA) or sentence pairs (NSP/SOP, whose 0/1 label becomes the example's
label) are tokenised once with the fast tokenizer; ``word_starts`` marks the first piece of every
word (from ``word_ids()``, restarted in the second segment) for whole-word and span masking.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from tinyplm.errors import TinyplmError
from tinyplm.pretrain.pairs import Pair
from tinyplm.tasks.encoding import Encoded


def word_starts_of(word_ids: Sequence[int | None], sequence_ids: Sequence[int | None]) -> list[int]:
    """1 where a token begins a word (a new word id, or a new segment), else 0; specials are 0."""
    out, prev = [], (None, None)
    for w, s in zip(word_ids, sequence_ids, strict=True):
        out.append(int(w is not None and (w, s) != prev))
        prev = (w, s)
    return out


def encode_texts(texts: Sequence[str] | Sequence[Pair], tokenizer, max_length: int) -> Encoded:
    """Tokenise ``texts``: strings in windows of ``max_length`` tokens (a text longer than one window
    is read in several, each framed by the specials, so every piece is trained on rather than all
    past the first ``max_length`` dropped), or :class:`Pair` s truncated to ``max_length`` (their
    segments are built to fit).

    Raises ``TinyplmError`` when the tokenizer is not a fast one (word boundaries need it) or
    there is nothing to encode.
    """
    if not texts:
        raise TinyplmError("no pre-training text to encode")
    if not getattr(tokenizer, "is_fast", False):
        raise TinyplmError(f"{type(tokenizer).__name__} is not a fast tokenizer: word boundaries need one")
    pairs = isinstance(texts[0], Pair)
    if pairs:
        out = tokenizer([p.a for p in texts], [p.b for p in texts], truncation="longest_first",
                        max_length=max_length, return_token_type_ids=True)
        labels = torch.tensor([p.label for p in texts], dtype=torch.long)
    else:
        out = tokenizer(list(texts), truncation=True, max_length=max_length, return_token_type_ids=True,
                        return_overflowing_tokens=True, stride=0)
        labels = torch.zeros(len(out["input_ids"]), dtype=torch.long)
    ids = [list(x) for x in out["input_ids"]]
    types = [list(x) for x in out["token_type_ids"]]
    starts = [word_starts_of(out.word_ids(i), out.sequence_ids(i)) for i in range(len(ids))]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    return Encoded(ids, types, labels, int(pad), word_starts=starts)


def unknown_share(enc: Encoded, tokenizer) -> float:
    """The share of ``enc``'s word pieces (specials aside) that are the tokenizer's unknown token:
    near 1 when the tokenizer was trained on other text (or another script) than the corpus."""
    unk = tokenizer.unk_token_id
    if unk is None:
        return 0.0
    special = set(tokenizer.all_special_ids) - {unk}
    pieces = [i for row in enc.input_ids for i in row if i not in special]
    return sum(i == unk for i in pieces) / len(pieces) if pieces else 0.0
