"""Distillation of embedding students: a student learns the teacher's sentence vectors.

Reimers & Gurevych (2020), "Making monolingual sentence embeddings multilingual using knowledge
distillation": on unlabelled text, the student's vector of each text is pulled towards the
teacher's (mean squared error). The targets are per-text vectors, computed once by the teacher in
its own tokenization (:func:`tinyplm.distill.vectors.teacher_vectors`) and handed to the loop as
its ``teacher_logits`` ``(N, teacher_dim)``; the student reads its own token ids of the same texts.
So teacher and student need not share a tokenizer, and the teacher does not run during training.

The terms are pure functions on ``(batch, dim)`` tensors (in :mod:`tinyplm.train.vector_losses`, where
the pruning importance uses them too):

- :func:`vector_mse`: mean squared error per element (sentence-transformers' ``MSELoss``);
- :func:`cosine_loss`: mean of ``1 - cos`` (the direction only, blind to each vector's length);
- :func:`similarity_kd`: in-batch similarity KD, MSE between the ``(batch, batch)`` cosine matrices
  of the student's and the teacher's vectors (the geometry of the batch; needs no common width).

:class:`EmbeddingObjective` weighs them (:class:`EmbeddingLossWeights`) and is the training
:class:`~tinyplm.train.objective.Objective`. When the student's width differs from the teacher's it
holds a learned projection ``nn.Linear(student_dim, teacher_dim)`` (TinyBERT's W_h) for the MSE and
cosine terms: the objective is an ``nn.Module``, so the projection trains and checkpoints with the
student. It exists for training only: the saved student's vectors are its own ``student_dim``
vectors, never projected. Before the first step (:meth:`EmbeddingObjective.start`) the projection
is fitted in closed form (ridge least squares) from the student's untrained vectors of a sample
of the training texts to the teacher's: a random projection makes the first few hundred
gradients random directions for the student, which wrecks a pretrained sentence encoder
(measured in docs/results/embeddings.md). The similarity term compares the student's own vectors
(cosine matrices need no common width), so it shapes exactly the geometry the saved student keeps.

Keeping the start (``keep_start``, :func:`blend_targets`). A student that starts as a trained sentence
encoder (the packaged all-MiniLM-L6-v2) has skills its short distillation cannot teach it again:
pulled towards another model's vectors on a few thousand texts, it drifts away from what it knew
before it has learnt the teacher's, and ends below both (learning without forgetting, Li & Hoiem
2016, for classifiers). With ``keep_start = k`` its targets are the teacher's vectors and its own
vectors from before the stage side by side, weighted ``sqrt(1 - k)`` and ``sqrt(k)``: on unit
vectors the cosine of two targets is ``(1 - k)`` times the teacher's cosine plus ``k`` times the
start's, the similarity matrix of the two models as an ensemble, which the student can reach
by moving part of the way (measured in docs/results/embeddings.md).

Normalised targets. The objective compares what the student outputs with the teacher's vectors as
given; it normalises neither. The student's layout decides: a student built with the teacher's
layout (pooling, dense, L2 normalisation when the teacher has it) outputs vectors of the teacher's
kind, and the MSE on them is the right target. Normalising inside the loss instead would train a
student whose unnormalised outputs have arbitrary lengths: harmless for cosine search, wrong for
dot-product use. On unit vectors the MSE is ``2 (1 - cos) / dim`` per pair, small in magnitude:
alone that changes nothing that matters (Adam's steps do not depend on the loss's scale), but when
mixing it with the cosine or similarity term, its weight must be about ``dim / 2`` times theirs
for an equal share.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

import torch
from torch import nn

from tinyplm.distill.intermediate import make_projection
from tinyplm.distill.similarity_memory import SimilarityMemory
from tinyplm.models.infer import predict_logits
from tinyplm.tasks.encoding import Encoded, model_inputs
from tinyplm.train.objective import Batch
from tinyplm.train.vector_losses import cosine_loss, cosine_matrix, cross_similarity_kd, similarity_kd, vector_mse

__all__ = ["EmbeddingLossWeights", "EmbeddingObjective", "blend_targets", "cosine_loss", "cosine_matrix",
           "similarity_kd", "vector_mse", "with_start"]

# -- weights ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EmbeddingLossWeights:
    """Weight of each term of :class:`EmbeddingObjective` (0 = off): ``mse`` (:func:`vector_mse`),
    ``cosine`` (:func:`cosine_loss`), ``similarity`` (:func:`similarity_kd`).

    Raises ``ValueError`` naming the field for a weight that is not a finite number >= 0, and
    naming all of them when none is > 0.
    """

    mse: float = 1.0
    cosine: float = 0.0
    similarity: float = 0.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise ValueError(f"EmbeddingLossWeights.{f.name} = {value!r}: expected a finite number >= 0")
        if not any(self.active().values()):
            names = ", ".join(f.name for f in fields(self))
            raise ValueError(f"EmbeddingLossWeights: every weight ({names}) is 0; set at least one > 0")

    def active(self) -> dict[str, float]:
        """The terms that are on: {name: weight > 0}, in field order."""
        return {f.name: float(getattr(self, f.name)) for f in fields(self) if getattr(self, f.name) > 0}


def blend_targets(teacher: torch.Tensor, start: torch.Tensor, keep: float) -> torch.Tensor:
    """The targets of ``keep_start = keep`` (see the module docstring): ``teacher`` ``(N, dt)`` and
    ``start`` ``(N, ds)`` (the student's own vectors before the stage), each row scaled to unit length,
    side by side as ``[sqrt(1 - keep) * teacher, sqrt(keep) * start]`` -> float32 ``(N, dt + ds)``.
    A zero row stays zero. ``keep`` 0 gives the teacher's vectors unchanged (not normalised).
    Raises ``ValueError`` for other row counts, shapes that are not ``(N, dim)`` or ``keep``
    outside [0, 1)."""
    if not 0 <= keep < 1:
        raise ValueError(f"keep_start = {keep!r}: expected a number in [0, 1)")
    if teacher.dim() != 2 or start.dim() != 2 or teacher.shape[0] != start.shape[0]:
        raise ValueError(f"teacher vectors {tuple(teacher.shape)} and start vectors {tuple(start.shape)}: expected "
                         "(N, dim) each, with the same N")
    if keep == 0:
        return teacher.float()
    unit = [torch.nn.functional.normalize(v.float(), dim=-1) for v in (teacher, start)]
    return torch.cat([math.sqrt(1.0 - keep) * unit[0], math.sqrt(keep) * unit[1]], dim=1)


def with_start(teacher: torch.Tensor, model: nn.Module, data: Encoded, keep: float, bf16: bool = False) -> torch.Tensor:
    """A stage's targets: ``teacher`` ``(N, dt)`` as they are when ``keep`` is 0, else blended
    (:func:`blend_targets`) with ``model``'s own vectors of the same ``N`` texts ``data``, computed
    now, before the stage trains it (``bf16``: under bf16 autocast)."""
    if keep == 0:
        return teacher
    return blend_targets(teacher, predict_logits(model, data, bf16=bf16), keep)


# -- the training objective ------------------------------------------------------------------------

#: The probe batch :meth:`EmbeddingObjective.check` runs the student on: (rows, tokens) of token id 0.
PROBE_SHAPE = (2, 4)
#: Most training texts :meth:`EmbeddingObjective.start` encodes to fit the projection (a seeded sample).
PROJECTION_FIT_ROWS = 4096
#: The ridge of that fit, relative to the mean squared norm of the student's vectors (keeps the
#: solve well posed when there are fewer texts than dimensions or the vectors are collinear).
PROJECTION_RIDGE = 1e-3


def fit_linear(x: torch.Tensor, y: torch.Tensor, ridge: float = PROJECTION_RIDGE) -> tuple[torch.Tensor, torch.Tensor]:
    """The ridge least-squares map ``y ~ x @ weight.T + bias`` -> ``(weight (dy, dx), bias (dy,))``.

    ``x`` ``(n, dx)``, ``y`` ``(n, dy)``; the bias is not penalised (the data are centred first).
    ``ridge`` is relative: ``ridge * mean(|x_i|^2)`` is added to the diagonal of the centred Gram matrix.
    Solved in float64. Raises ``ValueError`` for mismatched rows, fewer than two rows or a negative ridge.
    """
    if x.dim() != 2 or y.dim() != 2 or x.shape[0] != y.shape[0] or x.shape[0] < 2:
        raise ValueError(f"fit_linear needs (n, dx) and (n, dy) with the same n >= 2; got {tuple(x.shape)} and "
                         f"{tuple(y.shape)}")
    if not ridge >= 0:
        raise ValueError(f"ridge = {ridge!r}: expected a number >= 0")
    x64, y64 = x.double(), y.double()
    mx, my = x64.mean(0), y64.mean(0)
    xc, yc = x64 - mx, y64 - my
    gram = xc.T @ xc
    gram += torch.eye(gram.shape[0], dtype=gram.dtype) * (ridge * float((x64 * x64).sum(1).mean()) + 1e-12)
    weight = torch.linalg.solve(gram, xc.T @ yc).T
    return weight.to(x.dtype), (my - weight @ mx).to(x.dtype)


class EmbeddingObjective(nn.Module):
    """Train a student's sentence vectors towards the teacher's (see the module docstring).

    The loop hands each batch its rows of the teacher's vectors as ``batch.teacher_logits``
    ``(batch, teacher_dim)`` (``needs_teacher_logits``); no teacher model runs
    (``needs_teacher`` is False). The student is any module whose ``forward(**inputs)`` (with
    ``input_ids``, ``attention_mask``, ``token_type_ids``, each ``(batch, seq)``) returns its
    vectors ``(batch, student_dim)``; a model that has no use for ``token_type_ids`` ignores them.
    ``proj``: ``nn.Linear(student_dim, teacher_dim)`` when the widths differ, else None; used for
    training only. ``memory``: texts of earlier batches the similarity term also compares each batch
    with (:class:`~tinyplm.distill.similarity_memory.SimilarityMemory`; 0 = the batch alone).

    Raises ``ValueError`` for a width < 1, or a memory < 0 or without the similarity term.
    """

    needs_teacher_logits = True
    needs_teacher = False

    def __init__(self, student_dim: int, teacher_dim: int, weights: EmbeddingLossWeights | None = None,
                 memory: int = 0) -> None:
        super().__init__()
        for name, value in (("student_dim", student_dim), ("teacher_dim", teacher_dim)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} = {value!r}: expected a width >= 1")
        self.student_dim, self.teacher_dim = student_dim, teacher_dim
        self.weights = weights if weights is not None else EmbeddingLossWeights()
        self.proj = make_projection(student_dim, teacher_dim)
        if isinstance(memory, bool) or not isinstance(memory, int) or memory < 0:
            raise ValueError(f"similarity memory = {memory!r}: expected a number of texts >= 0")
        if memory and "similarity" not in self.weights.active():
            raise ValueError(f"similarity memory = {memory}: it serves the similarity term, whose weight is 0")
        self.memory = SimilarityMemory(memory, student_dim, teacher_dim) if memory else None

    def check(self, model: nn.Module, teacher: nn.Module | None) -> None:
        """Run ``model`` once, without gradients and in eval mode (each submodule's mode is restored
        after), on a probe batch of :data:`PROBE_SHAPE` token ids 0 (every token attended); raise
        ``ValueError`` unless it answers with a ``(rows, student_dim)`` tensor. ``teacher`` is not
        used."""
        device = next((p.device for p in model.parameters()), torch.device("cpu"))
        ids = torch.zeros(PROBE_SHAPE, dtype=torch.long, device=device)
        probe = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}
        modes = [(m, m.training) for m in model.modules()]  # restored one by one: a part may be frozen in eval
        model.eval()
        try:
            with torch.no_grad():
                out = model(**probe)
        finally:
            for module, training in modes:
                module.training = training
        self.vectors_of(out, PROBE_SHAPE[0])

    def vectors_of(self, out: Any, rows: int) -> torch.Tensor:
        """The student's answer ``out`` for ``rows`` texts as ``(rows, student_dim)`` vectors;
        raises ``ValueError`` when it is not a tensor of that shape."""
        if not isinstance(out, torch.Tensor):
            raise ValueError(f"an embedding student must answer model(**inputs) with a (batch, dim) tensor, "
                             f"got a {type(out).__name__}")
        if out.dim() != 2 or out.shape[0] != rows:
            raise ValueError(f"an embedding student must answer model(**inputs) with a (batch, dim) tensor; "
                             f"for a batch of {rows} it gave shape {tuple(out.shape)}")
        if out.shape[1] != self.student_dim:
            raise ValueError(f"the student's vectors have {out.shape[1]} dimensions, but the objective was built "
                             f"for student_dim={self.student_dim}")
        return out

    def start(self, model: nn.Module, data: Encoded, teacher_logits: torch.Tensor | None) -> None:
        """Before the first step: fit :attr:`proj` (when there is one and a term uses it) from
        ``model``'s vectors of up to :data:`PROJECTION_FIT_ROWS` training texts (a seeded sample)
        to their rows of ``teacher_logits`` (:func:`fit_linear`). A resumed stage then loads the
        trained projection from its checkpoint over this one."""
        if self.proj is None or teacher_logits is None or not {"mse", "cosine"} & set(self.weights.active()):
            return
        n = len(data)
        if n < 2:
            return
        rows = torch.randperm(n, generator=torch.Generator().manual_seed(0))[:PROJECTION_FIT_ROWS].sort().values
        student = predict_logits(model, data.subset(rows.tolist()))
        weight, bias = fit_linear(student, teacher_logits[rows].float())
        with torch.no_grad():
            self.proj.weight.copy_(weight)
            self.proj.bias.copy_(bias)

    def prepare(self, batch: dict[str, torch.Tensor]) -> Batch:
        """The collated batch's model inputs; no targets (the teacher's vectors come as
        ``teacher_logits``)."""
        return Batch(model_inputs(batch), None, batch["index"])

    def teacher_outputs(self, teacher: nn.Module, batch: Batch) -> Any:
        return None

    def loss(self, model: nn.Module, batch: Batch, teacher_out: Any) -> torch.Tensor:
        """Run ``model`` on the batch; the weighted loss of its vectors against the batch's teacher
        vectors (:meth:`terms`). Raises ``ValueError`` when the teacher's vectors are missing."""
        if batch.teacher_logits is None:
            raise ValueError("the embedding objective needs the teacher's vectors of the training texts "
                             "(teacher_logits, (N, teacher_dim))")
        rows = int(batch.index.shape[0])
        student = self.vectors_of(model(**batch.inputs), rows)
        if self.memory is None:
            return self.terms(student, batch.teacher_logits)[0]
        loss = self.terms(student, batch.teacher_logits, self.memory.rows())[0]
        self.memory.push(student, batch.teacher_logits.float())
        return loss

    def project(self, student: torch.Tensor) -> torch.Tensor:
        """The student's vectors ``(batch, student_dim)`` in the teacher's width
        ``(batch, teacher_dim)``, float32 (through :attr:`proj` when the widths differ)."""
        return (self.proj(student) if self.proj is not None else student).float()

    def terms(self, student: torch.Tensor, teacher: torch.Tensor,
              memory: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[torch.Tensor, dict[str, float]]:
        """The weighted loss and each active term's value (for logging) for one batch.

        ``student`` ``(batch, student_dim)``, ``teacher`` ``(batch, teacher_dim)``. The MSE and
        cosine terms compare the projected student vectors, the similarity term the student's own;
        with ``memory`` (earlier texts' student and teacher vectors) it also compares the batch with
        them (:func:`~tinyplm.train.vector_losses.cross_similarity_kd`).
        Raises ``ValueError`` for vectors of other widths or batch sizes.
        """
        if teacher.dim() != 2 or teacher.shape[1] != self.teacher_dim:
            raise ValueError(f"teacher vectors of shape {tuple(teacher.shape)}; the objective was built for "
                             f"teacher_dim={self.teacher_dim}")
        if student.dim() != 2 or student.shape[1] != self.student_dim:
            raise ValueError(f"student vectors of shape {tuple(student.shape)}; the objective was built for "
                             f"student_dim={self.student_dim}")
        teacher = teacher.to(device=student.device, dtype=torch.float32)
        parts: dict[str, torch.Tensor] = {}
        active = self.weights.active()
        if "mse" in active or "cosine" in active:
            projected = self.project(student)
            if "mse" in active:
                parts["mse"] = vector_mse(projected, teacher)
            if "cosine" in active:
                parts["cosine"] = cosine_loss(projected, teacher)
        if "similarity" in active:
            parts["similarity"] = (similarity_kd(student, teacher) if memory is None
                                   else cross_similarity_kd(student, teacher, *memory))
        total = sum((active[name] * value for name, value in parts.items()), torch.zeros((), device=student.device))
        return total, {name: float(value.detach()) for name, value in parts.items()}
