"""Masked-LM masking of a batch of token ids: which tokens are selected, and what they become.

Selection (``Masking.strategy``), always among real, non-special tokens:

* ``token`` (BERT): each token independently with probability ``rate``.
* ``whole_word`` (BERT's later WWM): each *word* with probability ``rate``; all its pieces
  together, so the expected share of selected tokens is still ``rate``.
* ``span`` (SpanBERT): spans of whole words whose length in words is geometric (``span_p``,
  truncated at ``max_span``: mean 3.8 words for 0.2 and 10) at random starts, until ``rate`` of
  the row's tokens are covered.
* ``ngram`` (ALBERT): as ``span`` with n-gram lengths 1..``max_ngram``, p(n) proportional to 1/n.

Each selected token then becomes ``[MASK]``, a random non-special token, or stays, by ``split``
(80/10/10 by default; decided per token for every strategy). Word boundaries come from a
``word_starts`` tensor (1 where a token begins a word, from the fast tokenizer's ``word_ids``);
without it every token is its own word.

Functions work on tensors already padded, so a training loop can mask each batch anew
(dynamic masking, as RoBERTa) with the process's torch RNG, which the checkpoints save: a resumed
run masks exactly as an uninterrupted one.

Deliberately not ``transformers.DataCollatorForLanguageModeling``: that collator tokenises and
pads rows itself and draws from its own generator; here the batch is already collated (length-
grouped, padded to a multiple of 8) and the draws must follow the loop's checkpointed RNG.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import torch

Strategy = Literal["token", "whole_word", "span", "ngram"]
STRATEGIES: tuple[str, ...] = ("token", "whole_word", "span", "ngram")

IGNORE = -100  # label of positions that are not predicted (PyTorch's cross-entropy default)
MAX_MISSES = 20  # span draws in a row that add nothing (overlap, or no room left) before a row stops


@dataclass(frozen=True)
class Masking:
    """What masking needs to know about a vocabulary, and the rates it uses."""

    mask_id: int
    vocab_size: int
    special_ids: tuple[int, ...]
    rate: float = 0.15
    split: tuple[float, float, float] = (0.8, 0.1, 0.1)  # [MASK], random token, unchanged
    strategy: Strategy = "token"
    span_p: float = 0.2  # SpanBERT's geometric parameter
    max_span: int = 10  # SpanBERT's truncation, in words
    max_ngram: int = 3  # ALBERT's longest n-gram

    def __post_init__(self) -> None:
        if not 0.0 < self.rate < 1.0:
            raise ValueError(f"masking rate must be in (0, 1), got {self.rate}")
        if len(self.split) != 3 or abs(sum(self.split) - 1.0) > 1e-6 or min(self.split) < 0:
            raise ValueError(f"masking split must be three non-negative fractions summing to 1, got {self.split}")
        if self.strategy not in STRATEGIES:
            raise ValueError(f"masking strategy must be one of {STRATEGIES}, got {self.strategy!r}")
        if not 0.0 < self.span_p <= 1.0 or self.max_span < 1 or self.max_ngram < 1:
            raise ValueError(f"span_p must be in (0, 1] and max_span, max_ngram >= 1, got "
                             f"{self.span_p}, {self.max_span}, {self.max_ngram}")

    @classmethod
    def from_tokenizer(cls, tokenizer, rate: float = 0.15, vocab_size: int | None = None, **options) -> Masking:
        """Masking for a Hugging Face tokenizer (its ``[MASK]`` id and special ids); ``options``
        are the other fields (``split``, ``strategy``, ...)."""
        if tokenizer.mask_token_id is None:
            raise ValueError(f"tokenizer {type(tokenizer).__name__} has no mask token: masked-LM needs one")
        specials: Iterable[int] = tokenizer.all_special_ids
        return cls(int(tokenizer.mask_token_id), int(vocab_size or len(tokenizer)), tuple(sorted(set(specials))), rate,
                   **options)

    def length_weights(self) -> torch.Tensor:
        """Probabilities of span lengths 1..max (in words) for ``span`` and ``ngram``."""
        if self.strategy == "ngram":
            w = torch.tensor([1.0 / n for n in range(1, self.max_ngram + 1)], dtype=torch.float64)
        else:
            w = torch.tensor([self.span_p * (1 - self.span_p) ** (n - 1) for n in range(1, self.max_span + 1)],
                             dtype=torch.float64)
        return w / w.sum()

    def mean_span(self) -> float:
        """Expected span length in words under :meth:`length_weights`."""
        w = self.length_weights()
        return float((w * torch.arange(1, len(w) + 1, dtype=torch.float64)).sum())


def mask_tokens(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, masking: Masking, generator: torch.Generator | None = None,
    word_starts: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask ``input_ids`` ``(batch, seq)`` -> ``(masked ids, labels)``.

    Tokens are selected by ``masking.strategy`` (module docstring) among real, non-special ones;
    a selected token becomes ``[MASK]``, a uniformly random non-special token, or stays, by
    ``masking.split``. ``labels`` hold the original id at selected positions and :data:`IGNORE`
    elsewhere. ``word_starts`` ``(batch, seq)`` marks the first piece of each word (without it
    every token is a word). The input tensor is not modified.
    """
    selected = select(input_ids, attention_mask, masking, generator, word_starts)
    return replace_selected(input_ids, selected, masking, generator)


def eligible_tokens(input_ids: torch.Tensor, attention_mask: torch.Tensor, masking: Masking) -> torch.Tensor:
    """Real (not padding), non-special positions: the only ones masking may select."""
    special = torch.isin(input_ids, torch.tensor(masking.special_ids, dtype=input_ids.dtype))
    return attention_mask.bool() & ~special


def select(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, masking: Masking, generator: torch.Generator | None = None,
    word_starts: torch.Tensor | None = None,
) -> torch.Tensor:
    """The positions ``masking.strategy`` selects, a bool ``(batch, seq)`` tensor."""
    eligible = eligible_tokens(input_ids, attention_mask, masking)
    if masking.strategy == "token":
        return eligible & (torch.rand(input_ids.shape, generator=generator) < masking.rate)
    words = word_index(eligible, word_starts)
    if masking.strategy == "whole_word":
        draw = torch.rand((input_ids.shape[0], input_ids.shape[1] + 1), generator=generator) < masking.rate
        return eligible & torch.gather(draw, 1, words.clamp(min=0))
    return _select_spans(eligible, words, masking, generator)


def word_index(eligible: torch.Tensor, word_starts: torch.Tensor | None) -> torch.Tensor:
    """Per-row word number of each eligible token (0, 1, ...), -1 for the others.

    A word starts at a marked token, or at an eligible token after an ineligible one (so a
    special token never joins two words)."""
    eligible = eligible.bool()
    starts = eligible.clone() if word_starts is None else eligible & word_starts.bool()
    after_gap = eligible & ~torch.cat([torch.zeros_like(eligible[:, :1]), eligible[:, :-1]], dim=1)
    starts = starts | after_gap
    idx = torch.cumsum(starts.long(), dim=1) - 1
    return torch.where(eligible, idx, torch.full_like(idx, -1))


def _select_spans(eligible: torch.Tensor, words: torch.Tensor, masking: Masking,
                  generator: torch.Generator | None) -> torch.Tensor:
    """SpanBERT/ALBERT selection: whole-word spans until ``rate`` of each row's tokens is covered.

    The budget is ``rate`` x the row's eligible tokens, rounded stochastically so the expected
    rate is exact; spans do not overlap; a span's last word is kept only when it ends nearer the
    budget than leaving it out would (so the realised rate is unbiased up to word granularity).
    """
    weights = masking.length_weights()
    selected = torch.zeros_like(eligible)
    for row in range(eligible.shape[0]):
        n_words = int(words[row].max()) + 1
        if n_words <= 0:
            continue
        sizes = torch.bincount(words[row][words[row] >= 0], minlength=n_words).tolist()
        n_tokens = sum(sizes)
        target = masking.rate * n_tokens
        budget = math.floor(target) + int(float(torch.rand((), generator=generator)) < target - math.floor(target))
        chosen = [False] * n_words
        covered, misses = 0, 0
        while covered < budget and misses < MAX_MISSES:
            length = int(torch.multinomial(weights, 1, generator=generator)) + 1
            start = int(torch.randint(n_words, (), generator=generator))
            span = range(start, min(start + length, n_words))
            added = 0
            if not any(chosen[w] for w in span):
                for w in span:
                    if covered >= budget or (covered + sizes[w] - budget) > (budget - covered):
                        break
                    chosen[w] = True
                    covered += sizes[w]
                    added += 1
            misses = 0 if added else misses + 1
        hit = torch.tensor(chosen + [False])
        selected[row] = eligible[row] & hit[words[row].clamp(min=0)] & (words[row] >= 0)
    return selected


def sample_span_lengths(n: int, masking: Masking, generator: torch.Generator | None = None) -> torch.Tensor:
    """``n`` span lengths in words drawn as span/n-gram masking draws them."""
    return torch.multinomial(masking.length_weights(), n, replacement=True, generator=generator) + 1


def replace_selected(
    input_ids: torch.Tensor, selected: torch.Tensor, masking: Masking, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Apply ``masking.split`` to the ``selected`` positions -> ``(masked ids, labels)``."""
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
