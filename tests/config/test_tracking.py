"""The recipe's ``tracking`` section: off by default, its values checked, never part of the run's identity."""

from __future__ import annotations

import pytest

from tinyplm.config import TrackingSpec, dump_resolved, validate_recipe
from tinyplm.errors import RecipeError


def test_off_by_default_and_left_out_of_the_resolved_recipe() -> None:
    plain = validate_recipe({"name": "t"})
    tracked = validate_recipe({"name": "t", "tracking": {"mlflow": True, "tensorboard": "tb", "experiment": "x"}})
    assert not plain.tracking.enabled and tracked.tracking.enabled
    assert dump_resolved(tracked) == dump_resolved(plain)  # the same run dir, tracked or not
    assert "tracking" not in dump_resolved(tracked)


@pytest.mark.parametrize(("section", "fragment"), [
    ({"mlfow": True}, "unknown key 'tracking.mlfow'; did you mean 'mlflow'?"),
    ({"mlflow": ""}, "tracking.mlflow: expected true, false or a URI / folder, got ''"),
    ({"tensorboard": 3}, "tracking.tensorboard: expected true, false or a URI / folder, got 3"),
    ({"experiment": ""}, "tracking.experiment"),
])
def test_bad_tracking_values_name_the_key(section: dict, fragment: str) -> None:
    with pytest.raises(RecipeError) as caught:
        validate_recipe({"tracking": section}, source="r.yaml")
    assert fragment in str(caught.value)


def test_track_flag_turns_mlflow_on_and_keeps_a_named_uri() -> None:
    assert TrackingSpec().with_mlflow().mlflow is True
    assert TrackingSpec(mlflow="http://127.0.0.1:5000").with_mlflow().mlflow == "http://127.0.0.1:5000"
    assert TrackingSpec(mlflow=None, tensorboard=None) == TrackingSpec()  # null: off
