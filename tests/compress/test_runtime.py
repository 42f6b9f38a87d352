"""The ``runtime: fastest`` choice: a candidate is judged by the predictions it flips against its
float parent and by a paired bound on its accuracy drop, on the task's held-out examples (else the
longest training examples); one that flips predictions on long inputs only is refused although it
agrees on short phrases."""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from conftest import WORDS, make_tiny_model_dir
from helpers_runtime import Table
from tinyplm.compress.runtime import (
    ALPHA,
    choose_fastest,
    control_indices,
    judge,
)
from tinyplm.compress.runtime_bounds import paired_drop_upper, wilson_upper
from tinyplm.config.compress import FastestRuntime
from tinyplm.models import load_classifier
from tinyplm.models.infer import logits_to_predictions, predict_logits
from tinyplm.tasks.base import Example, Split
from tinyplm.tasks.encoding import Encoded, encode_split

LONG = 16  # word pieces: the candidate below flips predictions only on inputs longer than this


class FlipsLong(nn.Module):
    """Its parent's logits, the two classes swapped on every input longer than ``LONG`` pieces
    whose ids sum to a multiple of 3: a form that reads short phrases exactly as its parent does
    and changes a known share of its predictions on whole sentences."""

    def __init__(self, parent: nn.Module) -> None:
        super().__init__()
        self.parent, self.config = parent, parent.config

    def forward(self, input_ids, attention_mask, **kw):
        logits = self.parent(input_ids=input_ids, attention_mask=attention_mask, **kw).logits
        flip = (attention_mask.sum(1) > LONG) & ((input_ids * attention_mask).sum(1) % 3 == 0)
        return SimpleNamespace(logits=torch.where(flip[:, None], logits.flip(-1), logits))


def _flipped_by_it(enc: Encoded) -> int:
    return sum(1 for ids in enc.input_ids if len(ids) > LONG and sum(ids) % 3 == 0)


def _split(name: str, n: int, words: tuple[int, int], seed: int) -> Split:
    rng = random.Random(seed)
    rows = [Example(" ".join(rng.choices(WORDS, k=rng.randint(*words))), None, rng.randint(0, 1), i)
            for i in range(n)]
    return Split(name, rows, Path(f"{name}.tsv"))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The tiny BERT and encodings: training examples that are mostly short phrases (2-4 words)
    with whole sentences (20-30 words) among them, as SST-2's are; held-out sentences; held-out
    phrases."""
    model, tok = load_classifier(make_tiny_model_dir(tmp_path_factory.mktemp("tiny") / "bert"), ("0", "1"), False)
    train = Split("train", _split("p", 1500, (2, 4), 0).examples + _split("s", 300, (20, 30), 1).examples,
                  Path("train.tsv"))
    random.Random(2).shuffle(train.examples)
    enc = {name: encode_split(split, tok, 64) for name, split in (
        ("train", train), ("sentences", _split("holdout", 450, (20, 30), 3)),
        ("phrases", _split("holdout", 450, (2, 4), 4)))}
    return model, enc


def _timer(speeds: dict[str, float]):
    return lambda models, enc: {k: speeds[k] for k in models}


# labels are random here, so a flipped prediction is as often a right answer won as one lost:
# max_drop is wide, to show that the flips alone refuse
STEP = FastestRuntime(kind="runtime", max_drop=0.1, max_flip=0.03, control_examples=200, calibration_examples=300)


def test_a_form_that_flips_only_long_inputs_is_refused_on_held_out_sentences(tiny) -> None:
    model, enc = tiny
    candidates = {"openvino_int8": FlipsLong(model), "openvino": model}  # the second predicts as its parent
    timer = _timer({"openvino_int8": 5000.0, "openvino": 3000.0})
    on_phrases = choose_fastest(model, candidates, enc["train"], timer, STEP, 0, False, held_out=enc["phrases"])
    assert on_phrases.chosen == "openvino_int8" and on_phrases.candidates["openvino_int8"]["flipped"] == 0
    assert on_phrases.within_limits and on_phrases.control == "holdout" and on_phrases.examples == 450

    choice = choose_fastest(model, candidates, enc["train"], timer, STEP, 0, False, held_out=enc["sentences"])
    int8 = choice.candidates["openvino_int8"]
    assert int8["flipped"] == _flipped_by_it(enc["sentences"]) > 0.2 * choice.examples  # the share it was built with
    assert choice.chosen == "openvino" and choice.within_limits
    assert int8["refused"].startswith(f"flips {int8['flipped']} of 450 predictions")
    assert "more than max_flip 3.00%" in int8["refused"]
    assert "max_drop" not in int8["refused"]
    assert choice.candidates["openvino"]["refused"] is None and choice.candidates["openvino"]["flipped"] == 0
    assert choice.confidence == pytest.approx(1 - ALPHA / 2)


def test_without_held_out_examples_the_longest_training_examples_are_the_control(tiny) -> None:
    model, enc = tiny
    train = enc["train"]
    candidates = {"openvino_int8": FlipsLong(model), "onnx_dynamic_int8": model}
    choice = choose_fastest(model, candidates, train, _timer({"openvino_int8": 9.0, "onnx_dynamic_int8": 1.0}),
                            STEP, 0, False)
    assert choice.control == "longest_training" and choice.examples == 200
    chosen_from = control_indices(len(train), 300, 200, 0, train.lengths())
    calibration = torch.randperm(len(train), generator=torch.Generator().manual_seed(0))[:300].tolist()
    assert not set(chosen_from) & set(calibration)  # never the examples calibration saw
    held = train.subset(chosen_from)
    assert min(held.lengths()) > LONG  # whole sentences, not the phrases most training examples are
    assert choice.candidates["openvino_int8"]["flipped"] == _flipped_by_it(held)
    assert choice.chosen == "onnx_dynamic_int8"
    # a draw of training examples as the choice made before: mostly phrases, so the flips thin out
    drawn = train.subset(control_indices(len(train), 300, 200, seed=0))
    assert _flipped_by_it(drawn) / len(drawn) < 0.5 * _flipped_by_it(held) / len(held)


def _numbered(labels: list[int]) -> Encoded:
    return Encoded([[i, 1] for i in range(len(labels))], [[0, 0] for _ in labels], torch.tensor(labels), 0)


def _close_and_exact(n: int, wrong: int) -> tuple[Encoded, Table, dict[str, Table]]:
    """``n`` examples all right for the parent; candidate ``close`` gets ``wrong`` of them wrong,
    ``exact`` none."""
    labels = [i % 2 for i in range(n)]
    close = [1 - y if i < wrong else y for i, y in enumerate(labels)]
    return _numbered(labels), Table(labels), {"close": Table(close), "exact": Table(labels)}


def test_a_drop_within_the_margin_on_too_few_examples_to_tell_loses_to_a_safe_candidate() -> None:
    step = FastestRuntime(kind="runtime", max_drop=0.02, max_flip=0.2)
    enc, parent, candidates = _close_and_exact(100, 1)  # drop 0.01, within max_drop 0.02, on 100 examples
    timer = _timer({"close": 100.0, "exact": 10.0})
    choice = choose_fastest(parent, candidates, enc, timer, step, 0, False, held_out=enc)
    close = choice.candidates["close"]
    assert close["drop"] == pytest.approx(0.01) and close["drop_bound"] > step.max_drop
    assert "a drop of up to" in close["refused"] and "max_drop 0.02" in close["refused"]
    assert choice.chosen == "exact" and choice.within_limits
    enc, parent, candidates = _close_and_exact(4000, 40)  # the same drop on enough examples to show it
    more = choose_fastest(parent, candidates, enc, timer, step, 0, False, held_out=enc)
    assert more.candidates["close"]["drop"] == pytest.approx(0.01) and more.chosen == "close"


def test_when_every_candidate_is_refused_the_closest_is_kept_and_the_choice_says_so() -> None:
    step = FastestRuntime(kind="runtime", max_drop=0.01, max_flip=0.01)
    enc, parent, candidates = _close_and_exact(40, 2)  # 40 examples cannot show 1% of anything
    choice = choose_fastest(parent, candidates, enc, _timer({"close": 100.0, "exact": 10.0}), step, 0, False,
                            held_out=enc)
    assert not choice.within_limits and choice.chosen == "exact"
    assert choice.candidates["exact"]["refused"].startswith("flips none of 40 predictions, but 40 examples cannot")


def test_regression_flips_are_moves_beyond_the_tolerance_and_the_drop_is_the_mse_increase() -> None:
    step = FastestRuntime(kind="runtime", max_drop=0.05, max_flip=0.02, flip_tolerance=0.1)
    rng = np.random.default_rng(0)
    labels = rng.uniform(0, 5, 2000)
    parent = labels + rng.normal(0, 0.3, 2000)
    z = 1.96
    nudged = judge(parent, parent + 0.05, labels, step, z, True)  # every prediction moves, none by 0.1
    assert nudged.flipped == 0 and nudged.refused is None
    mse_increase = float(((parent + 0.05 - labels) ** 2 - (parent - labels) ** 2).mean())
    assert nudged.drop == pytest.approx(mse_increase, abs=1e-5)
    moved = parent.copy()
    moved[:100] += 0.5  # 5% of the predictions moved by 0.5
    worse = judge(parent, moved, labels, step, z, True)
    assert worse.flipped == 100 and "max_flip 2.00%" in worse.refused
    assert worse.accuracy < -float(((parent - labels) ** 2).mean())


def test_the_bounds_hold_their_confidence_on_simulated_candidates() -> None:
    """Candidates exactly at the limits: each bound falls below the limit (so they would pass)
    in about ALPHA of draws, not more."""
    rng = np.random.default_rng(1)
    z, n, draws = 1.6448536, 500, 3000
    step = FastestRuntime(kind="runtime", max_drop=0.005, max_flip=0.02)
    passed_drop = passed_flip = 0
    for _ in range(draws):
        labels = np.ones(n, dtype=np.int64)
        u = rng.random(n)  # parent wrong on 4% of examples; the candidate on 1% more, at max_drop net
        parent = np.where(u < 0.04, 0, 1)
        candidate = np.where((u >= 0.04) & (u < 0.05), 0, parent)  # 1.0% lost
        candidate = np.where(u < 0.005, 1, candidate)  # 0.5% won back: drop 0.005, flips 1.5%
        v = judge(parent, candidate, labels, step, z, False)
        passed_drop += v.drop_bound <= step.max_drop
        flips = np.where(rng.random(n) < step.max_flip, 1 - parent, parent)  # flips exactly max_flip
        passed_flip += judge(parent, flips, labels, step, z, False).flip_bound <= step.max_flip
    assert passed_drop / draws <= ALPHA + 0.015 and passed_flip / draws <= ALPHA + 0.015


def test_predictions_the_tests_build_on_match_what_the_choice_computes(tiny) -> None:
    model, enc = tiny
    ours = logits_to_predictions(predict_logits(FlipsLong(model), enc["sentences"]), False)
    theirs = logits_to_predictions(predict_logits(model, enc["sentences"]), False)
    assert int((ours != theirs).sum()) == _flipped_by_it(enc["sentences"])


@settings(max_examples=300, deadline=None)
@given(n=st.integers(1, 5000), data=st.data(), z=st.floats(1.0, 2.4))
def test_the_bounds_sit_above_their_estimates_and_grow_with_what_was_lost(n: int, data, z: float) -> None:
    k = data.draw(st.integers(0, n))
    share = wilson_upper(k, n, z)
    assert k / n <= share <= 1.0
    if k < n:
        assert wilson_upper(k + 1, n, z) > share
    assert wilson_upper(0, n, z) == pytest.approx(z * z / (n + z * z))  # no flips still leaves a bound
    b = data.draw(st.integers(0, n // 2))
    c = data.draw(st.integers(0, n // 2 - b))  # disagreeing on under half: any candidate worth a look
    drop = paired_drop_upper(b, c, n, z)
    assert (b - c) / (n + 2) < drop <= 1.0
    if b + c < n // 2:
        assert paired_drop_upper(b + 1, c, n, z) > drop > paired_drop_upper(b, c + 1, n, z)
    assert paired_drop_upper(0, 0, n, z) == pytest.approx(min(1.0, z / (n + 2)))


def test_counts_that_cannot_come_from_the_examples_are_refused() -> None:
    with pytest.raises(ValueError, match="k=3, n=2"):
        wilson_upper(3, 2, 1.96)
    with pytest.raises(ValueError, match="b=2, c=2, n=3"):
        paired_drop_upper(2, 2, 3, 1.96)
    with pytest.raises(ValueError, match="no candidates"):
        choose_fastest(nn.Identity(), {}, _numbered([0, 1]), _timer({}), FastestRuntime(kind="runtime"), 0, False)
