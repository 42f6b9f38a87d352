"""A memo of a WordPiece tokenizer's pieces per whitespace-separated chunk of text: the same ids as
the tokenizer for single texts, without running it on words it has already seen.

Why: once the model is a table lookup (the static students, ``models.classic.static``), the
tokenizer is most of a prediction's time. The ``tokenizers`` library normalises, splits and
matches every word of every text again, with offsets and alignments that a classifier never reads,
and took longer per sentence than the bag's whole forward pass (docs/results/pareto.md has the
end-to-end figures with and without the memo, and the command). So the library
still tokenises every chunk once, in one batched call per batch of texts, and the memo only
remembers what it said. It is not a tokenizer of its own: nothing here knows a vocabulary.

Why it is exact: for a tokenizer made of a BERT normaliser (character by character: cleaning,
lower-casing, accents, spaces around CJK characters), a whitespace/punctuation pre-tokenizer and a
WordPiece or word-level model, no piece ever spans whitespace, so a text's pieces are the pieces of
its whitespace-separated chunks, in order. The memo takes only such tokenizers
(:meth:`PieceCache.of` reads the tokenizer's own description, ``tokenizer.json``), and checks itself
against the tokenizer on a set of probe texts before it is used. Python's ``str.split`` and the
normaliser disagree on a handful of control characters (Python splits on them, BERT deletes them,
joining their neighbours): a text holding one is tokenised whole. Truncation is the tokenizer's for
one text: the first ``max_length`` minus the special tokens' pieces are kept (``truncation_side``
must be right).

The memo stops growing at ``limit`` chunks (a stream of new words then costs a tokenizer call per
batch, as without it). It is not thread-safe by itself: the predictor calls it under its
tokenising lock.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from tokenizers import Tokenizer

#: The ``tokenizer.json`` parts under which a text's pieces are its chunks' pieces.
NORMALIZERS = frozenset({None, "BertNormalizer", "Lowercase", "NFD", "NFKD", "StripAccents"})
PRE_TOKENIZERS = frozenset({"BertPreTokenizer", "Whitespace", "WhitespaceSplit"})
MODELS = frozenset({"WordPiece", "WordLevel"})
#: Characters ``str.split`` splits on that a BERT normaliser deletes as control characters.
SPLIT_DISAGREES = re.compile("[\x0b\x0c\x1c-\x1f\x85]")
#: Texts the memo is checked on before use: punctuation, case, accents, CJK, digits, an added token.
PROBES = (
    "a", "", "   ", "Hello, world!", "it's not a bad film -- really.", "Ünïcödé façade naïve",
    "東京 is big", "x\u00a0y\u2028z\u3000w", "tab\tnew\nline\rend", "[MASK] and [CLS]x",
    "1,234.5 e-mail @user #tag", "don't can't won't", "zero\u200bwidth", "(parens) [brackets] {braces}",
)
LIMIT = 262_144


def _kind(part: dict | None) -> str | None:
    return None if part is None else part.get("type")


def _kinds(part: dict | None, members: str) -> set[str | None]:
    """The kinds of a ``tokenizer.json`` part, or of each member of a ``Sequence`` of them."""
    if _kind(part) == "Sequence":
        return {_kind(p) for p in part.get(members, [])}
    return {_kind(part)}


def unfit_reason(tokenizer) -> str | None:
    """Why a memo of ``tokenizer`` could differ from it, or None when it cannot."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return "not a fast tokenizer"
    if getattr(tokenizer, "truncation_side", "right") != "right":
        return "truncates on the left"
    spec = json.loads(backend.to_str())
    normalizers = _kinds(spec.get("normalizer"), "normalizers")
    if not normalizers <= NORMALIZERS:
        return f"normalizer {normalizers}"
    pre = _kinds(spec.get("pre_tokenizer"), "pretokenizers")
    if not pre or not pre <= PRE_TOKENIZERS:
        return f"pre-tokenizer {pre}"
    if _kind(spec.get("model")) not in MODELS:
        return f"model {_kind(spec.get('model'))}"
    if any(re.search(r"\s", t["content"]) for t in spec.get("added_tokens", [])):
        return "an added token holds whitespace"
    return None


@dataclass
class PieceCache:
    """The pieces of each chunk seen so far (see the module docstring). Make it with :meth:`of`."""

    backend: Tokenizer  # a private copy of its backend: no truncation or padding left by other calls
    prefix: list[int]  # the special tokens' ids before and after a text's pieces
    suffix: list[int]
    limit: int = LIMIT
    pieces: dict[str, list[int]] = field(default_factory=dict)

    @classmethod
    def of(cls, tokenizer, limit: int = LIMIT) -> PieceCache | None:
        """A memo of ``tokenizer``, or None where it could differ from it (:func:`unfit_reason`, or
        a probe text whose ids differ)."""
        if unfit_reason(tokenizer) is not None:
            return None
        backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
        backend.no_truncation()
        backend.no_padding()
        try:
            empty = backend.encode("", add_special_tokens=True)
            probe = backend.encode("a b", add_special_tokens=True)
            body = backend.encode("a b", add_special_tokens=False).ids
            at = next((i for i in range(len(probe.ids) - len(body) + 1) if probe.ids[i:i + len(body)] == body), None)
            if at is None or any(probe.type_ids) or probe.ids[:at] + probe.ids[at + len(body):] != empty.ids:
                return None
            cache = cls(backend, probe.ids[:at], probe.ids[at + len(body):], limit)
            reference = tokenizer(list(PROBES), truncation=True, max_length=8)["input_ids"]
            if cache.encode(PROBES, 8) != [list(ids) for ids in reference]:
                return None
        except Exception:  # noqa: BLE001 -- e.g. a word-level vocab without an unknown token refuses a
            return None   # probe word: such a tokenizer runs as it is, and raises on the user's text itself
        cache.pieces.clear()  # the probes' chunks are not the user's words
        return cache

    def __len__(self) -> int:
        return len(self.pieces)

    def encode(self, texts: Sequence[str], max_length: int) -> list[list[int]]:
        """The tokenizer's ids of each text (special tokens added, cut to ``max_length``)."""
        room = max_length - len(self.prefix) - len(self.suffix)
        if room < 1:
            specials = len(self.prefix) + len(self.suffix)
            raise ValueError(f"max_length {max_length} leaves no room beside {specials} special tokens")
        chunks = [None if SPLIT_DISAGREES.search(t) else t.split() for t in texts]
        known = self._learn({c for cs in chunks if cs for c in cs if c not in self.pieces})
        whole = [i for i, cs in enumerate(chunks) if cs is None]
        bodies = dict(zip(whole, (e.ids for e in self.backend.encode_batch(
            [texts[i] for i in whole], add_special_tokens=False)), strict=True)) if whole else {}
        out = []
        for i, cs in enumerate(chunks):
            if cs is None:
                body = bodies[i]
            else:
                body = []
                for c in cs:
                    body += known[c] if c in known else self.pieces[c]
                    if len(body) >= room:
                        break
            out.append(self.prefix + body[:room] + self.suffix)
        return out

    def _learn(self, new: set[str]) -> dict[str, list[int]]:
        """Tokenise the chunks not seen yet in one call; remember them while under ``limit`` ->
        those not remembered (needed for this call only)."""
        if not new:
            return {}
        words = sorted(new)
        encoded = self.backend.encode_batch(words, add_special_tokens=False)
        found = {w: e.ids for w, e in zip(words, encoded, strict=True)}
        space = max(0, self.limit - len(self.pieces))
        kept = dict(list(found.items())[:space])
        self.pieces.update(kept)
        return {w: ids for w, ids in found.items() if w not in kept}
