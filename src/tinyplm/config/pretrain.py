"""The pre-training recipe (``tinyplm pretrain RECIPE``): model, corpus, objective, training."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from tinyplm.config.base import Exact, Section, TrainSpec
from tinyplm.config.schema import NAME_PATTERN, ShapeSpec


class MaskingSpec(Section):
    """Which tokens masked-LM predicts (see ``tinyplm.train.masking``)."""

    strategy: Literal["token", "whole_word", "span", "ngram"] = Field(
        "token", description="token (BERT), whole_word, span (SpanBERT) or ngram (ALBERT)")
    rate: float = Field(0.15, gt=0, lt=1, description="share of tokens selected")
    split: tuple[float, float, float] = Field((0.8, 0.1, 0.1), description="[MASK] / random / unchanged")
    static_copies: int = Field(0, ge=0, le=64, description="0: a new mask every time (dynamic, RoBERTa); "
                                                          "N (up to 64): each text has N fixed masks (static, BERT: "
                                                          "10)")
    span_p: float = Field(0.2, gt=0, le=1, description="SpanBERT geometric parameter")
    max_span: int = Field(10, ge=1, description="SpanBERT longest span, in words")
    max_ngram: int = Field(3, ge=1, description="ALBERT longest n-gram, in words")

    @model_validator(mode="after")
    def _split_sums_to_one(self) -> MaskingSpec:
        if abs(sum(self.split) - 1.0) > 1e-6 or min(self.split) < 0:
            raise ValueError(f"split must be three non-negative fractions summing to 1, got {list(self.split)}")
        return self


class ElectraSpec(Section):
    """ELECTRA's generator and loss (Clark et al. 2020)."""

    generator_fraction: float = Field(0.25, gt=0, le=1, description="generator width / discriminator width")
    generator_layers: int | None = Field(None, ge=1, description="default: the discriminator's depth")
    disc_weight: float = Field(50.0, gt=0, description="lambda: weight of the replaced-token-detection loss")


class PretrainObjectiveSpec(Section):
    """Masked-LM (optionally with NSP or SOP pairs) or ELECTRA replaced-token detection."""

    kind: Literal["mlm", "electra"] = "mlm"
    pairs: Literal["nsp", "sop"] | None = Field(None, description="sentence-pair task trained with MLM")
    pair_weight: float = Field(1.0, ge=0)
    masking: MaskingSpec = MaskingSpec()
    electra: ElectraSpec = ElectraSpec()

    @model_validator(mode="after")
    def _pairs_with_mlm(self) -> PretrainObjectiveSpec:
        if self.pairs and self.kind != "mlm":
            raise ValueError("pairs (nsp/sop) go with kind: mlm")
        return self


class PretrainCorpusSpec(Section):
    """Text files (Gutenberg headers stripped, wikitext understood) and the held-out share."""

    paths: list[str] = Field(..., min_length=1, description="text files or folders (*.txt), or tables (.csv, "
                             ".tsv, .jsonl, .json: one text per row, its text_field)")
    text_field: str | None = Field(None, min_length=1, description="the column (key) of a table's rows that "
                                   "holds the text")
    max_docs: int | None = Field(None, ge=1, description="use at most this many paragraphs")
    max_length: int = Field(128, ge=16, le=512)
    holdout: float = Field(0.02, gt=0, lt=0.5, description="share of paragraphs held out for evaluation")
    segment_words: int | None = Field(None, ge=4, description="words per NSP/SOP segment; default from max_length")


class PretrainEvalSpec(Section):
    """Held-out evaluation: MLM loss and accuracy, the unigram baseline, pseudo-perplexity."""

    max_texts: int = Field(2000, ge=1, description="held-out texts for MLM loss and accuracy")
    pppl_texts: int = Field(100, ge=0, description="held-out texts for pseudo-perplexity (one pass per token)")
    pppl_max_length: int = Field(64, ge=8)
    precision: Exact = Field("fp32", description="precision of the held-out metrics (whatever the training's)")


class PretrainRecipe(Section):
    """Pre-train from scratch (``shape`` + ``tokenizer``) or continue from ``init`` (a checkpoint)."""

    name: str = Field("pretrain", pattern=NAME_PATTERN)
    output_dir: str = Field("runs/{name}", description="run directory; {name} is replaced")
    init: str | None = Field(None, description="checkpoint dir or alias (minilm-l6) to continue pre-training")
    shape: ShapeSpec | None = Field(None, description="from scratch: the encoder's shape")
    tokenizer: str | None = Field(None, description="tokenizer dir (default: init's, or minilm-l6's vocabulary)")
    corpus: PretrainCorpusSpec
    objective: PretrainObjectiveSpec = PretrainObjectiveSpec()
    train: TrainSpec = TrainSpec(epochs=1.0, lr=5e-4, keep_best=False, eval_every=500, checkpoint_every=500)
    eval: PretrainEvalSpec = PretrainEvalSpec()
    fit_head_steps: int = Field(300, ge=1, description="steps of fit-mlm-head when init has no MLM head")

    @model_validator(mode="after")
    def _init_or_shape(self) -> PretrainRecipe:
        if (self.init is None) == (self.shape is None):
            raise ValueError("give exactly one of init (continue pre-training) and shape (from scratch)")
        return self
