"""The training loop: data order, schedule, learning, budgets, checkpoints and in-process resume."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file

from conftest import TINY_TRAIN, tiny_sentiment_rows
from tinyplm.config import TrainSpec
from tinyplm.models import load_classifier
from tinyplm.tasks.base import Example, Split
from tinyplm.tasks.encoding import encode_split
from tinyplm.train import PredictionObjective, StageIO, epoch_batches, lr_factor, train
from tinyplm.train.checkpoint import list_checkpoints


def test_epoch_batches_cover_every_example_once_and_are_deterministic() -> None:
    lengths = np.random.default_rng(0).integers(3, 40, size=103)
    a = epoch_batches(103, 8, seed=1, epoch=0, lengths=lengths)
    b = epoch_batches(103, 8, seed=1, epoch=0, lengths=lengths)
    c = epoch_batches(103, 8, seed=1, epoch=1, lengths=lengths)
    assert a == b
    assert a != c
    assert sorted(i for batch in a for i in batch) == list(range(103))


def test_grouping_by_length_reduces_padding() -> None:
    lengths = np.random.default_rng(0).integers(3, 64, size=2000)

    def padded(batches: list[list[int]]) -> int:
        return sum(len(b) * max(lengths[i] for i in b) for b in batches)

    grouped = epoch_batches(2000, 32, 0, 0, lengths=lengths)
    plain = epoch_batches(2000, 32, 0, 0)
    assert padded(grouped) < 0.75 * padded(plain)


def test_small_last_batch_is_dropped_for_multiple_processes() -> None:
    batches = epoch_batches(17, 8, 0, 0, world=2)
    assert all(len(b) >= 2 for b in batches)
    assert sum(len(b) for b in batches) == 16


@pytest.mark.parametrize(
    ("progress", "expected"), [(0.0, 0.0), (0.05, 0.5), (0.1, 1.0), (0.55, 0.5), (1.0, 0.0), (1.5, 0.0)]
)
def test_lr_factor_warms_up_then_decays_linearly(progress: float, expected: float) -> None:
    assert lr_factor(progress, warmup=0.1) == pytest.approx(expected)


def _data(tok, n: int, seed: int):
    examples = [Example(t, None, y, i) for i, (t, y) in enumerate(tiny_sentiment_rows(n, seed))]
    return encode_split(Split("train", examples, Path("x")), tok, 32)


def _spec(**kw) -> TrainSpec:
    return TrainSpec(**{**TINY_TRAIN, "epochs": 3, "log_every": 5, **kw})


def _accuracy(model, enc) -> float:
    from tinyplm.models.infer import predict_logits

    preds = predict_logits(model, enc).argmax(-1)
    return float((preds == enc.labels).float().mean())


def test_fine_tuning_learns_the_toy_task(tiny_model_dir: Path, tmp_path: Path) -> None:
    model, tok = load_classifier(tiny_model_dir, ("0", "1"), False)
    train_enc, dev_enc = _data(tok, 256, 0), _data(tok, 64, 1)
    before = _accuracy(model, dev_enc)
    io = StageIO("t", tmp_path / "ckpt", tmp_path / "log.jsonl")
    result = train(model, train_enc, PredictionObjective(), spec=_spec(eval_every=16), io=io,
                   evaluate=lambda m: {"accuracy": _accuracy(m, dev_enc)}, primary="accuracy")
    assert result.steps == 48
    assert result.best_metric is not None and result.best_metric >= 0.9 > before
    assert _accuracy(result.model, dev_enc) == pytest.approx(result.best_metric)
    events = [line for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert any('"event": "eval"' in e for e in events) and any('"examples_per_s"' in e for e in events)


def test_max_steps_and_budget_stop_training(tiny_model_dir: Path, tmp_path: Path) -> None:
    model, tok = load_classifier(tiny_model_dir, ("0", "1"), False)
    enc = _data(tok, 64, 0)
    io = StageIO("t", tmp_path / "c1", tmp_path / "log.jsonl")
    assert train(model, enc, PredictionObjective(), spec=_spec(max_steps=5), io=io).stopped_by == "max_steps"
    io2 = StageIO("t2", tmp_path / "c2", tmp_path / "log.jsonl")
    result = train(model, enc, PredictionObjective(), spec=_spec(epochs=10_000, budget_minutes=0.02), io=io2)
    assert result.stopped_by == "budget"
    assert result.seconds >= 1.2 and result.steps < 10_000 * 4


def test_kd_objective_needs_teacher_logits(tiny_model_dir: Path, tmp_path: Path) -> None:
    model, tok = load_classifier(tiny_model_dir, ("0", "1"), False)
    io = StageIO("t", tmp_path / "c", tmp_path / "log.jsonl")
    with pytest.raises(ValueError, match="teacher logits"):
        train(model, _data(tok, 16, 0), PredictionObjective(kd_weight=1.0), spec=_spec(), io=io)


class _Crash(Exception):
    pass


def _crashing_at(n: int):
    """An evaluation that raises ``_Crash`` on its ``n``-th call (a kill mid-run)."""
    calls = {"n": 0}

    def evaluate(_model) -> dict[str, float]:
        calls["n"] += 1
        if calls["n"] == n:
            raise _Crash
        return {"accuracy": 0.5}

    return evaluate


def test_resume_from_checkpoint_reproduces_the_uninterrupted_run(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Crash at step 30 (last checkpoint at 20), resume: same weights as one straight run."""
    def fresh():
        return load_classifier(tiny_model_dir, ("0", "1"), False)

    crash_on_third_eval = _crashing_at(3)

    model, tok = fresh()
    enc = _data(tok, 128, 0)
    spec = _spec(epochs=5, checkpoint_every=10, eval_every=10, keep_best=False)
    straight = train(model, enc, PredictionObjective(), spec=spec,
                     io=StageIO("a", tmp_path / "a", tmp_path / "a.jsonl"), evaluate=lambda m: {"accuracy": 0.5})
    model, _ = fresh()
    with pytest.raises(_Crash):
        train(model, enc, PredictionObjective(), spec=spec, io=StageIO("b", tmp_path / "b", tmp_path / "b.jsonl"),
              evaluate=crash_on_third_eval)
    assert [p.name for p in list_checkpoints(tmp_path / "b")][-1] == "step-000020"
    model, _ = fresh()  # a new process starts from the original weights
    resumed = train(model, enc, PredictionObjective(), spec=spec,
                    io=StageIO("b", tmp_path / "b", tmp_path / "b.jsonl", resume=True),
                    evaluate=lambda m: {"accuracy": 0.5})
    assert resumed.steps == straight.steps == 40
    assert [h["step"] for h in resumed.history] == [h["step"] for h in straight.history] == [10, 20, 30, 40]
    a, b = straight.model.state_dict(), resumed.model.state_dict()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=0, msg=key)
    # checkpoints are complete directories; only the last two are kept
    ckpts = list_checkpoints(tmp_path / "b")
    assert [p.name for p in ckpts] == ["step-000030", "step-000040"]
    assert all((p / "optimizer.pt").is_file() for p in ckpts)
    assert set(load_file(str(ckpts[-1] / "model.safetensors"))) == {f"student.{k}" for k in a}


def test_resume_passes_over_a_damaged_last_checkpoint(tiny_model_dir: Path, tmp_path: Path) -> None:
    """The last checkpoint's weights lost (a copy cut short): the stage continues from the one
    before it, says so in its log, and still ends as one straight run."""
    import json

    def fresh():
        return load_classifier(tiny_model_dir, ("0", "1"), False)

    model, tok = fresh()
    enc = _data(tok, 128, 0)
    spec = _spec(epochs=5, checkpoint_every=10, eval_every=10, keep_best=False)
    straight = train(model, enc, PredictionObjective(), spec=spec,
                     io=StageIO("a", tmp_path / "a", tmp_path / "a.jsonl"), evaluate=lambda m: {"accuracy": 0.5})
    crash_on_third_eval = _crashing_at(3)

    with pytest.raises(_Crash):
        train(fresh()[0], enc, PredictionObjective(), spec=spec, io=StageIO("b", tmp_path / "b", tmp_path / "b.jsonl"),
              evaluate=crash_on_third_eval)
    (tmp_path / "b" / "step-000020" / "model.safetensors").unlink()
    resumed = train(fresh()[0], enc, PredictionObjective(), spec=spec,
                    io=StageIO("b", tmp_path / "b", tmp_path / "b.jsonl", resume=True),
                    evaluate=lambda m: {"accuracy": 0.5})
    events = [json.loads(line) for line in (tmp_path / "b.jsonl").read_text().splitlines()]
    assert [e["checkpoint"] for e in events if e.get("event") == "resume"] == ["step-000010"]
    assert any(e.get("event") == "damaged_checkpoint" and "step-000020" in e["damage"] for e in events)
    assert resumed.steps == straight.steps == 40
    a, b = straight.model.state_dict(), resumed.model.state_dict()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=0, msg=key)


def test_sigterm_checkpoints_the_step_it_stopped_at(tiny_model_dir: Path, tmp_path: Path) -> None:
    """SIGTERM arriving during step 8 (sent from the hook after step 7; no periodic checkpoint): the
    loop finishes that step, writes step-000008 and raises Interrupted (exit 143); resuming
    continues from step 8, not 0, and ends with the weights of an uninterrupted run."""
    import os
    import signal

    from tinyplm.errors import Interrupted

    def fresh():
        return load_classifier(tiny_model_dir, ("0", "1"), False)

    model, tok = fresh()
    enc = _data(tok, 128, 0)
    spec = _spec(epochs=2, checkpoint_every=0, keep_best=False)  # 16 steps
    straight = train(model, enc, PredictionObjective(), spec=spec, io=StageIO("a", tmp_path / "a", None))

    def term_at_step_7(progress: float) -> None:
        if round(progress * 16) == 7:
            os.kill(os.getpid(), signal.SIGTERM)

    model, _ = fresh()
    io = StageIO("b", tmp_path / "b", tmp_path / "b.jsonl")
    with pytest.raises(Interrupted) as stop:
        train(model, enc, PredictionObjective(), spec=spec, io=io, step_hook=term_at_step_7)
    assert (stop.value.step, stop.value.checkpoint, stop.value.exit_code) == (8, "step-000008", 143)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is gone again
    assert [p.name for p in list_checkpoints(tmp_path / "b")] == ["step-000008"]
    model, _ = fresh()
    io = StageIO("b", tmp_path / "b", tmp_path / "b.jsonl", resume=True)
    resumed = train(model, enc, PredictionObjective(), spec=spec, io=io)
    events = [json.loads(line) for line in (tmp_path / "b.jsonl").read_text().splitlines()]
    assert [e["step"] for e in events if e["event"] in ("interrupted", "resume")] == [8, 8]
    assert resumed.steps == straight.steps == 16
    a, b = straight.model.state_dict(), resumed.model.state_dict()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=0, msg=key)


def test_adamw_is_fused_on_cpu_and_takes_the_default_update() -> None:
    """The fused kernel where every parameter allows it; its step equals the default's to rounding;
    a parameter it cannot take (complex) falls back to the default rather than failing at step 1."""
    from tinyplm.train.optim import adamw

    torch.manual_seed(0)
    start, grads = torch.randn(64, 8), [torch.randn(64, 8) for _ in range(3)]
    results = []
    for make in (lambda g: adamw(g, 1e-2), lambda g: torch.optim.AdamW(g, lr=1e-2, foreach=False)):
        p = torch.nn.Parameter(start.clone())
        opt = make([{"params": [p], "weight_decay": 0.01}])
        for g in grads:
            p.grad = g.clone()
            opt.step()
        results.append((opt.defaults["fused"], p.detach()))
    assert results[0][0] is True and not results[1][0]
    assert not torch.equal(results[0][1], start)
    torch.testing.assert_close(results[0][1], results[1][1], rtol=1e-5, atol=1e-6)
    z = torch.nn.Parameter(torch.zeros(4, dtype=torch.complex64))
    opt = adamw([{"params": [z], "weight_decay": 0.0}], 1e-2)
    assert not opt.defaults["fused"]
    z.grad = torch.ones_like(z)
    opt.step()
    assert torch.all(z.real < 0)


@given(sizes=st.lists(st.integers(1, 12), min_size=1, max_size=40), batch=st.integers(1, 9),
       grouped=st.booleans(), seed=st.integers(0, 5))
@settings(max_examples=80, deadline=None)
def test_a_unit_of_examples_is_trained_in_one_batch(sizes: list[int], batch: int, grouped: bool, seed: int) -> None:
    groups = np.repeat(np.arange(len(sizes)), sizes)
    np.random.default_rng(seed).shuffle(groups)  # a unit's members need not be neighbours
    lengths = np.random.default_rng(seed).integers(1, 50, size=len(groups)) if grouped else None
    batches = epoch_batches(len(groups), batch, seed, 0, lengths=lengths, groups=groups)
    assert sorted(i for b in batches for i in b) == list(range(len(groups)))
    assert all(1 <= len(b) <= batch for b in batches)
    for g, size in enumerate(sizes):
        holding = [b for b in batches if any(groups[i] == g for i in b)]
        assert len(holding) == -(-size // batch)  # one batch, or as few as a unit larger than a batch needs
    assert batches == epoch_batches(len(groups), batch, seed, 0, lengths=lengths, groups=groups)


def test_units_are_still_grouped_by_length() -> None:
    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(1000), 2)
    lengths = rng.integers(3, 64, size=2000)

    def padded(batches: list[list[int]]) -> int:
        return sum(len(b) * max(lengths[i] for i in b) for b in batches)

    grouped = epoch_batches(2000, 32, 0, 0, lengths=lengths, groups=groups)
    plain = epoch_batches(2000, 32, 0, 0, groups=groups)
    assert padded(grouped) < 0.85 * padded(plain)
    with pytest.raises(ValueError, match="3 ids for 4 examples"):
        epoch_batches(4, 2, 0, 0, groups=np.zeros(3, dtype=np.int64))


@given(n=st.integers(1, 400), batch=st.integers(1, 40), grouped=st.booleans(), seed=st.integers(0, 5))
@settings(max_examples=40, deadline=None)
def test_units_of_one_give_the_batches_of_single_examples(n: int, batch: int, grouped: bool, seed: int) -> None:
    lengths = np.random.default_rng(seed).integers(1, 50, size=n) if grouped else None
    assert epoch_batches(n, batch, seed, 1, lengths=lengths, groups=np.arange(n)) == \
        epoch_batches(n, batch, seed, 1, lengths=lengths)


def test_a_stage_whose_weights_become_nan_is_stopped_naming_the_learning_rate(tiny_model_dir: Path,
                                                                              tmp_path: Path) -> None:
    """A learning rate far too high turned the weights to NaN; the stage went on, and the run reported
    the majority class's share as the model's accuracy (argmax of NaN logits is class 0)."""
    from tinyplm.errors import TinyplmError

    model, tok = load_classifier(tiny_model_dir, ("0", "1"), False)
    io = StageIO("teacher", tmp_path / "ckpt", tmp_path / "log.jsonl")
    with pytest.raises(TinyplmError, match=r"stage teacher: training diverged by step \d+: the loss is nan .*"
                                           r"lower this stage's learning rate \(teacher\.finetune\.lr"):
        train(model, _data(tok, 64, 0), PredictionObjective(), spec=_spec(lr=1e6, grad_clip=0.0, epochs=2,
                                                                          log_every=1), io=io)
    assert '"loss": NaN' in (tmp_path / "log.jsonl").read_text(encoding="utf-8")  # the log line that shows it


def _poison_at(model: torch.nn.Module, step: int):
    """A step hook that turns ``model``'s first weight to NaN after its ``step``-th step, as an overflow would."""
    seen: list[float] = []

    def poison(progress: float) -> None:
        seen.append(progress)
        if len(seen) == step:
            with torch.no_grad():
                next(model.parameters()).fill_(float("nan"))

    return poison


def test_a_stage_that_diverges_after_a_kept_checkpoint_ends_at_that_checkpoint(tiny_model_dir: Path,
                                                                                tmp_path: Path) -> None:
    """Weights turned NaN late (here by hand, as an overflow would) in a stage that kept a best
    checkpoint: the stage ends there with a warning and a diverged event, returning finite weights,
    and no evaluation of the NaN model may replace that checkpoint."""
    model, tok = load_classifier(tiny_model_dir, ("0", "1"), False)
    dev = _data(tok, 32, 1)
    io = StageIO("st", tmp_path / "ckpt", tmp_path / "log.jsonl")
    result = train(model, _data(tok, 64, 0), PredictionObjective(), io=io, step_hook=_poison_at(model, 12),
                   spec=_spec(epochs=4, log_every=1, eval_every=5, keep_best=True),
                   evaluate=lambda m: {"accuracy": _accuracy(m, dev)}, primary="accuracy")
    assert result.stopped_by == "diverged" and result.best_step in (5, 10)
    assert all(torch.isfinite(p).all() for p in result.model.parameters())
    assert all(entry["step"] <= 12 for entry in result.history)
    events = (tmp_path / "log.jsonl").read_text(encoding="utf-8")
    assert '"event": "diverged"' in events and '"stopped_by": "diverged"' in events


def test_weights_broken_since_the_last_log_are_found_before_they_are_scored(tiny_model_dir: Path,
                                                                          tmp_path: Path) -> None:
    """The loss is logged rarely (every 100 steps) and the weights break at step 7: the evaluation
    due at step 10 finds them broken before scoring them (scored, NaN reads as class 0), so the
    stage ends at its step-5 checkpoint instead of training on as if nothing happened."""
    model, tok = load_classifier(tiny_model_dir, ("0", "1"), False)
    dev = _data(tok, 32, 1)
    io = StageIO("st", tmp_path / "ckpt", tmp_path / "log.jsonl")
    result = train(model, _data(tok, 64, 0), PredictionObjective(), io=io, step_hook=_poison_at(model, 7),
                   spec=_spec(epochs=4, log_every=100, eval_every=5, keep_best=True),
                   evaluate=lambda m: {"accuracy": _accuracy(m, dev)}, primary="accuracy")
    assert result.stopped_by == "diverged" and result.best_step == 5 and result.steps == 10
    assert [entry["step"] for entry in result.history] == [5]
    assert all(torch.isfinite(p).all() for p in result.model.parameters())


def test_a_finished_stage_leaves_nothing_behind_without_a_garbage_collection(
        tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stage's optimiser state is freed when ``train`` returns by reference counting alone (the
    loop does not run a full collection: train/accelerator.release), and the process-wide
    accelerator holds nothing of the stage for the next one."""
    import gc
    import weakref

    from tinyplm.train import get_accelerator

    made: list[weakref.ref] = []
    adamw = torch.optim.AdamW

    def tracked(*args, **kwargs):
        optimiser = adamw(*args, **kwargs)
        made.append(weakref.ref(optimiser))
        return optimiser

    monkeypatch.setattr(torch.optim, "AdamW", tracked)
    model, tok = load_classifier(tiny_model_dir, ("0", "1"), False)
    enc = _data(tok, 64, 0)
    io = StageIO("t", tmp_path / "ckpt", tmp_path / "log.jsonl")
    gc.disable()
    try:
        result = train(model, enc, PredictionObjective(), spec=_spec(max_steps=3), io=io)
        assert result.steps == 3 and len(made) == 1
        assert made[0]() is None, "the stage's optimiser outlived its stage (a reference cycle, or still held)"
        acc = get_accelerator()
        assert acc._models == acc._optimizers == acc._schedulers == acc._dataloaders == [] and acc.step == 0
    finally:
        gc.enable()
