"""What a model dir says about itself: head, labels, regression, and which max length applies."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from conftest import make_tiny_model_dir
from helpers_serve import TAGS, make_regression_dir, make_tiny_head_dir
from tinyplm.errors import ModelError, TinyplmError
from tinyplm.inference.model_info import DEFAULT_MAX_LENGTH, model_info
from tinyplm.tasks.heads import Head


def _run_dir(root: Path, task: dict) -> Path:
    """A run dir holding config.resolved.yaml (with ``task``), model/ and students/s/."""
    root.mkdir(parents=True)
    (root / "config.resolved.yaml").write_text(yaml.safe_dump({"name": "r", "task": task}), encoding="utf-8")
    make_tiny_model_dir(root / "model")
    make_tiny_model_dir(root / "students" / "s")
    return root


def test_a_run_dir_means_its_model_and_its_recorded_max_length(tmp_path: Path) -> None:
    run = _run_dir(tmp_path / "run", {"name": "sst2", "max_length": 40})
    for target in (run, run / "model", run / "students" / "s"):
        info = model_info(target)
        assert info.max_length == 40 and info.task == "sst2", target
        assert "config.resolved.yaml" in info.max_length_from
    assert model_info(run).path == run / "model"


def test_explicit_max_length_wins_and_is_checked_against_positions(tmp_path: Path) -> None:
    run = _run_dir(tmp_path / "run", {"name": "sst2", "max_length": 40})
    assert model_info(run, max_length=16).max_length == 16
    with pytest.raises(TinyplmError, match="longer than the 64 positions"):
        model_info(run, max_length=100)  # the tiny model has 64 positions


def test_a_bare_model_dir_uses_evaluates_default_cut_to_its_positions(tmp_path: Path) -> None:
    info = model_info(make_tiny_model_dir(tmp_path / "m"))
    assert DEFAULT_MAX_LENGTH > 64 and info.max_length == 64 and "64 positions" in info.max_length_from
    assert info.head == Head.SEQUENCE and not info.is_regression and len(info.labels) == 2


def test_heads_labels_and_regression_come_from_config(tmp_path: Path) -> None:
    span = model_info(make_tiny_head_dir(tmp_path / "qa", "span"))
    assert span.head == Head.SPAN and span.labels == () and span.null_threshold is None
    token = model_info(make_tiny_head_dir(tmp_path / "ner", "token"))
    assert token.head == Head.TOKEN and token.labels == TAGS
    reg = model_info(make_regression_dir(tmp_path / "reg"))
    assert reg.is_regression and reg.labels == ()
    cfg = json.loads((tmp_path / "reg" / "config.json").read_text())
    cfg["id2label"] = {"0": "neg", "1": "pos"}
    cfg.pop("problem_type")
    (tmp_path / "reg" / "config.json").write_text(json.dumps(cfg))
    assert model_info(tmp_path / "reg").labels == ("neg", "pos")


@pytest.mark.parametrize(("id2label", "said"), [
    ({"0": "negative", "2": "positive"}, "id2label numbers its outputs [0, 2]; expected 0 to 1"),
    ({"0": "positive", "1": "positive"}, "id2label names two outputs 'positive'"),
    ({"0": "negative", "1": "positive", "label2id": {"positive": 0, "negative": 1}},
     "id2label puts 'positive' at output 1 but label2id at 0: the two disagree"),
    (None, "problem_type regression, but its head has 2 outputs; expected num_labels 1"),
])
def test_output_names_that_would_mislead_are_refused(tmp_path: Path, id2label: dict, said: str) -> None:
    """A gap in id2label's numbers renumbered the outputs without a word (label_id 1 for the config's
    2); a name given twice lost one output's score (the scores no longer summed to 1); a label2id
    that reversed id2label was ignored (transformers reads id2label, a user's code label2id); a
    regression problem_type on two outputs was refused as if a task had asked for one score."""
    path = make_tiny_model_dir(tmp_path / "m")
    cfg = json.loads((path / "config.json").read_text())
    id2label = dict(id2label or {})
    label2id = id2label.pop("label2id", None)
    changes = {"id2label": id2label} if id2label else {"problem_type": "regression"}
    changes.update({"label2id": label2id} if label2id else {})
    (path / "config.json").write_text(json.dumps({**cfg, **changes}))
    with pytest.raises(ModelError, match=re.escape(f"{path / 'config.json'}: {said}")):
        model_info(path)


def test_names_a_head_never_reads_are_not_checked(tmp_path: Path) -> None:
    """A reader's leftover id2label (a gap in it) names none of its outputs: it is not refused."""
    path = make_tiny_head_dir(tmp_path / "qa", "span")
    cfg = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**cfg, "id2label": {"0": "a", "2": "b"}}))
    assert model_info(path).labels == ()


def test_squad_v2_run_turns_on_the_null_answer_and_windows_are_checked(tmp_path: Path) -> None:
    root = tmp_path / "run"
    root.mkdir()
    (root / "config.resolved.yaml").write_text(yaml.safe_dump(
        {"task": {"name": "squad_v2", "max_length": 96, "doc_stride": 20, "max_query_length": 16}}))
    make_tiny_head_dir(root / "model", "span")
    info = model_info(root)
    assert (info.null_threshold, info.max_length, info.doc_stride, info.max_query_length) == (0.0, 96, 20, 16)
    with pytest.raises(TinyplmError, match="doc_stride"):
        model_info(root, doc_stride=90)


@pytest.mark.parametrize(("asked", "said"), [
    ({"max_query_length": 0}, "--max-query-length: expected at least 1 token, got 0"),
    ({"doc_stride": 0}, "--doc-stride: expected at least 1 token, got 0"),
    ({"doc_stride": -4}, "--doc-stride: expected at least 1 token, got -4"),
    ({"null_threshold": float("nan")}, "--null-threshold: expected a number, got nan")])
def test_a_window_setting_below_1_or_a_nan_threshold_is_refused_naming_its_flag(tmp_path: Path, asked: dict,
                                                                                 said: str) -> None:
    """--max-query-length 0 was taken as the default 64 (falsy), silently; --doc-stride 0 was refused
    in the recipe's words; a NaN threshold compared false with every score."""
    path = make_tiny_head_dir(tmp_path / "qa", "span")
    with pytest.raises(TinyplmError, match=re.escape(said)):
        model_info(path, **asked)


def test_missing_model_dir_names_it(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="nowhere"):
        model_info(tmp_path / "nowhere")


def test_review_context_comes_from_the_run_or_the_stamp_of_the_model(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from transformers import AutoConfig

    from tinyplm.config import TaskSpec
    from tinyplm.run.inputs import stamp_task

    run = tmp_path / "run"
    make_tiny_model_dir(run / "model")
    (run / "config.resolved.yaml").write_text(yaml.safe_dump(
        {"task": {"name": "goodreads_spoilers_reviews", "max_length": 32, "context_sentences": 3}}))
    info = model_info(run)
    assert (info.task, info.context_sentences, info.describe()["context_sentences"]) == \
        ("goodreads_spoilers_reviews", 3, 3)
    alone = make_tiny_model_dir(tmp_path / "alone")  # copied out of its run: the stamp in config.json
    model = SimpleNamespace(config=AutoConfig.from_pretrained(alone))
    stamp_task(model, TaskSpec(name="goodreads_spoilers_reviews", context_sentences=2))
    model.config.save_pretrained(alone)
    assert model_info(alone).context_sentences == 2 and model_info(alone).context_after == 0
    stamp_task(model, TaskSpec(name="tvtropes_spoilers", context_sentences=2, context_after=3))
    model.config.save_pretrained(alone)
    assert (model_info(alone).context_sentences, model_info(alone).context_after) == (2, 3)
    assert model_info(alone).describe()["context_after"] == 3
    assert model_info(make_tiny_model_dir(tmp_path / "plain")).context_sentences == 0


def test_a_custom_task_model_copied_out_of_its_run_still_says_whether_it_reads_pairs(tmp_path: Path) -> None:
    """Copied out of its run dir, a custom task's model took pairs and single texts alike: its
    config stamp did not record the recipe's text_pair_column."""
    from types import SimpleNamespace

    from transformers import AutoConfig

    from tinyplm.config import TaskSpec
    from tinyplm.run.inputs import stamp_task

    for pair_column, pairs in (("question", True), (None, False)):
        alone = make_tiny_model_dir(tmp_path / f"alone-{pairs}")
        model = SimpleNamespace(config=AutoConfig.from_pretrained(alone))
        stamp_task(model, TaskSpec(name="custom", train_file="t.csv", dev_file="d.csv", text_column="text",
                                   text_pair_column=pair_column, label_column="label"))
        model.config.save_pretrained(alone)
        assert model_info(alone).pairs is pairs


def test_a_feature_bilstm_is_held_to_its_encoders_positions(tmp_path: Path) -> None:
    from transformers import AutoModel, AutoTokenizer

    from tinyplm.models.classic.features import feature_bilstm
    from tinyplm.models.io import save_model

    src = make_tiny_model_dir(tmp_path / "bert")  # 64 positions
    model = feature_bilstm(AutoModel.from_pretrained(str(src)), 2, hidden=4, feature_layers=2).eval()
    save_model(model, AutoTokenizer.from_pretrained(str(src)), tmp_path / "features")
    assert model_info(tmp_path / "features", max_length=64).max_length == 64
    with pytest.raises(TinyplmError, match="--max-length 65 is longer than the 64 positions"):
        model_info(tmp_path / "features", max_length=65)
