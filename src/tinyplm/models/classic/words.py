"""Word tokenisation and the vocabulary of a classic student, saved beside its weights.

:class:`WordTokenizer` splits text into lower-cased words and punctuation marks (``WORD_RE``) and,
for the TF-IDF model, adds the word n-grams up to ``ngram_max`` (joined by a space, the way
scikit-learn names them). Ids 0, 1, 2 are ``[PAD]``, ``[UNK]`` and ``[SEP]``; the rest is the
vocabulary, most frequent first. A text pair is ``text [SEP] pair``.

It answers the calls the rest of tinyplm makes of a ``transformers`` tokenizer
(``tokenizer(texts, pairs, truncation=..., max_length=...)`` -> ``input_ids`` and
``token_type_ids``, ``pad_token_id``, ``len``, ``save_pretrained``), so ``tasks.encoding`` encodes
a split for these models with the same code as for a transformer. It is saved as
``word_tokenizer.json`` (a JSON object: settings and the vocabulary list).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tinyplm.errors import ModelError
from tinyplm.files import write_json_atomic

TOKENIZER_FILE = "word_tokenizer.json"
#: A word (letters/digits/underscore, with an inner apostrophe: "don't") or one punctuation mark.
WORD_RE = re.compile(r"\w+(?:'\w+)*|[^\w\s]")
SPECIALS = ("[PAD]", "[UNK]", "[SEP]")
PAD_ID, UNK_ID, SEP_ID = 0, 1, 2


def words(text: str, lowercase: bool = True) -> list[str]:
    """The words and punctuation marks of ``text`` in order."""
    return WORD_RE.findall(text.lower() if lowercase else text)


def with_ngrams(tokens: Sequence[str], ngram_max: int) -> list[str]:
    """``tokens`` followed by their 2..ngram_max-grams (scikit-learn's order: all unigrams first)."""
    out = list(tokens)
    for n in range(2, ngram_max + 1):
        out += [" ".join(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]
    return out


@dataclass
class WordTokenizer:
    """Words (and n-grams) -> ids over a fixed vocabulary; see the module docstring.

    ``vocab`` lists the tokens by id (the three specials first). ``max_tokens``, when set, is the
    cap on ids per text whatever ``max_length`` a caller asks for (the TF-IDF model sees every
    n-gram of a sentence, as scikit-learn did when it was fitted)."""

    vocab: list[str]
    lowercase: bool = True
    ngram_max: int = 1
    max_tokens: int | None = None
    _ids: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if tuple(self.vocab[:3]) != SPECIALS:
            raise ModelError(f"a word vocabulary starts with {', '.join(SPECIALS)}; got {self.vocab[:3]}")
        self._ids = {w: i for i, w in enumerate(self.vocab)}

    pad_token_id = PAD_ID
    unk_token_id = UNK_ID
    sep_token_id = SEP_ID

    @classmethod
    def build(cls, texts: Iterable[str], max_size: int, min_count: int = 1, lowercase: bool = True,
              ngram_max: int = 1, max_tokens: int | None = None) -> WordTokenizer:
        """The vocabulary of ``texts``: tokens seen at least ``min_count`` times, the ``max_size``
        most frequent (ties broken alphabetically, so the same texts give the same ids)."""
        counts: Counter[str] = Counter()
        for text in texts:
            counts.update(with_ngrams(words(text, lowercase), ngram_max))
        kept = sorted((w for w, c in counts.items() if c >= min_count and w not in SPECIALS),
                      key=lambda w: (-counts[w], w))[:max_size]
        return cls([*SPECIALS, *kept], lowercase, ngram_max, max_tokens)

    def __len__(self) -> int:
        return len(self.vocab)

    def tokens(self, text: str) -> list[str]:
        """The tokens of ``text`` (words, then n-grams when ``ngram_max`` > 1)."""
        return with_ngrams(words(text, self.lowercase), self.ngram_max)

    def encode(self, text: str, pair: str | None = None, max_length: int | None = None) -> tuple[list[int], list[int]]:
        """(ids, type ids) of ``text`` (``[SEP]`` ``pair``), cut to the cap; never empty ([UNK])."""
        ids = [self._ids.get(t, UNK_ID) for t in self.tokens(text)]
        types = [0] * len(ids)
        if pair is not None:
            rest = [self._ids.get(t, UNK_ID) for t in self.tokens(pair)]
            ids, types = ids + [SEP_ID] + rest, types + [1] * (len(rest) + 1)
        cap = self.max_tokens or max_length
        if cap:
            ids, types = ids[:cap], types[:cap]
        return (ids, types) if ids else ([UNK_ID], [0])

    def __call__(self, texts: Sequence[str], pairs: Sequence[str] | None = None, truncation: bool = True,
                 max_length: int | None = None, return_token_type_ids: bool = True, **_) -> dict[str, list]:
        """A ``transformers``-style batch call: ``{"input_ids": [...], "token_type_ids": [...]}``."""
        if isinstance(texts, str):
            texts = [texts]
            pairs = [pairs] if isinstance(pairs, str) else pairs
        out = [self.encode(t, pairs[i] if pairs is not None else None, max_length if truncation else None)
               for i, t in enumerate(texts)]
        return {"input_ids": [o[0] for o in out], "token_type_ids": [o[1] for o in out]}

    def save_pretrained(self, path: Path) -> None:
        """Write ``word_tokenizer.json`` into the folder ``path``."""
        write_json_atomic(Path(path) / TOKENIZER_FILE, {"kind": "words", "lowercase": self.lowercase,
                                                        "ngram_max": self.ngram_max, "max_tokens": self.max_tokens,
                                                        "vocab": self.vocab}, indent=None)

    @classmethod
    def load(cls, path: Path) -> WordTokenizer:
        """Read ``path/word_tokenizer.json``; raises ``ModelError`` naming the file when it is
        missing or not the object :meth:`save_pretrained` writes."""
        file = Path(path) / TOKENIZER_FILE
        try:
            doc = json.loads(file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ModelError(f"{path}: no {TOKENIZER_FILE} (where a classic student keeps its words)") from None
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise ModelError(f"{file}: not a JSON word vocabulary ({exc.__class__.__name__}: {exc})") from None
        vocab = doc.get("vocab") if isinstance(doc, dict) else None
        if not isinstance(vocab, list) or not all(isinstance(w, str) for w in vocab):
            raise ModelError(f"{file}: expected an object with 'vocab', a list of strings")
        ngram, cap = doc.get("ngram_max", 1), doc.get("max_tokens")
        if not isinstance(ngram, int) or ngram < 1 or not (cap is None or (isinstance(cap, int) and cap > 0)):
            raise ModelError(f"{file}: 'ngram_max' must be a positive integer and 'max_tokens' one or null")
        return cls(vocab, bool(doc.get("lowercase", True)), ngram, cap)
