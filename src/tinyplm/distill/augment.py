"""TinyBERT data augmentation: N noisy copies of each example, labels unchanged.

For every sentence (``text``, and ``text_pair`` on its own), split on whitespace into words (a
simplification of TinyBERT's basic tokenizer: ``"movie,"`` stays one word, and the untouched
words of a copy keep their spelling). Each word is tokenised with the teacher's WordPiece
tokenizer:

* a **single-piece** word gets the top-K masked-LM predictions at its position when it alone is
  masked (one ``[MASK]`` per row; the rows of many sentences go through the MLM in length-sorted
  batches under bf16 autocast, and the head is applied only at the masked positions);
* a **multi-piece** word gets its K nearest neighbours from a static embedding space (a
  :class:`NeighbourSource`: :class:`EmbeddingNeighbours` from the teacher's input embeddings, or
  :func:`word2vec_neighbours` trained on a corpus with gensim);
* special tokens (``tokenizer.all_special_tokens``, bracketed vocab tokens such as ``[unused0]``,
  words whose pieces include a special id such as ``[UNK]``) get no candidates and never change.

Candidates exclude special and bracketed tokens, ``##`` sub-pieces and the original word. They are
computed once per distinct sentence; then copy ``c`` of example ``e`` replaces each word that has
candidates, independently with probability ``p``, by a uniformly drawn candidate, using
``random.Random(hash(seed, e, c))`` -- so the draws depend only on the seed, never on batching
(the candidates themselves can differ at float-rounding level with another ``batch_size``).
``replacement_rate`` = replaced / draws over words *that have candidates* (words without any
are never replaced and not counted). The originals come first, then ``copies`` copies of each
example in example order. Results are cached on disk under ``cache_dir/augment/<key>.jsonl``.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Protocol

import torch

from tinyplm.train.progress import JsonlLog, make_progress
from tinyplm.errors import TinyplmError
from tinyplm.files import atomic_open, atomic_path, write_json_atomic
from tinyplm.models.infer import autocast, use_bf16
from tinyplm.tasks.base import Example

_BRACKETED = re.compile(r"^\[[^\]\s]+\]$")
CACHE_VERSION = 1
#: Examples per chunk: candidates for one chunk are computed together (length-sorted rows).
CHUNK_EXAMPLES = 512


@dataclass(frozen=True)
class AugmentSpec:
    """TinyBERT augmentation settings (defaults: TinyBERT's GLUE values, N=20 for SST-2/QNLI,
    use ``copies=30`` for the small tasks)."""

    copies: int = 20
    p: float = 0.4
    top_k: int = 15
    neighbours: int = 15
    seed: int = 42
    batch_size: int = 128
    max_length: int = 128

    def __post_init__(self) -> None:
        if self.copies < 0 or not 0.0 <= self.p <= 1.0 or min(self.top_k, self.neighbours, self.batch_size) < 1:
            raise TinyplmError(f"bad augmentation settings {self}: need copies >= 0, 0 <= p <= 1, top_k, "
                               "neighbours, batch_size >= 1")
        if self.max_length < 3:
            raise TinyplmError(f"augmentation max_length must be >= 3, got {self.max_length}")


@dataclass(frozen=True)
class AugmentResult:
    """Originals then copies; ``sentences_per_s`` = copies produced / ``seconds`` (whole call)."""

    examples: list[Example]
    seconds: float
    sentences_per_s: float
    replacement_rate: float
    cached: bool = False
    mlm_rows: int = 0


class NeighbourSource(Protocol):
    """Static-embedding neighbours for multi-piece words."""

    def neighbours(self, word: str) -> list[str]:
        """Up to K nearest words to ``word`` (never ``word`` itself); [] when unknown."""
        ...

    def fingerprint(self) -> str:
        """Identifies the embedding space and K (part of the augmentation cache key)."""
        ...


def banned_tokens(tokenizer, size: int) -> torch.Tensor:
    """``(size,)`` bool: ids never proposed (specials, bracketed ``[..]``, ``##`` pieces, ids
    the tokenizer lacks)."""
    banned = torch.ones(size, dtype=torch.bool)
    for tok, i in tokenizer.get_vocab().items():
        if i < size:
            banned[i] = tok.startswith("##") or bool(_BRACKETED.match(tok))
    banned[[i for i in tokenizer.all_special_ids if i < size]] = True
    return banned


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


@dataclass
class _Sentence:
    """A sentence's words, their WordPiece ids, and (filled later) each word's candidates."""

    words: list[str]
    pieces: list[list[int]]
    candidates: list[list[str]]


class _Vocabulary:
    """Per-word WordPiece ids (cached) and which words must never change."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.special_ids = set(tokenizer.all_special_ids)
        vocab = tokenizer.get_vocab()
        self.protected = set(tokenizer.all_special_tokens) | {t for t in vocab if _BRACKETED.match(t)}
        self._pieces: dict[str, list[int]] = {}

    def sentence(self, text: str) -> _Sentence:
        words = text.split()
        new = [w for w in dict.fromkeys(words) if w not in self._pieces]
        if new:
            ids = self.tokenizer(new, add_special_tokens=False)["input_ids"]
            self._pieces.update(zip(new, (list(x) for x in ids)))
        pieces = [self._pieces[w] for w in words]
        return _Sentence(words, pieces, [[] for _ in words])

    def frozen(self, word: str, pieces: list[int]) -> bool:
        """True for special tokens and words that cannot be changed."""
        return not pieces or word in self.protected or any(i in self.special_ids for i in pieces)


def mlm_rows(sent: _Sentence, vocab: _Vocabulary, tokenizer, max_length: int) -> list[tuple[int, list[int], int, int]]:
    """One row per single-piece word: (word index, ids with that word as [MASK] between [CLS] and
    [SEP], mask position, original id). Long sentences are windowed around the word."""
    flat = [i for p in sent.pieces for i in p]
    room, rows, offset = max_length - 2, [], 0
    for w, (word, pieces) in enumerate(zip(sent.words, sent.pieces)):
        if len(pieces) == 1 and not vocab.frozen(word, pieces):
            start = min(max(0, offset - room // 2), max(0, len(flat) - room))
            window = flat[start : start + room]
            window[offset - start] = tokenizer.mask_token_id
            rows.append((w, [tokenizer.cls_token_id, *window, tokenizer.sep_token_id], offset - start + 1, pieces[0]))
        offset += len(pieces)
    return rows


@torch.inference_mode()
def mlm_top_k(mlm, rows: list[list[int]], positions: list[int], originals: list[int], banned: torch.Tensor,
              k: int, batch_size: int, bf16: bool, pad_id: int) -> list[list[int]]:
    """Top-``k`` ids at one masked position per row, in row order (length-sorted batches).

    For BERT (``mlm.bert`` + ``mlm.cls``) the head runs only at the masked positions
    ``(batch, hidden) -> (batch, vocab)``; other models fall back to full ``logits``.
    """
    order = sorted(range(len(rows)), key=lambda r: len(rows[r]))
    out: list[list[int]] = [[] for _ in rows]
    for b in range(0, len(order), batch_size):
        idx = order[b : b + batch_size]
        width = max(len(rows[r]) for r in idx)
        ids = torch.full((len(idx), width), pad_id, dtype=torch.long)  # (batch, seq)
        mask = torch.zeros((len(idx), width), dtype=torch.long)  # a [PAD] word in a text stays visible
        for j, r in enumerate(idx):
            ids[j, : len(rows[r])] = torch.tensor(rows[r])
            mask[j, : len(rows[r])] = 1
        arange = torch.arange(len(idx))
        pos = torch.tensor([positions[r] for r in idx])
        with autocast(bf16):
            if hasattr(mlm, "bert") and hasattr(mlm, "cls"):
                hidden = mlm.bert(input_ids=ids, attention_mask=mask).last_hidden_state[arange, pos]
                logits = mlm.cls(hidden).float()  # (batch, vocab)
            else:
                logits = mlm(input_ids=ids, attention_mask=mask).logits[arange, pos].float()
        logits[:, banned[: logits.shape[-1]]] = float("-inf")
        logits[arange, torch.tensor([originals[r] for r in idx])] = float("-inf")
        allowed = int((~banned[: logits.shape[-1]]).sum()) - 1
        top = logits.topk(max(0, min(k, allowed)), dim=-1).indices.tolist()
        for j, r in enumerate(idx):
            out[r] = top[j]
    return out


def fill_candidates(sents: list[_Sentence], mlm, tokenizer, vocab: _Vocabulary, spec: AugmentSpec,
                    neighbours: NeighbourSource, banned: torch.Tensor, bf16: bool) -> int:
    """Fill every sentence's per-word candidates (MLM for single-piece, neighbours for multi-piece
    words) in place; returns the number of MLM rows run."""
    rows = [(s, row) for s in sents for row in mlm_rows(s, vocab, tokenizer, spec.max_length)]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    top = mlm_top_k(mlm, [r[1] for _, r in rows], [r[2] for _, r in rows], [r[3] for _, r in rows],
                    banned, spec.top_k, spec.batch_size, bf16, pad) if rows else []
    for (sent, row), ids in zip(rows, top):
        sent.candidates[row[0]] = tokenizer.convert_ids_to_tokens(ids)
    for sent in sents:
        for w, (word, pieces) in enumerate(zip(sent.words, sent.pieces)):
            if len(pieces) > 1 and not vocab.frozen(word, pieces):
                sent.candidates[w] = list(neighbours.neighbours(word))
    return len(rows)


def copy_rng(seed: int, example: int, copy: int) -> random.Random:
    """The RNG of one copy: depends only on (seed, example index, copy index)."""
    digest = hashlib.sha256(f"{seed}/{example}/{copy}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def draw(sent: _Sentence, p: float, rng: random.Random) -> tuple[str, int, int]:
    """One noisy copy -> (text, words with candidates, words replaced)."""
    words, eligible, replaced = list(sent.words), 0, 0
    for w, cands in enumerate(sent.candidates):
        if cands:
            eligible += 1
            if rng.random() < p:
                words[w] = rng.choice(cands)
                replaced += 1
    return " ".join(words), eligible, replaced


def model_fingerprint(model: torch.nn.Module) -> str:
    """sha256 over a model's parameter and buffer bytes (by name)."""
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(t.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def cache_key(examples: list[Example], tokenizer, mlm_fp: str, spec: AugmentSpec, neighbours_fp: str,
              bf16: bool) -> str:
    """sha256 of vocab, MLM weights, spec, neighbour space, precision and every input example."""
    h = hashlib.sha256(f"v{CACHE_VERSION}/{mlm_fp}/{neighbours_fp}/{bf16}/".encode())
    h.update(json.dumps(sorted(tokenizer.get_vocab().items())).encode())
    h.update(json.dumps(asdict(spec), sort_keys=True).encode())
    h.update(json.dumps([[e.text, e.text_pair, e.label, e.line] for e in examples]).encode())
    return h.hexdigest()[:32]


def _save(path: Path, examples: list[Example], rate: float) -> None:
    """Atomically write a header line then one JSON object per example."""
    with atomic_open(path) as fh:
        fh.write(json.dumps({"version": CACHE_VERSION, "count": len(examples), "replacement_rate": rate}) + "\n")
        for e in examples:
            fh.write(json.dumps({"text": e.text, "text_pair": e.text_pair, "label": e.label, "line": e.line}) + "\n")


def _load(path: Path) -> tuple[list[Example], float] | None:
    """Read a cache file; None when absent, truncated or of another version."""
    if not path.is_file():
        return None
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
        head = json.loads(lines[0])
        rows = [json.loads(x) for x in lines[1:]]
    except (OSError, ValueError, IndexError):
        return None
    if head.get("version") != CACHE_VERSION or head.get("count") != len(rows):
        return None
    return [Example(r["text"], r["text_pair"], r["label"], r["line"]) for r in rows], float(head["replacement_rate"])


def _finish(examples: list[Example], n_orig: int, start: float, rate: float, cached: bool, rows: int,
            log: JsonlLog | None) -> AugmentResult:
    seconds = max(time.perf_counter() - start, 1e-9)
    made = len(examples) - n_orig
    result = AugmentResult(examples, seconds, made / seconds, rate, cached, rows)
    if log is not None:
        log.write(event="augment", sentences=made, originals=n_orig, seconds=round(seconds, 3),
                  sentences_per_s=round(result.sentences_per_s, 1), replacement_rate=rate, cached=cached,
                  mlm_rows=rows)
    return result


def augment(examples: list[Example], mlm, tokenizer, spec: AugmentSpec, neighbours: NeighbourSource,
            cache_dir: Path | None = None, log: JsonlLog | None = None, progress: bool = True, *,
            mlm_fingerprint: str | None = None, precision: str = "auto") -> AugmentResult:
    """TinyBERT augmentation of ``examples`` -> originals, then ``spec.copies`` copies of each.

    ``mlm`` is a masked LM (``BertForMaskedLM``) with ``tokenizer``; ``neighbours`` serves
    multi-piece words. With ``cache_dir`` the result is stored under ``cache_dir/augment/`` and a
    second call with the same inputs loads it without running the MLM (``mlm_fingerprint`` skips
    hashing the weights). Labels, ``line`` and whether ``text_pair`` is set are kept.
    """
    if tokenizer.mask_token_id is None or tokenizer.cls_token_id is None:
        raise TinyplmError(f"augmentation needs a BERT-style tokenizer with [MASK] and [CLS] ({type(tokenizer).__name__})")
    start, bf16 = time.perf_counter(), use_bf16(precision)
    path = None
    if cache_dir is not None:
        fp = mlm_fingerprint or model_fingerprint(mlm)
        path = Path(cache_dir) / "augment" / f"{cache_key(examples, tokenizer, fp, spec, neighbours.fingerprint(), bf16)}.jsonl"
        hit = _load(path)
        if hit is not None:
            return _finish(hit[0], len(examples), start, hit[1], True, 0, log)
    vocab, banned = _Vocabulary(tokenizer), banned_tokens(tokenizer, mlm.config.vocab_size)
    was_training, memo = mlm.training, {}
    mlm.eval()
    copies: list[Example] = []
    eligible = replaced = rows = 0
    with make_progress(progress) as bar:
        task = bar.add_task("augment", total=len(examples), loss=float("nan"), eps=0.0)
        for lo in range(0, len(examples), CHUNK_EXAMPLES):
            chunk = examples[lo : lo + CHUNK_EXAMPLES]
            texts = {t for e in chunk for t in (e.text, e.text_pair) if t is not None and t not in memo}
            fresh = {t: vocab.sentence(t) for t in texts}
            rows += fill_candidates(list(fresh.values()), mlm, tokenizer, vocab, spec, neighbours, banned, bf16)
            memo.update(fresh)
            for e_idx, ex in enumerate(chunk, start=lo):
                for c in range(spec.copies):
                    rng = copy_rng(spec.seed, e_idx, c)
                    text, n1, r1 = draw(memo[ex.text], spec.p, rng)
                    pair, n2, r2 = draw(memo[ex.text_pair], spec.p, rng) if ex.text_pair is not None else (None, 0, 0)
                    copies.append(replace(ex, text=text, text_pair=pair))
                    eligible, replaced = eligible + n1 + n2, replaced + r1 + r2
            bar.update(task, advance=len(chunk), eps=len(copies) / (time.perf_counter() - start),
                       description=f"augment (replaced {replaced / max(eligible, 1):.3f})")
    mlm.train(was_training)
    rate = replaced / eligible if eligible else 0.0
    out = list(examples) + copies
    if path is not None:
        _save(path, out, rate)
    return _finish(out, len(examples), start, rate, False, rows, log)
