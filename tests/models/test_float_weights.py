"""A checkpoint saved in fp16 or bf16 loads in fp32: trained there (not losing updates to rounding)
and reported as what it is."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import BertForSequenceClassification

from conftest import make_tiny_model_dir
from tinyplm.models import load_classifier
from tinyplm.models.pooling import Pooling, SentenceLayout
from tinyplm.models.sentence import load_sentence_encoder


def _saved_in(dtype: torch.dtype, src: Path, dst: Path) -> Path:
    model = BertForSequenceClassification.from_pretrained(str(src), dtype=dtype)
    assert next(model.parameters()).dtype == dtype
    model.save_pretrained(dst)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        if (src / name).is_file():
            (dst / name).write_bytes((src / name).read_bytes())
    return dst


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_half_precision_checkpoints_load_in_fp32(tmp_path: Path, dtype: torch.dtype) -> None:
    src = make_tiny_model_dir(tmp_path / "fp32")
    half = _saved_in(dtype, src, tmp_path / "half")
    model, _ = load_classifier(half, ("negative", "positive"), False)
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    reference, _ = load_classifier(src, ("negative", "positive"), False)
    for (name, a), b in zip(model.state_dict().items(), reference.state_dict().values(), strict=True):
        if a.is_floating_point():  # the saved values, rounded to the half type once
            assert torch.equal(a, b.to(dtype).float()), name
    encoder, _ = load_sentence_encoder(half, SentenceLayout(Pooling("mean")))  # read as a sentence encoder
    assert {p.dtype for p in encoder.parameters()} == {torch.float32}
