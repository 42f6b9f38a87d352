"""benchmarks/train_step.py: both optimisers timed on a tiny model, each from the same weights."""

from __future__ import annotations

from pathlib import Path

import torch

import train_step as bench
from conftest import make_tiny_model_dir, tiny_sentiment_rows
from tinyplm.models import load_classifier
from tinyplm.tasks.base import Example, Split
from tinyplm.tasks.encoding import collate, encode_split, model_inputs


def test_compare_times_each_part_of_both_optimisers_and_restores_the_weights(tmp_path: Path) -> None:
    model, tok = load_classifier(make_tiny_model_dir(tmp_path / "tiny"), ("0", "1"), False)
    rows = tiny_sentiment_rows(40, 0)
    enc = encode_split(Split("train", [Example(t, None, y, i) for i, (t, y) in enumerate(rows)], tmp_path / "t"),
                       tok, 32)
    batches = [{**model_inputs(b), "labels": b["labels"]}
               for b in (collate(enc, range(i, i + 8)) for i in range(0, 40, 8))]
    before = {k: v.clone() for k, v in model.state_dict().items()}
    ms = bench.compare(model, batches, rounds=2, bf16=False)
    assert set(ms) == set(bench.OPTIMISERS)
    assert all(set(parts) == {"forward", "backward", "optimiser"} and min(parts.values()) > 0
               for parts in ms.values())
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_the_fused_optimiser_is_the_loops_and_the_other_is_not(tmp_path: Path) -> None:
    model, _ = load_classifier(make_tiny_model_dir(tmp_path / "tiny"), ("0", "1"), False)
    fused, default = (bench.make_optimiser(k, model) for k in ("fused", "default"))
    assert fused.defaults["fused"] is True and not default.defaults["fused"]
    assert [len(g["params"]) for g in fused.param_groups] == [len(g["params"]) for g in default.param_groups]
