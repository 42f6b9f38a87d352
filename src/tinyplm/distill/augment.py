"""TinyBERT data augmentation: N noisy copies of each example, labels unchanged.

For every sentence (``text``, and ``text_pair`` on its own unless ``spec.pair`` is ``keep``: page
context around a sentence stays as the task built it, see :func:`resolve_pair`), split on
whitespace into words (a
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

Candidates exclude special and bracketed tokens, ``##`` sub-pieces and the original word (and,
with ``spec.candidates: same_kind``, those of another kind than the word: punctuation for a word
with letters, or the other way round). They are
computed once per distinct sentence; then copy ``c`` of example ``e`` replaces each word that has
candidates, independently with probability ``p``, by a uniformly drawn candidate, using
``random.Random(hash(seed, e, c))`` -- so the draws depend only on the seed, never on batching
(the candidates themselves can differ at float-rounding level with another ``batch_size``).
``replacement_rate`` = replaced / draws over words *that have candidates* (words without any
are never replaced and not counted). The originals come first, then ``copies`` copies of each
example in example order. Results are cached on disk under ``cache_dir/augment/<key>.jsonl``.

The candidates are found in :mod:`tinyplm.distill.candidates`, the neighbour sources live in
:mod:`tinyplm.distill.neighbours` (and are importable from here too); this module draws the copies
and caches them.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from tinyplm.config.schema import AugmentSpec
from tinyplm.distill.candidates import Sentence, Vocabulary, banned_tokens, fill_candidates, lettered_tokens
from tinyplm.distill.neighbours import (
    EmbeddingNeighbours,
    NeighbourSource,
    Word2VecNeighbours,
    word2vec_neighbours,
)
from tinyplm.errors import TinyplmError
from tinyplm.files import atomic_open
from tinyplm.models import roles
from tinyplm.models.infer import use_bf16
from tinyplm.tasks.base import Example
from tinyplm.train.progress import JsonlLog, make_progress

__all__ = [  # the neighbour sources are defined in tinyplm.distill.neighbours; callers import them here too
    "AugmentResult", "AugmentSpec", "SHAPING", "EmbeddingNeighbours", "NeighbourSource", "Word2VecNeighbours",
    "augment", "augmented_share", "cache_key", "copy_rng", "draw", "model_fingerprint", "resolve_pair",
    "word2vec_neighbours",
]

CACHE_VERSION = 1
#: Examples per chunk: candidates for one chunk are computed together (length-sorted rows).
CHUNK_EXAMPLES = 512


#: The settings that shape the copies (and so key the cache); ``mlm`` and the word2vec options
#: reach ``augment`` as the loaded model and the neighbour source.
SHAPING = ("copies", "p", "top_k", "neighbours", "seed", "batch_size")


@dataclass(frozen=True)
class AugmentResult:
    """Originals then copies; ``sentences_per_s`` = copies produced / ``seconds`` (whole call)."""

    examples: list[Example]
    seconds: float
    sentences_per_s: float
    replacement_rate: float
    cached: bool = False
    mlm_rows: int = 0


def copy_rng(seed: int, example: int, copy: int) -> random.Random:
    """The RNG of one copy: depends only on (seed, example index, copy index)."""
    digest = hashlib.sha256(f"{seed}/{example}/{copy}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def draw(sent: Sentence, p: float, rng: random.Random) -> tuple[str, int, int]:
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


def resolve_pair(spec: AugmentSpec, page_context: bool) -> AugmentSpec:
    """``spec`` with ``pair: auto`` settled for a task -> ``keep`` when the task's text pairs are
    page context (the sentences around each one, e.g. ``task.context_sentences``), else
    ``augment``. Page context is not part of the example: TinyBERT's copies vary the sentence, and
    masking every word of four sentences around one would cost about five times the masked-LM rows."""
    if spec.pair != "auto":
        return spec
    return spec.model_copy(update={"pair": "keep" if page_context else "augment"})


def cache_key(examples: list[Example], tokenizer, mlm_fp: str, spec: AugmentSpec, neighbours_fp: str,
              bf16: bool, max_length: int) -> str:
    """sha256 of vocab, MLM weights, the settings that shape the copies, neighbour space,
    precision and every input example."""
    h = hashlib.sha256(f"v{CACHE_VERSION}/{mlm_fp}/{neighbours_fp}/{bf16}/".encode())
    h.update(json.dumps(sorted(tokenizer.get_vocab().items())).encode())
    shaping = {**spec.model_dump(include=set(SHAPING)), "max_length": max_length}
    if spec.pair == "keep":  # only then, so that caches made before the setting existed stay valid
        shaping["pair"] = "keep"
    if spec.candidates != "any":  # likewise
        shaping["candidates"] = spec.candidates
    h.update(json.dumps(shaping, sort_keys=True).encode())
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


def augmented_share(examples: list[Example], min_words: int = 0,
                    max_examples: int | None = None) -> tuple[list[Example], list[Example]]:
    """Split ``examples`` into (those to augment, the rest): the ones whose ``text`` has at least
    ``min_words`` whitespace-separated words, the first ``max_examples`` of them where it is set;
    both lists keep the examples' order."""
    chosen: list[Example] = []
    rest: list[Example] = []
    for e in examples:
        room = max_examples is None or len(chosen) < max_examples
        (chosen if room and len(e.text.split()) >= min_words else rest).append(e)
    return chosen, rest


def _token_masks(tokenizer, size: int, spec: AugmentSpec) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(ids never proposed, which ids hold a letter -- only for ``candidates: same_kind``), each ``(size,)``."""
    return banned_tokens(tokenizer, size), lettered_tokens(tokenizer, size) if spec.candidates == "same_kind" else None


def augment(examples: list[Example], mlm, tokenizer, spec: AugmentSpec, neighbours: NeighbourSource,
            cache_dir: Path | None = None, log: JsonlLog | None = None, progress: bool = True, *,
            max_length: int = 128, mlm_fingerprint: str | None = None, precision: str | None = None) -> AugmentResult:
    """TinyBERT augmentation of ``examples`` -> originals, then ``spec.copies`` copies of each.

    ``spec`` is the recipe's ``augment`` section (its ``mlm`` path is not read here: ``mlm`` is the
    loaded masked LM, with ``tokenizer``); ``neighbours`` serves multi-piece words; sentences are
    cut to ``max_length`` word pieces (at most the LM's positions). With ``cache_dir`` the result is
    stored under ``cache_dir/augment/`` and a second call with the same inputs loads it without running
    the MLM (``mlm_fingerprint`` skips hashing the weights). Labels, ``line`` and whether ``text_pair``
    is set are kept; with ``spec.pair == "keep"`` every copy keeps the example's ``text_pair`` as it
    is (``auto`` is read as ``augment`` here: settle it for the task with :func:`resolve_pair`).
    The masked LM runs in ``precision`` (default: ``spec.precision``).
    """
    if tokenizer.mask_token_id is None or tokenizer.cls_token_id is None:
        raise TinyplmError(f"augmentation needs a BERT-style tokenizer: [MASK] and [CLS] ({type(tokenizer).__name__})")
    start, bf16 = time.perf_counter(), use_bf16(precision or spec.precision)
    max_length = min(max_length, roles.usable_positions(mlm.config.to_dict()) or max_length)  # the LM's positions
    path = None
    if cache_dir is not None:
        fp = mlm_fingerprint or model_fingerprint(mlm)
        key = cache_key(examples, tokenizer, fp, spec, neighbours.fingerprint(), bf16, max_length)
        path = Path(cache_dir) / "augment" / f"{key}.jsonl"
        hit = _load(path)
        if hit is not None:
            return _finish(hit[0], len(examples), start, hit[1], True, 0, log)
    vocab, (banned, lettered) = Vocabulary(tokenizer), _token_masks(tokenizer, mlm.config.vocab_size, spec)
    was_training, memo, keep_pair = mlm.training, {}, spec.pair == "keep"
    mlm.eval()
    copies: list[Example] = []
    eligible = replaced = rows = 0
    with make_progress(progress) as bar:
        task = bar.add_task("augment", total=len(examples), loss=float("nan"), eps=0.0)
        for lo in range(0, len(examples), CHUNK_EXAMPLES):
            chunk = examples[lo : lo + CHUNK_EXAMPLES]
            texts = {t for e in chunk for t in (e.text, None if keep_pair else e.text_pair)
                     if t is not None and t not in memo}
            fresh = {t: vocab.sentence(t) for t in texts}
            rows += fill_candidates(list(fresh.values()), mlm, tokenizer, vocab, neighbours, banned, top_k=spec.top_k,
                                    batch_size=spec.batch_size, max_length=max_length, bf16=bf16,
                                    lettered=lettered)
            memo.update(fresh)
            for e_idx, ex in enumerate(chunk, start=lo):
                for c in range(spec.copies):
                    rng = copy_rng(spec.seed, e_idx, c)
                    text, n1, r1 = draw(memo[ex.text], spec.p, rng)
                    if ex.text_pair is None or keep_pair:
                        pair, n2, r2 = ex.text_pair, 0, 0
                    else:
                        pair, n2, r2 = draw(memo[ex.text_pair], spec.p, rng)
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
