"""Word-piece ids of texts for the models that read ids alone (static encoders: no attention mask,
no special tokens), by the quickest call that gives the same ids."""

from __future__ import annotations

from collections.abc import Sequence


def piece_ids(tokenizer, texts: Sequence[str], max_length: int | None) -> list[list[int]]:
    """Each text's piece ids without special tokens, cut at ``max_length`` pieces when given.

    Without a limit, a fast tokenizer's backend (the ``tokenizers`` library) is called directly:
    the ids are the same, and the transformers wrapper's per-call work was about a fifth of a
    static encoder's whole time on short texts. With a limit, or a backend holding truncation or
    padding of its own, the transformers call does it."""
    if not texts:
        return []  # the transformers call fails on an empty list
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if max_length is None and backend is not None and backend.truncation is None and backend.padding is None:
        encode = getattr(backend, "encode_batch_fast", backend.encode_batch)
        return [e.ids for e in encode(list(texts), add_special_tokens=False)]
    return tokenizer(list(texts), add_special_tokens=False, truncation=max_length is not None, max_length=max_length,
                     return_attention_mask=False, return_token_type_ids=False)["input_ids"]
