"""Low-rank Linear layers, factorized word embeddings and ALBERT-style cross-layer sharing.

- :class:`LowRankLinear` replaces ``W`` (out x in) by ``U V`` with ``V``: in -> r and ``U``: r -> out,
  initialised from the truncated SVD of ``W`` (:func:`factorize_linear`), so it starts as the best
  rank-r approximation. The rank is chosen by ratio or by kept spectral energy (:func:`choose_rank`).
- :class:`FactorizedEmbedding` is ALBERT's V x E table followed by an E x H projection, from the
  truncated SVD of the V x H table.
- :func:`share_layers` makes groups of encoder layers use one set of attention and/or FFN weights
  (ALBERT shares all layers), each shared module initialised from the mean of the ones it replaces.

What was done is read back off the modules by :func:`tinyplm.models.shape.structure` and stored in
the config, so a saved model is rebuilt to the same structure before its weights load
(:func:`tinyplm.models.shape.apply_shape`). Layers and their parts are found through
:mod:`tinyplm.models.roles`.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from tinyplm.errors import ModelError
from tinyplm.models import roles


class LowRankLinear(nn.Module):
    """``x -> up(down(x))``: a rank-``rank`` Linear (``down`` has no bias, ``up`` keeps the bias)."""

    def __init__(self, in_features: int, out_features: int, rank: int, bias: bool = True) -> None:
        super().__init__()
        self.in_features, self.out_features, self.rank = in_features, out_features, rank
        self.down = nn.Linear(in_features, rank, bias=False)
        self.up = nn.Linear(rank, out_features, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.up(self.down(x))


def choose_rank(singular: Tensor, *, ratio: float | None = None, energy: float | None = None) -> int:
    """A rank from singular values (descending): ``ratio`` of the full rank, or the fewest values
    keeping ``energy`` of the sum of squares. Raises ``ValueError`` unless exactly one is given."""
    if (ratio is None) == (energy is None):
        raise ValueError("give exactly one of ratio or energy")
    full = len(singular)
    if ratio is not None:
        return max(1, min(full, round(ratio * full)))
    cum = torch.cumsum(singular.double() ** 2, 0) / (singular.double() ** 2).sum()
    return max(1, min(full, int((cum < energy).sum()) + 1))


def factorize_linear(linear: nn.Linear, *, ratio: float | None = None, energy: float | None = None) -> LowRankLinear:
    """The truncated SVD of ``linear`` as a :class:`LowRankLinear` (rank by ratio or energy)."""
    w = linear.weight.detach().float()
    u, s, vh = torch.linalg.svd(w, full_matrices=False)
    r = choose_rank(s, ratio=ratio, energy=energy)
    root = s[:r].sqrt()
    out = LowRankLinear(linear.in_features, linear.out_features, r, linear.bias is not None)
    with torch.no_grad():
        out.down.weight.copy_(root[:, None] * vh[:r])  # (r, in)
        out.up.weight.copy_(u[:, :r] * root[None, :])  # (out, r)
        if linear.bias is not None:
            out.up.bias.copy_(linear.bias.detach())
    return out


class FactorizedEmbedding(nn.Module):
    """ALBERT's factorized word embeddings: ``ids -> proj(table[ids])``, table V x E, proj E x H."""

    def __init__(self, vocab_size: int, rank: int, hidden: int, padding_idx: int | None = None) -> None:
        super().__init__()
        self.rank = rank
        self.table = nn.Embedding(vocab_size, rank, padding_idx=padding_idx)
        self.proj = nn.Linear(rank, hidden, bias=False)

    @property
    def weight(self) -> Tensor:
        """The effective V x H table (for code that reads ``word_embeddings.weight``)."""
        return self.proj(self.table.weight)

    def forward(self, ids: Tensor) -> Tensor:
        return self.proj(self.table(ids))


def factorize_embeddings(model: nn.Module, rank: int) -> FactorizedEmbedding:
    """Replace the word embeddings of ``model`` by a rank-``rank`` factorization (truncated SVD).

    Raises ``ModelError`` when they are already factorized or ``rank`` is not below both sizes."""
    old = roles.word_embeddings(model)
    if isinstance(old, FactorizedEmbedding):
        raise ModelError("the word embeddings are already factorized")
    w = old.weight.detach().float()
    if not 1 <= rank < min(w.shape):
        raise ModelError(f"embedding rank must be in 1..{min(w.shape) - 1}, got {rank}")
    u, s, vh = torch.linalg.svd(w, full_matrices=False)
    new = FactorizedEmbedding(w.shape[0], rank, w.shape[1], old.padding_idx)
    with torch.no_grad():
        new.table.weight.copy_(u[:, :rank] * s[:rank])
        new.proj.weight.copy_(vh[:rank].T)
    roles.set_word_embeddings(model, new)
    return new


# ---------------------------------------------------------------------------------------------
# cross-layer sharing (the parts of each unit come from the role table: BERT's FFN is two modules)


def share_layers(model: nn.Module, mode: str = "all", groups: list[list[int]] | None = None) -> list[list[int]]:
    """Make each group of layers (default: one group of all) share its attention (``attention``),
    FFN (``ffn``) or both (``all``) weights, initialised from the mean of the group's weights.
    Returns the groups. Raises ``ModelError`` for an unknown mode or bad groups."""
    if mode not in ("all", *roles.SHARING_UNITS):
        raise ModelError(f"sharing mode must be all, attention or ffn, got {mode!r}")
    layers = roles.layers(model)
    groups = groups or [list(range(len(layers)))]
    flat = [i for g in groups for i in g]
    if len(set(flat)) != len(flat) or any(not 0 <= i < len(layers) for i in flat):
        raise ModelError(f"sharing groups must list distinct layers in 0..{len(layers) - 1}, got {groups}")
    units = roles.SHARING_UNITS if mode == "all" else (mode,)
    parts = [p for unit in units for p in roles.part_names(layers[0], unit)]
    for group in groups:
        first = layers[group[0]]
        for part in parts:
            modules = [roles.layer_part(layers[i], part) for i in group]
            shapes = {tuple(p.shape for p in m.parameters()) for m in modules}
            if len(shapes) > 1:
                raise ModelError(f"layers {group} have different {part} shapes and cannot share it")
            with torch.no_grad():
                for params in zip(*(m.parameters() for m in modules), strict=True):  # shapes checked above
                    params[0].copy_(torch.stack([p.detach() for p in params]).mean(0))
            for i in group[1:]:
                roles.set_layer_part(layers[i], part, roles.layer_part(first, part))
    return groups


def sharing_of(model: nn.Module) -> dict[str, list[int]]:
    """For each sharing unit (attention, ffn), the index of the layer whose module each layer uses."""
    layers = list(roles.layers(model))
    out: dict[str, list[int]] = {}
    for unit in roles.SHARING_UNITS:
        modules = [roles.layer_part(layer, roles.part_names(layer, unit)[0]) for layer in layers]
        out[unit] = [next(j for j in range(i + 1) if modules[j] is module) for i, module in enumerate(modules)]
    return out


def tie_shared(model: nn.Module, share: dict[str, list[int]]) -> None:
    """Re-create the sharing recorded by :func:`sharing_of` on a freshly built model."""
    layers = roles.layers(model)
    for unit, owners in share.items():
        if len(owners) != len(layers):
            raise ModelError(f"sharing of {unit} lists {len(owners)} layers; the model has {len(layers)}")
        for i, j in enumerate(owners):
            if j != i:
                for part in roles.part_names(layers[i], unit):
                    roles.set_layer_part(layers[i], part, roles.layer_part(layers[j], part))


def factorize_roles(model: nn.Module, rules: dict[str, dict[str, float]]) -> dict[str, int]:
    """Replace each encoder Linear whose role has a rule (``{"ratio": r}`` or ``{"energy": e}``) by
    its truncated SVD, when that has fewer parameters -> ``{module name: rank}`` of those replaced.
    Shared modules are factorized once."""
    done: dict[str, int] = {}
    seen: set[int] = set()
    for i, layer in enumerate(roles.layers(model)):
        for role, rule in rules.items():
            linear = roles.layer_linear(layer, role)  # ModelError for an unknown role
            if id(linear) in seen or not isinstance(linear, nn.Linear):
                continue
            seen.add(id(linear))
            low = factorize_linear(linear, **rule)
            if low.rank * (linear.in_features + linear.out_features) < linear.in_features * linear.out_features:
                roles.set_layer_linear(layer, role, low)
                seen.add(id(low))
                done[roles.linear_name(model, i, role)] = low.rank
    return done
