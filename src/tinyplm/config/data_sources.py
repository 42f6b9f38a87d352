"""The recipe's sections of training text besides the task's own: the TinyBERT augmentation of its
training set (``augment``) and unlabelled text (``corpus``). Part of the recipe's schema
(re-exported by ``config.schema``), kept in a file of its own so each file holds one concern."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from tinyplm.config.base import Exact, Section

#: What a distillation stage trains on (``StageSpec.data``): the task's training set, it with its
#: TinyBERT copies (``augment``), unlabelled text (``corpus``), or either of the first two with the
#: corpus texts (or pairs) beside them, labelled by the fine-tuned teacher.
StageDataKind = Literal["task", "augmented", "corpus", "task+corpus", "augmented+corpus"]

#: The kinds that add the corpus's texts to the task's examples (those are learnt from the
#: fine-tuned teacher's logits alone).
MIXED_KINDS: tuple[str, ...] = ("task+corpus", "augmented+corpus")


def uses_augment(kind: str) -> bool:
    """Whether stage data ``kind`` holds the training set's TinyBERT copies (needs ``augment``)."""
    return kind in ("augmented", "augmented+corpus")


def uses_corpus(kind: str) -> bool:
    """Whether stage data ``kind`` reads the recipe's ``corpus`` section."""
    return kind == "corpus" or kind in MIXED_KINDS


class AugmentSpec(Section):
    """TinyBERT data augmentation of the task's training set (used by ``data: augmented`` and
    ``augmented+corpus`` stages)."""

    _unwritten_defaults = ("min_words", "candidates")

    mlm: str | None = Field(None, description="a model dir with an MLM head (see `tinyplm fit-mlm-head`); "
                            "needed by data: augmented stages")
    copies: int = Field(20, ge=1, description="augmented copies per example (TinyBERT: 20 large, 30 small tasks)")
    p: float = Field(0.4, ge=0, le=1, description="probability of replacing each word")
    top_k: int = Field(15, ge=1, description="masked-LM candidates per single-piece word")
    neighbours: int = Field(15, ge=1, description="embedding neighbours per multi-piece word")
    candidates: Literal["any", "same_kind"] = Field(
        "any", description="which proposals may replace a word: any (TinyBERT: the masked LM's top_k and the "
        "neighbours as they come) or same_kind (a word with letters only by candidates with letters, "
        "punctuation and numbers only by candidates without: a weak masked LM proposes punctuation for "
        "words, which turns a copy into word salad rather than a nearby sentence)")
    neighbours_from: Literal["embeddings", "word2vec"] = Field(
        "embeddings", description="static embedding space for multi-piece words: the MLM model's input "
        "embeddings, or word2vec trained here (gensim) on word2vec_corpus")
    word2vec_corpus: list[str] | None = Field(None, description="text files or folders for word2vec; default: the "
                                              "corpus section's paths")
    word2vec_max_docs: int | None = Field(50000, ge=1, description="train word2vec on at most this many paragraphs")
    max_examples: int | None = Field(None, ge=1, description="augment only the first N training examples "
                                     "(of those min_words lets through; the rest are used as they are)")
    min_words: int = Field(0, ge=0, description="augment only training examples of at least this many "
                           "whitespace-separated words in their text (the others are used as they are): "
                           "for a task whose training set holds short phrases besides the sentences "
                           "(SST-2), the copies go where they vary most")
    seed: int = 42
    batch_size: int = Field(128, ge=1, description="sentences per masked-LM call")
    precision: Exact = Field("fp32", description="precision of the masked LM's candidates (bf16 is faster where "
                             "the CPU has it, and may pick other words)")
    pair: Literal["auto", "augment", "keep"] = Field(
        "auto", description="each example's text_pair: augment (TinyBERT, both sentences of a pair task), keep it "
        "as it is, or auto: keep it when it is page context the task built (task.context_sentences / "
        "context_after), augment it otherwise")


class CorpusSpec(Section):
    """Unlabelled text for ``data: corpus`` stages (general distillation) and ``data: task+corpus``
    or ``augmented+corpus`` ones (the fine-tuned teacher's logits on it; on a pair task, pairs of
    texts: ``pair_field``)."""

    _unwritten_defaults = ("pair_field",)

    paths: list[str] = Field(..., min_length=1, description="text files or folders (*.txt; Gutenberg headers are "
                             "stripped), or tables (.csv, .tsv, .jsonl, .json: one text per row, its text_field)")
    text_field: str | None = Field(None, min_length=1, description="the column (key) of a table's rows that "
                                   "holds the text")
    pair_field: str | None = Field(None, min_length=1, description="the column holding each row's second text: "
                                   "the corpus is then pairs (text_field, pair_field) of tables, for a pair "
                                   "task's data: task+corpus or augmented+corpus stage (e.g. QNLI's question "
                                   "and sentence)")
    max_docs: int | None = Field(None, ge=1, description="use at most this many paragraphs")
    max_length: int = Field(128, ge=8, le=512)

    @model_validator(mode="after")
    def _pairs_from_two_columns(self) -> CorpusSpec:
        if self.pair_field is not None and self.text_field in (None, self.pair_field):
            raise ValueError(f"corpus.pair_field: {self.pair_field!r} is a pair's second text; name its first in "
                             "corpus.text_field, another column of the same tables")
        return self
