"""Layer matching as data: which student layer learns from which teacher layer.

A :class:`LayerMap` is a tuple of (student layer, teacher layer) pairs with 1-based layer indices:
layer i is the output of encoder layer i and 0 is the embedding output. Presets:

- ``uniform`` / ``tinybert``: student layer m <-> teacher layer m*N/M, m = 1..M (TinyBERT).
- ``last`` / ``minilm`` / ``minilmv2`` / ``distilbert``: only the last layers, (M, N) (MiniLM's
  last-layer transfer; DistilBERT's cosine loss on the final hidden states).

:func:`resolve` turns a recipe value (a preset name or a list of pairs) into a validated map.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from tinyplm.errors import TinyplmError, did_you_mean


@dataclass(frozen=True)
class LayerMap:
    """(student layer, teacher layer) pairs; 0 = embedding output, i = output of encoder layer i."""

    pairs: tuple[tuple[int, int], ...]

    @property
    def student_layers(self) -> tuple[int, ...]:
        """The student side of each pair, in order."""
        return tuple(s for s, _ in self.pairs)

    @property
    def teacher_layers(self) -> tuple[int, ...]:
        """The teacher side of each pair, in order."""
        return tuple(t for _, t in self.pairs)


def _check_depths(student_layers: int, teacher_layers: int) -> None:
    for name, n in (("student_layers", student_layers), ("teacher_layers", teacher_layers)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise TinyplmError(f"{name} must be a positive integer, got {n!r}")


def uniform(student_layers: int, teacher_layers: int) -> LayerMap:
    """TinyBERT's uniform map: student layer m <-> teacher layer m*N/M for m = 1..M.

    When N is not a multiple of M the teacher layer is m*N/M rounded half up (so the last student
    layer still meets the last teacher layer). Raises TinyplmError when the student is deeper.
    """
    _check_depths(student_layers, teacher_layers)
    m_, n_ = student_layers, teacher_layers
    if m_ > n_:
        raise TinyplmError(
            f"uniform layer matching needs student layers <= teacher layers; got student depth {m_}, "
            f"teacher depth {n_}"
        )
    return LayerMap(tuple((m, math.floor(m * n_ / m_ + 0.5)) for m in range(1, m_ + 1)))


def last(student_layers: int, teacher_layers: int) -> LayerMap:
    """MiniLM's last-layer map: ((M, N),)."""
    _check_depths(student_layers, teacher_layers)
    return LayerMap(((student_layers, teacher_layers),))


def explicit(pairs: Iterable[Sequence[int]]) -> LayerMap:
    """A map from explicit (student, teacher) pairs. Raises TinyplmError for a malformed pair."""
    out: list[tuple[int, int]] = []
    for pair in pairs:
        items = list(pair) if isinstance(pair, (list, tuple)) else None
        if items is None or len(items) != 2 or not all(
            isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in items
        ):
            raise TinyplmError(
                f"layer pair {pair!r} must be [student_layer, teacher_layer], two integers >= 0 "
                "(0 = embeddings)"
            )
        out.append((items[0], items[1]))
    if not out:
        raise TinyplmError("a layer map needs at least one [student_layer, teacher_layer] pair")
    return LayerMap(tuple(out))


def with_embeddings(layer_map: LayerMap) -> LayerMap:
    """``layer_map`` with (0, 0) first (TinyBERT's embedding-layer loss); unchanged if present."""
    if (0, 0) in layer_map.pairs:
        return layer_map
    return LayerMap(((0, 0), *layer_map.pairs))


PRESETS: dict[str, Callable[[int, int], LayerMap]] = {
    "uniform": uniform,
    "last": last,
    "tinybert": uniform,
    "minilm": last,
    "minilmv2": last,
    "distilbert": last,
}


def validate(layer_map: LayerMap, student_layers: int, teacher_layers: int) -> LayerMap:
    """Check every pair lies in 0..M (student) and 0..N (teacher); returns the map.

    Raises TinyplmError naming the bad pair and both depths.
    """
    _check_depths(student_layers, teacher_layers)
    for s, t in layer_map.pairs:
        if not (0 <= s <= student_layers and 0 <= t <= teacher_layers):
            raise TinyplmError(
                f"layer pair ({s}, {t}) is out of range: the student has {student_layers} layers "
                f"(valid 0..{student_layers}) and the teacher {teacher_layers} layers "
                f"(valid 0..{teacher_layers}); 0 is the embedding output"
            )
    return layer_map


def resolve(
    spec: str | LayerMap | Sequence[Sequence[int]], student_layers: int, teacher_layers: int
) -> LayerMap:
    """A validated :class:`LayerMap` from a preset name, a LayerMap or a list of pairs.

    Raises TinyplmError for an unknown preset (suggesting the nearest), a malformed pair, or a
    pair outside the depths (0..student_layers, 0..teacher_layers).
    """
    if isinstance(spec, str):
        key = spec.strip().lower()
        if key not in PRESETS:
            raise TinyplmError(
                f"unknown layer matching preset '{spec}'{did_you_mean(key, PRESETS)}; "
                f"presets are {sorted(PRESETS)}, or give a list of [student_layer, teacher_layer] pairs"
            )
        layer_map = PRESETS[key](student_layers, teacher_layers)
    elif isinstance(spec, LayerMap):
        layer_map = spec
    else:
        layer_map = explicit(spec)
    return validate(layer_map, student_layers, teacher_layers)
