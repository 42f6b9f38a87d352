"""Vocabulary trimming: keep the word pieces the task's data uses (plus the specials).

The embedding table is most of a small BERT's bytes (30,522 x 384 floats are 47 MB of MiniLM's
91 MB); a task uses a fraction of the pieces. :func:`trim_vocab` keeps those rows, in their old
order, and writes a tokenizer whose WordPiece vocabulary holds exactly the kept pieces.

WordPiece tokenises greedily, longest piece first, so on text whose pieces were all kept the new
tokenizer produces the same pieces, renumbered: :func:`trim_vocab` checks this on the data it
was given and raises ``ModelError`` if not. Unseen words fall back to shorter kept pieces or
``[UNK]``. Only fast WordPiece tokenizers (``tokenizer.json``) are supported.
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


def _remap_tokenizer_files(folder: Path, keep: list[int]) -> None:
    new_id = {old: new for new, old in enumerate(keep)}
    tj = folder / "tokenizer.json"
    if not tj.is_file():
        raise ModelError("vocabulary trimming needs a fast tokenizer (tokenizer.json)")
    data = json.loads(tj.read_text(encoding="utf-8"))
    if data.get("model", {}).get("type") != "WordPiece":
        raise ModelError(f"vocabulary trimming supports WordPiece tokenizers, not {data.get('model', {}).get('type')}")
    vocab = data["model"]["vocab"]
    by_id = {i: t for t, i in vocab.items()}
    data["model"]["vocab"] = {by_id[old]: new for old, new in new_id.items()}
    data["added_tokens"] = [{**t, "id": new_id[t["id"]]} for t in data.get("added_tokens", []) if t["id"] in new_id]
    post = data.get("post_processor") or {}
    for special in (post.get("special_tokens") or {}).values():
        special["ids"] = [new_id[i] for i in special["ids"]]
    tj.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    (folder / "vocab.txt").write_text("".join(by_id[old] + "\n" for old in keep), encoding="utf-8")
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


def trim_vocab(model: nn.Module, tokenizer, encodings: list[Encoded], texts: list[tuple[str, str | None]]):
    """Keep only the pieces used in ``encodings`` -> (model with a smaller table, new tokenizer).

    ``texts`` (a sample of the data as (text, pair)) are re-tokenised with the new tokenizer to
    check the pieces are unchanged. Factorized embeddings lose rows of their V x E table. Raises
    ``ModelError`` when the check fails.
    """
    from transformers import AutoTokenizer

    keep = used_ids(encodings, tokenizer)
    words = roles.word_embeddings(model)
    factorized = isinstance(words, FactorizedEmbedding)  # trim the V x E table, keep the projection
    table = words.table if factorized else words
    if not isinstance(table, nn.Embedding):
        raise ModelError(f"cannot trim word embeddings of type {type(table).__name__}")
    index = torch.tensor(keep)
    new = nn.Embedding(len(keep), table.embedding_dim)
    with torch.no_grad():
        new.weight.copy_(table.weight.detach().index_select(0, index))
    pad = tokenizer.pad_token_id
    new.padding_idx = keep.index(pad) if pad in keep else None
    if factorized:
        words.table = new
    else:
        roles.set_word_embeddings(model, new)
    model.config.vocab_size = len(keep)
    if pad is not None:
        model.config.pad_token_id = keep.index(pad)
        move_positions(roles.embeddings(model), keep.index(pad))
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer.save_pretrained(tmp)
        _remap_tokenizer_files(Path(tmp), keep)
        new_tok = AutoTokenizer.from_pretrained(tmp, trust_remote_code=False)
    remap = {old: i for i, old in enumerate(keep)}
    for text, pair in texts:
        before = tokenizer(text, pair)["input_ids"]
        after = new_tok(text, pair)["input_ids"]
        if [remap.get(i, -1) for i in before] != after:
            raise ModelError(f"trimmed tokenizer splits {text[:60]!r} differently; vocabulary trimming aborted")
    return model, new_tok
