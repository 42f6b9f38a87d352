"""fit-mlm-head on the tiny model: only the head trains, loss falls, the saved dir reloads."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForMaskedLM

from tinyplm.errors import DataError, ModelError, TinyplmError
from tinyplm.pretrain.mlm_head import (
    METRICS_FILE,
    _setup,
    fit_mlm_head,
    has_mlm_head,
    load_mlm,
)

CORPUS = ["the movie was good and the plot was fun", "this film is bad but the actor is great",
          "it was a very dull story", "love the best film"] * 16


@pytest.fixture(scope="module")
def fitted(tmp_path_factory) -> tuple[Path, Path, dict]:
    from conftest import make_tiny_model_dir

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # module-scoped: runs before the autouse one-thread fixture
    try:
        root = tmp_path_factory.mktemp("mlm")
        src = make_tiny_model_dir(root / "tiny")
        metrics = fit_mlm_head(src, CORPUS, root / "fitted", steps=40, batch_size=16, max_length=32, lr=1e-2,
                               precision="fp32", progress=False)
    finally:
        torch.set_num_threads(threads)
    return src, root / "fitted", metrics


def test_a_classifier_checkpoint_has_no_head_and_load_mlm_says_what_to_do(tiny_model_dir: Path) -> None:
    assert not has_mlm_head(tiny_model_dir)
    with pytest.raises(ModelError, match=rf"{tiny_model_dir.name}.*fit-mlm-head"):
        load_mlm(tiny_model_dir)


def test_only_head_parameters_change(fitted) -> None:
    src, out, _ = fitted
    before = load_file(str(src / "model.safetensors"))
    after = load_file(str(out / "model.safetensors"))
    encoder = [k for k in after if k.startswith("bert.")]
    assert encoder and all(k in before for k in encoder)
    for key in encoder:
        assert torch.equal(before[key], after[key]), key
    fresh, _, trainable = _setup(src, seed=0)  # the same seeded initial head
    assert trainable == sum(p.numel() for n, p in fresh.named_parameters() if n.startswith("cls.predictions.t")) + 99
    init = fresh.state_dict()
    changed = [k for k in after if k.startswith("cls.") and not torch.equal(after[k], init[k])]
    assert set(changed) >= {"cls.predictions.transform.dense.weight", "cls.predictions.bias"}


def test_loss_falls_and_metrics_are_reported(fitted) -> None:
    _, out, m = fitted
    assert m["eval_loss_after"] < m["eval_loss_before"]
    assert m["train_loss_last"] < m["train_loss_first"]
    assert 0.0 <= m["eval_accuracy_after"] <= 1.0 and m["steps"] == 40
    assert (out / METRICS_FILE).is_file()


def test_the_held_out_score_reads_at_most_eval_max_windows(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Held-out texts were capped, not their windows: a corpus of long paragraphs spent most of a
    fit scoring hundreds of windows per text, twice."""
    long = [" ".join(CORPUS[:4] * 8)] * 8  # each about 20 windows of 32 pieces
    m = fit_mlm_head(tiny_model_dir, long, tmp_path / "o", steps=1, batch_size=4, max_length=32, eval_fraction=0.5,
                     eval_max=3, precision="fp32", progress=False)
    assert m["eval_windows"] == 3


def test_saved_dir_reloads_with_tied_decoder(fitted) -> None:
    _, out, _ = fitted
    assert has_mlm_head(out)
    auto = AutoModelForMaskedLM.from_pretrained(str(out))
    assert auto.get_output_embeddings().weight.data_ptr() == auto.get_input_embeddings().weight.data_ptr()
    model, tok = load_mlm(out)
    ids = tok(["the movie was [MASK]"], return_tensors="pt")
    with torch.no_grad():
        assert torch.allclose(model(**ids).logits, auto.eval()(**ids).logits)


def test_bad_arguments(tiny_model_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(TinyplmError, match="steps"):
        fit_mlm_head(tiny_model_dir, CORPUS, tmp_path / "o", steps=0, progress=False)
    with pytest.raises(DataError, match="at least 2"):
        fit_mlm_head(tiny_model_dir, ["one text only"], tmp_path / "o", steps=1, progress=False)
    with pytest.raises(ModelError, match="no config.json"):
        fit_mlm_head(tmp_path, CORPUS, tmp_path / "o", steps=1, progress=False)
    assert not (tmp_path / "o").exists()


def test_the_command_refuses_options_no_fit_can_run_with(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Before: --lr 0 was a pydantic traceback, --max-length 2 a 'successful' fit that masked nothing,
    --max-length past the positions a shape error mid-fit, --out naming a file a traceback."""
    from helpers_cli import assert_bad_input, cli

    (tmp_path / "c.txt").write_text("\n".join(CORPUS), encoding="utf-8")
    (tmp_path / "file").write_text("x")
    base = ["fit-mlm-head", str(tiny_model_dir), "--corpus", "c.txt", "--steps", "2"]
    for extra, said in ((["--lr", "0"], "--lr: expected a learning rate above 0"),
                        (["--max-length", "2"], "--max-length: expected at least 8"),
                        (["--max-length", "200"], "--max-length 200 is longer than the 64 positions"),
                        (["--batch-size", "0"], "--batch-size: expected at least 1")):
        assert_bad_input(cli([*base, "--out", "o", *extra], cwd=tmp_path), said)
    assert_bad_input(cli([*base, "--out", "file"], cwd=tmp_path), "--out: ", "file: is a file")
    # under a file: found before the corpus is read, not when the trained head is saved
    assert_bad_input(cli([*base, "--out", "file/head"], cwd=tmp_path), "--out: ", "file: is a file, so the model")
    assert not (tmp_path / "o").exists()
    done = cli([*base, "--out", "o", "--resume"], cwd=tmp_path)  # nothing to resume: a fresh fit
    assert done.returncode == 0, done.output
    assert (tmp_path / "o" / METRICS_FILE).is_file()


def test_another_family_is_refused_by_name_by_augment_and_fit_mlm_head(tmp_path: Path) -> None:
    """A RoBERTa checkpoint (its head is lm_head) was called headless by augment, which sent the user
    to fit-mlm-head, which then said BertForMaskedLM had no head at 'lm_head', naming no folder."""
    import json

    from conftest import make_tiny_mlm_dir

    roberta = make_tiny_mlm_dir(tmp_path / "roberta")
    config = json.loads((roberta / "config.json").read_text())
    (roberta / "config.json").write_text(json.dumps({**config, "model_type": "roberta"}))
    def fit() -> None:
        fit_mlm_head(roberta, CORPUS, tmp_path / "o", steps=1, progress=False)

    for call, what in ((lambda: load_mlm(roberta), "TinyBERT augmentation"), (fit, "fit-mlm-head")):
        with pytest.raises(ModelError, match=rf"roberta/config.json: model_type 'roberta': {what} reads BERT"):
            call()


def test_resume_takes_only_the_checkpoints_of_the_same_fit(tmp_path: Path) -> None:
    """An interrupted fit, rerun without --resume with other options and interrupted again, then
    resumed, would have continued the first fit's steps."""
    from tinyplm.pretrain.mlm_head import _claim_checkpoints

    out = tmp_path / "o"
    first = {"model": "m", "steps": 500, "lr": 1e-3}
    folder = _claim_checkpoints(out, first, resume=False)
    assert folder == tmp_path / ".o.checkpoints"
    (folder / "step-000300").mkdir()
    _claim_checkpoints(out, first, resume=True)  # the same fit: its steps stay
    assert (folder / "step-000300").is_dir()
    with pytest.raises(TinyplmError, match=r"--resume: the checkpoints in .* are of a fit with other lr \(lr 0.001\)"):
        _claim_checkpoints(out, {**first, "lr": 1e-2}, resume=True)
    _claim_checkpoints(out, {**first, "lr": 1e-2}, resume=False)  # started over: the old steps are gone
    assert not (folder / "step-000300").exists()
