"""SentenceEncoder: a Hugging Face encoder whose token vectors become one vector per text, pooled
exactly as the checkpoint's sentence-transformers (ST) layout says (:mod:`tinyplm.models.pooling`).

``load_sentence_encoder(dir)`` reads an ST folder (modules.json, the encoder at its root or in a
subfolder, Dense weights); ``save_sentence_encoder`` writes one that ``SentenceTransformer(dir)`` loads
and that gives the same vectors; ``encode_texts`` embeds texts in batches of similar length. A plain
encoder dir has no pooling to read: it loads only with a layout given.
"""

from __future__ import annotations

import inspect
import json
import shutil
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tinyplm.errors import ModelError, TinyplmError
from tinyplm.files import replace_dir
from tinyplm.models import roles
from tinyplm.models.io import save_model
from tinyplm.models.layout_files import layout_json, with_paths
from tinyplm.models.loaded import loaded
from tinyplm.models.loading import LOAD_ERRORS, check_model_dir, load_tokenizer, quiet_transformers, shape_mismatch
from tinyplm.models.onnx import FORMAT_KEY
from tinyplm.models.pooling import ACTIVATIONS, DENSE_WEIGHTS, DenseSpec, SentenceLayout, pool, read_layout
from tinyplm.models.quantized import QUANT_KEY
from tinyplm.models.safetensors_header import safetensors_shapes
from tinyplm.models.sentence_fit import layout_mismatch, own_limit, readable_positions
from tinyplm.models.shape import SHAPE_KEY, build_shaped, duplicate_keys
from tinyplm.tasks.heads import Head


class DenseLayer(nn.Module):
    """One ST Dense layer: ``activation(linear(x))``; its state keys (``linear.weight``,
    ``linear.bias``) are the ones ST saves in ``{n}_Dense/model.safetensors``."""

    def __init__(self, spec: DenseSpec) -> None:
        super().__init__()
        self.linear = nn.Linear(spec.in_features, spec.out_features, bias=spec.bias)
        self.activation = ACTIVATIONS[spec.activation]()

    def forward(self, x: Tensor) -> Tensor:  # (batch, in) -> (batch, out)
        return self.activation(self.linear(x))


class SentenceEncoder(nn.Module):
    """``encoder`` (a bare Hugging Face model such as ``BertModel``), then pooling, the Dense layers
    and L2 normalisation as ``layout`` says. ``layout.pooling.dimension`` is set from the encoder.

    Raises ``ModelError`` when the layout's pooling width differs from the encoder's hidden size or a
    Dense layer's inputs differ from what the layer before it gives."""

    def __init__(self, encoder: nn.Module, layout: SentenceLayout) -> None:
        super().__init__()
        width = roles.config_shape(encoder.config).hidden
        mismatch = layout_mismatch(layout, width)
        if mismatch is not None:
            raise ModelError(mismatch)
        self.encoder = encoder
        self.layout = replace(layout, pooling=replace(layout.pooling, dimension=width))
        self.dense = nn.ModuleList(DenseLayer(spec) for spec in layout.dense)
        self.takes_token_types = "token_type_ids" in inspect.signature(encoder.forward).parameters

    @property
    def dim(self) -> int:
        """The width of the vectors :meth:`forward` returns."""
        return int(self.layout.dim)

    @property
    def config(self):
        """The encoder's config (its sizes, vocabulary, positions)."""
        return self.encoder.config

    def save_to(self, tokenizer, path: Path) -> Path:
        """:func:`save_sentence_encoder` (what :func:`tinyplm.models.io.save_model` calls)."""
        return save_sentence_encoder(self, tokenizer, path)

    def num_parameters(self, exclude_embeddings: bool = False) -> int:
        """The encoder's parameters (``transformers``' count, its embedding tables left out when
        asked) and the Dense layers'."""
        dense = sum(p.numel() for p in self.dense.parameters())
        return int(self.encoder.num_parameters(exclude_embeddings=exclude_embeddings)) + dense

    def with_encoder(self, encoder: nn.Module) -> SentenceEncoder:
        """A new model of ``encoder`` laid out as this one (:func:`with_encoder`)."""
        return with_encoder(self, encoder)

    @property
    def base_model(self) -> nn.Module:
        """The encoder, where :func:`tinyplm.models.roles.base_model` finds it (as on a transformers
        task model), so the role table's paths (layers, attention, FFN) reach into it."""
        return self.encoder

    def forward(self, input_ids: Tensor, attention_mask: Tensor, token_type_ids: Tensor | None = None) -> Tensor:
        """``(batch, seq)`` token ids and mask (and segment ids, passed only to an encoder that takes
        them: MPNet and DistilBERT do not) -> ``(batch, dim)`` sentence vectors."""
        x = self.features(input_ids, attention_mask, token_type_ids)
        return F.normalize(x, p=2, dim=-1) if self.layout.normalize else x

    def features(self, input_ids: Tensor, attention_mask: Tensor, token_type_ids: Tensor | None = None) -> Tensor:
        """The vectors before the final L2 normalisation (pooled, then through the Dense layers)
        ``(batch, dim)``: their lengths still say how strongly the text points where it points
        (a static table made from a teacher keeps them, as Model2Vec does)."""
        inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if token_type_ids is not None and self.takes_token_types:
            inputs["token_type_ids"] = token_type_ids
        hidden = self.encoder(**inputs)[0]  # (batch, seq, hidden)
        x = pool(hidden, attention_mask, self.layout.pooling)  # (batch, hidden)
        for layer in self.dense:
            x = layer(x)  # (batch, out)
        return x


def with_encoder(template: SentenceEncoder, encoder: nn.Module) -> SentenceEncoder:
    """A new :class:`SentenceEncoder` of ``encoder`` laid out as ``template``: its pooling and
    normalisation; its Dense layers (weights copied) only when ``encoder`` is as wide as
    ``template``'s, since they take that width (a narrower student's vectors are its own width)."""
    width = roles.config_shape(encoder.config).hidden
    keep = width == template.layout.pooling.dimension
    layout = replace(template.layout, pooling=replace(template.layout.pooling, dimension=width),
                     dense=template.layout.dense if keep else ())
    out = SentenceEncoder(encoder, layout)
    if keep:
        out.dense.load_state_dict(template.dense.state_dict())
    return out


# ---------------------------------------------------------------------------------------------
# loading


def load_sentence_encoder(path: Path, layout: SentenceLayout | None = None) -> tuple[SentenceEncoder, object]:
    """An ST folder (or, with ``layout``, a plain encoder dir) -> (model in eval mode, tokenizer).

    ``layout``, when given, is used instead of the folder's modules.json. Raises ``ModelError`` naming
    the dir or file: a dir without modules.json and no layout, a damaged layout (see
    :func:`~tinyplm.models.pooling.read_layout`), encoder or tokenizer files (see
    :func:`~tinyplm.models.loading.check_model_dir`), Dense weights that do not fit their config."""
    path = Path(path)
    if not path.is_dir():
        raise ModelError(f"{path}: model directory not found")
    found = layout if layout is not None else read_layout(path)
    if found is None:
        raise ModelError(
            f"{path}: no modules.json, so tinyplm cannot tell how this encoder turns its token vectors into one: "
            "the pooling is read from modules.json (the sentence-transformers layout), never assumed. Save the "
            "model as a sentence-transformers folder, or give the pooling: load_sentence_encoder(path, "
            "layout=SentenceLayout(Pooling('mean'), normalize=True))")
    quiet_transformers()
    folder = path / found.transformer_path
    encoder = _load_encoder(folder, check_model_dir(folder))
    tokenizer = load_tokenizer(folder, encoder.config.vocab_size)
    if found.do_lower_case:
        lowercase(tokenizer)
    try:
        model = SentenceEncoder(encoder, found)
    except ModelError as exc:
        raise ModelError(f"{path}: {exc}") from None
    for spec, layer in zip(found.dense, model.dense, strict=True):
        if not spec.path:
            raise ModelError(f"{path}: a Dense layer of the layout names no folder to read its weights from")
        _load_dense(path / spec.path, layer)
    return model.eval(), tokenizer


def _load_encoder(folder: Path, cfg: dict) -> nn.Module:
    """The bare encoder in ``folder`` (a pruned one built to its recorded shape); ``ModelError``
    for an ONNX, OpenVINO or quantized model, or weights that cannot be loaded."""
    if cfg.get(FORMAT_KEY) or cfg.get(QUANT_KEY):
        form = cfg.get(FORMAT_KEY) or "quantized"
        raise ModelError(f"{folder / 'config.json'}: a {form} model cannot be loaded as a SentenceEncoder; "
                         "load its PyTorch form")
    from transformers import AutoConfig, AutoModel

    try:
        config = AutoConfig.from_pretrained(str(folder), trust_remote_code=False)
    except LOAD_ERRORS as exc:
        raise ModelError(f"{folder}: cannot load the encoder ({exc.__class__.__name__}: {_one_line(exc)})") from None
    if cfg.get(SHAPE_KEY):
        return _load_shaped(folder, config)
    try:
        model = AutoModel.from_pretrained(str(folder), config=config, trust_remote_code=False)
    except LOAD_ERRORS as exc:
        mismatch = shape_mismatch(folder, Head.SEQUENCE, False, config)
        if mismatch:  # the tensor, in words (transformers points at a report it printed, which is silenced)
            raise ModelError(f"{folder / 'model.safetensors'}: does not fit {folder / 'config.json'}: {mismatch}") \
                from None
        raise ModelError(f"{folder}: cannot load the encoder ({exc.__class__.__name__}: {_one_line(exc)})") from None
    return loaded(model, folder).eval()


def _load_shaped(folder: Path, config) -> nn.Module:
    """A pruned bare encoder (config.json records per-layer shapes) from its model.safetensors."""
    from safetensors.torch import load_file

    file = folder / "model.safetensors"
    if not file.is_file():
        raise ModelError(f"{folder}: a pruned encoder ({SHAPE_KEY} in config.json) needs model.safetensors")
    model = build_shaped(config, roles.task_class(config.model_type, "Model"))
    try:
        missing, unexpected = model.load_state_dict(load_file(str(file)), strict=False)
    except LOAD_ERRORS as exc:
        raise ModelError(f"{file}: does not fit {folder / 'config.json'} ({_one_line(exc)})") from None
    missing = [k for k in missing if k not in duplicate_keys(model)]
    if missing or unexpected:
        raise ModelError(f"{file}: does not fit {folder / 'config.json'}: missing {missing[:5]}, "
                         f"unexpected {unexpected[:5]}")
    return loaded(model, folder).eval()


def _load_dense(folder: Path, layer: DenseLayer) -> None:
    """Load a Dense folder's weights (model.safetensors, else pytorch_model.bin) into ``layer``."""
    file = next((folder / name for name in DENSE_WEIGHTS if (folder / name).is_file()), None)
    if file is None:
        raise ModelError(f"{folder}: the Dense module has no weights (expected {' or '.join(DENSE_WEIGHTS)})")
    try:
        if file.suffix == ".safetensors":
            from safetensors.torch import load_file

            safetensors_shapes(file)  # a cut-short file is named here, not by the Rust loader
            state = load_file(str(file))
        else:
            state = torch.load(file, map_location="cpu", weights_only=True)
    except ModelError:
        raise
    except LOAD_ERRORS as exc:
        raise ModelError(f"{file}: cannot load weights ({exc.__class__.__name__}: {_one_line(exc)})") from None
    if not isinstance(state, dict):
        raise ModelError(f"{file}: expected a state dict of tensors, got {type(state).__name__}")
    try:
        layer.load_state_dict(state)
    except RuntimeError as exc:
        raise ModelError(f"{file}: does not fit {folder / 'config.json'} ({_one_line(exc)})") from None


def lowercase(tokenizer) -> None:
    """Make ``tokenizer`` lower-case its input, as ST's Transformer does for ``do_lower_case``: a
    ``Lowercase`` normalizer first, unless the normalizer already has one; and a tokenizer class with
    a ``do_lower_case`` setting gets it on, so that a saved copy lower-cases too (transformers builds
    such a class's normalizer from the setting when it loads, dropping a ``Lowercase`` it does not ask
    for), with ``strip_accents`` off where it was left to follow the case (``café`` stays ``café``)."""
    if not getattr(tokenizer, "is_fast", False):
        target = tokenizer if hasattr(tokenizer, "do_lower_case") else tokenizer.basic_tokenizer
        target.do_lower_case = True
        return
    from tokenizers.normalizers import Lowercase
    from tokenizers.normalizers import Sequence as Chain

    backend = tokenizer.backend_tokenizer
    current = backend.normalizer
    parts = list(current) if isinstance(current, Chain) else [] if current is None else [current]
    if not any(isinstance(part, Lowercase) for part in parts):
        backend.normalizer = Chain([Lowercase(), *parts])
    if hasattr(tokenizer, "do_lower_case"):
        tokenizer.do_lower_case = True
        tokenizer.init_kwargs["do_lower_case"] = True
        if getattr(tokenizer, "strip_accents", False) is None:  # None strips them where it lower-cases
            tokenizer.strip_accents = False  # as read now (and as sentence-transformers' lower() reads)
            tokenizer.init_kwargs["strip_accents"] = False


def read_as_layout(tokenizer, path: Path) -> None:
    """Make ``tokenizer`` (of the sentence-transformers folder ``path``'s encoder) read text as the
    folder's layout says (``do_lower_case``), as :func:`load_sentence_encoder` does; a folder
    without modules.json is left as it is."""
    layout = read_layout(Path(path))
    if layout is not None and layout.do_lower_case:
        lowercase(tokenizer)


def _one_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit] + "..."


# ---------------------------------------------------------------------------------------------
# saving


def save_sentence_encoder(model: SentenceEncoder, tokenizer, out: Path) -> Path:
    """Write ``model`` as an ST folder at ``out``: the encoder and tokenizer at its root (as
    :func:`~tinyplm.models.io.save_model` writes them), modules.json, ``1_Pooling/config.json``,
    ``{n}_Dense`` (config and model.safetensors) per Dense layer, the Normalize entry,
    sentence_bert_config.json and config_sentence_transformers.json.

    The folder appears whole or not at all: it is written beside ``out`` and renamed into place, and
    an existing ``out`` is replaced only then. Returns ``out``."""
    out = Path(out)
    stage = out.with_name(out.name + ".st-tmp")
    if stage.exists():  # left by a save that was killed
        shutil.rmtree(stage)
    layout = with_paths(model.layout)
    save_model(model.encoder, tokenizer, stage)
    for name, value in layout_json(layout).items():
        file = stage / name
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")
    from safetensors.torch import save_file

    for spec, layer in zip(layout.dense, model.dense, strict=True):
        state = {k: v.detach().cpu().contiguous() for k, v in layer.state_dict().items()}
        save_file(state, str(stage / spec.path / "model.safetensors"), metadata={"format": "pt"})
    return replace_dir(stage, out)


# ---------------------------------------------------------------------------------------------
# encoding


def declare_max_length(model: object, max_length: int) -> bool:
    """Make an embedding model (a :class:`SentenceEncoder`, or its graph in another runtime, whose
    layout lives in its ``sentence`` parts) declare ``max_length`` as the token limit
    sentence-transformers applies (its layout's ``max_seq_length``, saved in
    ``sentence_bert_config.json``), so a user who loads it reads texts as far as it was measured.
    Returns whether the model has a layout (a static encoder or a classifier has none: unchanged).
    Raises ``TinyplmError`` for a ``max_length`` below 1."""
    if max_length < 1:
        raise TinyplmError(f"max_length must be at least 1, got {max_length}")
    layout = getattr(model, "layout", None)
    if not isinstance(layout, SentenceLayout):
        return False
    declared = replace(layout, max_seq_length=max_length)
    if isinstance(model, SentenceEncoder):
        model.layout = declared
    else:  # a graph: its layout is a property of its sentence parts
        model.sentence = replace(model.sentence, layout=declared)
    return True


def default_max_length(model: SentenceEncoder, tokenizer) -> int:
    """The token limit ST applies: the layout's ``max_seq_length``, else the tokenizer's
    ``model_max_length``; either capped at the positions the encoder can read (a ``max_seq_length``
    past them, which ST itself crashes on for longer texts, is cut to them:
    :func:`~tinyplm.models.sentence_fit.positions_cap`)."""
    tokenizer_limit = int(tokenizer.model_max_length)
    own = own_limit(model.layout.max_seq_length, tokenizer_limit, readable_positions(getattr(model, "config", None)))
    return own if own is not None else tokenizer_limit


def encode_texts(model: SentenceEncoder, tokenizer, texts: Sequence[str], max_length: int | None = None,
                 batch_size: int = 64) -> np.ndarray:
    """``(len(texts), model.dim)`` float32 sentence vectors, row i for ``texts[i]``; ``model`` a
    :class:`SentenceEncoder` or its graph in another runtime (``OrtEmbedder``, ``OvEmbedder``: no
    parameters, run on the CPU).

    Texts are tokenized once (cut to ``max_length`` tokens; None: :func:`default_max_length`), run
    longest first in batches of ``batch_size`` so each batch pads little, with gradients off and a
    PyTorch model in eval mode (its mode is restored after). Raises ``TinyplmError`` for a text that
    is not a string or a ``batch_size`` below 1."""
    texts = list(texts)
    bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
    if bad is not None:
        raise TinyplmError(f"encode_texts: texts[{bad}] is {type(texts[bad]).__name__}; expected a string")
    if batch_size < 1:
        raise TinyplmError(f"encode_texts: batch_size must be at least 1, got {batch_size}")
    out = np.zeros((len(texts), model.dim), dtype=np.float32)
    if not texts:
        return out
    limit = max_length if max_length is not None else default_max_length(model, tokenizer)
    encoded = tokenizer(texts, truncation=True, max_length=limit)
    keys = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in encoded]
    order = sorted(range(len(texts)), key=lambda i: -len(encoded["input_ids"][i]))
    torch_model = isinstance(model, nn.Module)
    device = next(model.parameters()).device if torch_model else torch.device("cpu")
    training = model.training if torch_model else False
    if torch_model:
        model.eval()
    try:
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                rows = order[start:start + batch_size]
                batch = tokenizer.pad({k: [encoded[k][i] for i in rows] for k in keys}, padding=True,
                                      return_attention_mask=True, return_tensors="pt",
                                      padding_side="right")  # a tokenizer saved with left moves every position
                vectors = model(**{k: v.to(device) for k, v in batch.items()})
                out[rows] = vectors.float().cpu().numpy()
    finally:
        if torch_model:
            model.train(training)
    return out
