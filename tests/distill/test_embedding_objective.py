"""Embedding distillation: the pure vector losses, the objective (weights, projection, checks), a
short training run with checkpoint and resume, and the on-disk cache of the teacher's vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from safetensors.torch import load_file, save_file
from torch import nn

from tinyplm.config import TrainSpec
from tinyplm.distill.embedding import (
    EmbeddingLossWeights,
    EmbeddingObjective,
    blend_targets,
    cosine_loss,
    fit_linear,
    similarity_kd,
    vector_mse,
    with_start,
)
from tinyplm.distill.vectors import cache_path, teacher_vectors, vectors_key
from tinyplm.errors import TinyplmError
from tinyplm.tasks.encoding import Encoded, collate
from tinyplm.train import StageIO, train
from tinyplm.train.checkpoint import list_checkpoints
from tinyplm.train.objective import Objective

# -- strategies ------------------------------------------------------------------------------------

#: Elements at least 1/8 away from 0, so no row is (near) zero and every cosine is defined.
ELEMENT = st.one_of(st.floats(0.125, 10.0, width=32), st.floats(-10.0, -0.125, width=32))


@st.composite
def vectors(draw, rows: int | None = None, dim: int | None = None) -> torch.Tensor:
    """A float32 ``(rows, dim)`` tensor with no zero row (shape drawn when not given)."""
    rows = draw(st.integers(1, 6)) if rows is None else rows
    dim = draw(st.integers(1, 8)) if dim is None else dim
    return torch.from_numpy(draw(hnp.arrays(np.float32, (rows, dim), elements=ELEMENT)))


def orthonormal_rows(rows: int, cols: int, seed: int) -> torch.Tensor:
    """A ``(rows, cols)`` matrix (rows <= cols) with orthonormal rows: ``m @ m.T == I``."""
    q, _ = torch.linalg.qr(torch.randn(cols, cols, generator=torch.Generator().manual_seed(seed), dtype=torch.float64))
    return q[:rows].float()


def np_cosines(x: np.ndarray) -> np.ndarray:
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    return unit @ unit.T


# -- pure losses -----------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(x=vectors())
def test_every_loss_is_zero_when_the_student_equals_the_teacher(x: torch.Tensor) -> None:
    assert vector_mse(x, x.clone()).item() == 0.0
    assert cosine_loss(x, x.clone()).item() == pytest.approx(0.0, abs=1e-5)
    assert similarity_kd(x, x.clone()).item() == pytest.approx(0.0, abs=1e-5)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_losses_match_numpy_references(data) -> None:
    s = data.draw(vectors())
    t = data.draw(vectors(rows=s.shape[0], dim=s.shape[1]))
    t_wide = data.draw(vectors(rows=s.shape[0]))
    sn, tn, twn = (v.double().numpy() for v in (s, t, t_wide))
    cos = (sn * tn).sum(1) / (np.linalg.norm(sn, axis=1) * np.linalg.norm(tn, axis=1))
    assert vector_mse(s, t).item() == pytest.approx(((sn - tn) ** 2).mean(), rel=1e-4, abs=1e-6)
    assert cosine_loss(s, t).item() == pytest.approx((1 - cos).mean(), rel=1e-4, abs=1e-5)
    expected = ((np_cosines(sn) - np_cosines(twn)) ** 2).mean()
    assert similarity_kd(s, t_wide).item() == pytest.approx(expected, rel=1e-3, abs=1e-5)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), a=st.floats(1e-3, 1e3), b=st.floats(1e-3, 1e3))
def test_cosine_loss_ignores_positive_scaling(data, a: float, b: float) -> None:
    s = data.draw(vectors())
    t = data.draw(vectors(rows=s.shape[0], dim=s.shape[1]))
    assert cosine_loss(a * s, b * t).item() == pytest.approx(cosine_loss(s, t).item(), abs=1e-5)


@settings(max_examples=60, deadline=None)
@given(t=vectors(), extra=st.integers(0, 4), seed=st.integers(0, 2**16),
       scales=st.lists(st.floats(0.1, 10.0), min_size=6, max_size=6))
def test_similarity_kd_is_zero_for_a_rotated_rescaled_teacher(t: torch.Tensor, extra: int, seed: int,
                                                             scales: list[float]) -> None:
    """Student = teacher times an orthogonal map (into a space ``extra`` wider), each row scaled."""
    m = orthonormal_rows(t.shape[1], t.shape[1] + extra, seed)
    student = (t @ m) * torch.tensor(scales[: t.shape[0]]).unsqueeze(1)
    assert student.shape[1] == t.shape[1] + extra
    assert similarity_kd(student, t).item() == pytest.approx(0.0, abs=1e-5)


def test_losses_on_hand_computed_pairs() -> None:
    s = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    assert cosine_loss(s, torch.tensor([[0.0, 3.0], [0.0, -1.0]])).item() == pytest.approx((1 + 2) / 2)
    assert vector_mse(s, torch.tensor([[1.0, 2.0], [0.0, 0.0]])).item() == pytest.approx((4 + 4) / 4)
    # student cosines [[1, 0], [0, 1]]; teacher's rows are parallel: [[1, 1], [1, 1]]
    assert similarity_kd(s, torch.tensor([[1.0, 1.0, 0.0], [2.0, 2.0, 0.0]])).item() == pytest.approx(2 / 4)


shapes = st.tuples(st.integers(1, 5), st.integers(1, 5))


@settings(max_examples=60, deadline=None)
@given(a=shapes, b=shapes)
def test_mismatched_shapes_are_refused(a: tuple[int, int], b: tuple[int, int]) -> None:
    s, t = torch.ones(a), torch.ones(b)
    for fn in (vector_mse, cosine_loss):
        if a != b:
            with pytest.raises(ValueError, match="differ in shape"):
                fn(s, t)
        else:
            assert fn(s, t).item() == pytest.approx(0.0, abs=1e-6)
    if a[0] != b[0]:
        with pytest.raises(ValueError, match="batch"):
            similarity_kd(s, t)
    else:
        assert similarity_kd(s, t).item() == pytest.approx(0.0, abs=1e-6)  # all-ones rows: every cosine 1


@pytest.mark.parametrize("bad", [torch.ones(4), torch.ones(2, 3, 4), torch.ones(0, 3), torch.ones(3, 0)])
def test_vectors_that_are_not_batch_by_dim_are_refused(bad: torch.Tensor) -> None:
    for fn in (vector_mse, cosine_loss, similarity_kd):
        with pytest.raises(ValueError, match=r"\(batch, dim\)"):
            fn(bad, bad)
        with pytest.raises(ValueError, match=r"\(batch, dim\)"):
            fn(torch.ones(3, 4), bad)


# -- weights and the objective ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"mse": -1.0}, "mse"), ({"cosine": float("nan")}, "cosine"), ({"similarity": float("inf")}, "similarity"),
     ({"cosine": True}, "cosine"), ({"mse": "1"}, "mse")],
)
def test_bad_weights_name_their_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=f"EmbeddingLossWeights.{field} = "):
        EmbeddingLossWeights(**kwargs)


def test_all_zero_weights_are_refused() -> None:
    with pytest.raises(ValueError, match="mse, cosine, similarity"):
        EmbeddingLossWeights(mse=0.0)
    assert EmbeddingLossWeights(mse=0, similarity=2).active() == {"similarity": 2.0}


class BagStudent(nn.Module):
    """A stand-in embedding student: mean of its word vectors over the attended tokens."""

    def __init__(self, vocab: int = 40, dim: int = 12) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)

    def forward(self, input_ids, attention_mask, token_type_ids=None) -> torch.Tensor:
        mask = attention_mask.unsqueeze(-1).float()
        return (self.emb(input_ids) * mask).sum(1) / mask.sum(1).clamp(min=1.0)  # (batch, dim)


class PerTokenStudent(BagStudent):
    def forward(self, input_ids, attention_mask, token_type_ids=None) -> torch.Tensor:
        return self.emb(input_ids)  # (batch, seq, dim): not an embedding model


class TupleStudent(BagStudent):
    def forward(self, input_ids, attention_mask, token_type_ids=None):
        return (super().forward(input_ids, attention_mask),)


def test_projection_exists_only_between_different_widths() -> None:
    same = EmbeddingObjective(12, 12)
    assert same.proj is None and list(same.state_dict()) == []
    wide = EmbeddingObjective(12, 24)
    assert isinstance(wide.proj, nn.Linear) and wide.proj.weight.shape == (24, 12)
    assert set(wide.state_dict()) == {"proj.weight", "proj.bias"}
    assert isinstance(wide, Objective) and wide.needs_teacher_logits and not wide.needs_teacher
    with pytest.raises(ValueError, match="teacher_dim = 0"):
        EmbeddingObjective(12, 0)


def test_terms_weigh_projected_mse_and_cosine_and_the_students_own_similarity() -> None:
    torch.manual_seed(0)
    weights = EmbeddingLossWeights(mse=1.0, cosine=2.0, similarity=3.0)
    objective = EmbeddingObjective(6, 10, weights)
    s, t = torch.randn(5, 6), torch.randn(5, 10)
    total, parts = objective.terms(s, t)
    with torch.no_grad():
        p = objective.proj(s)
        expected = {"mse": vector_mse(p, t), "cosine": cosine_loss(p, t), "similarity": similarity_kd(s, t)}
    assert parts == pytest.approx({k: v.item() for k, v in expected.items()}, rel=1e-6)
    assert total.item() == pytest.approx(parts["mse"] + 2 * parts["cosine"] + 3 * parts["similarity"], rel=1e-6)
    total.backward()
    assert objective.proj.weight.grad is not None and objective.proj.weight.grad.abs().sum() > 0
    only_mse = EmbeddingObjective(6, 10)
    assert set(only_mse.terms(s, t)[1]) == {"mse"}
    with pytest.raises(ValueError, match="teacher_dim=10"):
        objective.terms(s, torch.randn(5, 9))
    with pytest.raises(ValueError, match="student_dim=6"):
        objective.terms(torch.randn(5, 7), t)


def test_similarity_only_objective_needs_no_projection_to_reach_zero() -> None:
    teacher = torch.randn(7, 8, generator=torch.Generator().manual_seed(1))
    student = teacher @ orthonormal_rows(8, 12, seed=2)  # an isometry into the student's wider space
    objective = EmbeddingObjective(12, 8, EmbeddingLossWeights(mse=0.0, similarity=1.0))
    total, parts = objective.terms(student, teacher)
    assert total.item() == pytest.approx(0.0, abs=1e-5) and set(parts) == {"similarity"}


def test_check_runs_the_student_once_and_restores_its_mode() -> None:
    objective = EmbeddingObjective(12, 24)
    student = BagStudent().train()
    student.emb.eval()  # a part kept in eval mode stays so
    objective.check(student, None)
    assert student.training and not student.emb.training
    with pytest.raises(ValueError, match=r"\(batch, dim\) tensor; for a batch of 2 it gave shape \(2, 4, 12\)"):
        objective.check(PerTokenStudent(), None)
    with pytest.raises(ValueError, match="got a tuple"):
        objective.check(TupleStudent(), None)
    with pytest.raises(ValueError, match="12 dimensions.*student_dim=16"):
        EmbeddingObjective(16, 24).check(BagStudent(), None)


# -- training --------------------------------------------------------------------------------------

VOCAB, STUDENT_DIM, TEACHER_DIM = 40, 12, 24


def tiny_set(n: int = 64, seed: int = 0) -> tuple[Encoded, torch.Tensor]:
    """``n`` random token sequences and a fixed random "teacher"'s vectors of them ``(n, 24)``:
    a bag of 6-wide word vectors mapped linearly to 24 dimensions (so a 12-wide student with a
    projection can match them)."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(3, 11, (n,), generator=g).tolist()
    ids = [torch.randint(1, VOCAB, (k,), generator=g).tolist() for k in lengths]
    words, mix = torch.randn(VOCAB, 6, generator=g), torch.randn(6, TEACHER_DIM, generator=g) / 6**0.5
    teacher = torch.stack([words[torch.tensor(row)].mean(0) for row in ids]) @ mix
    enc = Encoded(ids, [[0] * len(row) for row in ids], torch.zeros(n, dtype=torch.long), pad_id=0)
    return enc, teacher


def full_loss(model: nn.Module, objective: EmbeddingObjective, enc: Encoded, teacher: torch.Tensor) -> float:
    batch = objective.prepare(collate(enc, range(len(enc))))
    batch.teacher_logits = teacher[batch.index]
    with torch.no_grad():
        return objective.loss(model, batch, None).item()


def spec(**kw) -> TrainSpec:
    base = {"batch_size": 16, "lr": 0.1, "precision": "fp32", "eval_every": 0, "checkpoint_every": 0,
            "epochs": 100, "max_steps": 40, "log_every": 5, "weight_decay": 0.0, "keep_best": False}
    return TrainSpec(**{**base, **kw})


def test_training_brings_the_loss_down(tmp_path: Path) -> None:
    enc, teacher = tiny_set()
    torch.manual_seed(0)
    student, objective = BagStudent(VOCAB, STUDENT_DIM), EmbeddingObjective(STUDENT_DIM, TEACHER_DIM)
    before = full_loss(student, objective, enc, teacher)
    io = StageIO("emb", tmp_path / "ckpt", None, show_progress=False)
    result = train(student, enc, objective, spec=spec(), io=io, teacher_logits=teacher)
    after = full_loss(result.model, objective, enc, teacher)
    assert result.steps == 40 and result.model is student
    assert after < before / 10, (before, after)
    assert result.losses[-1][1] < result.losses[0][1]


def test_training_without_the_teachers_vectors_is_refused(tmp_path: Path) -> None:
    enc, _ = tiny_set(8)
    with pytest.raises(ValueError, match="teacher logits"):
        train(BagStudent(VOCAB, STUDENT_DIM), enc, EmbeddingObjective(STUDENT_DIM, TEACHER_DIM), spec=spec(),
              io=StageIO("emb", tmp_path / "ckpt", None, show_progress=False))


class _Crash(Exception):
    pass


# -- keeping the start (keep_start) ---------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(data=st.data(), keep=st.floats(0.01, 0.99))
def test_blended_cosines_are_the_weighted_mean_of_both_models_cosines(data, keep: float) -> None:
    t = data.draw(vectors())
    s = data.draw(vectors(rows=t.shape[0]))
    blended = blend_targets(t, s, keep)
    assert blended.shape == (t.shape[0], t.shape[1] + s.shape[1]) and blended.dtype == torch.float32
    expected = (1 - keep) * np_cosines(t.double().numpy()) + keep * np_cosines(s.double().numpy())
    np.testing.assert_allclose(blended.double() @ blended.double().T, expected, atol=1e-5)


def test_keep_zero_leaves_the_teachers_vectors_and_bad_input_is_refused() -> None:
    t, s = torch.randn(3, 4) * 5, torch.randn(3, 2)
    assert torch.equal(blend_targets(t, s, 0.0), t)
    for keep in (1.0, -0.1, float("nan")):
        with pytest.raises(ValueError, match="keep_start"):
            blend_targets(t, s, keep)
    with pytest.raises(ValueError, match="same N"):
        blend_targets(t, torch.randn(2, 2), 0.5)


def test_with_start_blends_in_the_students_vectors_from_before_training() -> None:
    enc, teacher = tiny_set(12)
    torch.manual_seed(0)
    student = BagStudent(VOCAB, STUDENT_DIM)
    own = torch.stack([student.emb.weight[torch.tensor(row)].mean(0) for row in enc.input_ids]).detach()
    assert with_start(teacher, student, enc, 0.0) is teacher
    blended = with_start(teacher, student, enc, 0.25)
    assert blended.shape == (12, TEACHER_DIM + STUDENT_DIM)
    torch.testing.assert_close(blended[:, TEACHER_DIM:], 0.5 * F.normalize(own, dim=-1), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(blended[:, :TEACHER_DIM], 0.75**0.5 * F.normalize(teacher, dim=-1))


def test_resume_restores_the_projection_from_the_checkpoint(tmp_path: Path) -> None:
    """Crash at step 15 (checkpoint at 10), resume with a differently initialised student and
    projection: the run ends with exactly the weights of one straight run, projection included."""
    enc, teacher = tiny_set()
    run_spec = spec(max_steps=20, checkpoint_every=10)

    def fresh(seed: int) -> tuple[BagStudent, EmbeddingObjective]:
        torch.manual_seed(seed)
        return BagStudent(VOCAB, STUDENT_DIM), EmbeddingObjective(STUDENT_DIM, TEACHER_DIM)

    def io(name: str, resume: bool = False) -> StageIO:
        return StageIO(name, tmp_path / name, None, resume=resume, show_progress=False)

    student, straight = fresh(0)
    done = train(student, enc, straight, spec=run_spec, io=io("a"), teacher_logits=teacher)

    def crash_at_15(progress: float) -> None:
        if progress >= 15 / 20:
            raise _Crash

    student, objective = fresh(0)
    with pytest.raises(_Crash):
        train(student, enc, objective, spec=run_spec, io=io("b"), teacher_logits=teacher, step_hook=crash_at_15)
    last = list_checkpoints(tmp_path / "b")[-1]
    assert last.name == "step-000010"
    saved = load_file(str(last / "model.safetensors"))
    assert "objective.proj.weight" in saved and "objective.proj.bias" in saved

    student, resumed = fresh(1)
    assert not torch.equal(resumed.proj.weight, straight.proj.weight)
    again = train(student, enc, resumed, spec=run_spec, io=io("b", resume=True), teacher_logits=teacher)
    assert again.steps == done.steps == 20
    for key, value in done.model.state_dict().items():
        torch.testing.assert_close(again.model.state_dict()[key], value, rtol=0, atol=0, msg=key)
    for key, value in straight.state_dict().items():
        torch.testing.assert_close(resumed.state_dict()[key], value, rtol=0, atol=0, msg=key)


# -- the projection fitted before the first step ---------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(dx=st.integers(1, 8), dy=st.integers(1, 8), extra=st.integers(2, 30), seed=st.integers(0, 10_000))
def test_fit_linear_recovers_an_affine_map(dx: int, dy: int, extra: int, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(dx + extra, dx, generator=g, dtype=torch.float64)
    weight = torch.randn(dy, dx, generator=g, dtype=torch.float64)
    bias = torch.randn(dy, generator=g, dtype=torch.float64)
    got_w, got_b = fit_linear(x, x @ weight.T + bias, ridge=0.0)
    torch.testing.assert_close(got_w, weight, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(got_b, bias, rtol=1e-6, atol=1e-6)


def test_fit_linear_is_finite_with_fewer_rows_than_dimensions_and_refuses_bad_shapes() -> None:
    x, y = torch.randn(3, 10), torch.randn(3, 4)
    weight, bias = fit_linear(x, y)
    assert weight.shape == (4, 10) and bias.shape == (4,) and torch.isfinite(weight).all()
    assert (x @ weight.T + bias - y).abs().max() < 0.1  # the ridge is small: the 3 rows are nearly fitted
    with pytest.raises(ValueError, match="same n >= 2"):
        fit_linear(torch.randn(3, 2), torch.randn(4, 2))
    with pytest.raises(ValueError, match="same n >= 2"):
        fit_linear(torch.randn(1, 2), torch.randn(1, 2))
    with pytest.raises(ValueError, match="ridge"):
        fit_linear(x, y, ridge=-1.0)


def projection_grad_norm(student: nn.Module, objective: EmbeddingObjective, enc: Encoded,
                         teacher: torch.Tensor) -> float:
    objective.zero_grad()
    batch = objective.prepare(collate(enc, range(len(enc))))
    batch.teacher_logits = teacher[batch.index]
    objective.loss(student, batch, None).backward()
    return float(torch.cat([objective.proj.weight.grad.flatten(), objective.proj.bias.grad.flatten()]).norm())


def test_start_fits_the_projection_to_the_least_squares_optimum() -> None:
    """After ``start`` the MSE loss is lower than behind the random projection, and its gradient
    with respect to the projection is (nearly) zero: the projection is the least-squares map of the
    student's vectors to the teacher's, and the student's own weights are untouched."""
    enc, teacher = tiny_set(200)
    torch.manual_seed(0)
    student = BagStudent(VOCAB, STUDENT_DIM)
    objective = EmbeddingObjective(STUDENT_DIM, TEACHER_DIM, EmbeddingLossWeights(mse=1.0))
    before = (full_loss(student, objective, enc, teacher), projection_grad_norm(student, objective, enc, teacher))
    words = student.emb.weight.detach().clone()
    objective.start(student, enc, teacher)
    after = (full_loss(student, objective, enc, teacher), projection_grad_norm(student, objective, enc, teacher))
    assert after[0] < before[0] / 2, (before, after)
    assert after[1] < before[1] / 100, (before, after)
    assert torch.equal(student.emb.weight, words) and student.training


UNUSED_OR_ABSENT = [(EmbeddingLossWeights(mse=0.0, similarity=1.0), (STUDENT_DIM, TEACHER_DIM)),
                    (EmbeddingLossWeights(mse=1.0), (STUDENT_DIM, STUDENT_DIM))]


@pytest.mark.parametrize(("weights", "dims"), UNUSED_OR_ABSENT)
def test_start_leaves_an_unused_or_absent_projection_alone(weights: EmbeddingLossWeights,
                                                           dims: tuple[int, int]) -> None:
    enc, _ = tiny_set(32)
    teacher = torch.randn(len(enc), dims[1])
    objective = EmbeddingObjective(*dims, weights)
    state = {k: v.clone() for k, v in objective.state_dict().items()}
    objective.start(BagStudent(VOCAB, STUDENT_DIM), enc, teacher)
    assert state.keys() == objective.state_dict().keys()
    for key, value in state.items():
        assert torch.equal(objective.state_dict()[key], value), key


# -- the teacher's vectors, cached -----------------------------------------------------------------

TEXTS = ["a cat", "the dog", "", "banana bread", "zz"]
PARTS = {"teacher": "fp-1", "max_length": "128", "precision": "fp32"}


class FakeTeacher:
    """``embed``: three float64 features of each text; records every call."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    @staticmethod
    def vector(text: str) -> list[float]:
        return [len(text), text.count("a"), ord(text[0]) if text else -1.0]

    def __call__(self, texts) -> np.ndarray:
        self.calls.append(list(texts))
        return np.array([self.vector(t) for t in texts], dtype=np.float64)


def refuse(_texts) -> np.ndarray:
    raise AssertionError("a cache hit must not call embed")


def expected(texts: list[str]) -> torch.Tensor:
    return torch.tensor([FakeTeacher.vector(t) for t in texts], dtype=torch.float32)


def test_vectors_are_computed_in_chunks_then_read_from_the_cache(tmp_path: Path) -> None:
    teacher, seen = FakeTeacher(), []
    got = teacher_vectors(teacher, TEXTS, key_parts=PARTS, cache_dir=tmp_path, chunk_size=2,
                          progress=lambda done, total: seen.append((done, total)))
    assert [len(c) for c in teacher.calls] == [2, 2, 1] and seen == [(2, 5), (4, 5), (5, 5)]
    assert got.dtype == torch.float32 and torch.equal(got, expected(TEXTS))
    path = cache_path(tmp_path, vectors_key(PARTS, TEXTS))
    assert [p.name for p in (tmp_path / "vectors").iterdir()] == [path.name]
    assert torch.equal(load_file(str(path))["vectors"], got)
    again = teacher_vectors(refuse, TEXTS, key_parts=dict(reversed(PARTS.items())), cache_dir=tmp_path, dim=3)
    assert torch.equal(again, got) and again.dtype == torch.float32


@pytest.mark.parametrize(
    ("parts", "texts"),
    [({**PARTS, "teacher": "fp-2"}, TEXTS), ({**PARTS, "pooling": "cls"}, TEXTS), (PARTS, [*TEXTS[:-1], "zy"]),
     (PARTS, TEXTS[::-1]), (PARTS, TEXTS[:-1])],
    ids=["teacher", "extra part", "one text", "order", "fewer texts"],
)
def test_another_key_or_text_is_computed_again(tmp_path: Path, parts: dict, texts: list[str]) -> None:
    teacher_vectors(FakeTeacher(), TEXTS, key_parts=PARTS, cache_dir=tmp_path)
    teacher = FakeTeacher()
    got = teacher_vectors(teacher, texts, key_parts=parts, cache_dir=tmp_path)
    assert teacher.calls == [texts] and torch.equal(got, expected(texts))
    assert len(list((tmp_path / "vectors").iterdir())) == 2


def _saved(tensors: dict, key: str | None = "same"):
    """A writer of a cache entry holding ``tensors`` under metadata key ``key`` (``same``: the
    entry's own key; None: no metadata)."""

    def write(path: Path) -> None:
        meta = {"key": vectors_key(PARTS, TEXTS) if key == "same" else key}
        save_file(tensors, str(path), metadata=meta if key is not None else None)
    return write


def _truncated(path: Path) -> None:
    _saved({"vectors": torch.ones(5, 3)})(path)
    path.write_bytes(path.read_bytes()[:-7])


@pytest.mark.parametrize(
    "spoil",
    [lambda p: p.write_bytes(b"not a safetensors file"), _truncated, _saved({"vectors": torch.zeros(6, 3)}),
     _saved({"vectors": torch.zeros(5, 3, dtype=torch.float64)}), _saved({"vectors": torch.zeros(15)}),
     _saved({"vectors": torch.zeros(5, 4)}), _saved({"other": torch.zeros(5, 3)}),
     _saved({"vectors": torch.zeros(5, 3), "extra": torch.zeros(1)}), _saved({"vectors": torch.zeros(5, 3)}, "x"),
     _saved({"vectors": torch.zeros(5, 3)}, None), _saved({"vectors": torch.full((5, 3), float("nan"))})],
    ids=["garbage", "truncated", "rows", "float64", "1-D", "width", "name", "extra tensor", "other key", "no key",
         "nan"],
)
def test_an_unsound_entry_is_computed_again_and_replaced(tmp_path: Path, spoil) -> None:
    path = cache_path(tmp_path, vectors_key(PARTS, TEXTS))
    path.parent.mkdir(parents=True)
    spoil(path)
    teacher = FakeTeacher()
    got = teacher_vectors(teacher, TEXTS, key_parts=PARTS, cache_dir=tmp_path, dim=3)
    assert len(teacher.calls) == 1 and torch.equal(got, expected(TEXTS))
    assert torch.equal(teacher_vectors(refuse, TEXTS, key_parts=PARTS, cache_dir=tmp_path, dim=3), got)


def test_without_a_cache_dir_every_call_computes(tmp_path: Path) -> None:
    teacher = FakeTeacher()
    for _ in range(2):
        teacher_vectors(teacher, TEXTS, key_parts=PARTS, cache_dir=None)
    assert len(teacher.calls) == 2
    empty = teacher_vectors(refuse, [], key_parts=PARTS, cache_dir=tmp_path, dim=3)
    assert empty.shape == (0, 3) and not list(tmp_path.iterdir())


def test_bad_embed_output_and_key_parts_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"embed gave shape \(2, 3\) for texts 0\.\.1, expected \(2, 4\)"):
        teacher_vectors(FakeTeacher(), TEXTS, key_parts=PARTS, cache_dir=tmp_path, chunk_size=2, dim=4)
    with pytest.raises(ValueError, match=r"embed gave shape \(3,\)"):
        teacher_vectors(lambda texts: np.zeros(len(texts)), TEXTS[:3], key_parts=PARTS, cache_dir=tmp_path)
    with pytest.raises(ValueError, match=r"texts 2\.\.3, expected \(2, 3\)"):  # a later chunk changes width
        teacher_vectors(lambda t: np.zeros((len(t), 3 if "a cat" in t else 2)), TEXTS, key_parts=PARTS,
                        cache_dir=tmp_path, chunk_size=2)
    with pytest.raises(TinyplmError, match="not all finite"):
        teacher_vectors(lambda t: np.full((len(t), 2), np.nan), TEXTS, key_parts=PARTS, cache_dir=tmp_path)
    with pytest.raises(ValueError, match=r"key_parts\['max_length'\] = 128"):
        teacher_vectors(FakeTeacher(), TEXTS, key_parts={"max_length": 128}, cache_dir=tmp_path)
    assert not (tmp_path / "vectors").exists()


@settings(max_examples=100, deadline=None)
@given(a=st.lists(st.text(max_size=4), max_size=4), b=st.lists(st.text(max_size=4), max_size=4),
       pa=st.dictionaries(st.sampled_from("xyz"), st.text(max_size=3)),
       pb=st.dictionaries(st.sampled_from("xyz"), st.text(max_size=3)))
def test_the_key_changes_exactly_when_parts_or_texts_do(a: list[str], b: list[str], pa: dict, pb: dict) -> None:
    assert (vectors_key(pa, a) == vectors_key(pb, b)) == (a == b and pa == pb)


def test_the_key_tells_where_texts_split() -> None:
    assert vectors_key({}, ["ab", "c"]) != vectors_key({}, ["a", "bc"])
    assert vectors_key({"a": "b"}, []) != vectors_key({"ab": ""}, [])
    assert vectors_key({}, ["x"]) != vectors_key({"x": ""}, [])


def test_mse_on_unit_vectors_is_two_one_minus_cos_over_dim() -> None:
    """The scale the module docstring speaks of: on unit vectors, MSE = 2 (1 - cos) / dim."""
    g = torch.Generator().manual_seed(3)
    s, t = F.normalize(torch.randn(4, 16, generator=g), dim=-1), F.normalize(torch.randn(4, 16, generator=g), dim=-1)
    assert vector_mse(s, t).item() == pytest.approx(2 * cosine_loss(s, t).item() / 16, rel=1e-5)
