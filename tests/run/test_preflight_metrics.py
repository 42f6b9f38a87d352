"""A metric no model can get a value on (one class, one score, one example in an eval split) is
refused before the run trains, naming the file, the split and the metric: it read 0.0 for every
stage (a choice made on nothing), or, for ROC AUC, failed with a traceback after training."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import make_tiny_model_dir, tiny_recipe
from tinyplm.config import validate_recipe
from tinyplm.errors import DataError
from tinyplm.evaluate.metrics import undefined_reason
from tinyplm.run.preflight import preflight


def test_undefined_reason_names_what_no_prediction_can_fix() -> None:
    one_class, both = np.array([0, 0, 0]), np.array([0, 1, 0])
    assert "'no'" in undefined_reason("roc_auc", one_class, ("no", "yes"))
    assert undefined_reason("mcc", one_class) and undefined_reason("f1", one_class)
    assert "'yes'" in undefined_reason("f1", one_class, ("no", "yes"))
    assert all(undefined_reason(m, np.array([])) == "the split has no labelled example"
               for m in ("mcc", "f1", "accuracy", "pearson", "roc_auc"))  # not an IndexError
    assert "score 3" in undefined_reason("pearson", np.array([3.0, 3.0]))
    assert "1" in undefined_reason("spearman", np.array([2.5]))
    for name in ("accuracy", "f1_macro"):  # defined on any references
        assert undefined_reason(name, one_class) is None
    for name in ("roc_auc", "mcc", "f1", "pr_auc", "f1_best"):
        assert undefined_reason(name, both) is None
    assert undefined_reason("pearson", np.array([1.0, 2.0])) is None


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_a_constant_score_dev_file_is_refused_before_training(tmp_path: Path) -> None:
    train = _write(tmp_path / "train.csv", "text,label\na good movie,1.5\na bad film,4\nthe plot,2\n")
    dev = _write(tmp_path / "dev.csv", "text,label\na good movie,3\nthe bad plot,3\n")
    task = {"name": "custom", "train_file": str(train), "dev_file": str(dev), "regression": True, "max_length": 16}
    cfg = validate_recipe(tiny_recipe(tmp_path, make_tiny_model_dir(tmp_path / "m"), tmp_path, task=task))
    with pytest.raises(DataError, match=r"dev\.csv: the dev split \(2 examples\) leaves metric 'pearson' .*"
                                        r"every example has the score 3"):
        preflight(cfg)
    assert not (tmp_path / "runs").exists()


def test_a_one_class_dev_cut_by_max_eval_examples_is_refused_naming_roc_auc(tmp_path: Path) -> None:
    folder = tmp_path / "spoilers" / "tvtropes"
    _write(folder / "train.csv", "".join(f"{i},the movie was {w},{i % 2}\n" for i, w in enumerate(["good", "bad"] * 4)))
    _write(folder / "dev.csv", "1,the film was dull,0\n2,the plot was fun,0\n3,the actor dies,1\n")
    task = {"name": "tvtropes_spoilers", "data_dir": str(tmp_path), "max_length": 16}
    model = make_tiny_model_dir(tmp_path / "m")
    preflight(validate_recipe(tiny_recipe(tmp_path, model, tmp_path, task=task)))  # both classes: fine
    cut = validate_recipe(tiny_recipe(tmp_path, model, tmp_path, task={**task, "max_eval_examples": 2}))
    with pytest.raises(DataError, match=r"dev\.csv: the dev split \(2 examples\) leaves metric 'roc_auc' .*"
                                        r"every example has the label 'not_spoiler'"):
        preflight(cut)
