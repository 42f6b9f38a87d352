"""The teacher's sentence vectors over the training texts, computed once and cached on disk.

An embedding student (:mod:`tinyplm.distill.embedding`) learns the teacher's vector of each text;
those targets are computed before training by :func:`teacher_vectors`, in the teacher's own
tokenization, and handed to the loop as its ``teacher_logits`` ``(N, dim)``.

An entry is ``cache_dir/vectors/<key>.safetensors`` holding one float32 tensor ``vectors``
``(N, dim)``. The key (:func:`vectors_key`) is a sha256 over the caller's ``key_parts`` (the
teacher's fingerprint, ``max_length``, precision and whatever else changes the vectors) and every
text, so any change makes a new entry. Entries are written atomically (a temporary sibling and
``os.replace``, as :mod:`tinyplm.distill.cache`); one read back is trusted only when it holds
exactly that tensor, float32, finite, ``(N, dim)``, under the same key; anything else (a
truncated file, another shape) is computed again and replaced.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from tinyplm.errors import TinyplmError
from tinyplm.files import atomic_path

log = logging.getLogger(__name__)

#: The tensor's name in a cache entry.
TENSOR = "vectors"
#: Texts per call of ``embed`` by default.
CHUNK = 4096

Embed = Callable[[Sequence[str]], np.ndarray]


def vectors_key(key_parts: Mapping[str, str], texts: Sequence[str]) -> str:
    """sha256 (hex) over ``key_parts`` (in name order, so their order does not matter) and every
    text in order; every part is length-prefixed and both lists counted, so no two different
    inputs hash the same byte stream.
    Raises ``ValueError`` naming a key part or text that is not a string."""
    h = hashlib.sha256()

    def put(data: str) -> None:
        raw = data.encode("utf-8", "surrogatepass")
        h.update(len(raw).to_bytes(8, "little"))
        h.update(raw)

    h.update(len(key_parts).to_bytes(8, "little"))
    for name in sorted(key_parts):
        value = key_parts[name]
        if not isinstance(name, str) or not isinstance(value, str):
            raise ValueError(f"key_parts[{name!r}] = {value!r}: key parts are strings (name and value)")
        put(name)
        put(value)
    h.update(len(texts).to_bytes(8, "little"))
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise ValueError(f"text {i} is a {type(text).__name__}, expected a string")
        put(text)
    return h.hexdigest()


def cache_path(cache_dir: Path, key: str) -> Path:
    """Where the entry of ``key`` lives under ``cache_dir``."""
    return Path(cache_dir) / "vectors" / f"{key}.safetensors"


def teacher_vectors(
    embed: Embed,
    texts: Sequence[str],
    *,
    key_parts: Mapping[str, str],
    cache_dir: Path | None,
    dim: int | None = None,
    chunk_size: int = CHUNK,
    progress: Callable[[int, int], None] | None = None,
) -> torch.Tensor:
    """The teacher's vectors of ``texts``: float32 ``(N, dim)``, row i for text i.

    Read from ``cache_dir`` when a sound entry is there (see the module docstring); else
    ``embed(chunk) -> (len(chunk), dim)`` array is called on chunks of ``chunk_size`` texts in
    order (``progress(done, N)`` after each), the rows are written into one ``(N, dim)`` tensor
    (the only memory held) and stored. ``cache_dir`` None: computed, nothing stored. ``dim``, when
    given, is the width the vectors must have (a cached entry of another width is recomputed).
    No texts: a ``(0, dim or 0)`` tensor, ``embed`` not called.

    Raises ``ValueError`` for a bad key part, text or ``chunk_size``, or when ``embed`` answers
    with another shape or width; ``TinyplmError`` when its vectors are not finite.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size = {chunk_size}: expected >= 1")
    key = vectors_key(key_parts, texts)
    if len(texts) == 0:
        return torch.empty((0, dim or 0), dtype=torch.float32)
    path = cache_path(cache_dir, key) if cache_dir is not None else None
    if path is not None and path.is_file():
        cached = _read(path, key, len(texts), dim)
        if cached is not None:
            return cached
    vectors = _compute(embed, texts, dim, chunk_size, progress)
    if path is not None:
        with atomic_path(path) as tmp:
            save_file({TENSOR: vectors}, str(tmp), metadata={"key": key, "texts": str(len(texts))})
    return vectors


def _read(path: Path, key: str, rows: int, dim: int | None) -> torch.Tensor | None:
    """The entry at ``path`` when it is sound for ``key`` (one finite float32 ``(rows, dim)``
    tensor), else None (logged: it will be computed again and replaced)."""
    try:
        with safe_open(str(path), framework="pt") as f:
            meta, names = f.metadata() or {}, list(f.keys())
            vectors = f.get_tensor(TENSOR) if names == [TENSOR] else None
    except (SafetensorError, OSError, ValueError, RuntimeError) as err:
        log.warning("%s: unreadable cache entry (%s); computing the teacher's vectors again", path, err)
        return None
    problem = None
    if vectors is None:
        problem = f"holds {names}, expected only {TENSOR!r}"
    elif meta.get("key") != key:
        problem = "was written for another key"
    elif vectors.dtype != torch.float32:
        problem = f"holds {vectors.dtype}, expected float32"
    elif vectors.dim() != 2 or vectors.shape[0] != rows or vectors.shape[1] < 1 or \
            (dim is not None and vectors.shape[1] != dim):
        problem = f"holds shape {tuple(vectors.shape)}, expected ({rows}, {dim if dim is not None else 'dim'})"
    elif not bool(torch.isfinite(vectors).all()):
        problem = "holds values that are not finite"
    if problem is not None:
        log.warning("%s: cache entry %s; computing the teacher's vectors again", path, problem)
        return None
    return vectors


def _compute(embed: Embed, texts: Sequence[str], dim: int | None, chunk_size: int,
             progress: Callable[[int, int], None] | None) -> torch.Tensor:
    """Run ``embed`` over ``texts`` in chunks into one float32 ``(N, dim)`` tensor."""
    total = len(texts)
    out: torch.Tensor | None = None
    for start in range(0, total, chunk_size):
        chunk = texts[start : start + chunk_size]
        rows = np.asarray(embed(chunk), dtype=np.float32)
        width = dim if dim is not None else (out.shape[1] if out is not None else None)
        if rows.ndim != 2 or rows.shape[0] != len(chunk) or rows.shape[1] < 1 or \
                (width is not None and rows.shape[1] != width):
            expected = f"({len(chunk)}, {width if width is not None else 'dim'})"
            raise ValueError(f"embed gave shape {rows.shape} for texts {start}..{start + len(chunk) - 1}, "
                             f"expected {expected}")
        if not np.isfinite(rows).all():
            raise TinyplmError(f"the teacher's vectors of texts {start}..{start + len(chunk) - 1} are not all "
                               "finite (NaN or inf); check the teacher and its precision")
        if out is None:
            out = torch.empty((total, rows.shape[1]), dtype=torch.float32)
        out[start : start + len(chunk)] = torch.from_numpy(rows)
        if progress is not None:
            progress(start + len(chunk), total)
    if out is None:  # unreachable: the caller gives at least one text
        raise ValueError("no texts to embed")
    return out
