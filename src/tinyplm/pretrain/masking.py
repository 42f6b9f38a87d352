"""BERT masking of a batch of token ids (15% selected; of those 80% [MASK], 10% random, 10% kept).

:func:`mask_tokens` works on tensors already padded, so a training loop can mask each batch anew
(dynamic masking, as RoBERTa) with the process's torch RNG, which the checkpoints save: a resumed
run masks exactly as an uninterrupted one. Special and padding tokens are never selected.

Deliberately not ``transformers.DataCollatorForLanguageModeling``: that collator tokenises and
pads rows itself and draws from its own generator; here the batch is already collated (length-
grouped, padded to a multiple of 8) and the draws must follow the loop's checkpointed RNG.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch

IGNORE = -100  # label of positions that are not predicted (PyTorch's cross-entropy default)


@dataclass(frozen=True)
class Masking:
    """What masking needs to know about a vocabulary, and the rates it uses."""

    mask_id: int
    vocab_size: int
    special_ids: tuple[int, ...]
    rate: float = 0.15
    split: tuple[float, float, float] = (0.8, 0.1, 0.1)  # [MASK], random token, unchanged

    def __post_init__(self) -> None:
        if not 0.0 < self.rate < 1.0:
            raise ValueError(f"masking rate must be in (0, 1), got {self.rate}")
        if len(self.split) != 3 or abs(sum(self.split) - 1.0) > 1e-6 or min(self.split) < 0:
            raise ValueError(f"masking split must be three non-negative fractions summing to 1, got {self.split}")

    @classmethod
    def from_tokenizer(cls, tokenizer, rate: float = 0.15, vocab_size: int | None = None) -> Masking:
        """Masking for a Hugging Face tokenizer (its ``[MASK]`` id and special ids)."""
        if tokenizer.mask_token_id is None:
            raise ValueError(f"tokenizer {type(tokenizer).__name__} has no mask token: masked-LM needs one")
        specials: Iterable[int] = tokenizer.all_special_ids
        return cls(int(tokenizer.mask_token_id), int(vocab_size or len(tokenizer)), tuple(sorted(set(specials))), rate)


def mask_tokens(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, masking: Masking, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask ``input_ids`` ``(batch, seq)`` -> ``(masked ids, labels)``.

    Each real, non-special token is selected with probability ``masking.rate``; a selected token
    becomes ``[MASK]``, a uniformly random non-special token, or stays, by ``masking.split``.
    ``labels`` hold the original id at selected positions and :data:`IGNORE` elsewhere.
    The input tensor is not modified.
    """
    special = torch.isin(input_ids, torch.tensor(masking.special_ids, dtype=input_ids.dtype))
    eligible = attention_mask.bool() & ~special
    draw = torch.rand(input_ids.shape, generator=generator)
    selected = eligible & (draw < masking.rate)
    how = torch.rand(input_ids.shape, generator=generator)
    to_mask = selected & (how < masking.split[0])
    to_random = selected & (how >= masking.split[0]) & (how < masking.split[0] + masking.split[1])
    masked = input_ids.clone()
    masked[to_mask] = masking.mask_id
    masked[to_random] = random_tokens(int(to_random.sum()), masking, generator).to(input_ids.dtype)
    labels = torch.full_like(input_ids, IGNORE)
    labels[selected] = input_ids[selected]
    return masked, labels


def random_tokens(n: int, masking: Masking, generator: torch.Generator | None = None) -> torch.Tensor:
    """``n`` token ids drawn uniformly from the vocabulary without its special tokens."""
    allowed = torch.ones(masking.vocab_size, dtype=torch.bool)
    allowed[[i for i in masking.special_ids if i < masking.vocab_size]] = False
    pool = allowed.nonzero().squeeze(-1)
    return pool[torch.randint(len(pool), (n,), generator=generator)]
