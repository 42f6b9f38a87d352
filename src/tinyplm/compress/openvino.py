"""OpenVINO steps: the model converted to OpenVINO IR (run in f32 or bf16), or quantized to int8 by
NNCF's post-training quantization, optionally accuracy-controlled, optionally with int8 embedding
tables.

NNCF calibrates activation ranges on ``examples`` random training examples (one example per
sample, at its own length, as it is deployed; an embedding model's are its texts). With
``max_drop`` it runs ``quantize_with_accuracy_control``: layers whose quantization costs most are
put back to float until the metric on *held-out training examples* (never the dev split we report)
drops at most ``max_drop`` (absolute). The metric is the head's (:data:`CONTROLS`): accuracy for a
classifier, the mean cosine of the graph's vectors to its PyTorch parent's for an embedding model
(its texts have no labels). ``embeddings`` compresses the word/position embedding tables to int8
(``nncf.compress_weights``, int8 asymmetric, per row): most of a small model's bytes.
``reduce_range`` turns on NNCF's overflow fix in every layer (7-bit weights), by default where this
CPU's int8 products would saturate (x86 without VNNI: ``tinyplm.models.int8_cpu``); otherwise NNCF
applies its default (the first layer only).

Each returns an :class:`~tinyplm.models.openvino.OvClassifier` (an ``OvEmbedder`` for an
embedding model); it cannot be trained further, so an OpenVINO step ends a ``compress`` list.
"""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from tinyplm.models.infer import predict_logits
from tinyplm.models.int8_cpu import reduce_range as resolve_reduce_range
from tinyplm.models.onnx import graph_feed
from tinyplm.models.openvino import WIDENED, OvClassifier, ov_model, to_openvino
from tinyplm.tasks.encoding import Encoded, collate, model_inputs
from tinyplm.tasks.heads import Head, PerHead


def openvino_float(model: torch.nn.Module, work: Path, precision: str = "auto",
                   embeddings: bool = False, weights: str = "float") -> OvClassifier:
    """The model in OpenVINO, run in ``precision`` (``auto``: bf16 where the CPU has it);
    ``weights: int8`` stores its weight matrices in int8, widened when compiled
    (:mod:`tinyplm.models.openvino`)."""
    graph = to_openvino(model, work)
    how = []
    with _quiet_nncf():
        if weights == "int8":
            graph = _compress_matmuls(graph)
            how.append(WIDENED)
        if embeddings:
            graph = _compress_embeddings(graph)
            how.append("int8 embeddings")
    return ov_model(graph, model, precision, ", ".join(how) or None, widen=weights == "int8")


def _samples(enc: Encoded, order: list[int], names: set[str]) -> list[dict[str, np.ndarray]]:
    """One model input per example (batch of 1, its own length), as NNCF's dataset items: the
    inputs the graph has (``names``; a family without token types has no ``token_type_ids``)."""
    return [graph_feed(names, **model_inputs(collate(enc, [i]))) for i in order]


def _split(n: int, calibration: int, control: int, seed: int) -> tuple[list[int], list[int]]:
    """Disjoint random calibration and held-out control indices of the training set."""
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()
    return order[:calibration], order[calibration:calibration + control]


@contextmanager
def _quiet_nncf() -> Iterator[None]:
    """NNCF logs at INFO and draws its own progress bars on stdout (no switch turns them off):
    keep its warnings and errors, swallow the bars (stdout is where reports and tables go)."""
    logging.getLogger("nncf").setLevel(logging.WARNING)
    with contextlib.redirect_stdout(io.StringIO()):
        yield


def openvino_int8(model: torch.nn.Module, enc: Encoded, work: Path, *, examples: int = 300, seed: int = 0,
                  precision: str = "auto", embeddings: bool = False, max_drop: float | None = None,
                  control_examples: int = 300, is_regression: bool = False,
                  reduce_range: bool | None = None, head: Head = Head.SEQUENCE) -> OvClassifier:
    """NNCF int8 post-training quantization of ``model`` (see the module docstring); ``head`` says
    what accuracy control measures (:data:`CONTROLS`; ``TinyplmError`` for a head it has no rule for,
    raised before any work)."""
    control = Control(model, CONTROLS[head], is_regression) if max_drop is not None else None
    graph = to_openvino(model, work)
    seven = resolve_reduce_range(reduce_range)
    with _quiet_nncf():
        quantized, how = _quantize(graph, enc, examples, seed, max_drop, control_examples, control, seven)
        if seven:
            how += ", 7-bit weights (overflow fix in every layer)"
        if embeddings:
            quantized = _compress_embeddings(quantized)
            how += ", int8 embeddings"
    return ov_model(quantized, model, precision, how)


def _quantize(graph, enc: Encoded, examples: int, seed: int, max_drop: float | None, control_examples: int,
              control: Control | None, seven_bit: bool = False):
    """NNCF quantization of ``graph`` -> (the quantized model, how it was done); with ``max_drop``
    accuracy-controlled as ``control`` says (None: not controlled); ``seven_bit``: the overflow fix in
    every layer."""
    import nncf

    calib, held = _split(len(enc), examples, control_examples if max_drop else 0, seed)
    names = {name for port in graph.inputs for name in port.get_names()}
    dataset = nncf.Dataset(_samples(enc, calib, names))
    kwargs = {"model_type": nncf.ModelType.TRANSFORMER, "subset_size": len(calib)}
    advanced = nncf.AdvancedQuantizationParameters(overflow_fix=nncf.OverflowFix.ENABLE) if seven_bit else None
    if control is None:
        quantized = nncf.quantize(graph, dataset, advanced_parameters=advanced, **kwargs)
        how = f"NNCF post-training int8, {len(calib)} calibration examples"
    else:
        rule = control.rule
        targets = rule.targets(control, enc, held)
        validation = nncf.Dataset(list(zip(_samples(enc, held, names), targets, strict=True)))
        quantized = nncf.quantize_with_accuracy_control(
            graph, dataset, validation, validation_fn=rule.metric(control.is_regression), max_drop=max_drop,
            drop_type=nncf.DropType.ABSOLUTE, advanced_quantization_parameters=advanced, **kwargs)
        how = (f"NNCF accuracy-controlled int8 (max drop {max_drop} {rule.measure} on {len(held)} held-out "
               f"training examples), {len(calib)} calibration examples")
    return quantized, how


@dataclass(frozen=True)
class Control:
    """What accuracy control compares a quantized graph with: the PyTorch ``model`` it was made
    from, the ``rule`` of the task's head and whether it predicts a score."""

    model: torch.nn.Module
    rule: ControlRule
    is_regression: bool


@dataclass(frozen=True)
class ControlRule:
    """How one head's accuracy control works: ``targets(control, enc, indices)`` gives each held-out
    example's target (a label, the parent's vector), ``metric(is_regression)`` NNCF's
    ``validation_fn(compiled_model, items) -> metric`` over ``(inputs, target)`` items (higher is
    better; NNCF keeps its drop against the float graph within ``max_drop``); ``measure`` names it."""

    targets: Callable[[Control, Encoded, list[int]], list]
    metric: Callable[[bool], Callable]
    measure: str


def _labels(control: Control, enc: Encoded, indices: list[int]) -> list:
    """Each example's label: a class id, or a score."""
    return [float(enc.labels[i]) if control.is_regression else int(enc.labels[i]) for i in indices]


def _validation_fn(is_regression: bool):
    """NNCF's ``validation_fn(compiled_model, items) -> metric``: accuracy (negative MSE for a
    regression head) on the held-out items."""

    def metric(compiled, items) -> float:
        output = compiled.output(0)
        scores = []
        for inputs, label in items:
            logits = np.asarray(compiled(inputs)[output])
            if is_regression:
                scores.append(-float((logits[0, 0] - label) ** 2))
            else:
                scores.append(float(int(logits[0].argmax()) == label))
        return float(np.mean(scores))

    return metric


def _parent_vectors(control: Control, enc: Encoded, indices: list[int]) -> list:
    """The PyTorch parent's vector ``(dim,)`` of each example (the texts carry no labels)."""
    return list(predict_logits(control.model, enc.subset(indices)).numpy())


def _cosine_fn(is_regression: bool):
    """NNCF's ``validation_fn``: the mean cosine of the graph's vectors with the parent's (about 1
    for the float graph, so ``max_drop`` bounds how far int8 may take the vectors)."""

    def metric(compiled, items) -> float:
        output = compiled.output(0)
        cosines = []
        for inputs, target in items:
            vector = np.asarray(compiled(inputs)[output], dtype=np.float64)[0]  # (dim,)
            norms = np.linalg.norm(vector) * np.linalg.norm(target)
            cosines.append(float(vector @ target) / norms if norms > 0 else 0.0)
        return float(np.mean(cosines))

    return metric


#: Accuracy control (``max_drop``) per head: what the held-out examples are scored by.
CONTROLS: PerHead[ControlRule] = PerHead("accuracy-controlled int8 quantization (max_drop)", {
    Head.SEQUENCE: ControlRule(_labels, _validation_fn, "in accuracy (negative MSE for a score)"),
    Head.EMBEDDING: ControlRule(_parent_vectors, _cosine_fn, "in mean cosine to the PyTorch model's vectors"),
})


def _compress_embeddings(ov_model):
    """int8 weight compression of the embedding tables only (their ``Gather`` constants). A gather
    from anything but a float matrix is left alone: a static bag's per-piece weights (a vector),
    on which NNCF's compression fails."""
    import nncf

    others = [op.get_friendly_name() for op in ov_model.get_ops() if op.get_type_name() == "Gather"
              and not _gathers_from_a_table(op)]
    return nncf.compress_weights(ov_model, mode=nncf.CompressWeightsMode.INT8_ASYM,
                                 ignored_scope=nncf.IgnoredScope(types=["MatMul"], names=others))


def _compress_matmuls(ov_model):
    """int8 weight compression (symmetric, per output channel) of the constant weights of every
    MatMul; the embedding tables are left to ``embeddings``."""
    import nncf

    return nncf.compress_weights(ov_model, mode=nncf.CompressWeightsMode.INT8_SYM,
                                 ignored_scope=nncf.IgnoredScope(types=["Gather"]))


def _gathers_from_a_table(op) -> bool:
    """Whether an OpenVINO ``Gather`` reads rows of a float matrix (an embedding table), directly
    or through a conversion (an fp16 table)."""
    source = op.input_value(0).get_node()
    while source.get_type_name() == "Convert":
        source = source.input_value(0).get_node()
    return (source.get_type_name() == "Constant" and len(source.get_output_partial_shape(0)) == 2
            and source.get_output_element_type(0).is_real())
