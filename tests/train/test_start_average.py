"""Averaging a stage's start weights into what it trained (``train.keep_start_weights``, WiSE-FT)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from conftest import TINY_TRAIN, tiny_sentiment_rows
from tinyplm.config import TrainSpec
from tinyplm.models import load_classifier
from tinyplm.tasks.base import Example, Split
from tinyplm.tasks.encoding import encode_split
from tinyplm.train import PredictionObjective, StageIO, train
from tinyplm.train.checkpoint import list_checkpoints
from tinyplm.train.start_average import StartWeights


def _net(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3), torch.nn.Linear(3, 2))


@settings(max_examples=25, deadline=None)
@given(keep=st.floats(0.01, 0.99), seeds=st.tuples(st.integers(0, 99), st.integers(100, 199)))
def test_the_blend_is_the_weighted_mean_and_applied_gives_the_trained_weights_back(
        keep: float, seeds: tuple[int, int]) -> None:
    start, trained = _net(seeds[0]), _net(seeds[1])
    snapshot = StartWeights.of(start, keep)
    before = copy.deepcopy(trained.state_dict())
    with snapshot.applied(trained) as blended:
        for name, value in blended.state_dict().items():
            torch.testing.assert_close(value, keep * start.state_dict()[name] + (1 - keep) * before[name])
    for name, value in trained.state_dict().items():
        torch.testing.assert_close(value, before[name], rtol=0, atol=0)
    snapshot.blend_into(trained)
    assert not torch.equal(trained[0].weight, before["0.weight"])


def test_applied_restores_the_trained_weights_when_the_block_raises() -> None:
    start, trained = _net(0), _net(1)
    before = copy.deepcopy(trained.state_dict())
    with pytest.raises(RuntimeError), StartWeights.of(start, 0.5).applied(trained):
        raise RuntimeError("evaluation failed")
    assert all(torch.equal(v, before[k]) for k, v in trained.state_dict().items())


def test_nothing_to_blend_at_zero_and_a_share_outside_the_range_is_refused() -> None:
    assert StartWeights.of(_net(0), 0.0) is None
    with pytest.raises(ValueError, match=r"keep_start_weights = 1\.0: expected a number in \[0, 1\)"):
        StartWeights.of(_net(0), 1.0)


def test_another_model_is_named_not_blended() -> None:
    snapshot = StartWeights.of(_net(0), 0.5)
    other = torch.nn.Sequential(torch.nn.Linear(4, 5))
    with pytest.raises(ValueError, match=r"has no tensor '1.bias' of its start \(4 missing\)"):
        snapshot.blend_into(other)
    wider = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.LayerNorm(3), torch.nn.Linear(3, 2))
    with pytest.raises(ValueError, match=r"tensor '0.weight' is \(5, 4\) after training and was \(3, 4\)"):
        snapshot.blend_into(wider)


def test_the_recipe_key_is_checked_against_the_method_and_left_out_of_dumps_at_its_default() -> None:
    with pytest.raises(ValidationError, match="keep_start_weights = 0.3 averages the model's own weights, which "
                                              "method lora leaves"):
        TrainSpec(keep_start_weights=0.3, method="lora")
    with pytest.raises(ValidationError, match="keep_start_weights"):
        TrainSpec(keep_start_weights=1.0)
    assert "keep_start_weights" not in TrainSpec().model_dump()
    assert TrainSpec(keep_start_weights=0.3, method="ulmfit").model_dump()["keep_start_weights"] == 0.3


def _data(tok, n: int, seed: int):
    examples = [Example(t, None, y, i) for i, (t, y) in enumerate(tiny_sentiment_rows(n, seed))]
    return encode_split(Split("train", examples, Path("x")), tok, 32)


def test_a_stage_returns_the_blend_scores_it_and_checkpoints_the_trained_weights(
        tiny_model_dir: Path, tmp_path: Path) -> None:
    model, tok = load_classifier(tiny_model_dir, ("0", "1"), False)
    start = copy.deepcopy(model.state_dict())
    enc = _data(tok, 96, 0)
    spec = TrainSpec(**{**TINY_TRAIN, "epochs": 2, "eval_every": 3, "checkpoint_every": 3, "keep_best": False,
                        "keep_start_weights": 0.25})
    seen: list[dict[str, torch.Tensor]] = []

    def record(m) -> dict[str, float]:
        seen.append({k: v.detach().clone() for k, v in m.state_dict().items()})
        return {"accuracy": 0.5}

    result = train(model, enc, PredictionObjective(), spec=spec, io=StageIO("s", tmp_path / "c", None),
                   evaluate=record, primary="accuracy")
    from safetensors.torch import load_file

    trained = {k.removeprefix("student."): v
               for k, v in load_file(str(list_checkpoints(tmp_path / "c")[-1] / "model.safetensors")).items()}
    name = "classifier.weight" if "classifier.weight" in start else next(k for k in start if k.endswith(".weight"))
    expected = 0.25 * start[name] + 0.75 * trained[name]
    torch.testing.assert_close(result.model.state_dict()[name], expected)
    torch.testing.assert_close(seen[-1][name], expected)  # the last evaluation scored the blend
    assert not torch.equal(trained[name], expected)
