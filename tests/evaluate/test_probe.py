"""Layer probes on a tiny random BERT and tiny made-up data."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import make_tiny_glue, make_tiny_model_dir
from tinyplm.errors import TinyplmError
from tinyplm.evaluate.encoder import open_model, random_copy
from tinyplm.evaluate.probe import ProbeReport, ProbeSettings, fit_probe, majority_accuracy, probe_model
from tinyplm.evaluate.probe_data import load_probe_data, probe_task

# Word -> (POS, chunk): the tag is a function of the word, so the embedding layer can read it.
LEXICON = {"the": ("DT", "B-NP"), "a": ("DT", "B-NP"), "movie": ("NN", "I-NP"), "film": ("NN", "I-NP"),
           "plot": ("NN", "I-NP"), "good": ("JJ", "I-NP"), "bad": ("JJ", "I-NP"), "is": ("VBZ", "B-VP"),
           "was": ("VBD", "B-VP"), ".": (".", "O")}


def write_tiny_conll(root: Path, sentences: int = 40, seed: int = 0) -> Path:
    """``root/conll2003/{train,valid,test}.txt`` of random sentences over :data:`LEXICON`."""
    folder = root / "conll2003"
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    for name in ("train.txt", "valid.txt", "test.txt"):
        blocks = ["-DOCSTART- -X- -X- O\n"]
        for _ in range(sentences):
            words = rng.choices(list(LEXICON), k=rng.randint(3, 8))
            blocks.append("".join(f"{w} {LEXICON[w][0]} {LEXICON[w][1]} O\n" for w in words))
        (folder / name).write_text("\n".join(blocks), encoding="utf-8")
    return root


def test_a_pos_probe_reads_word_identity_off_every_layer(tmp_path: Path) -> None:
    opened = open_model(make_tiny_model_dir(tmp_path / "m"))
    data = load_probe_data(probe_task("conll2003-pos"), write_tiny_conll(tmp_path / "data"), 30, 20)
    assert data.label_names == (".", "DT", "JJ", "NN", "VBD", "VBZ")
    curve = probe_model(opened.model, opened.tokenizer, data, ProbeSettings(max_iter=200), "tiny")
    assert len(curve.accuracy) == len(curve.control) == 3  # embeddings + 2 layers
    assert curve.dev_items == sum(len(y) for y in data.dev.labels)
    assert curve.accuracy[0] > 0.95 > curve.majority + 0.3  # word identity decides the tag
    assert curve.selectivity == pytest.approx([a - c for a, c in zip(curve.accuracy, curve.control, strict=True)])


def test_a_sentence_probe_and_its_stored_form(tmp_path: Path) -> None:
    opened = open_model(make_tiny_model_dir(tmp_path / "m"))
    data = load_probe_data(probe_task("sst2"), make_tiny_glue(tmp_path / "glue", 60, 30), None, None)
    assert len(data.train) == 60 and set(data.dev.labels) <= {0, 1}
    curve = probe_model(opened.model, opened.tokenizer, data, ProbeSettings(control=False, pool="cls"), "tiny")
    assert curve.control is None and curve.selectivity is None and curve.train_items == 60
    report = ProbeReport("sst2", "sentence", "", list(data.label_names), {"c": 1.0}, [curve])
    again = ProbeReport.from_dict(report.to_dict())
    assert again.curve("tiny").accuracy == curve.accuracy
    with pytest.raises(ValueError, match=r"curves\[0\].control"):
        ProbeReport.from_dict({**report.to_dict(), "curves": [{"name": "x", "accuracy": [0.5], "control": [1, 2]}]})


def test_the_random_control_has_the_shape_but_not_the_weights(tmp_path: Path) -> None:
    model = open_model(make_tiny_model_dir(tmp_path / "m")).model
    fresh = random_copy(model, seed=1)
    for (name, a), (_, b) in zip(model.named_parameters(), fresh.named_parameters(), strict=True):
        assert a.shape == b.shape, name
    words = model.bert.embeddings.word_embeddings.weight
    assert not torch.equal(words, fresh.bert.embeddings.word_embeddings.weight)
    assert torch.equal(random_copy(model, seed=1).bert.embeddings.word_embeddings.weight,
                       fresh.bert.embeddings.word_embeddings.weight)  # seeded


def test_probe_baselines() -> None:
    assert majority_accuracy(np.array([1, 1, 0]), np.array([1, 0, 1, 1])) == 0.75
    x = np.array([[0.0], [1.0], [0.1], [0.9]])
    assert fit_probe(x, np.array([0, 1, 0, 1]), x, np.array([0, 1, 0, 1])) == 1.0
    assert fit_probe(x, np.array([1, 1, 1, 1]), x, np.array([1, 0, 1, 0])) == 0.5  # one label: majority


def test_the_probe_reaches_scikit_learns_optimum() -> None:
    """The torch L-BFGS probe minimises LogisticRegression's objective: same weights (up to float32),
    same dev predictions, on overlapping classes (an optimum the L2 term decides, not a separable set)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    from tinyplm.evaluate.probe import _lbfgs_logistic

    rng = np.random.default_rng(0)
    centres = rng.normal(size=(4, 6))
    y = rng.integers(0, 4, 600)
    x = centres[y] + 1.5 * rng.normal(size=(600, 6))
    train_x, train_y, dev_x, dev_y = x[:400], y[:400], x[400:], y[400:]
    for c in (0.01, 1.0):
        scaler = StandardScaler().fit(train_x)
        ref = LogisticRegression(C=c, max_iter=2000, tol=1e-10).fit(scaler.transform(train_x), train_y)
        weight, bias = _lbfgs_logistic(scaler.transform(train_x), train_y, 4, c, max_iter=500)
        # Softmax weights are defined up to a shift shared by the classes; compare them centred.
        ours = (weight - weight.mean(1, keepdim=True)).numpy()
        np.testing.assert_allclose(ours, (ref.coef_ - ref.coef_.mean(0)).T, atol=2e-3)
        expected = float((ref.predict(scaler.transform(dev_x)) == dev_y).mean())
        assert fit_probe(train_x, train_y, dev_x, dev_y, c=c, max_iter=500) == pytest.approx(expected, abs=1 / 200)
    labels = np.array([3, 7, 3, 7])  # label ids need not be 0..k-1
    x = np.array([[0.0], [1.0], [0.1], [0.9]])
    assert fit_probe(x, labels, np.array([[0.05], [0.95]]), np.array([3, 7])) == 1.0


def test_unknown_probing_task_and_bad_settings() -> None:
    with pytest.raises(TinyplmError, match="conll2003-pos"):
        probe_task("conll2003-ps")
    with pytest.raises(ValueError, match="pool"):
        ProbeSettings(pool="max")
