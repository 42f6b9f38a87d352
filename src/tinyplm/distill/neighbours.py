"""Static-embedding neighbours for the multi-piece words of TinyBERT augmentation.

A :class:`NeighbourSource` answers "the K nearest whole words to this word" and fingerprints its
embedding space (part of the augmentation cache key). Two sources:

* :class:`EmbeddingNeighbours`: cosine neighbours in the teacher's input embeddings (a word is the
  mean of its WordPiece vectors; candidates are alphabetic whole-word vocab tokens);
* :func:`word2vec_neighbours`: gensim skip-gram vectors trained on a corpus (deterministic, one
  worker), cached as safetensors + JSON rather than gensim's pickles.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Protocol

import torch

from tinyplm.errors import TinyplmError
from tinyplm.files import atomic_path, write_json_atomic


class NeighbourSource(Protocol):
    """Static-embedding neighbours for multi-piece words."""

    def neighbours(self, word: str) -> list[str]:
        """Up to K nearest words to ``word`` (never ``word`` itself); [] when unknown."""
        ...

    def fingerprint(self) -> str:
        """Identifies the embedding space and K (part of the augmentation cache key)."""
        ...


class EmbeddingNeighbours:
    """Nearest whole words by cosine similarity of input embeddings (a word = mean of its pieces).

    Candidates: alphabetic whole-word vocab tokens (no ``##``, no specials). ``embeddings`` is the
    ``(vocab, hidden)`` input-embedding matrix; results are cached per word.
    """

    def __init__(self, tokenizer, embeddings: torch.Tensor, k: int = 15) -> None:
        self.tokenizer, self.k = tokenizer, k
        self.emb = embeddings.detach().float().cpu()
        special = set(tokenizer.all_special_tokens)
        vocab = sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])
        keep = [(t, i) for t, i in vocab if t.isalpha() and t not in special and i < len(self.emb)]
        self.words = [t for t, _ in keep]
        cand = self.emb[[i for _, i in keep]]  # (n_words, hidden)
        self.unit = cand / cand.norm(dim=-1, keepdim=True).clamp_min(1e-8)
        self._cache: dict[str, list[str]] = {}
        self._fp: str | None = None

    @classmethod
    def from_model(cls, model: torch.nn.Module, tokenizer, k: int = 15) -> EmbeddingNeighbours:
        """Use ``model.get_input_embeddings()`` (the teacher's word embeddings)."""
        return cls(tokenizer, model.get_input_embeddings().weight, k)

    def neighbours(self, word: str) -> list[str]:
        if word not in self._cache:
            ids = self.tokenizer(word, add_special_tokens=False)["input_ids"]
            if not ids:
                self._cache[word] = []
            else:
                vec = self.emb[ids].mean(0)
                sims = self.unit @ (vec / vec.norm().clamp_min(1e-8))  # (n_words,)
                top = sims.topk(min(self.k + 1, len(self.words))).indices.tolist()
                lower = word.lower()
                self._cache[word] = [self.words[i] for i in top if self.words[i] != lower][: self.k]
        return self._cache[word]

    def fingerprint(self) -> str:
        if self._fp is None:
            h = hashlib.sha256(f"embedding-neighbours/{self.k}/".encode())
            h.update(self.emb.numpy().tobytes())
            self._fp = h.hexdigest()
        return self._fp


class Word2VecNeighbours:
    """Neighbours from a gensim ``KeyedVectors`` (lower-cased words)."""

    def __init__(self, vectors, k: int = 15, tag: str = "") -> None:
        self.vectors, self.k, self.tag = vectors, k, tag
        self._cache: dict[str, list[str]] = {}

    def neighbours(self, word: str) -> list[str]:
        key = word.lower()
        if key not in self._cache:
            found = self.vectors.most_similar(key, topn=self.k) if key in self.vectors.key_to_index else []
            self._cache[key] = [w for w, _ in found if w != key]
        return self._cache[key]

    def fingerprint(self) -> str:
        return f"word2vec/{self.k}/{self.tag}"


def _stable_hash(text: str) -> int:
    """gensim seeds each word vector with hash(word + seed); Python's str hash varies per process."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")


def word2vec_neighbours(texts: list[str], k: int = 15, *, vector_size: int = 100, window: int = 5,
                        min_count: int = 3, epochs: int = 5, seed: int = 0,
                        cache_dir: Path | None = None) -> Word2VecNeighbours:
    """Train gensim word2vec (skip-gram, 1 worker: deterministic) on lower-cased whitespace words.

    With ``cache_dir`` the vectors are kept in ``cache_dir/word2vec/<key>.{safetensors,json}``
    (the key hashes the texts and settings) and reused. Deliberately not gensim's own ``save``:
    that pickles, and loading a pickle from a cache folder would run whatever it holds.
    Raises ``TinyplmError`` when gensim is not installed.
    """
    try:
        from gensim.models import KeyedVectors, Word2Vec
    except ImportError:
        raise TinyplmError("word2vec neighbours need gensim (pip install gensim)") from None
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode("utf-8") + b"\0")
    digest.update(json.dumps([vector_size, window, min_count, epochs, seed]).encode())
    tag = digest.hexdigest()
    base = Path(cache_dir) / "word2vec" / tag[:24] if cache_dir else None
    if base is not None and base.with_suffix(".json").is_file() and base.with_suffix(".safetensors").is_file():
        from safetensors.torch import load_file

        words = json.loads(base.with_suffix(".json").read_text(encoding="utf-8"))["words"]
        vectors = KeyedVectors(vector_size)
        vectors.add_vectors(words, load_file(str(base.with_suffix(".safetensors")))["vectors"].numpy())
        return Word2VecNeighbours(vectors, k, tag)
    sentences = [t.lower().split() for t in texts]
    model = Word2Vec(sentences, vector_size=vector_size, window=window, min_count=min_count, sg=1,
                     epochs=epochs, seed=seed, workers=1, hashfxn=_stable_hash)
    if base is not None:
        _save_vectors(base, model.wv)
    return Word2VecNeighbours(model.wv, k, tag)


def _save_vectors(base: Path, wv) -> None:
    """Vectors as safetensors, words as JSON; each written to a temp name, then renamed."""
    from safetensors.torch import save_file

    with atomic_path(base.with_suffix(".safetensors")) as tmp:
        save_file({"vectors": torch.from_numpy(wv.vectors.copy())}, str(tmp))
    write_json_atomic(base.with_suffix(".json"), {"words": list(wv.index_to_key)}, indent=None)
