"""Train a subword tokenizer on text files with the ``tokenizers`` library, saved in HF format.

Three kinds, as in the models they come from:

* ``wordpiece`` (BERT): BERT's normaliser (lower-casing optional) and pre-tokeniser, ``##``
  continuation pieces, specials ``[PAD] [UNK] [CLS] [SEP] [MASK]``.
* ``bpe`` (character-level BPE, as the original subword-nmt/GPT): the same normaliser and
  pre-tokeniser, ``</w>`` marking word ends, BERT's specials.
* ``bytelevel-bpe`` (GPT-2/RoBERTa): bytes, so no unknown characters; a space prefix marks word
  starts; specials ``<s> <pad> </s> <unk> <mask>``; never lower-cased.

Every kind frames one text as ``CLS A SEP`` and a pair as ``CLS A SEP B SEP`` with segment ids 0/1
(deliberately BERT's template also for byte-level BPE, so NSP/SOP and BERT models take any of
them). Words are the pre-tokeniser's: the saved tokenizer's ``word_ids()`` gives the boundaries
whole-word and span masking need. The corpus is read as for pre-training (Gutenberg headers cut,
wikitext joiners undone); a run of more than :data:`MAX_WORD` characters without a space (a hash,
base64, a line of DNA) is cut into pieces of that length before training: the trainers' work grows
with the square of a word's length (one such run of megabytes kept a training going for most of an
hour, deaf to SIGTERM), and WordPiece reads any word that long as its unknown token anyway.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from tinyplm.errors import TinyplmError
from tinyplm.files import check_creatable

Kind = Literal["wordpiece", "bpe", "bytelevel-bpe"]
KINDS: tuple[str, ...] = ("wordpiece", "bpe", "bytelevel-bpe")
BERT_SPECIALS = {"pad": "[PAD]", "unk": "[UNK]", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"}
BYTE_SPECIALS = {"cls": "<s>", "pad": "<pad>", "sep": "</s>", "unk": "<unk>", "mask": "<mask>"}
#: The largest vocabulary trained: beyond, tokenizers' up-front allocation fails and aborts the process.
MAX_VOCAB = 1_000_000
#: The longest run of non-space characters a trainer sees (BERT's longest word: its WordPiece reads a
#: longer one as the unknown token).
MAX_WORD = 100
_LONG_WORD = re.compile(rf"\S{{{MAX_WORD + 1},}}")


def cut_long_words(text: str) -> str:
    """``text`` with each run of more than :data:`MAX_WORD` non-space characters cut by spaces into
    pieces of at most that many."""
    def cut(match: re.Match[str]) -> str:
        word = match.group()
        return " ".join(word[i : i + MAX_WORD] for i in range(0, len(word), MAX_WORD))

    return _LONG_WORD.sub(cut, text)


def _items(files: Sequence[Path], max_items: int | None, text_field: str | None = None) -> list[str]:
    """The corpus items the trainer reads (all read first, so a bad file is named before training)."""
    from tinyplm.pretrain.corpus import read_corpus

    return [cut_long_words(t) for t in read_corpus(files, max_docs=max_items, text_field=text_field)]


def build_tokenizer(kind: Kind, lowercase: bool = True):
    """An untrained ``tokenizers.Tokenizer`` of ``kind`` and the trainer for it (vocab size unset)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

    if kind not in KINDS:
        raise TinyplmError(f"tokenizer kind must be one of {', '.join(KINDS)}, got {kind!r}")
    specials = BYTE_SPECIALS if kind == "bytelevel-bpe" else BERT_SPECIALS
    if kind == "wordpiece":
        tok = Tokenizer(models.WordPiece(unk_token=specials["unk"]))
        tok.decoder = decoders.WordPiece()
    elif kind == "bpe":
        tok = Tokenizer(models.BPE(unk_token=specials["unk"], end_of_word_suffix="</w>"))
        tok.decoder = decoders.BPEDecoder(suffix="</w>")
    else:
        tok = Tokenizer(models.BPE())
        tok.decoder = decoders.ByteLevel()
    if kind == "bytelevel-bpe":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    else:
        tok.normalizer = normalizers.BertNormalizer(lowercase=lowercase, strip_accents=lowercase)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tok, specials


def _trainer(kind: Kind, vocab_size: int, min_frequency: int, specials: dict[str, str]):
    from tokenizers import pre_tokenizers, trainers

    ordered = list(specials.values())
    if kind == "wordpiece":
        return trainers.WordPieceTrainer(vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=ordered)
    if kind == "bpe":
        return trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=ordered,
                                   end_of_word_suffix="</w>")
    return trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=ordered,
                               initial_alphabet=pre_tokenizers.ByteLevel.alphabet())


def train_tokenizer(
    files: Sequence[Path], kind: Kind, vocab_size: int, out: Path, *, lowercase: bool = True,
    min_frequency: int = 2, max_items: int | None = None, max_length: int = 512,
    text_field: str | None = None,
) -> Path:
    """Train on ``files`` (text files or directories, or tables whose ``text_field`` holds the text)
    and save to ``out`` (HF format); returns ``out``.

    Raises ``TinyplmError`` for an unknown kind, a vocabulary smaller than the specials plus the
    alphabet it needs, or an ``out`` that already holds a tokenizer (nothing is overwritten);
    ``DataError`` for unreadable or empty corpus files.
    """
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    out = Path(out)
    check_creatable(out, "tokenizer destination", flag="--out")  # not after the tokenizer is trained
    if (out / "tokenizer.json").exists():
        raise TinyplmError(f"{out} already holds a tokenizer; choose another --out or remove it")
    if not 100 <= vocab_size <= MAX_VOCAB:  # tokenizers reserves the whole vocabulary first (it aborted)
        raise TinyplmError(f"--vocab-size: expected 100 to {MAX_VOCAB} (the largest BERT-family vocabularies hold "
                           f"about 250000), got {vocab_size}")
    if max_items is not None and max_items < 1:
        raise TinyplmError(f"--max-docs: expected at least 1 paragraph, got {max_items}")
    if min_frequency < 0:
        raise TinyplmError(f"--min-frequency: expected 0 or more, got {min_frequency}")
    tok, specials = build_tokenizer(kind, lowercase)
    floor = len(specials) + 256  # byte-level BPE starts from every byte: its vocabulary cannot be smaller
    if kind == "bytelevel-bpe" and vocab_size < floor:
        raise TinyplmError(f"--vocab-size {vocab_size}: a byte-level BPE holds its {len(specials)} specials and all "
                           f"256 bytes before any merge; give at least {floor}")
    trainer = _trainer(kind, vocab_size, min_frequency, specials)
    tok.train_from_iterator(_items(files, max_items, text_field), trainer=trainer)
    cls, sep = specials["cls"], specials["sep"]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{cls} $A {sep}", pair=f"{cls} $A {sep} $B:1 {sep}:1",
        special_tokens=[(cls, tok.token_to_id(cls)), (sep, tok.token_to_id(sep))],
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, model_max_length=max_length,
        model_input_names=["input_ids", "token_type_ids", "attention_mask"],
        do_lower_case=lowercase and kind != "bytelevel-bpe",
        **{f"{k}_token": v for k, v in specials.items()},
    )
    out.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(out))
    return out
