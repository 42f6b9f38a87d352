"""The recipe section of a classic student (``students[].family``: the recipe key keeps its name), the
pre-transformer models trained and measured in the same run as the BERT students.

=================  ======================================================================================
``arch``           the model
=================  ======================================================================================
``tfidf_lr``       TF-IDF of word n-grams + logistic regression (scikit-learn fit; ``tfidf`` options)
``lstm``           a unidirectional LSTM over word embeddings (``embeddings``: random, word2vec, GloVe)
``bilstm``         the same, bidirectional
``elmo_bilstm``    a frozen ELMo-style biLM (byte CNN + 2-layer forward and backward LSTM LMs, ``bilm``,
                   pre-trained here on the corpus), its layers mixed by a learned scalar mix, into a BiLSTM
``feature_bilstm`` a frozen transformer (``encoder``), its last ``feature_layers`` hidden layers
                   concatenated into a BiLSTM classifier (Devlin et al.'s feature-based setting)
``static``         a bag of the teacher's word-piece vectors (mean, SIF- or Zipf-weighted) into a linear
                   classifier; the table made from ``encoder`` the Model2Vec way (``static`` options)
``static_cnn``     a 1-D CNN (Kim 2014) over the same table
``static_bilstm``  a BiLSTM over the same table (``hidden``, ``layers``, ``pooling`` as the other LSTMs')
``static_sentence`` the embedding task's static student: a sentence encoder (no classifier) whose table is
                   made the same way from the teacher's sentence pipeline, then trained on the teacher's
                   sentence vectors (``static`` options: ``dims``, ``tokens``, ``weighting``, ``sif_a``,
                   ``table_dtype``, ``batch_size``)
=================  ======================================================================================

A student with ``family`` trains with the student's ``objective``/``train`` (or ``stages``), like a
BERT student: ``hard_weight`` for supervised training, ``kd_weight`` / ``logit_mse`` (Tang et al.
2019) against the fine-tuned teacher's cached logits, on ``data: task`` or ``augmented``.
``tfidf_lr`` is fitted in one step and takes no objective, train or stages. ``static_sentence``
trains with the embedding task's vector terms (``vector_mse``, ``vector_cosine``, ``similarity_kd``)
on ``data: task``; it is the only arch of that task, and the classifier archs are refused there
(``run.preflight``). Its table keeps every piece (``tokens: all``) and weighs them by Zipf's law
(``weighting: zipf``, ``sif_a: 1e-4``) unless the recipe says otherwise: an embedding model meets any
text, and these are Model2Vec's choices (its ``sif_coefficient`` is 1e-4).
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field, model_serializer, model_validator

from tinyplm.config.base import Section, TrainSpec

Arch = Literal["tfidf_lr", "lstm", "bilstm", "elmo_bilstm", "feature_bilstm", "static", "static_cnn",
               "static_bilstm", "static_sentence"]
#: The archs whose student is a sentence encoder for the embedding task (vectors out, no classifier).
SENTENCE_ARCHS = ("static_sentence",)
#: The static archs that classify: a table into a classifier.
CLASSIFIER_STATIC = ("static", "static_cnn", "static_bilstm")
#: The archs that classify (every arch but the sentence encoders).
CLASSIFIER_ARCHS = tuple(a for a in get_args(Arch) if a not in SENTENCE_ARCHS)
#: What ``family.static`` defaults to for a sentence arch when the recipe leaves the key out.
SENTENCE_STATIC_DEFAULTS = {"tokens": "all", "weighting": "zipf", "sif_a": 1e-4}
#: The option groups that belong to one arch only (setting one for another arch is an error).
ARCH_OPTIONS: dict[str, tuple[str, ...]] = {
    "tfidf": ("tfidf_lr",), "embeddings": ("lstm", "bilstm"), "vocab_size": ("lstm", "bilstm", "elmo_bilstm"),
    "min_count": ("lstm", "bilstm", "elmo_bilstm"), "bilm": ("elmo_bilstm",),
    "encoder": ("feature_bilstm", *CLASSIFIER_STATIC, *SENTENCE_ARCHS), "feature_layers": ("feature_bilstm",),
    "static": (*CLASSIFIER_STATIC, *SENTENCE_ARCHS),
}
#: The options of ``family.static`` that belong to some of the static archs only (a BiLSTM's
#: classifier is its LSTM's: its width is ``family.hidden``, not a ReLU layer's).
STATIC_OPTIONS: dict[str, tuple[str, ...]] = {
    "weighting": ("static", *SENTENCE_ARCHS), "sif_a": ("static", *SENTENCE_ARCHS), "filters": ("static_cnn",),
    "hidden": ("static", "static_cnn"), "hidden_layers": ("static", "static_cnn"),
    # a sentence student's pieces come from the teacher's sentence pipeline, its table always trains
    "vectors": CLASSIFIER_STATIC, "contextual_texts": CLASSIFIER_STATIC, "word_dropout": CLASSIFIER_STATIC,
    "freeze": CLASSIFIER_STATIC,
}


def _field_with_corpus(section: EmbeddingSpec | BiLMSpec, key: str) -> None:
    """``family.KEY.text_field`` names a column of the student's own corpus: refused without one."""
    if section.text_field is not None and section.corpus is None:
        raise ValueError(f"family.{key}.text_field names the text column of family.{key}.corpus's tables; give that "
                         "corpus too, or set corpus.text_field for the recipe's corpus section")


class TfidfSpec(Section):
    """TF-IDF features (scikit-learn's word analyzer, l2-normalised) and a logistic regression."""

    ngram_max: int = Field(2, ge=1, le=4, description="word n-grams 1..ngram_max")
    min_df: int = Field(1, ge=1, description="keep n-grams found in at least this many training texts")
    max_features: int | None = Field(None, ge=1, description="keep the most frequent n-grams only")
    c: float = Field(1.0, gt=0, description="inverse L2 strength of the logistic regression (scikit-learn's C)")
    max_iter: int = Field(1000, ge=10)


class EmbeddingSpec(Section):
    """The word embeddings of an (Bi)LSTM: random, or word vectors trained here on a corpus
    (cached by corpus and settings)."""

    _unwritten_defaults = ("text_field",)

    kind: Literal["random", "word2vec", "glove"] = "random"
    dim: int = Field(100, ge=4, le=1024)
    corpus: list[str] | None = Field(None, description="text files or folders, or tables with text_field; default: "
                                     "the recipe's corpus section")
    text_field: str | None = Field(None, min_length=1, description="the column (key) of corpus's tables that holds "
                                   "the text (the recipe's corpus section has its own)")
    max_docs: int | None = Field(50000, ge=1, description="train on at most this many paragraphs")
    window: int = Field(5, ge=1, le=50, description="context words on each side")
    min_count: int = Field(3, ge=1, description="ignore corpus words seen fewer times")
    vocab_size: int = Field(30000, ge=10, description="GloVe: the most frequent words in the co-occurrence matrix")
    epochs: int | None = Field(None, ge=1, description="default 5 (word2vec), 25 (GloVe)")
    freeze: bool = Field(False, description="keep the vectors fixed while the classifier trains")
    seed: int = 0

    @model_validator(mode="after")
    def _own_field(self) -> EmbeddingSpec:
        _field_with_corpus(self, "embeddings")
        return self


class BiLMSpec(Section):
    """The ELMo-style biLM: pre-trained here on the corpus (cached by corpus and settings) unless
    ``model`` names a biLM saved before, then frozen."""

    _unwritten_defaults = ("text_field",)

    model: str | None = Field(None, description="a biLM folder made before (default: pre-train one or reuse "
                              "the cached one)")
    corpus: list[str] | None = Field(None, description="text files or folders, or tables with text_field; default: "
                                     "the recipe's corpus section")
    text_field: str | None = Field(None, min_length=1, description="the column (key) of corpus's tables that holds "
                                   "the text (the recipe's corpus section has its own)")
    max_docs: int | None = Field(20000, ge=1, description="pre-train on at most this many paragraphs")
    max_words: int = Field(48, ge=4, le=256, description="words per pre-training segment (a paragraph's first ones)")
    vocab_size: int = Field(10000, ge=10, description="the LMs' output words (most frequent; the rest are [UNK])")
    max_chars: int = Field(16, ge=4, le=64, description="bytes per word, its start and end marks included")
    char_dim: int = Field(16, ge=2)
    filters: list[tuple[int, int]] = Field([(1, 32), (2, 32), (3, 64), (4, 128)],
                                           description="char CNN [width, channels] pairs")
    hidden: int = Field(128, ge=4, description="LSTM width per direction (and the char CNN's projection)")
    holdout: float = Field(0.02, gt=0, lt=0.5, description="share of paragraphs held out for perplexity")
    train: TrainSpec = TrainSpec(epochs=1.0, lr=2e-3, weight_decay=0.0, keep_best=False, eval_every=0,
                                 checkpoint_every=500, warmup_ratio=0.02, precision="fp32")

    @model_validator(mode="after")
    def _own_field(self) -> BiLMSpec:
        _field_with_corpus(self, "bilm")
        return self

    def settings(self) -> dict:
        """The biLM's shape, as its config records it."""
        return {"max_chars": self.max_chars, "char_dim": self.char_dim, "filters": [list(f) for f in self.filters],
                "hidden": self.hidden}


class StaticSpec(Section):
    """The word-piece table of a static student (``models.classic.static_init``) and its classifier."""

    _unwritten_defaults = ("word_dropout", "hidden_layers", "vectors", "contextual_texts")

    dims: int = Field(256, ge=2, le=4096, description="table width: the teacher's piece vectors reduced by PCA "
                      "to this many components (at most the encoder's hidden size)")
    vectors: Literal["passthrough", "contextual"] = Field(
        "passthrough", description="each piece's vector before PCA: the teacher's output for the piece alone "
        "(passthrough, as Model2Vec), or the mean of the teacher's output states at the piece over the training "
        "texts that use it (contextual; a piece they never use keeps its passthrough vector)")
    contextual_texts: int | None = Field(None, ge=1, description="contextual: read only the first this many training "
                                         "texts (the task's, then the augmented ones); default all")
    tokens: Literal["used", "all"] = Field("used", description="rows for the pieces the training data uses and "
                                           "the specials (others read [UNK]'s row), or for the whole vocabulary "
                                           "(static_sentence's default)")
    weighting: Literal["mean", "sif", "zipf"] = Field("sif", description="static: the bag's piece weights: 1, "
                                                      "a/(a+p) with p the training text's frequency (sif), or p "
                                                      "by Zipf's law over the vocabulary order (zipf, as Model2Vec)")
    sif_a: float = Field(1e-3, gt=0, le=1, description="static: the a of a/(a+p)")
    filters: list[tuple[int, int]] = Field([(2, 100), (3, 100), (4, 100)], min_length=1,
                                           description="static_cnn: [width, channels] pairs")
    hidden: int = Field(0, ge=0, le=4096, description="static, static_cnn: a ReLU layer of this width before the "
                        "classifier; 0: none (static_bilstm: its LSTM's width is family.hidden)")
    hidden_layers: int = Field(1, ge=1, le=4, description="how many such ReLU layers, stacked (Iyyer et al. "
                               "2015's deep averaging network); only with hidden > 0")
    word_dropout: float = Field(0.0, ge=0, lt=1, description="while training, leave each piece of a sentence out "
                                "with this probability (Iyyer et al. 2015's word dropout): the student "
                                "cannot lean on a few words")
    table_dtype: Literal["fp32", "fp16", "int8"] = Field("fp32", description="how model.safetensors stores the "
                                                         "table (int8: one scale per row); loading rebuilds floats")
    freeze: bool = Field(False, description="keep the table fixed while the classifier trains")
    batch_size: int = Field(512, ge=1, description="pieces per teacher pass while the table is made")

    @model_validator(mode="after")
    def _filters_are_sizes(self) -> StaticSpec:
        bad = [f for f in self.filters if min(f) < 1]
        if bad:
            raise ValueError(f"family.static.filters: [width, channels] must both be at least 1, got {list(bad[0])}")
        if self.hidden_layers > 1 and not self.hidden:
            raise ValueError(f"family.static.hidden_layers: {self.hidden_layers} layers of width 0; set "
                             "family.static.hidden to their width")
        return self


class FamilySpec(Section):
    """One classic student (see the module docstring)."""

    arch: Arch
    hidden: int = Field(128, ge=4, le=2048, description="classifier LSTM width per direction")
    layers: int | None = Field(None, ge=1, le=4, description="classifier LSTM layers; default 1 (feature_bilstm 2)")
    pooling: Literal["max", "mean", "attention"] = Field("max", description="how the LSTM states become one vector")
    dropout: float = Field(0.1, ge=0, lt=1)
    vocab_size: int = Field(30000, ge=10, description="(bi)lstm: words kept, the most frequent in the training data")
    min_count: int = Field(1, ge=1, description="(bi)lstm: keep training words seen at least this often")
    embeddings: EmbeddingSpec = EmbeddingSpec()
    bilm: BiLMSpec = BiLMSpec()
    encoder: str = Field("base", min_length=1, description="feature_bilstm: the frozen transformer; static, "
                         "static_cnn, static_bilstm: the transformer whose piece vectors make the table: base "
                         "(the teacher's checkpoint before fine-tuning), finetuned, or a model dir of the "
                         "teacher's vocabulary; static_sentence: the sentence model whose whole pipeline embeds "
                         "each piece: base or finetuned (both the embedding task's teacher), or a sentence "
                         "model dir of the teacher's vocabulary")
    feature_layers: int = Field(4, ge=1, le=24, description="feature_bilstm: last hidden layers concatenated")
    tfidf: TfidfSpec = TfidfSpec()
    static: StaticSpec = StaticSpec()

    @model_validator(mode="before")
    @classmethod
    def _sentence_defaults(cls, data):
        """A sentence arch's ``static`` defaults (:data:`SENTENCE_STATIC_DEFAULTS`) where the recipe
        leaves a key out; a resolved recipe writes them, so it loads back the same."""
        if isinstance(data, dict) and data.get("arch") in SENTENCE_ARCHS:
            static = data.get("static", {})
            if isinstance(static, dict):
                data = {**data, "static": {**SENTENCE_STATIC_DEFAULTS, **static}}
        return data

    @model_validator(mode="after")
    def _options_fit_the_arch(self) -> FamilySpec:
        # An option at its default is harmless wherever it stands: a resolved recipe (every field
        # written out) must load back, for export and resume.
        for option, archs in ARCH_OPTIONS.items():
            unused = option in self.model_fields_set and self.arch not in archs
            if unused and getattr(self, option) != type(self).model_fields[option].default:
                raise ValueError(f"family.{option} is for arch {' / '.join(archs)}, not {self.arch}")
        static = type(self.static).model_fields
        for option, archs in STATIC_OPTIONS.items():
            unused = option in self.static.model_fields_set and self.arch not in archs
            if unused and getattr(self.static, option) != static[option].get_default():
                raise ValueError(f"family.static.{option} is for arch {' / '.join(archs)}, not {self.arch}")
        lstm = [k for k in ("hidden", "layers", "pooling") if k in self.model_fields_set
                and getattr(self, k) != type(self).model_fields[k].default]
        if self.arch in (*STATIC_OPTIONS["hidden"], *SENTENCE_ARCHS) and lstm:  # the static archs with no LSTM
            relu = lstm[0] == "hidden" and self.arch not in SENTENCE_ARCHS
            where = "family.static.hidden (a ReLU layer before the classifier)" if relu else "none"
            raise ValueError(f"family.{lstm[0]} is the classifier LSTM's; a {self.arch} student has no LSTM "
                             f"(its counterpart: {where})")
        return self

    @model_serializer(mode="wrap")
    def _static_unwritten(self, handler):
        """Leave ``static`` out of a dump for the other archs while it is at its defaults, so their
        resolved recipes (and the run dirs claimed with them) are as before static students existed."""
        data = handler(self)
        if isinstance(data, dict) and self.arch not in ARCH_OPTIONS["static"] and self.static == StaticSpec():
            data.pop("static", None)
        return data

    @property
    def lstm_layers(self) -> int:
        """The classifier's LSTM layers in effect."""
        return self.layers or (2 if self.arch == "feature_bilstm" else 1)

    @property
    def corpus_needed(self) -> bool:
        """True when the student trains word vectors or a biLM on a corpus."""
        if self.arch == "elmo_bilstm":
            return self.bilm.model is None
        return self.arch in ("lstm", "bilstm") and self.embeddings.kind != "random"

    @property
    def own_corpus(self) -> list[str] | None:
        """The corpus paths the student names itself (None: the recipe's corpus section)."""
        return self.bilm.corpus if self.arch == "elmo_bilstm" else self.embeddings.corpus

    @property
    def own_text_field(self) -> str | None:
        """The text column of the tables of :attr:`own_corpus`."""
        return self.bilm.text_field if self.arch == "elmo_bilstm" else self.embeddings.text_field


#: The compress steps a static student takes: another runtime for the same arithmetic (its graph
#: exports to ONNX as plain ops); the others reach into transformer layers.
STATIC_COMPRESS = ("runtime", "openvino", "openvino_int8", "onnx_dynamic_int8", "onnx_static_int8")


def check_family_student(spec: Section) -> None:
    """Raise ``ValueError`` when ``spec`` (a ``StudentSpec`` with ``family``) also asks for what only
    a transformer student has (a shape, teacher layers, an init, compress steps other than a static
    student's runtimes, layer-wise or masked-LM terms, corpus data), or gives ``tfidf_lr`` training
    settings."""
    fam = spec.family
    clash = [k for k in ("shape", "teacher_layers", "init_from") if getattr(spec, k)]
    if clash:
        raise ValueError(f"a 'family' student is built from its family section; drop '{clash[0]}'")
    if spec.compress and fam.arch in SENTENCE_ARCHS:
        raise ValueError(f"a '{fam.arch}' student takes no compress steps (its table is stored as "
                         "family.static.table_dtype: fp32, fp16 or int8)")
    if spec.compress and fam.arch not in CLASSIFIER_STATIC:
        raise ValueError(f"a '{fam.arch}' student takes no compress steps (the static archs take a runtime: "
                         f"{', '.join(STATIC_COMPRESS)})")
    other = [s.kind for s in spec.compress if s.kind not in STATIC_COMPRESS]
    if other:
        raise ValueError(f"compress step {other[0]}: a '{fam.arch}' student takes only a runtime step "
                         f"({', '.join(STATIC_COMPRESS)})")
    if fam.arch == "tfidf_lr":
        fields = type(spec).model_fields  # settings at their defaults (a resolved recipe writes them all) are no ask
        given = sorted(k for k in {"objective", "train", "stages"} & spec.model_fields_set
                       if getattr(spec, k) != fields[k].get_default(call_default_factory=True))
        if given:
            raise ValueError(f"family.arch tfidf_lr is fitted by scikit-learn in one step: drop '{given[0]}' "
                             "(its options are family.tfidf)")
        return
    if fam.arch in SENTENCE_ARCHS:
        _check_sentence_stages(spec)
        return
    for stage in spec.stage_specs():
        o = stage.objective
        if o.vectors:
            raise ValueError("vector_mse, vector_cosine and similarity_kd train sentence vectors (the embedding "
                             f"task, family.arch {' / '.join(SENTENCE_ARCHS)}); a '{fam.arch}' student classifies: "
                             "use kd_weight, hard_weight or logit_mse")
        if o.layerwise or o.masked_lm or stage.data == "corpus":
            raise ValueError("a 'family' student learns from the task's labels and the teacher's logits only: "
                             "use kd_weight, hard_weight or logit_mse on data: task, augmented, task+corpus or "
                             "augmented+corpus")


def _check_sentence_stages(spec: Section) -> None:
    """Raise ``ValueError`` naming the field when a stage of a sentence student (``static_sentence``)
    asks for anything but the vector terms on the task's texts."""
    arch = spec.family.arch
    for stage in spec.stage_specs():
        o = stage.objective
        if stage.data != "task" or stage.teacher != "finetuned":
            key, value = ("data", stage.data) if stage.data != "task" else ("teacher", stage.teacher)
            raise ValueError(f"{key}: {value}: a '{arch}' student learns the run's teacher's vectors of the task's "
                             "training texts (data: task, teacher: finetuned)")
        labelled = [k for k in ("hard_weight", "logit_mse") if getattr(o, k) > 0]
        if o.layerwise or o.masked_lm or labelled or not o.vectors:
            asked = labelled[0] if labelled else "layer-wise or masked-LM terms" if o.vectors else "no vector term"
            raise ValueError(f"objective: a '{arch}' student learns the teacher's sentence vectors only ({asked} "
                             "given): set vector_mse, vector_cosine or similarity_kd")
