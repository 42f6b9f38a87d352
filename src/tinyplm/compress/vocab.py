"""Vocabulary trimming: keep the pieces the task's data uses (plus the specials).

The embedding table is most of a small BERT's bytes (30,522 x 384 floats are 47 MB of MiniLM's
91 MB); a task uses a fraction of the pieces. :func:`trim_vocab` keeps those rows, in their old
order, and rewrites the fast tokenizer (``tokenizer.json``) to hold exactly the kept pieces, for
each kind of tokenizer model (:data:`KINDS`):

- WordPiece (BERT, DistilBERT, ELECTRA, MPNet): the used pieces and the continuation characters
  (``##c``) of every character in them. WordPiece tokenises each word greedily from its start,
  longest piece first, so a word whose pieces were all kept splits the same, and so do the first
  pieces of a word cut by the window: the rest falls back to characters instead of turning the
  whole word into ``[UNK]``.
- BPE (RoBERTa, ModernBERT; byte-level or not): the used pieces, every piece a kept piece is merged
  from (so each merge that built a kept piece still can), the single characters (unseen text still
  tokenises), and the merges among kept pieces, in their old ranks: the merges a word's pieces
  came from all remain and keep their order, so the word splits the same.
- Unigram (SentencePiece: XLM-RoBERTa, CamemBERT, ALBERT): the used pieces and the single
  characters, with their scores; the best segmentation of a word whose pieces were kept is still
  the best, as only alternatives were removed.

Texts longer than ``max_length``. The model only ever sees the window: training and evaluation
read the truncated encodings, and prediction tokenises a text whole, then truncates it. So the
rule is: keep the pieces of the windows (the encodings as the model sees them) and check the
trimmed tokenizer on that same view. Keeping what the untruncated texts need instead would keep
rows the model never reads, and checking on untruncated texts refused every text longer than the
window. Two things past the window still decide what falls inside it, and :func:`missing` finds
them in the texts :func:`trim_vocab` is shown, which keeps the pieces and trims again:

- a word the window cuts: BPE and Unigram segment a word as a whole, so its first pieces can
  change when its later ones are gone; WordPiece turns a word it cannot finish into ``[UNK]``.
  Where the trimmed tokenizer splits such a word's start otherwise, the word is kept whole.
  (WordPiece's ``##c`` above let most cut words finish, shown or not.)
- a pair: ``longest_first`` truncation shares the window by the two parts' whole lengths, so a
  part that splits into another number of pieces past the window moves the cut. Such a part is
  kept whole.

Pieces past the window are otherwise dropped. At prediction, a text whose window holds a piece
that was not kept reads it as ``[UNK]`` or as shorter kept pieces (and its window may then end
elsewhere): the trade-off of trimming, not an error.

:func:`trim_vocab` then re-encodes the data with the trimmed tokenizer, by the same function and
truncation that made the encodings, and checks every window holds the same pieces, renumbered;
it raises ``ModelError`` naming the text and the piece if not. Other tokenizer models raise
``ModelError`` naming them.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from tinyplm.errors import ModelError
from tinyplm.models import roles
from tinyplm.models.factorized import FactorizedEmbedding
from tinyplm.tasks.encoding import Encoded


def used_ids(encodings: Iterable[Encoded], tokenizer) -> list[int]:
    """Sorted ids of every piece in ``encodings`` and every special token of ``tokenizer``."""
    ids: set[int] = set(int(i) for i in tokenizer.all_special_ids)
    for enc in encodings:
        for row in enc.input_ids:
            ids.update(row)
    return sorted(ids)


def _wordpiece(model: dict, used: set[int]) -> set[int]:
    """``used`` with the continuation piece (``##c``) of every character of a used piece."""
    vocab, mark = model["vocab"], model.get("continuing_subword_prefix") or "##"
    by_id = {i: t for t, i in vocab.items()}
    chars = {c for i in used if i in by_id for c in by_id[i].removeprefix(mark)}
    return set(used) | {vocab[mark + c] for c in chars if mark + c in vocab}


def _bpe(model: dict, used: set[int]) -> set[int]:
    """``used`` with the pieces kept pieces are merged from, and the single characters."""
    vocab = model["vocab"]
    parts: dict[str, tuple[str, str]] = {}
    for merge in model.get("merges") or []:
        a, b = merge.split(" ", 1) if isinstance(merge, str) else merge
        parts.setdefault(a + b, (a, b))
    by_id = {i: t for t, i in vocab.items()}
    keep = set(used) | {i for t, i in vocab.items() if len(t) == 1}
    todo = [by_id[i] for i in keep if i in by_id]
    while todo:
        for piece in parts.get(todo.pop(), ()):
            if piece in vocab and vocab[piece] not in keep:
                keep.add(vocab[piece])
                todo.append(piece)
    return keep


def _unigram(model: dict, used: set[int]) -> set[int]:
    """``used`` with the single-character pieces (a word-start mark counts as none) and ``unk_id``."""
    chars = {i for i, (piece, _score) in enumerate(model["vocab"]) if len(piece.lstrip("\u2581")) <= 1}
    return set(used) | chars | ({model["unk_id"]} if model.get("unk_id") is not None else set())


#: tokenizer.json model type -> which ids to keep, given those the data used (added tokens aside).
KINDS = {"WordPiece": _wordpiece, "BPE": _bpe, "Unigram": _unigram}


def trim_refusal(tokenizer) -> str | None:
    """Why ``tokenizer`` cannot be trimmed (not a fast one, or a model type :data:`KINDS` lacks),
    in words; None when it can. Known from the tokenizer alone, so a run checks it before training."""
    backend = getattr(tokenizer, "backend_tokenizer", None) if getattr(tokenizer, "is_fast", False) else None
    if backend is None:
        return f"its tokenizer ({type(tokenizer).__name__}) is not a fast one (no tokenizer.json)"
    kind = json.loads(backend.to_str()).get("model", {}).get("type")
    if kind not in KINDS:
        return f"its tokenizer's model is {kind}; trimming supports {', '.join(KINDS)} tokenizers"
    return None


def _tokenizer_json(folder: Path) -> dict:
    tj = folder / "tokenizer.json"
    if not tj.is_file():
        raise ModelError("vocabulary trimming needs a fast tokenizer (tokenizer.json)")
    return json.loads(tj.read_text(encoding="utf-8"))


def _kept_ids(folder: Path, used: set[int]) -> list[int]:
    """Sorted ids to keep for the tokenizer saved in ``folder`` (see :data:`KINDS`); the added
    tokens among ``used`` (the specials) are kept as they are."""
    data = _tokenizer_json(folder)
    model = data.get("model", {})
    if model.get("type") not in KINDS:
        raise ModelError(f"vocabulary trimming supports {', '.join(KINDS)} tokenizers, not {model.get('type')}")
    added = {t["id"] for t in data.get("added_tokens", [])}
    return sorted(KINDS[model["type"]](model, used - added) | (used & added))


def _remap_model(model: dict, new_id: dict[int, int]) -> None:
    """Renumber the tokenizer model's vocabulary to the kept ids (``new_id``: old -> new, in order)."""
    if model["type"] == "Unigram":
        model["vocab"] = [model["vocab"][old] for old in new_id]
        if model.get("unk_id") is not None:
            model["unk_id"] = new_id[model["unk_id"]]
        return
    by_id = {i: t for t, i in model["vocab"].items()}
    model["vocab"] = {by_id[old]: new for old, new in new_id.items()}
    if model["type"] == "BPE":
        kept = model["vocab"]
        pairs = [m.split(" ", 1) if isinstance(m, str) else m for m in model.get("merges") or []]
        model["merges"] = [[a, b] for a, b in pairs if a in kept and b in kept and a + b in kept]


def _remap_post(post: dict, new_id: dict[int, int]) -> None:
    """Renumber the special-token ids of a post-processor (a Sequence of them, or one)."""
    for step in post.get("processors") or [post]:
        for special in (step.get("special_tokens") or {}).values():
            special["ids"] = [new_id[i] for i in special["ids"]]
        for key in ("sep", "cls"):  # RoBERTa / BERT processing: [token, id]
            if isinstance(step.get(key), list):
                step[key] = [step[key][0], new_id[step[key][1]]]


def _remap_tokenizer_files(folder: Path, keep: list[int]) -> None:
    new_id = {old: new for new, old in enumerate(keep)}
    data = _tokenizer_json(folder)
    _remap_model(data["model"], new_id)
    data["added_tokens"] = [{**t, "id": new_id[t["id"]]} for t in data.get("added_tokens", []) if t["id"] in new_id]
    _remap_post(data.get("post_processor") or {}, new_id)
    (folder / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    for stale in ("vocab.json", "merges.txt", "spiece.model", "sentencepiece.bpe.model", "vocab.txt"):
        (folder / stale).unlink(missing_ok=True)  # tokenizer.json is the tokenizer now
    if data["model"]["type"] == "WordPiece":
        by_new = {i: t for t, i in data["model"]["vocab"].items()}
        (folder / "vocab.txt").write_text("".join(by_new[i] + "\n" for i in range(len(keep))), encoding="utf-8")
    tc = folder / "tokenizer_config.json"
    if tc.is_file():
        cfg = json.loads(tc.read_text(encoding="utf-8"))
        if "added_tokens_decoder" in cfg:
            cfg["added_tokens_decoder"] = {str(new_id[int(k)]): v for k, v in cfg["added_tokens_decoder"].items()
                                           if int(k) in new_id}
        tc.write_text(json.dumps(cfg, ensure_ascii=False, indent=2), encoding="utf-8")


@torch.no_grad()
def move_positions(embeddings: nn.Module, pad: int) -> None:
    """Make a RoBERTa-style ``embeddings`` (positions counted from ``padding_idx + 1``) count from the
    new padding id ``pad``: the position rows move with it, so every token keeps its position vector.
    Embeddings without a ``padding_idx`` (BERT, DeBERTa: positions from 0 or relative) are left as is."""
    old = getattr(embeddings, "padding_idx", None)
    table = getattr(embeddings, "position_embeddings", None)
    if old is None or old == pad or not isinstance(table, nn.Embedding):
        return
    rows = table.num_embeddings - max(old, pad)  # the padding row and the positions both numberings hold
    weight = table.weight.detach().clone()
    weight[pad: pad + rows] = table.weight[old: old + rows]
    table.weight.copy_(weight)
    embeddings.padding_idx = table.padding_idx = pad


def _trim_table(model: nn.Module, keep: list[int], pad: int | None) -> None:
    """Keep rows ``keep`` of the word table (of its V x E factor when factorized), in order; the
    config's vocabulary size and padding id follow, and RoBERTa-style positions move with the pad."""
    words = roles.word_embeddings(model)
    factorized = isinstance(words, FactorizedEmbedding)  # trim the V x E table, keep the projection
    table = words.table if factorized else words
    if not isinstance(table, nn.Embedding):
        raise ModelError(f"cannot trim word embeddings of type {type(table).__name__}")
    new = nn.Embedding(len(keep), table.embedding_dim)
    with torch.no_grad():
        new.weight.copy_(table.weight.detach().index_select(0, torch.tensor(keep)))
    new.padding_idx = keep.index(pad) if pad in keep else None
    if factorized:
        words.table = new
    else:
        roles.set_word_embeddings(model, new)
    model.config.vocab_size = len(keep)
    if pad is not None:
        model.config.pad_token_id = keep.index(pad)
        move_positions(roles.embeddings(model), keep.index(pad))


@dataclass(frozen=True)
class Parts:
    """Every part of some (text, pair) texts, tokenised whole by the untrimmed tokenizer, no specials."""

    ids: list[list[int]]  # per part, its pieces
    words: list[list[int | None]]  # per part, the word each piece belongs to
    paired: list[bool]  # per part, whether it is one of a pair's two parts
    strings: list[str]

    @classmethod
    def of(cls, tokenizer, texts: Iterable[tuple[str, str | None]]) -> Parts:
        parts = [(part, pair is not None) for text, pair in texts for part in (text, pair) if part]
        if not parts:
            return cls([], [], [], [])
        out = tokenizer([p for p, _ in parts], add_special_tokens=False)
        return cls([list(x) for x in out["input_ids"]], [out.word_ids(i) for i in range(len(parts))],
                   [paired for _, paired in parts], [p for p, _ in parts])


def missing(parts: Parts, used: set[int], keep: list[int], new_tok) -> set[int]:
    """The pieces ``new_tok`` (trimmed to ``keep``) lacks to give every part its window again.

    A part's window is a prefix of its pieces that ends before its first piece outside ``used``
    (the windows' pieces). The words before that piece are kept whole, so they split the same; the
    word holding it (the word the window cuts) may not: if ``new_tok`` splits the part otherwise
    before that piece, the word's pieces are missing. A pair's part that ``new_tok`` splits into
    another number of pieces is missing whole, as ``longest_first`` shares the window by length."""
    if not parts.ids:
        return set()
    new_id = {old: new for new, old in enumerate(keep)}
    extra: set[int] = set()
    for ids, words, paired, new in zip(parts.ids, parts.words, parts.paired,
                                       new_tok(parts.strings, add_special_tokens=False)["input_ids"], strict=True):
        first = next((j for j, i in enumerate(ids) if i not in used), None)
        if first is None:  # every piece is a window's: the part splits the same
            continue
        if [new_id[i] for i in ids[:first]] != list(new[:first]):
            cut = words[first]
            extra.update([ids[first]] if cut is None else [i for i, w in zip(ids, words, strict=True) if w == cut])
        if paired and len(new) != len(ids):
            extra.update(ids)
    return extra - set(keep)


def _trimmed_tokenizer(source: Path, folder: Path, keep: list[int]):
    """The tokenizer saved in ``source``, rewritten in ``folder`` to hold only ``keep``."""
    from transformers import AutoTokenizer

    shutil.copytree(source, folder)
    _remap_tokenizer_files(folder, keep)
    return AutoTokenizer.from_pretrained(folder, trust_remote_code=False)


#: What the user can do when a window changes (see :func:`trim_vocab`).
_WHAT_TO_DO = ("raise task.max_length so the text fits, cut such texts to the window before training, "
               "or leave trim_vocab out")


def _mismatch(name: str, row: int, before: tuple[list[int], list[int]], after: tuple[list[int], list[int]],
              new_id: dict[int, int], old_tok, new_tok) -> ModelError:
    """The error for a window that changed: ``before`` (old ids, types), ``after`` (new ids, types)."""
    (ids, types), (new_ids, new_types) = before, after
    pairs = zip([new_id[i] for i in ids], new_ids, types, new_types, strict=False)  # up to the shorter
    k = next((j for j, (a, b, c, d) in enumerate(pairs) if (a, c) != (b, d)), min(len(ids), len(new_ids)))
    was = repr(old_tok.convert_ids_to_tokens(ids[k])) if k < len(ids) else "the end of the window"
    now = repr(new_tok.convert_ids_to_tokens(new_ids[k])) if k < len(new_ids) else "the end of the window"
    text = old_tok.decode(ids, skip_special_tokens=True)
    return ModelError(
        f"trimmed tokenizer splits {text[:80]!r} ({name} row {row}, as the model sees it) differently: "
        f"piece {k}, {was}, became {now}; vocabulary trimming aborted. The text needs a piece past "
        f"task.max_length that was not kept (a word the window cuts, or a pair's part that shares the "
        f"window by its length): {_WHAT_TO_DO}")


def _check(before: dict[str, Encoded], after: dict[str, Encoded], keep: list[int], old_tok, new_tok) -> None:
    """Raise ``ModelError`` unless ``after`` holds the windows of ``before``, renumbered to ``keep``."""
    new_id = {old: new for new, old in enumerate(keep)}
    for name, old in before.items():
        new = after.get(name)
        count = 0 if new is None else len(new)
        if count != len(old):
            raise ModelError(f"trimmed tokenizer cuts the {name} data into {count} windows, not {len(old)}: a long "
                             f"text splits into other pieces; vocabulary trimming aborted: {_WHAT_TO_DO}")
        for row, (ids, types) in enumerate(zip(old.input_ids, old.token_type_ids, strict=True)):
            new_ids, new_types = list(new.input_ids[row]), list(new.token_type_ids[row])
            if [new_id[i] for i in ids] != new_ids or list(types) != new_types:
                raise _mismatch(name, row, (list(ids), list(types)), (new_ids, new_types), new_id, old_tok, new_tok)


@dataclass(frozen=True)
class Trimmed:
    """What :func:`trim_vocab` made: the model with its smaller table, the trimmed tokenizer, and
    the data re-encoded with it (the same keys as the encodings given)."""

    model: nn.Module
    tokenizer: object
    encodings: dict[str, Encoded]


#: How often :func:`trim_vocab` adds what the texts it is shown miss (:func:`missing`) and trims again.
ROUNDS = 8


def trim_vocab(model: nn.Module, tokenizer, encodings: dict[str, Encoded], texts: list[tuple[str, str | None]],
               encode: Callable[[object], dict[str, Encoded]]) -> Trimmed:
    """Keep only the pieces of the windows in ``encodings`` (and what the tokenizer kind needs
    besides, see :data:`KINDS` and the module docstring) -> :class:`Trimmed`.

    ``encodings``: the data as the model sees it (truncated to its window), by name (train, dev);
    ``texts``: the (text, pair) texts behind them, whole; ideally all, else a sample: what a text
    needs past its window (:func:`missing`) is kept for these texts only. ``encode``: the function
    that made ``encodings``, given a tokenizer (the same truncation, the same keys). Every window
    it makes with the trimmed tokenizer is checked against ``encodings`` before the model is
    touched. Factorized embeddings lose rows of their V x E table. Raises ``ModelError`` when a
    window changes (naming the text and the piece) or the tokenizer is not a fast one of
    :data:`KINDS`.
    """
    used = set(used_ids(encodings.values(), tokenizer))
    parts = Parts.of(tokenizer, texts)
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "source"
        tokenizer.save_pretrained(source)
        keep = _kept_ids(source, used)
        new_tok = _trimmed_tokenizer(source, Path(tmp) / "trimmed0", keep)
        for n in range(1, ROUNDS + 1):
            grow = missing(parts, used, keep, new_tok)
            if not grow:
                break
            keep = _kept_ids(source, set(keep) | grow)
            new_tok = _trimmed_tokenizer(source, Path(tmp) / f"trimmed{n}", keep)
    after = encode(new_tok)
    _check(encodings, after, keep, tokenizer, new_tok)
    _trim_table(model, keep, tokenizer.pad_token_id)
    return Trimmed(model, new_tok, after)
