"""``task.holdout``'s value: a count of training examples or a share of them, checked when the
recipe is read (what it holds out is :mod:`tinyplm.tasks.holdout`)."""

from __future__ import annotations

from typing import NoReturn


def _bad(value: object) -> NoReturn:
    raise ValueError(f"holdout {value!r}: give a count of training examples (1, 2, ...) or a share of them "
                     "over 0 and under 0.5 (0.1 holds out a tenth)")


def not_a_switch(value: object) -> object:
    """``value`` as given, before parsing; a boolean is refused (YAML's ``true`` would read as 1)."""
    return _bad(value) if isinstance(value, bool) else value


def count_or_share(value: int | float | None) -> int | float | None:
    """A count (an int of at least 1; ``1000.0`` becomes 1000) or a share over 0 and under 0.5.
    Raises ``ValueError`` naming the value and what is expected."""
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer() and value >= 1:
        value = int(value)
    if isinstance(value, int):
        return value if value >= 1 else _bad(value)
    return value if 0 < value < 0.5 else _bad(value)
