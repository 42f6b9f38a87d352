"""A static sentence encoder: text -> one vector, from one vector per word piece of the teacher's
tokenizer and no attention, the compressed form Model2Vec makes of a sentence-transformers model.

The sentence vector (:class:`StaticSentenceEncoder`, :func:`encode_static`) of a text whose pieces,
tokenized **without** special tokens, are ``t_1 .. t_n``::

    s = (1 / n) * sum_i w(t_i) v(t_i)        (s = 0 when n = 0), then s / |s| when ``normalize``

``v`` is the piece's row of the table ``(rows, dims)`` (``row_of`` maps each id to a row; a piece
without a row reads ``[UNK]``'s) and ``w`` its weight (Zipf or SIF, ``a / (a + p(t))``, or 1; 0 for
every special token, so an unknown piece adds nothing, but it is counted in ``n``).

Why ``1 / n`` and not the weighted mean ``sum w v / sum w``: the same model is also saved for
sentence-transformers (ST), whose ``StaticEmbedding`` is an ``nn.EmbeddingBag`` in ``mean`` mode
over the ids its tokenizer gives with ``add_special_tokens=False``, and stores no weights: the
weights go into its vectors, ``v'(t) = w(t) v(t)`` (as ST folds a Model2Vec file's weights), and it
divides by the count of ids ``n``, unknown ones included; a mean bag takes no per-piece weights, so
the text-dependent ``sum w`` cannot be expressed in that form. The two differ by the positive
factor ``n / sum w`` only, so normalised (``Normalize`` in ST, as in all-MiniLM-L6-v2 and
all-mpnet-base-v2) they are the same vector; unnormalised, tinyplm computes what ST computes, so the
two forms of one saved model give the same vectors. (Model2Vec's own ``encode`` leaves ``[UNK]``
pieces out of ``n``: again only the length differs.)

A saved dir (:func:`save_static_sentence`, written to a temporary sibling and renamed into place)
is both tinyplm's and sentence-transformers':

- ``config.json``: :class:`StaticSentenceConfig` (``model_type: tinyplm_static_sentence``);
- ``model.safetensors``: ``embeddings`` ``(rows, dims)`` as ``table_dtype`` stores it (fp32, fp16,
  or int8 with ``table.scale`` ``(rows,)``: :func:`~tinyplm.models.classic.static.pack_table`),
  ``mapping`` ``(vocab,)`` (``row_of``), ``token_weights`` ``(rows,)``, and ``weights`` ``(vocab,)``
  = ``w(row_of[t]) * scale(row_of[t])`` (scale 1 unless int8). ``embeddings``, ``mapping`` and
  ``weights`` are Model2Vec's key names, which ST's ``StaticEmbedding.load`` folds into one vector
  per id, ``embeddings[mapping[t]] * weights[t]``: so ST reads the int8 table as it is, no float copy;
- the tokenizer's files (``tokenizer.json``, which ST reads, is kept free of truncation and padding);
- ``modules.json`` (``StaticEmbedding`` in the root, then ``Normalize`` in ``1_Normalize`` when
  ``normalize``), ``config_sentence_transformers.json`` (cosine similarity).

tinyplm does not import sentence_transformers here (it is an interop target, not a dependency).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence
from itertools import chain
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from transformers import PretrainedConfig

from tinyplm.config.classic import StaticSpec
from tinyplm.errors import ModelError, TinyplmError
from tinyplm.files import COMPLETE_MARK, read_utf8, replace_dir, tmp_sibling
from tinyplm.models.classic.config import TABLE_DTYPES, WEIGHTINGS
from tinyplm.models.classic.io import WEIGHTS, load_weights
from tinyplm.models.classic.lstm import FamilyModule
from tinyplm.models.classic.piece_ids import piece_ids
from tinyplm.models.classic.static import QWEIGHT, SCALE, TABLE, pack_table, unpack_table
from tinyplm.models.classic.static_init import checked_student_arguments, pca_table, piece_weights, placeholder_pieces

SENTENCE_MODEL_TYPE = "tinyplm_static_sentence"
#: model.safetensors keys: Model2Vec's names (ST folds these three), then tinyplm's own.
EMBEDDINGS, MAPPING, FOLDED = "embeddings", "mapping", "weights"
ROW_WEIGHTS = "token_weights"
#: The two module types of the sentence-transformers layout (the names every ST release since 3 loads).
ST_STATIC, ST_NORMALIZE = "sentence_transformers.models.StaticEmbedding", "sentence_transformers.models.Normalize"
NORMALIZE_DIR = "1_Normalize"
#: The ``a`` of ``a / (a + p)`` when none is given: the recipe's default (``family.static.sif_a``).
DEFAULT_A = float(StaticSpec.model_fields["sif_a"].default)


class StaticSentenceConfig(PretrainedConfig):
    """Shape of a static sentence encoder: ``vocab_size`` (the tokenizer's ids it reads),
    ``table_rows`` and ``embed_dim`` (its table), ``table_dtype`` (how the table is stored: fp32,
    fp16, int8), ``weighting`` (a record: mean, sif or zipf; the weights are a saved buffer) and
    ``normalize`` (L2-normalised output). Raises ``ValueError`` naming a bad value."""

    model_type = SENTENCE_MODEL_TYPE
    attribute_map = {"hidden_size": "embed_dim"}

    @property
    def num_attention_heads(self) -> int:
        """0: no attention."""
        return 0

    @property
    def intermediate_size(self) -> int:
        """0: no feed-forward blocks."""
        return 0

    def __init__(self, vocab_size: int = 3, embed_dim: int = 64, table_rows: int = 1, table_dtype: str = "fp32",
                 weighting: str = "zipf", normalize: bool = True, **kwargs) -> None:
        if table_dtype not in TABLE_DTYPES:
            raise ValueError(f"table_dtype {table_dtype!r} is not one of {', '.join(TABLE_DTYPES)}")
        if weighting not in WEIGHTINGS:
            raise ValueError(f"weighting {weighting!r} is not one of {', '.join(WEIGHTINGS)}")
        self.vocab_size, self.embed_dim, self.table_rows = vocab_size, embed_dim, table_rows
        self.table_dtype, self.weighting, self.normalize = table_dtype, weighting, bool(normalize)
        super().__init__(**kwargs)


class StaticSentenceEncoder(FamilyModule):
    """Word-piece ids -> sentence vectors (see the module docstring for the function and why).

    ``forward(input_ids (batch, seq), attention_mask (batch, seq))`` -> ``(batch, dims)``; the ids are
    the tokenizer's **without** special tokens (:func:`sentence_batch`), padding masked out.

    Inference runs it on one torch thread (``forward_threads``, as the static bag classifier: a
    gather and a mean gain nothing from more)."""

    forward_threads = 1

    def __init__(self, config: StaticSentenceConfig) -> None:
        super().__init__()
        self.config = config
        self.register_buffer("row_of", torch.zeros(config.vocab_size, dtype=torch.int32))
        self.register_buffer("token_weights", torch.ones(config.table_rows))
        self.table = nn.Embedding(config.table_rows, config.embed_dim)

    @property
    def dim(self) -> int:
        """The width of the vectors :meth:`forward` returns (what ``distill.objective`` reads)."""
        return int(self.config.embed_dim)

    def save_to(self, tokenizer, path: Path) -> Path:
        """:func:`save_static_sentence` (what :func:`tinyplm.models.io.save_model` calls)."""
        return save_static_sentence(self, tokenizer, path)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, **_) -> torch.Tensor:
        """``(batch, seq)`` ids and mask -> ``(batch, dims)``. Ids with special tokens (an encoding
        of the teacher's, ``[CLS] .. [SEP]``) weigh 0 but count in ``n``: normalised, the vector is
        the same as without them."""
        mask = attention_mask if attention_mask is not None else torch.ones_like(input_ids)
        rows = self.row_of[input_ids].long()  # (batch, seq)
        v = self.table(rows)  # (batch, seq, dims)
        w = self.token_weights[rows] * mask.to(v.dtype)  # (batch, seq); padding 0, specials 0
        n = mask.to(v.dtype).sum(dim=1, keepdim=True).clamp(min=1)  # (batch, 1): every real piece counts
        pooled = (w.unsqueeze(-1) * v).sum(dim=1) / n  # (batch, dims)
        return F.normalize(pooled, p=2, dim=-1) if self.config.normalize else pooled

    def saved_state(self) -> dict[str, torch.Tensor]:
        """The tensors of model.safetensors (see the module docstring); the table held is first set
        to the values ``table_dtype`` stores, so the model kept and the one loaded agree."""
        dtype = self.config.table_dtype
        packed = pack_table(self.table.weight, dtype)
        with torch.no_grad():
            self.table.weight.copy_(unpack_table(packed, dtype))
        row_w = self.token_weights.detach().float()
        scale = packed[SCALE] if dtype == "int8" else torch.ones_like(row_w)
        state = {EMBEDDINGS: packed[QWEIGHT if dtype == "int8" else TABLE], MAPPING: self.row_of,
                 FOLDED: (row_w * scale)[self.row_of.long()], ROW_WEIGHTS: row_w}
        if dtype == "int8":
            state[SCALE] = packed[SCALE]
        return {k: v.detach().cpu().contiguous() for k, v in state.items()}

    def load_saved_state(self, state: dict[str, torch.Tensor]) -> None:
        """Load what :meth:`saved_state` wrote; raises ``RuntimeError`` naming a missing tensor, a
        shape that does not fit, or a row past the table."""
        dtype = self.config.table_dtype
        for name in (EMBEDDINGS, MAPPING, ROW_WEIGHTS, *((SCALE,) if dtype == "int8" else ())):
            if name not in state:
                raise RuntimeError(f"no tensor {name!r} (the table is stored as {dtype})")
        packed = {QWEIGHT: state[EMBEDDINGS], SCALE: state[SCALE]} if dtype == "int8" else {TABLE: state[EMBEDDINGS]}
        self.load_state_dict({"table.weight": unpack_table(packed, dtype), "row_of": state[MAPPING],
                              "token_weights": state[ROW_WEIGHTS]}, strict=True)
        if len(self.row_of) and not 0 <= int(self.row_of.min()) <= int(self.row_of.max()) < self.config.table_rows:
            raise RuntimeError(f"{MAPPING!r} points past the table's {self.config.table_rows} rows")


def _fallback_row(tokenizer, row: dict[int, int], vocab_size: int) -> int:
    """The row a piece without one reads: ``[UNK]``'s, else the padding's, else any special's
    (weight 0). Raises ``TinyplmError`` when a piece has no row and no special has one."""
    for name in ("unk_token_id", "pad_token_id"):
        i = getattr(tokenizer, name, None)
        if i is not None and i in row:
            return row[i]
    specials = [row[i] for i in tokenizer.all_special_ids if i in row]
    if specials:
        return specials[0]
    if len(row) < vocab_size:
        raise TinyplmError("kept: the tokenizer has no special token for the pieces not kept to read "
                           "(weight 0); keep every piece")
    return 0


def static_sentence_student(embed_pieces: Callable[[Sequence[int]], np.ndarray], tokenizer, dims: int,
                            weighting: str, kept: Sequence[int], counts: np.ndarray | None, normalize: bool, *,
                            table_dtype: str = "fp32", a: float = DEFAULT_A) -> StaticSentenceEncoder:
    """A new static sentence encoder over ``tokenizer``'s pieces, made the way Model2Vec makes one
    (Tulkens and van Dongen 2024), by tinyplm's own steps (:mod:`.static_init`):

    1. ``embed_pieces(ids)`` -> ``(len(ids), hidden)``: each piece's teacher vector. The caller passes
       the teacher's whole sentence pipeline run on the piece framed by the tokenizer's specials
       (``[CLS] piece [SEP]``: its pooling and normalisation included), so the table starts in the
       space the teacher's sentence vectors live in, the space a tokenlearn-style training on the
       teacher's sentence vectors then fits; ``ids`` are ``kept`` plus the tokenizer's specials,
       ascending, asked for once.
    2. PCA to ``dims`` components (:func:`~.static_init.pca_table`: centred, not whitened).
    3. weights (:func:`~.static_init.piece_weights`): ``zipf`` (the vocabulary order taken as
       frequency rank, as Model2Vec), ``sif`` (``counts`` ``(vocab_size,)``: the piece counts of a
       corpus) or ``mean``; specials weigh 0.

    What differs from Model2Vec, and why: the pieces are the ones the caller keeps (a piece not kept
    reads ``[UNK]``'s row, weight 0), so a corpus's vocabulary makes a smaller file; the specials
    always get a row, so that row exists. The weights stay a buffer beside the table instead of being
    multiplied into it: the int8 scale is then per row of the plain vectors, and training can move a
    vector without undoing its weight; they are folded only into the ST export. The mean divides by
    the pieces' count, as ST's bag does (the module docstring), and no text is cut at 512 pieces.

    ``table_dtype``: how the table is stored (fp32, fp16, int8); ``a``: the ``a`` of ``a / (a + p)``.
    Raises ``TinyplmError`` (a ``ValueError``) naming the argument: ``dims`` over the pieces kept
    (before any teacher pass) or over the teacher's width, an unknown ``weighting``, ``sif`` without
    ``counts``, a ``kept`` id outside the tokenizer, a wrong shape from ``embed_pieces``."""
    vocab_size = len(tokenizer)
    specials = {int(i) for i in tokenizer.all_special_ids}
    ids = sorted({int(i) for i in kept} | specials)
    freq = checked_student_arguments(ids, vocab_size, dims, weighting, counts)
    vectors = np.asarray(embed_pieces(ids), dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[0] != len(ids):
        raise TinyplmError(f"embed_pieces gave shape {vectors.shape} for {len(ids)} pieces; expected "
                           f"({len(ids)}, hidden)")
    try:
        table, _ = pca_table(vectors, dims)
    except ValueError as exc:
        raise TinyplmError(str(exc)) from None
    row = {piece: r for r, piece in enumerate(ids)}
    row_of = torch.full((vocab_size,), _fallback_row(tokenizer, row, vocab_size), dtype=torch.int32)
    row_of[torch.tensor(ids, dtype=torch.long)] = torch.arange(len(ids), dtype=torch.int32)
    config = StaticSentenceConfig(vocab_size=vocab_size, embed_dim=dims, table_rows=len(ids), table_dtype=table_dtype,
                                  weighting=weighting, normalize=normalize)
    model = StaticSentenceEncoder(config)
    with torch.no_grad():
        model.table.weight.copy_(torch.from_numpy(table))
        model.row_of.copy_(row_of)
        model.token_weights.copy_(torch.from_numpy(piece_weights(weighting, ids, freq, specials, a,
                                                                 placeholder_pieces(tokenizer, ids))))
    return model.eval()


def static_sentence_shape(config: StaticSentenceConfig) -> dict:
    """What reports show as a static sentence encoder's shape."""
    return {"arch": "static_sentence", "dims": config.embed_dim, "rows": config.table_rows,
            "table": config.table_dtype, "weighting": config.weighting}


def sentence_batch(tokenizer, texts: Sequence[str], max_length: int | None = None) -> dict[str, torch.Tensor]:
    """``texts`` as :class:`StaticSentenceEncoder` reads them: ``input_ids`` and ``attention_mask``
    ``(batch, seq)``, no special tokens, padded, cut at ``max_length`` pieces (None: never)."""
    enc = tokenizer(list(texts), add_special_tokens=False, truncation=max_length is not None, max_length=max_length,
                    padding=True, return_tensors="pt", return_token_type_ids=False)
    # long: a batch of only empty texts comes back as an empty float tensor
    return {"input_ids": enc["input_ids"].long(), "attention_mask": enc["attention_mask"].long()}


def encode_static(model: StaticSentenceEncoder, tokenizer, texts: Sequence[str],
                  max_length: int | None = None) -> np.ndarray:
    """``texts`` -> their vectors ``(len(texts), dims)`` float32, as ``model``'s forward computes them
    over :func:`sentence_batch`, in numpy: one batched tokenizer call, then the pieces' rows and
    weights gathered and summed per text with ``np.add.reduceat`` (no padding, no torch per text)."""
    dims = model.config.embed_dim
    if not len(texts):
        return np.zeros((0, dims), np.float32)
    ids = piece_ids(tokenizer, texts, max_length)
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    flat = np.fromiter(chain.from_iterable(ids), dtype=np.int64, count=int(lengths.sum()))
    table = model.table.weight.detach().cpu().float().numpy()
    rows = model.row_of.cpu().numpy()[flat]  # (pieces,)
    x = table[rows] * model.token_weights.detach().cpu().float().numpy()[rows, None]  # (pieces, dims)
    out = np.zeros((len(ids), dims), np.float32)
    full = lengths > 0
    if full.any():  # reduceat over the non-empty texts only: an empty slice would read the next text's row
        starts = (np.cumsum(lengths) - lengths)[full]
        out[full] = np.add.reduceat(x, starts, axis=0) / lengths[full, None].astype(np.float32)
    if model.config.normalize:
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)  # F.normalize's eps
    return out


def _plain_tokenizer_json(folder: Path) -> None:
    """Drop any truncation or padding a tokenizer call left in ``folder/tokenizer.json`` (ST reads
    that file and would truncate with it; tinyplm never does unless asked)."""
    from tokenizers import Tokenizer

    file = folder / "tokenizer.json"
    tok = Tokenizer.from_file(str(file))
    if tok.truncation is not None or tok.padding is not None:
        tok.no_truncation()
        tok.no_padding()
        tok.save(str(file))


def _write(model: StaticSentenceEncoder, tokenizer, folder: Path) -> None:
    """Every file of a saved dir (see the module docstring) into ``folder``."""
    from safetensors.torch import save_file

    model.config.architectures = [type(model).__name__]
    state = model.saved_state()  # first: the table held is rounded to its stored precision here
    model.config.save_pretrained(folder)
    save_file(state, str(folder / WEIGHTS), metadata={"format": "pt"})
    tokenizer.save_pretrained(folder)
    _plain_tokenizer_json(folder)
    modules = [{"idx": 0, "name": "0", "path": "", "type": ST_STATIC}]
    if model.config.normalize:
        modules.append({"idx": 1, "name": "1", "path": NORMALIZE_DIR, "type": ST_NORMALIZE})
        (folder / NORMALIZE_DIR).mkdir()
        (folder / NORMALIZE_DIR / "config.json").write_text("{}\n", encoding="utf-8")
    (folder / "modules.json").write_text(json.dumps(modules, indent=2) + "\n", encoding="utf-8")
    st_config = {"model_type": "SentenceTransformer", "prompts": {}, "default_prompt_name": None,
                 "similarity_fn_name": "cosine"}
    (folder / "config_sentence_transformers.json").write_text(json.dumps(st_config, indent=2) + "\n",
                                                              encoding="utf-8")
    (folder / COMPLETE_MARK).write_text("ok\n")


def save_static_sentence(model: StaticSentenceEncoder, tokenizer, out: Path) -> Path:
    """Write ``model`` and ``tokenizer`` to the dir ``out`` (see the module docstring) atomically: into
    a temporary sibling, renamed onto ``out`` once complete (an existing ``out`` is replaced only
    then, as ``models.io.save_model`` does). Returns ``out``. Raises ``TinyplmError`` when the
    tokenizer is not a fast one (ST reads its tokenizer.json) or has ids past the model's vocabulary."""
    out = Path(out)
    if not getattr(tokenizer, "is_fast", False):
        raise TinyplmError("a static sentence encoder is saved with a fast tokenizer (tokenizer.json), which "
                           f"sentence-transformers reads; got {type(tokenizer).__name__}")
    if len(tokenizer) > model.config.vocab_size:
        raise TinyplmError(f"the tokenizer has {len(tokenizer)} pieces but the model reads {model.config.vocab_size}")
    tmp = tmp_sibling(out)
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    try:
        _write(model, tokenizer, tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return replace_dir(tmp, out)


def is_static_sentence_dir(path: Path) -> bool:
    """True when ``path/config.json`` names a static sentence encoder (False for anything else, a
    damaged file included)."""
    try:
        doc = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("model_type") == SENTENCE_MODEL_TYPE


def load_static_sentence(path: Path):
    """A dir :func:`save_static_sentence` wrote -> (model in eval mode, its tokenizer).

    Raises ``ModelError`` naming the file when config.json is missing, damaged or not a static
    sentence encoder's, the weights are missing or do not fit it, or the tokenizer cannot be loaded
    or has more pieces than the model reads."""
    from transformers import AutoTokenizer

    path = Path(path)
    cfg_file = path / "config.json"
    try:
        doc = json.loads(read_utf8(cfg_file, ModelError))
    except ValueError as exc:
        raise ModelError(f"{cfg_file}: not JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("model_type") != SENTENCE_MODEL_TYPE:
        found = doc.get("model_type") if isinstance(doc, dict) else type(doc).__name__
        raise ModelError(f"{cfg_file}: model_type {found!r}, not {SENTENCE_MODEL_TYPE!r} (a static sentence encoder)")
    try:
        config = StaticSentenceConfig.from_pretrained(str(path))
    except (OSError, ValueError, TypeError) as exc:
        raise ModelError(f"{cfg_file}: not a static sentence encoder's config ({exc.__class__.__name__}: {exc})") \
            from None
    model = StaticSentenceEncoder(config)
    load_weights(model, path)
    try:
        tok = AutoTokenizer.from_pretrained(str(path), trust_remote_code=False)
    except Exception as exc:  # transformers raises many types for broken tokenizer files
        raise ModelError(f"{path}: cannot load its tokenizer ({exc.__class__.__name__})") from None
    if len(tok) > config.vocab_size:
        raise ModelError(f"{path}: its tokenizer has {len(tok)} pieces but the model reads {config.vocab_size} "
                         "(vocab_size in config.json); the tokenizer is not this model's")
    return model.eval(), tok
