"""A scope in which :func:`~tinyplm.run.preflight.preflight` reads each task's data and each
tokenizer once for all the recipes it checks (a sweep's trials read the same files): every other
check still runs for each recipe."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

T = TypeVar("T")
#: Within :func:`reading_once`: what :func:`once` has read, by function and arguments.
_READ: ContextVar[dict[str, object] | None] = ContextVar("tinyplm_preflight_read", default=None)


@contextmanager
def reading_once() -> Iterator[None]:
    """Within the block, what :func:`once` is given (preflight's task data and tokenizers) is read
    once for all the recipes checked that read the same ones (a sweep's trials)."""
    token = _READ.set({})
    try:
        yield
    finally:
        _READ.reset(token)


def once(fn: Callable[..., T], *args: object) -> T:
    """``fn(*args)``, from what :func:`reading_once` keeps when it is in force."""
    read = _READ.get()
    if read is None:
        return fn(*args)
    key = repr((fn.__qualname__, args))
    if key not in read:
        read[key] = fn(*args)
    return read[key]
