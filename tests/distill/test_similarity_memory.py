"""Similarity KD across batches: the cross-batch loss, the memory it reads, and training with it
(saved in checkpoints, so a resumed stage ends where a straight one does)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from safetensors.torch import load_file
from tests.distill.test_embedding_objective import (
    STUDENT_DIM,
    TEACHER_DIM,
    VOCAB,
    BagStudent,
    _Crash,
    np_cosines,
    orthonormal_rows,
    spec,
    tiny_set,
    vectors,
)

from tinyplm.config import ObjectiveSpec
from tinyplm.distill.embedding import EmbeddingLossWeights, EmbeddingObjective
from tinyplm.distill.similarity_memory import SimilarityMemory
from tinyplm.tasks.encoding import collate
from tinyplm.train import StageIO, train
from tinyplm.train.checkpoint import list_checkpoints
from tinyplm.train.vector_losses import cross_similarity_kd, similarity_kd

# -- the loss --------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_cross_similarity_kd_matches_a_numpy_reference(data) -> None:
    s = data.draw(vectors())
    t = data.draw(vectors(rows=s.shape[0]))
    m = data.draw(st.integers(0, 5))
    ms = data.draw(vectors(rows=m, dim=s.shape[1])) if m else torch.zeros(0, s.shape[1])
    mt = data.draw(vectors(rows=m, dim=t.shape[1])) if m else torch.zeros(0, t.shape[1])
    b = s.shape[0]
    sn, tn = (torch.cat(p).double().numpy() for p in ((s, ms), (t, mt)))
    expected = ((np_cosines(sn)[:b] - np_cosines(tn)[:b]) ** 2).mean()  # batch rows against batch + memory
    assert cross_similarity_kd(s, t, ms, mt).item() == pytest.approx(expected, rel=1e-3, abs=1e-5)
    if m == 0:
        assert cross_similarity_kd(s, t, ms, mt).item() == pytest.approx(similarity_kd(s, t).item(), abs=1e-6)


@settings(max_examples=40, deadline=None)
@given(t=vectors(), memory=vectors(), extra=st.integers(0, 3), seed=st.integers(0, 2**16))
def test_cross_similarity_kd_is_zero_when_batch_and_memory_are_the_teachers_rotated(
        t: torch.Tensor, memory: torch.Tensor, extra: int, seed: int) -> None:
    memory = memory[:, :1].expand(-1, t.shape[1]).contiguous() + torch.arange(t.shape[1]).float()
    m = orthonormal_rows(t.shape[1], t.shape[1] + extra, seed)
    assert cross_similarity_kd(t @ m, t, memory @ m, memory).item() == pytest.approx(0.0, abs=1e-5)


def test_no_gradient_flows_into_the_memory_and_bad_shapes_are_refused() -> None:
    s = torch.randn(3, 4, requires_grad=True)
    ms = torch.randn(5, 4, requires_grad=True)
    cross_similarity_kd(s, torch.randn(3, 6), ms, torch.randn(5, 6)).backward()
    assert s.grad is not None and s.grad.abs().sum() > 0 and ms.grad is None
    with pytest.raises(ValueError, match="memory 5 rows and teacher memory 4 rows"):
        cross_similarity_kd(s, torch.randn(3, 6), ms, torch.randn(4, 6))
    with pytest.raises(ValueError, match=r"teacher memory of shape \(5, 7\)"):
        cross_similarity_kd(s, torch.randn(3, 6), ms, torch.randn(5, 7))
    with pytest.raises(ValueError, match="batch"):
        cross_similarity_kd(s, torch.randn(2, 6), ms, torch.randn(5, 6))


# -- the memory ------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(size=st.integers(1, 9), pushes=st.lists(st.integers(1, 12), min_size=1, max_size=8))
def test_the_memory_holds_the_last_texts_pushed(size: int, pushes: list[int]) -> None:
    memory = SimilarityMemory(size, 2, 3)
    assert memory.rows()[0].shape == (0, 2)
    pushed = 0
    for n in pushes:
        ids = torch.arange(pushed, pushed + n).float()
        memory.push(ids[:, None].expand(n, 2), -ids[:, None].expand(n, 3))
        pushed += n
    student, teacher = memory.rows()
    last = set(range(max(0, pushed - size), pushed))
    assert student.shape == (len(last), 2) and teacher.shape == (len(last), 3)
    assert set(student[:, 0].long().tolist()) == last
    torch.testing.assert_close(teacher[:, 0], -student[:, 0])  # each row's teacher vector beside its own


def test_the_memory_refuses_bad_sizes_and_batches() -> None:
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="size"):
            SimilarityMemory(bad, 2, 3)
    memory = SimilarityMemory(4, 2, 3)
    with pytest.raises(ValueError, match=r"expected \(batch, 2\) and \(batch, 3\)"):
        memory.push(torch.ones(2, 2), torch.ones(3, 3))
    with pytest.raises(ValueError, match=r"expected \(batch, 2\)"):
        memory.push(torch.ones(2, 5), torch.ones(2, 3))


# -- the objective and the recipe ------------------------------------------------------------------


def test_the_objective_compares_each_batch_with_the_one_before() -> None:
    enc, teacher = tiny_set(16)
    torch.manual_seed(0)
    student = BagStudent(VOCAB, STUDENT_DIM)
    plain = EmbeddingObjective(STUDENT_DIM, TEACHER_DIM, EmbeddingLossWeights(mse=0, similarity=1.0))
    remembering = EmbeddingObjective(STUDENT_DIM, TEACHER_DIM, EmbeddingLossWeights(mse=0, similarity=1.0), memory=8)
    first, second = (remembering.prepare(collate(enc, rows)) for rows in (range(8), range(8, 16)))
    for batch in (first, second):
        batch.teacher_logits = teacher[batch.index]
    with torch.no_grad():
        assert remembering.loss(student, first, None).item() == pytest.approx(plain.loss(student, first, None).item())
        both = remembering.loss(student, second, None).item()
        s1, s2 = (student(**b.inputs) for b in (first, second))
    assert both == pytest.approx(cross_similarity_kd(s2, teacher[8:], s1, teacher[:8]).item(), rel=1e-5)
    assert both != pytest.approx(plain.loss(student, second, None).item(), rel=1e-3)
    assert int(remembering.memory.filled) == 8


def test_the_objective_and_the_recipe_refuse_a_memory_without_the_similarity_term() -> None:
    with pytest.raises(ValueError, match="similarity memory = 4: it serves the similarity term"):
        EmbeddingObjective(STUDENT_DIM, TEACHER_DIM, EmbeddingLossWeights(cosine=1.0, mse=0), memory=4)
    with pytest.raises(ValueError, match="memory = -1"):
        EmbeddingObjective(STUDENT_DIM, TEACHER_DIM, EmbeddingLossWeights(similarity=1.0), memory=-1)
    with pytest.raises(ValidationError, match="similarity_memory = 64 serves the similarity_kd term"):
        ObjectiveSpec(kd_weight=0, vector_cosine=1.0, similarity_memory=64)
    assert ObjectiveSpec(kd_weight=0, similarity_kd=1.0, similarity_memory=64).similarity_memory == 64


def test_training_with_a_memory_resumes_exactly_from_its_checkpoint(tmp_path: Path) -> None:
    """Crash at step 15 (checkpoint at 10), resume: the memory comes back from the checkpoint, so the
    run ends with exactly the weights of one straight run, and the memory changed the training."""
    enc, teacher = tiny_set()
    run_spec = spec(max_steps=20, checkpoint_every=10)
    weights = EmbeddingLossWeights(mse=1.0, similarity=1.0)

    def fresh(memory: int = 24) -> tuple[BagStudent, EmbeddingObjective]:
        torch.manual_seed(0)
        return BagStudent(VOCAB, STUDENT_DIM), EmbeddingObjective(STUDENT_DIM, TEACHER_DIM, weights, memory)

    def io(name: str, resume: bool = False) -> StageIO:
        return StageIO(name, tmp_path / name, None, resume=resume, show_progress=False)

    student, straight = fresh()
    done = train(student, enc, straight, spec=run_spec, io=io("a"), teacher_logits=teacher)
    student, forgetful = fresh(0)
    without = train(student, enc, forgetful, spec=run_spec, io=io("c"), teacher_logits=teacher)

    def crash_at_15(progress: float) -> None:
        if progress >= 15 / 20:
            raise _Crash

    student, objective = fresh()
    with pytest.raises(_Crash):
        train(student, enc, objective, spec=run_spec, io=io("b"), teacher_logits=teacher, step_hook=crash_at_15)
    saved = load_file(str(list_checkpoints(tmp_path / "b")[-1] / "model.safetensors"))
    assert int(saved["objective.memory.filled"]) == 24 and saved["objective.memory.student"].abs().sum() > 0
    student, resumed = fresh()
    again = train(student, enc, resumed, spec=run_spec, io=io("b", resume=True), teacher_logits=teacher)
    for key, value in done.model.state_dict().items():
        torch.testing.assert_close(again.model.state_dict()[key], value, rtol=0, atol=0, msg=key)
        assert not np.allclose(without.model.state_dict()[key].numpy(), value.numpy())
    torch.testing.assert_close(resumed.memory.student, straight.memory.student, rtol=0, atol=0)
