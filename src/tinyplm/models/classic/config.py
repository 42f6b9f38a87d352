"""The config of a classic student: the only input its constructor takes, saved as config.json.

It is a ``transformers`` ``PretrainedConfig`` (so ``num_labels``/``id2label``, ``save_pretrained``
and extra keys such as ``tinyplm_task`` behave as for the transformer models), with
``model_type: tinyplm_family``, which ``transformers``' Auto classes do not know: loading goes
through :func:`tinyplm.models.classic.io.load_family` only.

``arch`` picks the model (see ``ARCHS``); the other keys are the shape of that model.
"""

from __future__ import annotations

from transformers import PretrainedConfig

MODEL_TYPE = "tinyplm_family"
#: arch -> what it is (the recipe's ``students[].family.arch``).
ARCHS = {
    "tfidf_lr": "TF-IDF of word n-grams + logistic regression",
    "lstm": "LSTM over word embeddings",
    "bilstm": "BiLSTM over word embeddings",
    "elmo_bilstm": "frozen ELMo-style biLM, scalar mix, BiLSTM",
    "feature_bilstm": "frozen transformer, last layers concatenated, BiLSTM",
    "static": "bag of the teacher's word-piece vectors (Model2Vec-style table), linear classifier",
    "static_cnn": "1-D CNN over the teacher's word-piece vectors (Model2Vec-style table)",
    "static_bilstm": "BiLSTM over the teacher's word-piece vectors (Model2Vec-style table)",
}
#: The archs that read the teacher's own tokenizer (and are saved with its files, not a word vocabulary).
TEACHER_TOKENIZED = ("feature_bilstm", "static", "static_cnn", "static_bilstm")
#: The archs over a static word-piece table (:mod:`tinyplm.models.classic.static`).
STATIC_ARCHS = ("static", "static_cnn", "static_bilstm")
POOLINGS = ("max", "mean", "attention")
#: How a static table is stored in model.safetensors: float32, float16, or int8 with one scale per row.
TABLE_DTYPES = ("fp32", "fp16", "int8")
WEIGHTINGS = ("mean", "sif", "zipf")


class FamilyConfig(PretrainedConfig):
    """Shape of a classic student.

    ``vocab_size``: word (or n-gram) ids; ``embed_dim``: word-vector width; ``hidden``: LSTM width
    per direction; ``layers``: stacked LSTM layers; ``bidirectional``; ``pooling``: max, mean or
    attention over the LSTM states; ``dropout``; ``embeddings``: where the word vectors came from
    (random, word2vec, glove: a record only). ``encoder``: the frozen transformer's config dict
    (feature_bilstm); ``feature_layers``: its last hidden layers concatenated. ``bilm``: the
    biLM's config dict (elmo_bilstm).

    Static archs (``static``, ``static_cnn``, ``static_bilstm``): ``vocab_size`` is the teacher's
    word pieces (the ids they read), ``table_rows`` the rows of their table (the pieces kept),
    ``embed_dim`` its width, ``table_dtype`` how it is stored (fp32, fp16, int8), ``hidden`` the
    width of the ReLU layers before the classifier (0: none; ``static_bilstm``: its LSTM's width per
    direction, with ``layers`` and ``pooling`` as for ``bilstm``), ``hidden_layers`` how many
    (configs saved before it read 1),
    ``weighting`` how the bag weighs its pieces (a record: the weights are a saved buffer),
    ``filters`` the CNN's ``[width, channels]`` pairs, ``word_dropout`` the share of pieces left out
    of each sentence while training.
    """

    model_type = MODEL_TYPE
    #: the names code written for transformers reads (``models.shape_of``: layers and width)
    attribute_map = {"num_hidden_layers": "layers", "hidden_size": "hidden"}

    @property
    def num_attention_heads(self) -> int:
        """0: no attention (so no transformer FLOP count is made for it, ``evaluate.compute``)."""
        return 0

    @property
    def intermediate_size(self) -> int:
        """0: no feed-forward blocks."""
        return 0

    def __init__(self, arch: str = "bilstm", vocab_size: int = 3, embed_dim: int = 100, hidden: int = 128,
                 layers: int = 1, bidirectional: bool = True, pooling: str = "max", dropout: float = 0.1,
                 embeddings: str = "random", encoder: dict | None = None, feature_layers: int = 4,
                 bilm: dict | None = None, table_rows: int = 0, table_dtype: str = "fp32",
                 weighting: str = "mean", filters: list | None = None, word_dropout: float = 0.0,
                 hidden_layers: int = 1, **kwargs) -> None:
        if arch not in ARCHS:
            raise ValueError(f"classic arch {arch!r} is not one of {', '.join(ARCHS)}")
        if pooling not in POOLINGS:
            raise ValueError(f"pooling {pooling!r} is not one of {', '.join(POOLINGS)}")
        if table_dtype not in TABLE_DTYPES:
            raise ValueError(f"table_dtype {table_dtype!r} is not one of {', '.join(TABLE_DTYPES)}")
        if weighting not in WEIGHTINGS:
            raise ValueError(f"weighting {weighting!r} is not one of {', '.join(WEIGHTINGS)}")
        self.arch, self.vocab_size, self.embed_dim, self.hidden = arch, vocab_size, embed_dim, hidden
        self.layers, self.bidirectional, self.pooling, self.dropout = layers, bidirectional, pooling, dropout
        self.embeddings, self.encoder, self.feature_layers, self.bilm = embeddings, encoder, feature_layers, bilm
        self.table_rows, self.table_dtype, self.weighting = table_rows, table_dtype, weighting
        self.filters = [list(f) for f in filters] if filters else None
        self.word_dropout, self.hidden_layers = word_dropout, hidden_layers
        super().__init__(**kwargs)


def family_shape(config: FamilyConfig) -> dict:
    """What reports show as a classic student's shape: its arch and the sizes that apply to it."""
    if config.arch == "tfidf_lr":
        return {"arch": config.arch, "n-grams": config.vocab_size - 3, "ngram_max": getattr(config, "ngram_max", 1)}
    if config.arch in STATIC_ARCHS:
        shape = {"arch": config.arch, "dims": config.embed_dim, "rows": config.table_rows, "table": config.table_dtype}
        if config.arch == "static_bilstm":
            return {**shape, "layers": config.layers, "hidden": config.hidden, "pooling": config.pooling}
        if config.arch == "static":
            shape["weighting"] = config.weighting
        else:
            shape.update(widths=[w for w, _ in config.filters or []], channels=sum(c for _, c in config.filters or []))
        if config.hidden:
            shape["hidden"] = [config.hidden] * config.hidden_layers if config.hidden_layers > 1 else config.hidden
        return shape
    shape = {"arch": config.arch, "layers": config.layers, "hidden": config.hidden, "pooling": config.pooling}
    if config.arch in ("lstm", "bilstm"):
        shape.update(words=config.vocab_size, embeddings=f"{config.embeddings} {config.embed_dim}")
    if config.arch == "feature_bilstm":
        shape.update(feature_layers=config.feature_layers)
    return shape
