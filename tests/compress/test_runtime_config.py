"""The ``runtime`` step's limits in a recipe: ``max_flip``, ``max_drop`` and ``flip_tolerance``
are checked with errors naming the key, and new keys at their defaults leave the resolved recipe
as it was."""

from __future__ import annotations

import math
import re

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tinyplm.config.compress import FastestRuntime
from tinyplm.config.load import dump_resolved, validate_recipe
from tinyplm.errors import RecipeError

KEY = re.escape("students[0].compress[0].runtime")


def _recipe(**step) -> dict:
    return {"task": {"name": "sst2"}, "teacher": {"model": "minilm-l6"},
            "students": [{"name": "t", "init_from": "teacher", "stages": [],
                          "compress": [{"kind": "runtime", **step}]}]}


def _step(raw: dict) -> dict:
    return yaml.safe_load(dump_resolved(validate_recipe(raw, source="test")))["students"][0]["compress"][0]


@settings(max_examples=40, deadline=None)
@given(field=st.sampled_from(["max_flip", "max_drop"]),
       value=st.floats(allow_nan=False) | st.integers(-3, 3))
def test_a_share_outside_zero_to_one_is_refused_naming_the_key(field: str, value: float) -> None:
    if 0 < value < 1:
        assert getattr(validate_recipe(_recipe(**{field: value}), source="test").students[0].compress[0],
                       field) == value
        return
    with pytest.raises(RecipeError, match=rf"{KEY}\.{field}: Input should be (greater|less) than"):
        validate_recipe(_recipe(**{field: value}), source="test")


@settings(max_examples=25, deadline=None)
@given(value=st.floats(allow_nan=False, allow_infinity=False, max_value=1e6))
def test_flip_tolerance_must_be_positive(value: float) -> None:
    if value > 0:
        # a value equal to the default is left out of the resolved recipe like the default itself
        default = FastestRuntime(kind="runtime").flip_tolerance
        assert math.isclose(_step(_recipe(flip_tolerance=value)).get("flip_tolerance", default), value)
        return
    with pytest.raises(RecipeError, match=rf"{KEY}\.flip_tolerance: Input should be greater than 0"):
        validate_recipe(_recipe(flip_tolerance=value), source="test")


def test_the_new_limits_have_defaults_left_out_of_the_resolved_recipe_until_set() -> None:
    default = FastestRuntime(kind="runtime")
    assert (default.max_flip, default.max_drop, default.flip_tolerance) == (0.01, 0.005, 0.1)
    plain = _step(_recipe())
    assert "max_flip" not in plain and "flip_tolerance" not in plain and plain["max_drop"] == 0.005
    chosen = _step(_recipe(max_flip=0.02, flip_tolerance=0.25))
    assert (chosen["max_flip"], chosen["flip_tolerance"]) == (0.02, 0.25)
    assert _step(_recipe(**chosen)) == chosen  # read back as written

