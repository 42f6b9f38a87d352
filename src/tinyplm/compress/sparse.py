"""Unstructured sparsity trained as masks during recovery distillation, then made permanent.

Two ways to choose the weights to zero, both on the encoder's Linear layers, both on the cubic
schedule of Zhu & Gupta (2017): sparsity ``s(t) = s_f + (s_0 - s_f) (1 - t)^3`` over the stage's
progress ``t`` in [0, 1] (steps or time budget, whichever the loop is following), masks updated
every ``update_every`` steps and held at ``s_f`` for the last ``final_fraction`` of training:

- **magnitude**: the smallest ``|w|`` (globally across layers, or per layer); masks only grow;
- **movement** (Sanh et al. 2020, hard variant): the lowest accumulated movement scores
  ``S = -sum_t w * dL/dw`` (weights moving towards zero score low); the gradient is taken with
  respect to the masked weight, so a pruned weight can come back if its score rises.

Masks use ``torch.nn.utils.prune`` (``weight = weight_orig * weight_mask`` by a forward pre-hook);
:meth:`Sparsifier.finalize` removes the re-parametrisation, leaving zeros in dense tensors.
The saved model is dense (same bytes, same speed on CPU): :func:`csr_bytes` writes the pruned
weights in CSR form to measure what sparse storage would take.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import torch
from torch import Tensor, nn
from torch.nn.utils import prune

from tinyplm.models.quantized import encoder_linear_names


def cubic_sparsity(progress: float, final: float, initial: float = 0.0, final_fraction: float = 0.1) -> float:
    """Target sparsity at ``progress`` in [0, 1]; reaches ``final`` at ``1 - final_fraction``."""
    end = max(1e-9, 1.0 - final_fraction)
    t = min(max(progress / end, 0.0), 1.0)
    return final + (initial - final) * (1.0 - t) ** 3


class Sparsifier:
    """Masks on the encoder's Linear weights, updated on a cubic schedule while the model trains.

    ``on_step(progress)`` is the training loop's per-step hook; call :meth:`finalize` after training.
    """

    def __init__(self, model: nn.Module, method: str, sparsity: float, *, scope: str = "global",
                 update_every: int = 10, final_fraction: float = 0.1) -> None:
        if method not in ("magnitude", "movement"):
            raise ValueError(f"method must be 'magnitude' or 'movement', got {method!r}")
        self.method, self.target, self.scope = method, sparsity, scope
        self.update_every, self.final_fraction = update_every, final_fraction
        self.names = encoder_linear_names(model)
        self.modules = [model.get_submodule(n) for n in self.names]
        self.steps = 0
        self.current = 0.0
        self.scores: list[Tensor] = []
        self._handles = []
        for m in self.modules:
            prune.identity(m, "weight")
            if method == "movement":
                score = torch.zeros_like(m.weight_orig)
                self.scores.append(score)
                self._handles.append(m.register_forward_pre_hook(self._score_hook(score)))

    @staticmethod
    def _score_hook(score: Tensor):
        def hook(mod, _inputs):
            w = mod.weight  # the masked weight prune's own pre-hook has just computed
            if w.requires_grad and torch.is_grad_enabled():
                w.register_hook(lambda g: score.add_(-(mod.weight_orig.detach() * g.detach().float())))
        return hook

    def importance(self) -> list[Tensor]:
        """Per-module scores: ``|w|`` (magnitude) or accumulated movement."""
        if self.method == "movement":
            return self.scores
        return [m.weight_orig.detach().abs() for m in self.modules]

    @torch.no_grad()
    def apply(self, sparsity: float) -> None:
        """Set the masks so that ``sparsity`` of the weights are zero (ties broken arbitrarily)."""
        scores = self.importance()
        if self.method == "magnitude":  # masks only grow: pruned weights stay out of the ranking
            scores = [torch.where(m.weight_mask.bool(), s, torch.full_like(s, -float("inf")))
                      for m, s in zip(self.modules, scores, strict=True)]
        if self.scope == "layer":
            for m, s in zip(self.modules, scores, strict=True):
                m.weight_mask.copy_(_keep_top(s.flatten(), s.numel() - round(sparsity * s.numel())).view_as(s))
            self.current = sparsity
            return
        flat = torch.cat([s.flatten() for s in scores])
        keep = _keep_top(flat, flat.numel() - round(sparsity * flat.numel()))
        offset = 0
        for m in self.modules:
            n = m.weight_mask.numel()
            m.weight_mask.copy_(keep[offset:offset + n].view_as(m.weight_mask))
            offset += n
        self.current = sparsity

    def on_step(self, progress: float) -> None:
        """The loop's hook after each optimiser step."""
        self.steps += 1
        if self.steps % self.update_every == 0 or progress >= 1.0:
            target = cubic_sparsity(progress, self.target, final_fraction=self.final_fraction)
            if target > self.current + 1e-6 or (self.method == "movement" and target > 0):
                self.apply(target)

    def finalize(self) -> dict:
        """Reach the final sparsity, make the zeros permanent, drop the hooks -> info for the report."""
        self.apply(self.target)
        for handle in self._handles:
            handle.remove()
        for m in self.modules:
            prune.remove(m, "weight")
        total = sum(m.weight.numel() for m in self.modules)
        zeros = sum(int((m.weight == 0).sum()) for m in self.modules)
        return {"method": self.method, "sparsity": round(zeros / total, 4), "target": self.target,
                "scope": self.scope, "pruned_modules": len(self.modules)}


def _keep_top(scores: Tensor, k: int) -> Tensor:
    """A 0/1 float mask keeping the ``k`` highest scores."""
    mask = torch.zeros_like(scores, dtype=torch.float32)
    if k > 0:
        mask[torch.topk(scores.float(), k, sorted=False).indices] = 1.0
    return mask


def sparsity_of(model: nn.Module) -> float:
    """Share of exact zeros in the encoder's Linear weights."""
    weights = [model.get_submodule(n).weight for n in encoder_linear_names(model)]
    return sum(int((w == 0).sum()) for w in weights) / max(1, sum(w.numel() for w in weights))


def csr_bytes(model: nn.Module, path: Path) -> int:
    """Write the encoder's Linear weights in CSR form (fp32 values, int32 column indices and row
    pointers) and every other tensor dense to ``path`` (safetensors) -> its size in bytes."""
    from safetensors.torch import save_file

    sparse = set(encoder_linear_names(model))
    tensors: dict[str, Tensor] = {}
    for name, value in model.state_dict().items():
        module = name.rsplit(".", 1)[0]
        if module in sparse and name.endswith(".weight"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "sparse CSR support is in beta"
                csr = value.detach().float().to_sparse_csr()
            tensors[f"{name}.values"] = csr.values().contiguous()
            tensors[f"{name}.col_indices"] = csr.col_indices().to(torch.int32).contiguous()
            tensors[f"{name}.crow_indices"] = csr.crow_indices().to(torch.int32).contiguous()
        else:
            tensors[name] = value.detach().contiguous()
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path))
    return path.stat().st_size
