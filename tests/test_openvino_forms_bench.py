"""benchmarks/openvino_forms.py: the four OpenVINO forms it compares, on a tiny model (the
benchmark's own run times them on a finished demo run)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from conftest import make_tiny_model_dir, tiny_sentiment_rows
from tinyplm.models import load_classifier
from tinyplm.models.infer import predict_logits
from tinyplm.tasks.base import Example, Split
from tinyplm.tasks.encoding import encode_split

pytest.importorskip("openvino")
pytest.importorskip("nncf")
import openvino_forms as bench  # noqa: E402


def test_the_four_forms_are_what_their_names_say(tmp_path: Path) -> None:
    model, tok = load_classifier(make_tiny_model_dir(tmp_path / "tiny"), ("0", "1"), False)
    rows = tiny_sentiment_rows(64, 0)
    enc = encode_split(Split("train", [Example(t, None, y, i) for i, (t, y) in enumerate(rows)], tmp_path / "t"),
                       tok, 32)
    forms = bench.make_forms(model, enc, tmp_path / "work", precision="f32")  # the same numbers on every CPU
    assert tuple(forms) == bench.FORMS
    assert forms["nncf_int8"].int8_matmuls and not forms["float"].int8_matmuls
    assert forms["int8_weights"].widen and not forms["int8_weights_per_call"].widen and not forms["float"].widen
    assert all(m.precision == "f32" for m in forms.values())
    per_call, folded = (predict_logits(forms[k], enc) for k in ("int8_weights_per_call", "int8_weights"))
    torch.testing.assert_close(per_call, folded, atol=1e-4, rtol=1e-4)  # the same int8 weights, widened either way
