"""How much the loss depends on each attention head and FFN neuron (Michel et al., 2019).

A gate ``xi`` (all ones) multiplies every head's context output and every FFN neuron's activation;
the importance of a unit is the expected absolute first-order change of the loss when its gate is
closed, ``E_x |dL(x)/d xi|`` (a Taylor expansion), accumulated over ``batches`` training batches.
The gates are forward pre-hooks on the attention output and FFN output Linear modules (their
inputs are the heads' contexts and the FFN activations; found through :mod:`tinyplm.models.roles`),
so they work whatever the attention implementation; they are removed afterwards and the model's
weights are not changed.

Scores are normalised per layer (L2, as Michel et al. do) so that a global threshold compares
layers fairly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from tinyplm.models import roles
from tinyplm.models.infer import output_logits
from tinyplm.models.shape import head_size
from tinyplm.models.widths import attention_heads, ffn_width
from tinyplm.tasks.encoding import Encoded, collate, model_inputs
from tinyplm.tasks.heads import Head, PerHead
from tinyplm.train.prediction import PredictionObjective
from tinyplm.train.vector_losses import cosine_loss, similarity_kd


@dataclass
class Importance:
    """Per-layer importance: ``heads[l]`` ``(heads_l,)``, ``ffn[l]`` ``(ffn_l,)``, non-negative."""

    heads: list[Tensor]
    ffn: list[Tensor]

    def normalised(self) -> Importance:
        """Each layer's scores divided by their L2 norm (a layer of zeros stays zeros)."""
        def norm(scores: list[Tensor]) -> list[Tensor]:
            return [s / s.norm().clamp_min(1e-12) for s in scores]
        return Importance(norm(self.heads), norm(self.ffn))


def _gate_hooks(model: nn.Module, heads: list[Tensor], ffn: list[Tensor]) -> list:
    size = head_size(model)
    handles = []
    for layer, hg, fg in zip(roles.layers(model), heads, ffn, strict=False):
        def head_gate(_m, args, g=hg):  # context (batch, seq, heads*size) before the output Linear
            x = args[0]
            return (x * g.repeat_interleave(size).to(x.dtype), *args[1:])
        def ffn_gate(_m, args, g=fg):  # activations (batch, seq, ffn) before the FFN output Linear
            x = args[0]
            return (x * g.to(x.dtype), *args[1:])
        handles.append(roles.layer_linear(layer, "attn_out").register_forward_pre_hook(head_gate))
        handles.append(roles.layer_linear(layer, "ffn_out").register_forward_pre_hook(ffn_gate))
    return handles


def importance(
    model: nn.Module, data: Encoded, *, batches: int = 32, batch_size: int = 32, seed: int = 0,
    teacher_logits: Tensor | None = None, is_regression: bool = False, temperature: float = 1.0,
    head: Head = Head.SEQUENCE,
) -> Importance:
    """Taylor importance of every head and FFN neuron over ``batches`` random training batches.

    The loss is KD to ``teacher_logits`` when given (the teacher's view of the task), else the
    task loss on the labels; both as the task ``head`` computes them (:data:`IMPORTANCE_LOSSES`:
    an embedding model's vectors against the teacher's).
    The model is left in eval mode with no gradients.
    """
    kd = teacher_logits is not None
    loss_of = IMPORTANCE_LOSSES[head](kd, temperature, is_regression, head)
    layers = roles.layers(model)
    heads = [torch.ones(attention_heads(x), requires_grad=True) for x in layers]
    ffn = [torch.ones(ffn_width(x), requires_grad=True) for x in layers]
    score_h = [torch.zeros_like(g) for g in heads]
    score_f = [torch.zeros_like(g) for g in ffn]
    gen = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(data), generator=gen).tolist()
    handles = _gate_hooks(model, heads, ffn)
    model.eval()  # no dropout: scores measure the model as deployed
    try:
        for b in range(min(batches, max(1, len(data) // batch_size))):
            idx = order[b * batch_size:(b + 1) * batch_size]
            batch = collate(data, idx)
            logits = output_logits(model(**model_inputs(batch))).float()
            t = teacher_logits[batch["index"]] if kd else None
            loss = loss_of(logits, batch, t)
            grads = torch.autograd.grad(loss, heads + ffn)
            for s, g in zip(score_h + score_f, grads, strict=True):
                s += g.abs()
    finally:
        for h in handles:
            h.remove()
    return Importance([s.detach() for s in score_h], [s.detach() for s in score_f])


LossOf = Callable[[Tensor, dict[str, Tensor], Tensor | None], Tensor]


def _prediction_loss(kd: bool, temperature: float, is_regression: bool, head: Head) -> LossOf:
    """KD to the teacher's logits when given, else the task loss on the labels (``PredictionObjective``)."""
    objective = PredictionObjective(kd_weight=float(kd), hard_weight=float(not kd), temperature=temperature,
                                    is_regression=is_regression, head=head)
    return lambda logits, batch, t: objective(logits, batch["labels"], t, batch["attention_mask"])[0]


def _vector_loss(kd: bool, temperature: float, is_regression: bool, head: Head) -> LossOf:
    """An embedding model's vectors ``(batch, dim)`` against the teacher's: in-batch similarity KD
    (any widths), plus ``1 - cos`` when the widths agree. Raises ``ValueError`` without the teacher's
    vectors (an embedding task has no labels to score units by)."""
    if not kd:
        raise ValueError("the importance of an embedding model's units needs the teacher's vectors")

    def loss(vectors: Tensor, batch: dict[str, Tensor], t: Tensor | None) -> Tensor:
        t = t.float()
        same = similarity_kd(vectors, t)
        return same + cosine_loss(vectors, t) if vectors.shape == t.shape else same

    return loss


#: The loss each head's units are scored by: (kd, temperature, is_regression, head) -> loss of
#: (outputs, collated batch, the teacher's rows or None).
IMPORTANCE_LOSSES: PerHead = PerHead("importance loss", {Head.SEQUENCE: _prediction_loss, Head.SPAN: _prediction_loss,
                                                         Head.TOKEN: _prediction_loss, Head.EMBEDDING: _vector_loss})


def select(scores: list[Tensor], keep: float, scope: str = "global", minimum: int = 1) -> list[list[int]]:
    """Indices to keep per layer: the top ``keep`` fraction of units, ranked within each layer
    (``scope="layer"``) or across layers (``"global"``, on per-layer normalised scores), never
    fewer than ``minimum`` per layer. Returned indices are sorted.

    Raises ``ValueError`` for ``keep`` outside (0, 1] or an unknown scope.
    """
    if not 0.0 < keep <= 1.0:
        raise ValueError(f"keep must be in (0, 1], got {keep}")
    if scope == "layer":
        counts = [max(minimum, round(keep * len(s))) for s in scores]
        return [sorted(s.argsort(descending=True)[:c].tolist()) for s, c in zip(scores, counts, strict=True)]
    if scope != "global":
        raise ValueError(f"scope must be 'global' or 'layer', got {scope!r}")
    total = sum(len(s) for s in scores)
    budget = max(len(scores) * minimum, round(keep * total))
    flat = torch.cat(scores)
    owner = torch.cat([torch.full((len(s),), i) for i, s in enumerate(scores)])
    local = torch.cat([torch.arange(len(s)) for s in scores])
    chosen: list[set[int]] = [set(s.argsort(descending=True)[:minimum].tolist()) for s in scores]
    left = budget - sum(len(c) for c in chosen)
    for j in flat.argsort(descending=True).tolist():
        if left <= 0:
            break
        i, k = int(owner[j]), int(local[j])
        if k not in chosen[i]:
            chosen[i].add(k)
            left -= 1
    return [sorted(c) for c in chosen]
