"""One-sided confidence bounds the ``runtime: fastest`` step judges its candidates by
(:mod:`tinyplm.compress.runtime`): of a share (flips), of a paired accuracy drop, of a paired mean.

Closed forms of a few lines each. Wilson's bound is also in scipy (``binomtest(...).proportion_ci``,
through a test object per candidate); Agresti & Min's paired bound is in no dependency of tinyplm,
so they are written here side by side.
"""

from __future__ import annotations

import math

import numpy as np


def wilson_upper(k: int, n: int, z: float) -> float:
    """One-sided upper confidence bound of a share ``k / n`` (Wilson score; ``z`` the normal
    quantile of the confidence). Raises ``ValueError`` for no examples or ``k`` outside 0..n."""
    if n <= 0 or not 0 <= k <= n:
        raise ValueError(f"a share needs 0 <= k <= n and n > 0; got k={k}, n={n}")
    if k == n:  # the formula's value, which rounding can put a hair under
        return 1.0
    p, zz = k / n, z * z
    centre = p + zz / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + zz / (4 * n * n))
    return min(1.0, (centre + spread) / (1 + zz / n))


def paired_drop_upper(b: int, c: int, n: int, z: float) -> float:
    """One-sided upper confidence bound of the accuracy drop ``(b - c) / n`` of two models scored on
    the same ``n`` examples, ``b`` of them right only for the first and ``c`` only for the second:
    the Wald bound with 1/2 added to each cell of the 2x2 table (Agresti & Min 2005), at most 1. It
    grows with ``b`` and falls with ``c`` while the two models disagree on under half the examples
    (like any Wald bound, not always beyond). Raises ``ValueError`` when the counts cannot come
    from ``n`` examples."""
    if n <= 0 or b < 0 or c < 0 or b + c > n:
        raise ValueError(f"discordant pairs need b, c >= 0 and b + c <= n; got b={b}, c={c}, n={n}")
    bb, cc, nn = b + 0.5, c + 0.5, n + 2
    drop = (bb - cc) / nn
    return min(1.0, drop + z * math.sqrt(max((bb + cc) / nn - drop * drop, 0.0) / nn))


def mean_upper(diffs: np.ndarray, z: float) -> float:
    """One-sided upper confidence bound of the mean of paired differences ``diffs`` (N,) (normal
    approximation); infinite for fewer than two."""
    if len(diffs) < 2:
        return math.inf
    return float(diffs.mean() + z * diffs.std(ddof=1) / math.sqrt(len(diffs)))


def mean_lower(values: np.ndarray, z: float) -> float:
    """One-sided lower confidence bound of the mean of ``values`` (N,) (normal approximation);
    minus infinity for fewer than two."""
    return -mean_upper(-np.asarray(values, dtype=np.float64), z)
