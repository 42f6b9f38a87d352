"""The model contract, on the output of every compress step (tiny random model): forward shapes,
save -> load gives identical logits, parameter count matches the config, ONNX agrees with PyTorch."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from pydantic import TypeAdapter

from conftest import make_tiny_model_dir
from tinyplm.compress import REGISTRY, CompressContext, apply_step
from tinyplm.config.compress import CompressStep
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
    "onnx_dynamic_int8": {},
    "onnx_static_int8": {"calibration_examples": 32},
}


def test_every_registered_kind_is_covered() -> None:
    assert set(STEPS) == set(REGISTRY)


@pytest.mark.parametrize("kind", sorted(STEPS))
def test_contract(kind: str, tmp_path: Path) -> None:
    model, tok = load_classifier(make_tiny_model_dir(tmp_path / "m"), LABELS, False)
    rows = [Example(f"good movie {i} fun" if i % 2 else f"bad dull film {i}", None, i % 2, i) for i in range(64)]
    enc = encode_split(Split("train", rows, tmp_path), tok, 16)
    step = TypeAdapter(CompressStep).validate_python({"kind": kind, **STEPS[kind]})
    reference = model(**model_inputs(collate(enc, list(range(8))))).logits.detach()
    ctx = CompressContext(enc, None, False, tmp_path / "work")
    out, info = apply_step(model, step, ctx)
    assert isinstance(info, dict) and info
    batch = model_inputs(collate(enc, list(range(8))))
    with torch.no_grad():
        logits = out.eval()(**batch).logits
    assert logits.shape == (8, 2)  # forward shapes
    if kind.startswith("onnx"):  # quantized: close to the fp32 model it came from
        assert torch.allclose(logits, reference, atol=0.05)
    saved = save_model(out, tok, tmp_path / "saved")
    loaded, _ = load_classifier(saved, LABELS, False)
    with torch.no_grad():
        assert torch.equal(loaded.eval()(**batch).logits, logits)  # save -> load: identical logits
    assert loaded.num_parameters() == params_from_config(loaded.config)  # the config says the size
    if isinstance(loaded, OrtClassifier):
        return  # already ONNX
    onnx = OrtClassifier(export_onnx(loaded, tmp_path / "export.onnx"), loaded.config)
    longer = model_inputs(collate(enc, list(range(16, 40))))  # another batch size and length
    with torch.no_grad():
        torch.testing.assert_close(onnx(**longer).logits, loaded(**longer).logits, atol=1e-4, rtol=1e-4)
