"""Config values no family can run, refused from config.json before any weight is read (found by a
probe of users' own checkpoints: each ran validate "ok" and then crashed inside transformers, or
gave a misleading message)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import make_tiny_model_dir
from tinyplm.errors import ModelError
from tinyplm.models import check_model_dir, load_classifier


@pytest.mark.parametrize(("changes", "said"), [
    ({"pad_token_id": 500}, "pad_token_id 500 is outside the word table (vocab_size 99: ids 0 to 98)"),
    ({"pad_token_id": -1}, "pad_token_id -1 is outside the word table"),
    ({"num_attention_heads": 5}, "num_attention_heads 5 does not divide hidden_size 32"),
    ({"type_vocab_size": 0}, "type_vocab_size 0: a bert model adds a segment (token type) embedding"),
])
def test_a_config_value_no_model_can_run_is_named_before_loading(tmp_path: Path, changes: dict, said: str) -> None:
    path = make_tiny_model_dir(tmp_path / "m")
    cfg = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**cfg, **changes}))
    expected = re.escape(f"{path / 'config.json'}: {said}")
    for read in (check_model_dir, lambda p: load_classifier(p, ("a", "b"), False)):
        with pytest.raises(ModelError, match=expected):
            read(path)


def test_values_that_run_are_left_alone(tmp_path: Path) -> None:
    """DeBERTa reads type_vocab_size 0 as no segment embedding; an explicit per-head size need not
    divide the width."""
    from tinyplm.models.config_values import config_value_problem

    assert config_value_problem(Path("c"), {"model_type": "deberta-v2", "type_vocab_size": 0}) is None
    assert config_value_problem(Path("c"), {"model_type": "deberta-v2", "num_attention_heads": 5, "hidden_size": 32,
                                            "attention_head_size": 8}) is None
    assert config_value_problem(Path("c"), {"model_type": "distilbert", "n_heads": 3, "dim": 32}) is not None
    assert check_model_dir(make_tiny_model_dir(tmp_path / "m"))["vocab_size"] == 99
