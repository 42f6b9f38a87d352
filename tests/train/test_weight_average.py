"""The moving average of a stage's weights (``train.ema_decay``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from safetensors.torch import load_file

from conftest import TINY_TRAIN, tiny_sentiment_rows
from tinyplm.config import TrainSpec
from tinyplm.models import load_classifier
from tinyplm.tasks.base import Example, Split
from tinyplm.tasks.encoding import encode_split
from tinyplm.train import PredictionObjective, StageIO, train
from tinyplm.train.checkpoint import list_checkpoints
from tinyplm.train.weight_average import AVERAGE_FILE, WeightAverage


def _net(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3), torch.nn.Linear(3, 2))


@settings(max_examples=25, deadline=None)
@given(decay=st.floats(0.01, 0.99), seeds=st.lists(st.integers(0, 999), min_size=2, max_size=5))
def test_the_average_is_the_exponential_moving_average_of_the_weights(decay: float, seeds: list[int]) -> None:
    """The first update copies the weights; each later one moves 1 - decay of the way to them."""
    model = _net(seeds[0])
    average = WeightAverage.of(model, decay)
    expected = None
    for seed in seeds:
        model.load_state_dict(_net(seed).state_dict())
        average.update(model)
        now = {k: v.clone() for k, v in model.state_dict().items()}
        expected = now if expected is None else {k: decay * expected[k] + (1 - decay) * now[k] for k in now}
    for name, value in average.model.state_dict().items():
        torch.testing.assert_close(value, expected[name])
    target = _net(12345)
    average.copy_into(target)
    for name, value in target.state_dict().items():
        torch.testing.assert_close(value, expected[name])


def test_the_state_restores_the_average_and_its_count() -> None:
    model = _net(0)
    average = WeightAverage.of(model, 0.5)
    for seed in (1, 2, 3):
        model.load_state_dict(_net(seed).state_dict())
        average.update(model)
    again = WeightAverage.of(_net(7), 0.5)
    again.load(average.state())
    model.load_state_dict(_net(4).state_dict())
    average.update(model)
    again.update(model)
    for name, value in again.model.state_dict().items():
        torch.testing.assert_close(value, average.model.state_dict()[name])


def test_no_average_at_zero_and_a_decay_outside_the_range_is_refused() -> None:
    assert WeightAverage.of(_net(0), 0.0) is None
    with pytest.raises(ValueError, match=r"ema_decay = 1\.0: expected a number in \[0, 1\)"):
        WeightAverage.of(_net(0), 1.0)


def test_the_recipe_key_is_checked_and_left_out_of_dumps_at_its_default() -> None:
    with pytest.raises(ValidationError, match="ema_decay = 0.9 averages the model's own weights, which method "
                                              "lora leaves"):
        TrainSpec(ema_decay=0.9, method="lora")
    with pytest.raises(ValidationError, match="set one of them to 0"):
        TrainSpec(ema_decay=0.9, keep_start_weights=0.3)
    with pytest.raises(ValidationError, match="ema_decay"):
        TrainSpec(ema_decay=1.0)
    assert "ema_decay" not in TrainSpec().model_dump()
    assert TrainSpec(ema_decay=0.99).model_dump()["ema_decay"] == 0.99


def _data(tok, n: int, seed: int):
    examples = [Example(t, None, y, i) for i, (t, y) in enumerate(tiny_sentiment_rows(n, seed))]
    return encode_split(Split("train", examples, Path("x")), tok, 32)


def _spec(**changes) -> TrainSpec:
    return TrainSpec(**{**TINY_TRAIN, "epochs": 2, "eval_every": 3, "checkpoint_every": 3, "ema_decay": 0.5,
                        **changes})


def test_a_stage_scores_and_returns_the_average_and_checkpoints_both(tiny_model_dir: Path, tmp_path: Path) -> None:
    model, tok = load_classifier(tiny_model_dir, ("0", "1"), False)
    enc = _data(tok, 96, 0)
    seen: list[dict[str, torch.Tensor]] = []

    def record(m) -> dict[str, float]:
        seen.append({k: v.detach().clone() for k, v in m.state_dict().items()})
        return {"accuracy": 0.5}

    result = train(model, enc, PredictionObjective(), spec=_spec(keep_best=False),
                   io=StageIO("s", tmp_path / "c", None), evaluate=record, primary="accuracy")
    last = list_checkpoints(tmp_path / "c")[-1]
    trained = {k.removeprefix("student."): v for k, v in load_file(str(last / "model.safetensors")).items()}
    averaged = {k.removeprefix("module."): v for k, v in load_file(str(last / f"{AVERAGE_FILE}.safetensors")).items()
                if k.startswith("module.")}
    name = "classifier.weight"
    torch.testing.assert_close(result.model.state_dict()[name], averaged[name])
    torch.testing.assert_close(seen[-1][name], averaged[name])  # the last evaluation scored the average
    assert not torch.equal(trained[name], averaged[name])  # training went on from its own weights


def test_the_kept_best_checkpoint_is_the_average_that_scored_best(tiny_model_dir: Path, tmp_path: Path) -> None:
    model, tok = load_classifier(tiny_model_dir, ("0", "1"), False)
    enc = _data(tok, 96, 0)
    seen: list[dict[str, torch.Tensor]] = []
    scores = iter([0.6, 0.9, 0.7, 0.5, 0.4, 0.3, 0.2, 0.1, 0.0])

    def record(m) -> dict[str, float]:
        seen.append({k: v.detach().clone() for k, v in m.state_dict().items()})
        return {"accuracy": next(scores)}

    result = train(model, enc, PredictionObjective(), spec=_spec(), io=StageIO("s", tmp_path / "c", None),
                   evaluate=record, primary="accuracy")
    assert result.best_metric == 0.9 and len(seen) > 2
    for name, value in result.model.state_dict().items():
        torch.testing.assert_close(value, seen[1][name])


class _Crash(Exception):
    pass


def test_a_resumed_stage_averages_on_as_one_that_ran_through(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Crashed after a checkpoint and resumed in a new process, a stage ends on the same average as
    one that was never stopped (the average is in the checkpoint, not restarted from the weights)."""
    def fresh():
        return load_classifier(tiny_model_dir, ("0", "1"), False)

    model, tok = fresh()
    enc = _data(tok, 96, 0)
    spec = _spec(keep_best=False)
    through = train(model, enc, PredictionObjective(), spec=spec, io=StageIO("a", tmp_path / "a", None))
    calls = []

    def crash_on_second_eval(_m) -> dict[str, float]:
        calls.append(1)
        if len(calls) == 2:
            raise _Crash
        return {"accuracy": 0.5}

    with pytest.raises(_Crash):
        train(fresh()[0], enc, PredictionObjective(), spec=spec, io=StageIO("b", tmp_path / "b", None),
              evaluate=crash_on_second_eval, primary="accuracy")
    assert [p.name for p in list_checkpoints(tmp_path / "b")][-1] == "step-000003"
    resumed = train(fresh()[0], enc, PredictionObjective(), spec=spec,
                    io=StageIO("b", tmp_path / "b", None, resume=True))
    assert resumed.steps == through.steps
    for name, value in resumed.model.state_dict().items():
        torch.testing.assert_close(value, through.model.state_dict()[name])
