"""A key added to the recipe schema leaves the resolved recipe of a recipe that does not set it as it
was before the key existed: finished runs stay reusable (``run_or_reuse`` compares the text)."""

from __future__ import annotations

import yaml

from tinyplm.config.load import dump_resolved, validate_recipe

RECIPE = {"task": {"name": "sst2"}, "teacher": {"model": "minilm-l6"}}


def test_keys_at_their_defaults_are_left_out_and_set_ones_written_and_read_back() -> None:
    plain = dump_resolved(validate_recipe(RECIPE, source="test"))
    loaded = yaml.safe_load(plain)
    assert "holdout" not in loaded["task"] and "holdout_seed" not in loaded["task"]
    assert "logits_from" not in loaded["teacher"]
    assert "max_length" in loaded["task"] and "logits_precision" in loaded["teacher"]  # the older keys stay

    chosen = {"task": {"name": "sst2", "holdout": 500, "holdout_seed": 3},
              "teacher": {"model": "minilm-l6", "logits_from": "teacher-best.runtime"},
              "students": [{"name": "teacher-best", "init_from": "teacher", "stages": [],
                            "compress": [{"kind": "runtime", "runtime": "fastest"}]}]}
    dumped = dump_resolved(validate_recipe(chosen, source="test"))
    again = yaml.safe_load(dumped)
    assert (again["task"]["holdout"], again["task"]["holdout_seed"]) == (500, 3)
    assert again["teacher"]["logits_from"] == "teacher-best.runtime"
    assert dump_resolved(validate_recipe(again, source="test")) == dumped

    seed_only = yaml.safe_load(dump_resolved(validate_recipe({"task": {"name": "sst2", "holdout_seed": 7}},
                                                             source="test")))
    assert seed_only["task"]["holdout_seed"] == 7 and "holdout" not in seed_only["task"]
