"""Vocabulary trimming: keep the pieces the task's data uses (plus the specials).

The embedding table is most of a small BERT's bytes (30,522 x 384 floats are 47 MB of MiniLM's
91 MB); a task uses a fraction of the pieces. :func:`trim_vocab` keeps those rows, in their old
order, and rewrites the fast tokenizer (``tokenizer.json``) to hold exactly the kept pieces, for
each kind of tokenizer model (:data:`KINDS`):

- WordPiece (BERT, DistilBERT, ELECTRA, MPNet): the used pieces. WordPiece tokenises greedily,
  longest piece first, so text whose pieces were all kept splits the same; unseen words fall back
  to shorter kept pieces or ``[UNK]``.
- BPE (RoBERTa, ModernBERT; byte-level or not): the used pieces, every piece a kept piece is merged
  from (so each merge that built a kept piece still can), the single characters (unseen text still
  tokenises), and the merges among kept pieces, in their old ranks: the merges a text's pieces
  came from all remain and keep their order, so the text splits the same.
- Unigram (SentencePiece: XLM-RoBERTa, CamemBERT, ALBERT): the used pieces and the single
  characters, with their scores; the best segmentation of a text whose pieces were kept is still
  the best, as only alternatives were removed.

:func:`trim_vocab` checks on the data it was given that the new tokenizer produces the same pieces,
renumbered, and raises ``ModelError`` if not. Other tokenizer models raise ``ModelError`` naming them.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import torch
from torch import nn

from tinyplm.errors import ModelError
from tinyplm.models import roles
from tinyplm.models.factorized import FactorizedEmbedding
from tinyplm.tasks.encoding import Encoded


def used_ids(encodings: list[Encoded], tokenizer) -> list[int]:
    """Sorted ids of every piece in ``encodings`` and every special token of ``tokenizer``."""
    ids: set[int] = set(int(i) for i in tokenizer.all_special_ids)
    for enc in encodings:
        for row in enc.input_ids:
            ids.update(row)
    return sorted(ids)


def _wordpiece(model: dict, used: set[int]) -> set[int]:
    return used


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


#: tokenizer.json model type -> which ids to keep, given those the data used.
KINDS = {"WordPiece": _wordpiece, "BPE": _bpe, "Unigram": _unigram}


def _tokenizer_json(folder: Path) -> dict:
    tj = folder / "tokenizer.json"
    if not tj.is_file():
        raise ModelError("vocabulary trimming needs a fast tokenizer (tokenizer.json)")
    return json.loads(tj.read_text(encoding="utf-8"))


def _kept_ids(folder: Path, used: list[int]) -> list[int]:
    """Sorted ids to keep for the tokenizer saved in ``folder`` (see :data:`KINDS`)."""
    model = _tokenizer_json(folder).get("model", {})
    if model.get("type") not in KINDS:
        raise ModelError(f"vocabulary trimming supports {', '.join(KINDS)} tokenizers, not {model.get('type')}")
    return sorted(KINDS[model["type"]](model, set(used)))


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


def trim_vocab(model: nn.Module, tokenizer, encodings: list[Encoded], texts: list[tuple[str, str | None]]):
    """Keep only the pieces used in ``encodings`` (and what the tokenizer kind needs besides, see
    :data:`KINDS`) -> (model with a smaller table, new tokenizer).

    ``texts`` (a sample of the data as (text, pair)) are re-tokenised with the new tokenizer to
    check the pieces are unchanged. Factorized embeddings lose rows of their V x E table. Raises
    ``ModelError`` when the check fails or the tokenizer is not a fast one of :data:`KINDS`.
    """
    from transformers import AutoTokenizer

    with tempfile.TemporaryDirectory() as tmp:
        tokenizer.save_pretrained(tmp)
        keep = _kept_ids(Path(tmp), used_ids(encodings, tokenizer))
        _remap_tokenizer_files(Path(tmp), keep)
        new_tok = AutoTokenizer.from_pretrained(tmp, trust_remote_code=False)
    _trim_table(model, keep, tokenizer.pad_token_id)
    remap = {old: i for i, old in enumerate(keep)}
    for text, pair in texts:
        before = tokenizer(text, pair)["input_ids"]
        after = new_tok(text, pair)["input_ids"]
        if [remap.get(i, -1) for i in before] != after:
            raise ModelError(f"trimmed tokenizer splits {text[:60]!r} differently; vocabulary trimming aborted")
    return model, new_tok
