"""The model contract, on the output of every compress step (tiny random model): forward shapes,
save -> load gives identical logits, parameter count matches the config, ONNX agrees with PyTorch."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from pydantic import TypeAdapter

from conftest import make_tiny_model_dir
from tinyplm.compress import REGISTRY, CompressContext, apply_step, controller
from tinyplm.config.compress import SCHEDULED_KINDS, CompressStep
from tinyplm.evaluate.size import count_params
from tinyplm.models import load_classifier, save_model
from tinyplm.models.onnx import OrtClassifier, export_onnx
from tinyplm.models.shape import params_from_config
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
}
QUANTIZED = ("onnx_dynamic_int8", "onnx_static_int8", "dynamic_int8", "int4_weight", "bf16", "qat")


def test_every_registered_kind_is_covered() -> None:
    assert set(STEPS) == set(REGISTRY)


@pytest.mark.parametrize("kind", sorted(STEPS))
def test_contract(kind: str, tmp_path: Path) -> None:
    model, tok = load_classifier(make_tiny_model_dir(tmp_path / "m"), LABELS, False)
    rows = [Example(f"good movie {i} fun" if i % 2 else f"bad dull film {i}", None, i % 2, i) for i in range(64)]
    enc = encode_split(Split("train", rows, tmp_path), tok, 16)
    step = TypeAdapter(CompressStep).validate_python({"kind": kind, **STEPS[kind]})
    reference = model(**model_inputs(collate(enc, list(range(8))))).logits.detach()
    texts = [(r.text, None) for r in rows]
    ctx = CompressContext(enc, None, False, tmp_path / "work", tokenizer=tok, evals={"dev": enc}, texts=texts,
                          reencode=lambda t: (encode_split(Split("train", rows, tmp_path), t, 16),
                                              {"dev": encode_split(Split("dev", rows, tmp_path), t, 16)}))
    out, info = apply_step(model, step, ctx)
    enc, tok = ctx.train, ctx.tokenizer  # a trimmed vocabulary brings its own ids
    assert isinstance(info, dict) and info
    if kind in SCHEDULED_KINDS:  # these act during recovery: one training step, then finish
        during = controller(out, step, ctx)
        b = collate(enc, list(range(16)))
        out.train()(**model_inputs(b), labels=b["labels"]).loss.backward()
        if during.on_step:
            during.on_step(1.0)
        out, done = during.finish(out.eval())
        if kind != "qat":
            assert done["sparsity"] == pytest.approx(0.5, abs=0.01)
    batch = model_inputs(collate(enc, list(range(8))))
    with torch.no_grad():
        logits = out.eval()(**batch).logits
    assert logits.shape == (8, 2)  # forward shapes
    if kind in QUANTIZED:  # close to the fp32 model it came from
        assert torch.allclose(logits.float(), reference, atol=0.05)
    if kind == "int4_weight":  # 4 bits + an fp16 scale per 8 weights: 6 of 32 bits
        assert info["linear_weight_bytes_int4"] == pytest.approx(info["linear_weight_bytes_fp32"] * 6 / 32, rel=0.05)
    if kind == "trim_vocab":  # same pieces under new ids: the same outputs
        assert torch.allclose(logits, reference, atol=1e-5) and info["vocab_after"] < info["vocab_before"]
    saved = save_model(out, tok, tmp_path / "saved")
    loaded, _ = load_classifier(saved, LABELS, False)
    with torch.no_grad():
        assert torch.equal(loaded.eval()(**batch).logits, logits)  # save -> load: identical logits
    assert count_params(loaded)[0] == params_from_config(loaded.config)  # the config says the size
    if isinstance(loaded, OrtClassifier) or kind in ("dynamic_int8",):
        return  # already ONNX; torch's dynamic int8 ops have no ONNX export (ONNX Runtime's int8 is the one to use)
    onnx = OrtClassifier(export_onnx(loaded, tmp_path / "export.onnx"), loaded.config)
    longer = model_inputs(collate(enc, list(range(16, 40))))  # another batch size and length
    with torch.no_grad():
        tol = 0.05 if kind == "bf16" else 1e-4  # a bf16 model exports as fp32 (ONNX Runtime's CPU has no bf16)
        torch.testing.assert_close(onnx(**longer).logits, loaded(**longer).logits.float(), atol=tol, rtol=tol)
