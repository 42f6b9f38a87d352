"""The tokenizer files of a checkpoint, checked before transformers reads them, and what a
checkpoint's tokenizer needs that is not installed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tinyplm.errors import ModelError
from tinyplm.tasks.io import read_text
from tinyplm.tasks.json_layout import load_json, shown

#: Tokenizer files that are JSON objects, checked before transformers reads them.
TOKENIZER_JSON = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json")
#: sentencepiece models, which transformers reads only with the sentencepiece package.
SENTENCEPIECE_FILES = ("spiece.model", "sentencepiece.bpe.model")


def check_tokenizer_files(path: Path) -> None:
    """Check the tokenizer files of ``path`` are whole: each JSON file (tokenizer.json,
    tokenizer_config.json ...) parses to an object, and vocab.txt is UTF-8, ends with a line
    break (every saved vocab.txt does; a cut-short one does not) and, beside a WordPiece
    tokenizer.json, lists as many tokens as its vocabulary. Raises ``ModelError`` naming the file."""
    docs = {}
    for name in TOKENIZER_JSON:
        file = path / name
        if file.is_file():
            docs[name] = load_json(file, ModelError)
            if not isinstance(docs[name], dict):
                raise ModelError(f"{file}: expected a JSON object, got {shown(docs[name])}")
    model = docs.get("tokenizer.json", {}).get("model", {})
    if "tokenizer.json" in docs and not isinstance(model, dict):
        raise ModelError(f"{path / 'tokenizer.json'}: 'model' should be an object, got {shown(model)}")
    vocab_file = path / "vocab.txt"
    if vocab_file.is_file():
        text = read_text(vocab_file, ModelError)
        if not text.endswith("\n"):
            raise ModelError(f"{vocab_file}: the last line has no line break, so the file looks cut short; "
                             "copy or save the tokenizer again")
        vocab = model.get("vocab") if model.get("type") == "WordPiece" else None
        count = text.count("\n")
        if isinstance(vocab, dict) and count != len(vocab):
            raise ModelError(f"{vocab_file}: holds {count} tokens but tokenizer.json's vocabulary has {len(vocab)}; "
                             "one of them is cut short or from another model")


def sentencepiece_missing(path: Path) -> str | None:
    """Why the tokenizer of ``path`` cannot be read here, when it is only a sentencepiece model (no
    tokenizer.json) and the sentencepiece package is not installed (transformers then names another
    package); None otherwise."""
    found = [f for f in SENTENCEPIECE_FILES if (path / f).is_file()]
    if not found or (path / "tokenizer.json").is_file() or importlib.util.find_spec("sentencepiece") is not None:
        return None
    return (f"{path}: its tokenizer is only {found[0]}, which transformers reads with the sentencepiece package: "
            "pip install sentencepiece (or save a tokenizer.json beside it)")


def declared_added_tokens(path: Path) -> set[str]:
    """The tokens ``path``'s tokenizer files declare as added beyond the vocabulary (tokenizer.json's
    ``added_tokens``, added_tokens.json, tokenizer_config.json's ``added_tokens_decoder``)."""
    declared: set[str] = set()
    for name, read in (("tokenizer.json", lambda d: [t.get("content") for t in d.get("added_tokens") or []]),
                       ("added_tokens.json", lambda d: list(d)),
                       ("tokenizer_config.json",
                        lambda d: [t.get("content") for t in (d.get("added_tokens_decoder") or {}).values()])):
        if (path / name).is_file():
            doc = load_json(path / name, ModelError)
            try:
                declared.update(str(t) for t in read(doc) if t is not None)
            except (AttributeError, TypeError):
                continue  # a layout transformers reads its own way: nothing declared that tinyplm can tell
    return declared


def refuse_added_specials(path: Path, tok) -> None:
    """Raise ``ModelError`` naming ``path`` when a special token of ``tok`` (loaded from a WordPiece
    ``vocab.txt`` in ``path``) is in neither the vocabulary nor the declared added tokens: transformers
    then adds it at load (a vocab.txt without ``[SEP]``) as a new id past the vocabulary, whose
    embedding row the model never trained, so every input would carry an untrained vector. A
    sentencepiece model is not checked: DeBERTa-v3's lacks its ``[MASK]``, which transformers adds at
    the id the model was trained with."""
    if not (path / "vocab.txt").is_file():
        return
    base = tok.vocab_size
    added = [t for t in tok.all_special_tokens if tok.convert_tokens_to_ids(t) >= base]
    declared = declared_added_tokens(path) if added else set()  # files read only where a token is past
    added = [t for t in added if t not in declared]
    if added:
        first = added[0]
        raise ModelError(f"{path}: its vocab.txt holds no {', '.join(repr(t) for t in added)}, a special token the "
                         f"tokenizer uses; transformers would add it at load as id {tok.convert_tokens_to_ids(first)},"
                         " an embedding the model never trained; use the model's own tokenizer files, or add the "
                         "token to the vocabulary")
