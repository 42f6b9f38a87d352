"""A trained head's outputs are matched to the task's labels by name: the same names in another
order are reordered (the loaded model's output i is the task's label i), names that contradict the
task's order are refused before any work, default or unrelated names are taken as they are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import make_tiny_model_dir
from tinyplm.errors import ModelError
from tinyplm.models import load_classifier
from tinyplm.models.head_labels import output_order

FAST = settings(max_examples=40, deadline=None, database=None)


def _named(path: Path, names: list[str], num_labels: int | None = None) -> Path:
    model = make_tiny_model_dir(path, num_labels=num_labels or len(names), seed=4)
    config = json.loads((model / "config.json").read_text(encoding="utf-8"))
    config["id2label"] = {str(i): n for i, n in enumerate(names)}
    config["label2id"] = {n: i for i, n in enumerate(names)}
    (model / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return model


def _logits(model, tok, texts=("a good film", "the worst")) -> torch.Tensor:
    batch = tok(list(texts), return_tensors="pt", padding=True)
    with torch.no_grad():
        return model(**batch).logits


@FAST
@given(names=st.lists(st.sampled_from(["neg", "pos", "neutral", "mixed", "x"]), min_size=2, max_size=5, unique=True),
       data=st.data())
def test_the_same_names_in_any_order_map_each_task_label_to_its_row(names: list[str], data) -> None:
    task = data.draw(st.permutations(names))
    shown = [n.upper() if data.draw(st.booleans()) else f" {n}" for n in names]  # case and spaces aside
    order = output_order(Path("m"), {"id2label": {str(i): n for i, n in enumerate(shown)}}, tuple(task))
    if list(task) == names:
        assert order is None
    else:
        assert [names[i] for i in order] == list(task)


def test_defaults_and_unrelated_names_are_taken_as_they_are() -> None:
    assert output_order(Path("m"), {"id2label": {"0": "LABEL_0", "1": "LABEL_1"}}, ("b", "a")) is None
    assert output_order(Path("m"), {"id2label": {"0": "NEG", "1": "POS"}}, ("negative", "positive")) is None
    assert output_order(Path("m"), {}, ("negative", "positive")) is None


def test_names_that_contradict_the_task_order_are_refused_naming_id2label() -> None:
    with pytest.raises(ModelError, match=r"m/config.json: id2label names its outputs \['pos', 'other'\].*'pos'"):
        output_order(Path("m"), {"id2label": {"0": "pos", "1": "other"}}, ("neg", "pos"))


def test_a_head_of_the_task_labels_in_another_order_loads_in_the_task_order(tmp_path: Path) -> None:
    """A classifier saved as (pos, neg), loaded for a task of (neg, pos): its logits come back with
    the columns swapped, so every prediction keeps its meaning; the MNLI-style three-way case too."""
    as_saved = _named(tmp_path / "two", ["pos", "neg"])
    model, tok = load_classifier(as_saved, ("pos", "neg"), is_regression=False)
    theirs = _logits(model, tok)
    model, tok = load_classifier(as_saved, ("neg", "pos"), is_regression=False)
    assert torch.allclose(_logits(model, tok), theirs[:, [1, 0]])
    assert model.config.id2label == {0: "neg", 1: "pos"}
    three = _named(tmp_path / "three", ["CONTRADICTION", "NEUTRAL", "ENTAILMENT"])
    model, tok = load_classifier(three, ("contradiction", "neutral", "entailment"), is_regression=False)
    theirs = _logits(model, tok)
    model, tok = load_classifier(three, ("contradiction", "entailment", "neutral"), is_regression=False)
    assert torch.allclose(_logits(model, tok), theirs[:, [0, 2, 1]])


def test_validate_refuses_a_teacher_whose_labels_contradict_the_task(tmp_path: Path) -> None:
    from helpers_cli import assert_bad_input, cli

    teacher = _named(tmp_path / "teacher", ["pos", "other"])
    for name, rows in (("train", ["good film,pos", "bad film,neg"] * 4), ("dev", ["fine,pos", "awful,neg"])):
        (tmp_path / f"{name}.csv").write_text("text,label\n" + "\n".join(rows) + "\n", encoding="utf-8")
    recipe = tmp_path / "r.yaml"
    task = f"{{name: custom, train_file: {tmp_path / 'train.csv'}, dev_file: {tmp_path / 'dev.csv'}, max_length: 32}}"
    recipe.write_text(f"task: {task}\nteacher: {{model: {teacher}}}\nstudents: []\n", encoding="utf-8")
    assert_bad_input(cli(["validate", recipe], cwd=tmp_path), "id2label", "'pos'", "task.labels")


def test_a_multi_label_head_is_refused_by_predict_not_read_as_one_label(tmp_path: Path) -> None:
    """A head trained with a sigmoid per label: transformers' pipeline scores each label alone;
    tinyplm would give one softmax label. Refused, naming problem_type."""
    from helpers_cli import assert_bad_input, cli

    model = _named(tmp_path / "multi", ["sports", "politics", "music"])
    config = json.loads((model / "config.json").read_text(encoding="utf-8"))
    (model / "config.json").write_text(json.dumps({**config, "problem_type": "multi_label_classification"}),
                                       encoding="utf-8")
    (tmp_path / "in.txt").write_text("a film\n", encoding="utf-8")
    assert_bad_input(cli(["predict", str(model), "-i", "in.txt"], cwd=tmp_path),
                     f"{model / 'config.json'}: problem_type multi_label_classification")

