"""A saved model opened for looking inside it: layer states and attention, whatever its head.

Probing (:mod:`tinyplm.evaluate.probe`) and head analysis (:mod:`tinyplm.evaluate.head_run`) run
float PyTorch encoders through :func:`tinyplm.models.features.forward_features`. ONNX, OpenVINO
and quantized model dirs run outside PyTorch (or without float weights) and are refused, saying
so. :func:`random_copy` gives the random-encoder control: the same modules, freshly initialised.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tinyplm.errors import TinyplmError
from tinyplm.models import check_model_dir
from tinyplm.models.head_loading import load_for_head
from tinyplm.models.onnx import FORMAT_KEY
from tinyplm.models.quantized import QUANT_KEY
from tinyplm.tasks.encoding import Encoded, collate, length_sorted_batches, model_inputs
from tinyplm.tasks.heads import Head


@dataclass
class OpenedModel:
    """A float PyTorch model in eval mode, its tokenizer, and the head its config names
    (``trained_head``: config.json names a task head, so its outputs were trained)."""

    model: nn.Module
    tokenizer: Any
    head: Head
    labels: tuple[str, ...]
    trained_head: bool
    path: Path


def not_analysable(cfg: dict) -> str | None:
    """Why a model with config ``cfg`` cannot be looked inside (None when it can)."""
    if cfg.get(FORMAT_KEY):
        return f"it is an {cfg[FORMAT_KEY]} model (looking inside needs the PyTorch model it was made from)"
    if cfg.get(QUANT_KEY):
        return "it holds quantized weights (looking inside needs the float PyTorch model it was made from)"
    return None


def open_model(path: Path) -> OpenedModel:
    """Load ``path`` with the head its config names, as float32 in eval mode.

    Raises ``ModelError`` for a missing or damaged model dir and ``TinyplmError`` for an ONNX,
    OpenVINO or quantized one."""
    path = Path(path)
    cfg = check_model_dir(path)
    why = not_analysable(cfg)
    if why:
        raise TinyplmError(f"{path}: cannot look inside: {why}")
    archs = cfg.get("architectures") or []
    head = Head.of_architectures(archs)
    trained = any(head.auto_suffix in a for a in archs)
    id2label = cfg.get("id2label") or {}
    labels = tuple(str(id2label[k]) for k in sorted(id2label, key=lambda k: int(k))) if trained else ()
    regression = head.row.may_regress and (cfg.get("problem_type") == "regression" or cfg.get("num_labels") == 1)
    if not labels and not regression:
        labels = ("LABEL_0", "LABEL_1")
    model, tokenizer = load_for_head(path, labels, regression, head, replace_head=not trained)  # the encoder is read
    return OpenedModel(model.float().eval(), tokenizer, head, labels, trained, path)


def random_copy(model: nn.Module, seed: int = 0) -> nn.Module:
    """A copy of ``model`` with every weight drawn anew as BERT initialises it: Linear and
    Embedding weights ``N(0, initializer_range)``, biases 0, LayerNorms 1 and 0. Same modules and
    shapes (a pruned model's too), no trained knowledge: the random-encoder control of a probe."""
    fresh = copy.deepcopy(model)
    std = float(getattr(getattr(model, "config", None), "initializer_range", 0.02))
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in fresh.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                module.weight.copy_(torch.randn(module.weight.shape, generator=gen) * std)
                if isinstance(module, nn.Embedding) and module.padding_idx is not None:
                    module.weight[module.padding_idx].zero_()
            if isinstance(module, nn.LayerNorm):
                module.weight.fill_(1.0)
            if isinstance(module, (nn.Linear, nn.LayerNorm)) and module.bias is not None:
                module.bias.zero_()
    return fresh.eval()


def batches(enc: Encoded, batch_size: int) -> Iterator[tuple[list[int], dict[str, torch.Tensor]]]:
    """(item indices, model inputs) of length-sorted batches covering ``enc`` once; inputs are
    ``input_ids``, ``attention_mask``, ``token_type_ids``, each (batch, seq)."""
    for idx in length_sorted_batches(enc, batch_size):
        yield idx, model_inputs(collate(enc, idx))
