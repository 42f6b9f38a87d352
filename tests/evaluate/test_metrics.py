"""Metrics agree with scikit-learn / scipy and with values worked by hand; suffixes; undefined metrics are 0.0;
which metrics depend on the order of predictions and references."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

from tinyplm.errors import TinyplmError
from tinyplm.evaluate import metrics
from tinyplm.evaluate.entities import entity_scores
from tinyplm.evaluate.model_eval import token_scores
from tinyplm.tasks import METRIC_NAMES, Example, Split, TaskData
from tinyplm.tasks.conll import TAGS, Sentence
from tinyplm.tasks.encoding import Encoded
from tinyplm.tasks.tagging import Tagged

RNG_SEED = 0


@pytest.fixture
def binary() -> tuple[np.ndarray, np.ndarray]:
    """200 random binary predictions and references."""
    rng = np.random.default_rng(RNG_SEED)
    return rng.integers(0, 2, 200), rng.integers(0, 2, 200)


def test_table_matches_the_names_tasks_know() -> None:
    assert set(metrics.METRICS) | set(metrics.SCORE_METRICS) == set(METRIC_NAMES)


def test_classification_metrics_match_sklearn(binary: tuple[np.ndarray, np.ndarray]) -> None:
    p, r = binary
    out = metrics.compute(["accuracy", "f1", "f1_macro", "mcc"], p, r)
    assert out == {
        "accuracy": pytest.approx(accuracy_score(r, p)),
        "f1": pytest.approx(f1_score(r, p)),
        "f1_macro": pytest.approx(f1_score(r, p, average="macro")),
        "mcc": pytest.approx(matthews_corrcoef(r, p)),
    }
    assert all(type(v) is float for v in out.values())


def test_multiclass_metrics_match_sklearn() -> None:
    rng = np.random.default_rng(1)
    p, r = rng.integers(0, 3, 300), rng.integers(0, 3, 300)
    out = metrics.compute(["accuracy", "f1_macro", "mcc"], p, r)
    assert out["accuracy"] == pytest.approx(accuracy_score(r, p))
    assert out["f1_macro"] == pytest.approx(f1_score(r, p, average="macro"))
    assert out["mcc"] == pytest.approx(matthews_corrcoef(r, p))
    with pytest.raises(TinyplmError, match="f1 is binary"):
        metrics.compute(["f1"], p, r)


def test_regression_metrics_match_scipy() -> None:
    rng = np.random.default_rng(RNG_SEED)
    r = rng.uniform(0, 5, 100)
    p = r + rng.normal(0, 1, 100)
    out = metrics.compute(["pearson", "spearman"], p.astype(np.float32), r)
    assert out["pearson"] == pytest.approx(pearsonr(p, r).statistic, rel=1e-5)
    assert out["spearman"] == pytest.approx(spearmanr(p, r).statistic, rel=1e-5)
    assert all(type(v) is float for v in out.values())


def test_suffix(binary: tuple[np.ndarray, np.ndarray]) -> None:
    p, r = binary
    out = metrics.compute(["accuracy", "f1"], p, r, suffix="_mm")
    assert set(out) == {"accuracy_mm", "f1_mm"}
    assert out["accuracy_mm"] == pytest.approx(accuracy_score(r, p))


def test_undefined_metrics_are_zero() -> None:
    constant, varied = np.zeros(10), np.arange(10.0)
    out = metrics.compute(["pearson", "spearman"], constant, varied)
    assert out == {"pearson": 0.0, "spearman": 0.0}
    labels = np.array([0, 1, 0, 1])
    assert metrics.compute(["mcc"], np.zeros(4, dtype=int), labels) == {"mcc": 0.0}
    assert metrics.compute(["f1"], np.zeros(4, dtype=int), np.zeros(4, dtype=int)) == {"f1": 0.0}
    assert metrics.compute(["pearson"], np.array([1.0]), np.array([2.0])) == {"pearson": 0.0}


def test_bad_calls() -> None:
    expected = r"unknown metric 'acc'; did you mean 'mcc'\? Known: accuracy"
    with pytest.raises(TinyplmError, match=expected):
        metrics.compute(["acc"], np.zeros(2), np.zeros(2))
    with pytest.raises(TinyplmError, match="3 predictions for 2 references"):
        metrics.compute(["accuracy"], np.zeros(3), np.zeros(2))
    with pytest.raises(TinyplmError, match="no predictions"):
        metrics.compute(["accuracy"], np.zeros(0), np.zeros(0))


def test_predictions_from_logits() -> None:
    logits = np.array([[0.1, 2.0, -1.0], [3.0, 0.0, 0.0]])  # (batch=2, num_labels=3)
    preds = metrics.predictions_from_logits(logits, is_regression=False)
    assert preds.tolist() == [1, 0] and preds.dtype == np.int64
    scores = metrics.predictions_from_logits(np.array([[0.5], [4.25]]), is_regression=True)
    assert scores.tolist() == [0.5, 4.25] and scores.shape == (2,)
    assert metrics.predictions_from_logits(np.array([1.0, 2.0]), True).tolist() == [1.0, 2.0]
    with pytest.raises(TinyplmError, match=r"\(batch, 1\)"):
        metrics.predictions_from_logits(np.zeros((2, 3)), is_regression=True)
    with pytest.raises(TinyplmError, match="num_labels"):
        metrics.predictions_from_logits(np.zeros(3), is_regression=False)


def mnli_data() -> TaskData:
    """A hand-built MNLI-like TaskData with two eval splits."""
    split = Split("x", [Example("a", "b", 0, 2)], Path("x.tsv"))
    return TaskData(
        task="mnli", train=split, evals={"dev_matched": split, "dev_mismatched": split},
        labels=("contradiction", "entailment", "neutral"), is_regression=False,
        metrics=("accuracy",), primary_metric="accuracy",
        metric_suffix={"dev_mismatched": "_mm"},
    )


def test_task_metrics_applies_split_suffix() -> None:
    data = mnli_data()
    p, r = np.array([0, 1, 2, 2]), np.array([0, 1, 2, 1])
    assert metrics.task_metrics(data, "dev_matched", p, r) == {"accuracy": 0.75}
    assert metrics.task_metrics(data, "dev_mismatched", p, r) == {"accuracy_mm": 0.75}
    with pytest.raises(TinyplmError, match="no split 'test'"):
        metrics.task_metrics(data, "test", p, r)


# A skewed binary example: 4 positives, 6 negatives; TP=2, FN=2, FP=1, TN=5.
SKEWED_REFS = np.array([1, 1, 1, 1, 0, 0, 0, 0, 0, 0])
SKEWED_PREDS = np.array([1, 1, 0, 0, 1, 0, 0, 0, 0, 0])


def test_skewed_binary_example_by_hand() -> None:
    out = metrics.compute(["accuracy", "f1", "f1_macro", "mcc"], SKEWED_PREDS, SKEWED_REFS)
    assert out["accuracy"] == pytest.approx(7 / 10)
    assert out["f1"] == pytest.approx(2 * 2 / (2 * 2 + 1 + 2))  # 2TP / (2TP + FP + FN) = 4/7: class 1 only
    assert out["f1_macro"] == pytest.approx((4 / 7 + 10 / 13) / 2)  # class 0: TP=5, FP=2, FN=1 -> 10/13
    assert out["mcc"] == pytest.approx((2 * 5 - 1 * 2) / np.sqrt(3 * 4 * 6 * 7))  # 8 / sqrt(504) = 0.356


def test_f1_is_of_the_positive_class() -> None:
    """Flipping which class is 1 changes F1 (4/7 -> 10/13) but not accuracy or MCC."""
    flipped = metrics.compute(["accuracy", "f1", "mcc"], 1 - SKEWED_PREDS, 1 - SKEWED_REFS)
    assert flipped["f1"] == pytest.approx(10 / 13)
    assert flipped["accuracy"] == pytest.approx(7 / 10)
    assert flipped["mcc"] == pytest.approx(8 / np.sqrt(504))


#: The table's metrics are symmetric in (predictions, references): F1 = 2TP/(2TP+FP+FN) and MCC
#: are unchanged when FP and FN trade places, accuracy and correlations trivially. So a swapped
#: call cannot change a GLUE score; a metric added to the table that is not symmetric (precision,
#: recall) fails the test below and needs a test of its argument order like the entity ones.
SYMMETRIC = {"accuracy", "f1", "f1_macro", "mcc", "pearson", "spearman"}


def test_every_table_metric_is_symmetric_in_its_arguments() -> None:
    assert set(metrics.METRICS) == SYMMETRIC
    rng = np.random.default_rng(3)
    for _ in range(20):
        p, r = rng.integers(0, 2, 30), (rng.random(30) < 0.2).astype(int)  # skewed references
        names = ["accuracy", "f1", "f1_macro", "mcc", "pearson", "spearman"]
        assert metrics.compute(names, p, r) == pytest.approx(metrics.compute(names, r, p))


# Entity scores are not symmetric: gold has 3 entities, the prediction finds 1 of them exactly.
GOLD_TAGS = ["B-PER", "I-PER", "O", "B-LOC", "B-ORG"]
PREDICTED_TAGS = ["B-PER", "I-PER", "O", "O", "O"]


def test_entity_precision_and_recall_by_hand() -> None:
    out = entity_scores([GOLD_TAGS], [PREDICTED_TAGS])
    assert out == pytest.approx({"precision": 1.0, "recall": 1 / 3, "f1": 0.5})  # 2 * (1 * 1/3) / (4/3)
    swapped = entity_scores([PREDICTED_TAGS], [GOLD_TAGS])
    assert swapped == pytest.approx({"precision": 1 / 3, "recall": 1.0, "f1": 0.5})


def test_token_scores_pass_gold_and_predictions_in_order() -> None:
    """The evaluation of a tagger reads gold tags from the split and predictions from the logits."""
    pieces = len(GOLD_TAGS) + 2  # [CLS] w1 .. w5 [SEP]
    logits = torch.full((1, pieces, len(TAGS)), -5.0)
    for word, tag in enumerate(PREDICTED_TAGS):
        logits[0, word + 1, TAGS.index(tag)] = 5.0
    tagged = Tagged([[0] * pieces], [[0] * pieces], [[-100] * pieces], [list(range(1, pieces - 1))], 0)
    enc = Encoded(tagged.input_ids, tagged.token_type_ids, torch.zeros(1, pieces, dtype=torch.long), 0,
                  head="token", meta=tagged)
    split = Split("dev", [Sentence(tuple(f"w{i}" for i in range(len(GOLD_TAGS))), tuple(GOLD_TAGS), 1)],
                  Path("valid.txt"), head="token")
    out = token_scores(split, enc, logits, TAGS)
    assert out == pytest.approx({"precision": 1.0, "recall": 1 / 3, "f1": 0.5})


def test_a_word_the_tokenizer_gives_no_piece_is_o_and_the_words_after_it_keep_their_tags() -> None:
    """A zero-width space is a word of its own in the file and no piece at all: the tags after it
    stay on their words instead of sliding one word to the left."""
    from transformers import BertTokenizerFast

    from conftest import tiny_vocab
    from tinyplm.tasks.tagging import encode_tagged, tags_from_logits

    tok = BertTokenizerFast(vocab={t: i for i, t in enumerate(tiny_vocab())}, do_lower_case=True)
    words = ["the", "actor", "\u200b", "film", "was", "good"]
    tags = ["O", "B-PER", "O", "B-MISC", "O", "O"]
    label_ids = {t: i for i, t in enumerate(TAGS)}
    tagged = encode_tagged([words], [tags], tok, label_ids, 32)
    assert tagged.first_words == [[0, 1, 3, 4, 5]]  # no piece starts word 2
    logits = torch.full((1, len(tagged.input_ids[0]), len(TAGS)), -5.0)
    for piece, word in zip(tagged.first_pieces[0], tagged.first_words[0], strict=True):
        logits[0, piece, TAGS.index(tags[word])] = 5.0
    assert tags_from_logits(tagged, logits, TAGS, [len(words)]) == [tags]
