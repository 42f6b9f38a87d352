"""The model contract, on the output of every compress step (tiny random model): forward shapes,
save -> load gives identical logits, parameter count matches the config, ONNX agrees with PyTorch;
and each structural step really shrank what it claims, counted on the saved model against numbers
derived from the tiny config and the step's own settings (never from the step's report, which a
no-op step could fill in: ``test_a_no_op_step_fails_the_contract``)."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from pydantic import TypeAdapter

from conftest import make_tiny_model_dir
from tinyplm.compress import REGISTRY, CompressContext, apply_step, controller
from tinyplm.config.compress import SCHEDULED_KINDS, CompressStep
from tinyplm.evaluate.size import count_params
from tinyplm.models import load_classifier, roles, save_model
from tinyplm.models.factorized import FactorizedEmbedding, LowRankLinear
from tinyplm.models.onnx import OrtClassifier, export_onnx
from tinyplm.models.openvino import OvClassifier
from tinyplm.models.shape import layer_shape, params_from_config
from tinyplm.tasks.base import Example, Split
from tinyplm.tasks.encoding import collate, encode_split, model_inputs

LABELS = ("negative", "positive")
STEPS = {
    "prune_heads": {"keep": 0.5, "score_batches": 2},
    "prune_ffn": {"keep": 0.5, "score_batches": 2, "scope": "global"},
    "drop_layers": {"count": 1, "score_batches": 2},
    "magnitude": {"sparsity": 0.5, "recover": {}},
    "share": {"mode": "all"},
    "qat": {"recover": {}, "calibration_examples": 16},
    "svd": {"ratio": 0.25, "per_role": {"ffn_in": {"energy": 0.5}}},
    "factorize_embeddings": {"rank": 8},
    "trim_vocab": {},
    "movement": {"sparsity": 0.5, "recover": {}},
    "onnx_dynamic_int8": {"embeddings": True},
    "onnx_static_int8": {"calibration_examples": 32},
    "dynamic_int8": {},
    "int4_weight": {"group_size": 8},
    "bf16": {},
    "openvino": {"precision": "f32"},
    "openvino_int8": {"calibration_examples": 32, "precision": "f32"},
    "runtime": {"candidates": ["onnx_dynamic_int8", "openvino"], "control_examples": 16, "calibration_examples": 16},
}
QUANTIZED = ("onnx_dynamic_int8", "onnx_static_int8", "dynamic_int8", "int4_weight", "bf16", "qat", "openvino",
             "openvino_int8", "runtime")
STRUCTURAL = ("prune_heads", "prune_ffn", "drop_layers", "share", "svd", "factorize_embeddings", "trim_vocab")

# The tiny model of conftest.make_tiny_model_dir and what its units weigh.
V, H, HEADS, D, F, L = 99, 32, 4, 8, 37, 2
HEAD = 3 * (H * D + D) + D * H  # one head: its Q, K, V rows (and biases), its columns of the output Linear
NEURON = H + 1 + H  # one FFN neuron: its input row and bias, its output column
LAYER = 4 * (H * H + H) + 2 * H + (H * F + F) + (F * H + H) + 2 * H  # attention, FFN, two LayerNorms


@dataclass
class Applied:
    """One step run on a fresh tiny classifier, then saved and loaded."""

    step: object
    before: int  # parameters of the model the step started from
    reference: torch.Tensor  # its logits on 8 examples
    out: object  # the compressed model
    info: dict  # what the step reported
    done: dict | None  # what a scheduled step's finish reported
    loaded: object  # ``out`` saved and loaded again
    batch: dict
    enc: object  # the (re-encoded) training data


def _apply(kind: str, tmp_path: Path) -> Applied:
    model, tok = load_classifier(make_tiny_model_dir(tmp_path / "m"), LABELS, False)
    rows = [Example(f"good movie {i} fun" if i % 2 else f"bad dull film {i}", None, i % 2, i) for i in range(64)]
    enc = encode_split(Split("train", rows, tmp_path), tok, 16)
    step = TypeAdapter(CompressStep).validate_python({"kind": kind, **STEPS[kind]})
    reference = model(**model_inputs(collate(enc, list(range(8))))).logits.detach()
    before = count_params(model)[0]
    texts = [(r.text, None) for r in rows]
    ctx = CompressContext(enc, None, False, tmp_path / "work", tokenizer=tok, evals={"dev": enc}, texts=texts,
                          reencode=lambda t: (encode_split(Split("train", rows, tmp_path), t, 16),
                                              {"dev": encode_split(Split("dev", rows, tmp_path), t, 16)}),
                          timer=lambda models, _: {name: float(i) for i, name in enumerate(models)})
    out, info = apply_step(model, step, ctx)
    enc, tok = ctx.train, ctx.tokenizer  # a trimmed vocabulary brings its own ids
    done = None
    if kind in SCHEDULED_KINDS:  # these act during recovery: one training step, then finish
        during = controller(out, step, ctx)
        b = collate(enc, list(range(16)))
        out.train()(**model_inputs(b), labels=b["labels"]).loss.backward()
        if during.on_step:
            during.on_step(1.0)
        out, done = during.finish(out.eval())
    batch = model_inputs(collate(enc, list(range(8))))
    loaded, _ = load_classifier(save_model(out, tok, tmp_path / "saved"), LABELS, False)
    return Applied(step, before, reference, out, info, done, loaded, batch, enc)


def assert_shrunk(kind: str, step, before: int, model, info: dict) -> None:
    """``model`` (the saved and loaded result of ``step``) has exactly the units and parameters the
    step's settings promise, fewer than ``before``; a quantization or sparsity step keeps the count."""
    after = count_params(model)[0]
    if kind not in STRUCTURAL:
        assert after == before  # quantization changes bytes, sparsity zeros weights: the count stays
        return
    if kind == "prune_heads":
        heads = layer_shape(model)["heads"]
        assert sum(heads) == round(step.keep * L * HEADS) and min(heads) >= 1 and info["heads_after"] == heads
        assert before - after == (L * HEADS - sum(heads)) * HEAD
    elif kind == "prune_ffn":
        ffn = layer_shape(model)["ffn"]
        assert sum(ffn) == round(step.keep * L * F) and info["ffn_after"] == ffn
        assert before - after == (L * F - sum(ffn)) * NEURON
    elif kind == "drop_layers":
        assert len(roles.layers(model)) == model.config.num_hidden_layers == L - step.count
        assert before - after == step.count * LAYER
    elif kind == "share":  # all layers in one group: one layer's weights, one tensor
        assert before - after == (L - 1) * LAYER
        assert len({roles.layer_linear(x, "query").weight.data_ptr() for x in roles.layers(model)}) == 1
    elif kind == "svd":
        low = {n: m for n, m in model.named_modules() if isinstance(m, LowRankLinear)}
        assert low and info["ranks"] == {n: m.rank for n, m in low.items()}
        saved = sum(m.in_features * m.out_features - m.rank * (m.in_features + m.out_features) for m in low.values())
        assert before - after == saved > 0
    elif kind == "factorize_embeddings":
        words = roles.word_embeddings(model)
        assert isinstance(words, FactorizedEmbedding) and words.rank == step.rank
        assert before - after == V * H - (V * step.rank + step.rank * H)
    elif kind == "trim_vocab":
        vocab = model.config.vocab_size
        assert vocab < V and roles.word_embeddings(model).num_embeddings == vocab
        assert before - after == (V - vocab) * H


def test_every_registered_kind_is_covered() -> None:
    assert set(STEPS) == set(REGISTRY)


@pytest.mark.parametrize("kind", sorted(STEPS))
def test_contract(kind: str, tmp_path: Path) -> None:
    run = _apply(kind, tmp_path)
    out, info, loaded, batch = run.out, run.info, run.loaded, run.batch
    assert isinstance(info, dict) and info
    if kind in SCHEDULED_KINDS and kind != "qat":
        assert run.done["sparsity"] == pytest.approx(0.5, abs=0.01)
    with torch.no_grad():
        logits = out.eval()(**batch).logits
    assert logits.shape == (8, 2)  # forward shapes
    if kind in QUANTIZED:  # close to the fp32 model it came from
        assert torch.allclose(logits.float(), run.reference, atol=0.05)
    if kind == "int4_weight":  # 4 bits + an fp16 scale per 8 weights: 6 of 32 bits
        assert info["linear_weight_bytes_int4"] == pytest.approx(info["linear_weight_bytes_fp32"] * 6 / 32, rel=0.05)
    if kind == "trim_vocab":  # same pieces under new ids: the same outputs
        assert torch.allclose(logits, run.reference, atol=1e-5) and info["vocab_after"] < info["vocab_before"]
    with torch.no_grad():
        assert torch.equal(loaded.eval()(**batch).logits, logits)  # save -> load: identical logits
    assert count_params(loaded)[0] == params_from_config(loaded.config)  # the config says the size
    assert_shrunk(kind, run.step, run.before, loaded, info)  # and the size is what the step promised
    if isinstance(loaded, OrtClassifier | OvClassifier) or kind in ("dynamic_int8",):
        return  # already ONNX; torch's dynamic int8 ops have no ONNX export (ONNX Runtime's int8 is the one to use)
    onnx = OrtClassifier(export_onnx(loaded, tmp_path / "export.onnx"), loaded.config)
    longer = model_inputs(collate(run.enc, list(range(16, 40))))  # another batch size and length
    with torch.no_grad():
        tol = 0.05 if kind == "bf16" else 1e-4  # a bf16 model exports as fp32 (ONNX Runtime's CPU has no bf16)
        torch.testing.assert_close(onnx(**longer).logits, loaded(**longer).logits.float(), atol=tol, rtol=tol)


@pytest.mark.parametrize("kind", ["prune_heads", "share", "svd", "factorize_embeddings"])
def test_a_no_op_step_fails_the_contract(kind: str, tmp_path: Path, monkeypatch) -> None:
    """A step that leaves the model alone but reports what the real step would (run on a copy)
    passes the old checks (a forward, save/load, the count matching its own config) and fails
    :func:`assert_shrunk`."""
    real = REGISTRY[kind]
    monkeypatch.setitem(REGISTRY, kind, lambda model, step, ctx: (model, real(copy.deepcopy(model), step, ctx)[1]))
    run = _apply(kind, tmp_path)
    assert count_params(run.loaded)[0] == params_from_config(run.loaded.config) == run.before
    with pytest.raises(AssertionError):
        assert_shrunk(kind, run.step, run.before, run.loaded, run.info)
