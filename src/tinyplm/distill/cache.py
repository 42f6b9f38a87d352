"""Teacher logits computed once and cached on disk.

The cache key covers the teacher (hash of its weights and config), the encoded task data (hash of
the token ids and labels, so the data file, the tokenizer and ``max_length`` are all in it) and
the precision; any change makes a new entry. Entries are safetensors files written atomically.

Within one run, :class:`KnownRows` remembers the logits of every example already computed, so a
set that repeats examples of another (the TinyBERT-augmented set keeps the training examples it
did not augment, and the originals of those it did) runs the teacher only on its new examples.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from tinyplm.files import atomic_path
from tinyplm.models.infer import predict_logits
from tinyplm.tasks.encoding import Encoded
from tinyplm.tasks.heads import Head


def default_cache_dir() -> Path:
    """TINYPLM_CACHE, else ~/.cache/tinyplm."""
    env = os.environ.get("TINYPLM_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "tinyplm"


def cache_key(teacher_fingerprint: str, data: Encoded, bf16: bool) -> str:
    """Key of one cache entry; ``data.fingerprint()`` already reflects data, tokenizer, max length."""
    h = hashlib.sha256()
    for part in (teacher_fingerprint, data.fingerprint(), "bf16" if bf16 else "fp32"):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


class KnownRows:
    """Teacher logits of single examples, keyed by their token ids and token types (what the
    teacher reads; labels do not change logits). One instance serves one teacher at one precision:
    the caller keeps one per run, as :class:`tinyplm.run.inputs.Teachers` does.

    Only sequence-level logits ``(N, C)`` are remembered: span and token heads' rows are padded to
    their set's longest example and do not carry over between sets."""

    def __init__(self) -> None:
        self._rows: dict[bytes, torch.Tensor] = {}

    def __len__(self) -> int:
        return len(self._rows)

    @staticmethod
    def _keys(data: Encoded) -> list[bytes]:
        keys = []
        for ids, types in zip(data.input_ids, data.token_type_ids, strict=True):
            h = hashlib.blake2b(digest_size=16)
            h.update(np.asarray(ids, dtype=np.int32).tobytes())
            h.update(b"|")
            h.update(np.asarray(types, dtype=np.int8).tobytes())
            keys.append(h.digest())
        return keys

    def add(self, data: Encoded, logits: torch.Tensor) -> None:
        """Remember row i of ``logits`` as the logits of example i of ``data``."""
        if logits.dim() == 2 and Head(data.head).row.subset:
            self._rows.update(zip(self._keys(data), logits, strict=True))

    def predict(self, teacher: torch.nn.Module, data: Encoded, batch_size: int, bf16: bool) -> torch.Tensor:
        """Logits of every example of ``data``: remembered rows as they are, the teacher run on the
        rest (length-sorted batches, as :func:`predict_logits`), all of them remembered after."""
        if not Head(data.head).row.subset:  # rows tied by per-window metadata: run them all
            return predict_logits(teacher, data, batch_size=batch_size, bf16=bf16)
        keys = self._keys(data)
        todo = [i for i, k in enumerate(keys) if k not in self._rows]
        if todo:
            fresh = predict_logits(teacher, data.subset(todo), batch_size=batch_size, bf16=bf16)
            self._rows.update(zip((keys[i] for i in todo), fresh, strict=True))
        return torch.stack([self._rows[k] for k in keys]) if keys else torch.empty((0, 0))


def cached_teacher_logits(
    teacher: torch.nn.Module,
    teacher_fingerprint: str,
    data: Encoded,
    cache_dir: Path,
    batch_size: int = 128,
    bf16: bool = False,
    known: KnownRows | None = None,
) -> tuple[torch.Tensor, bool]:
    """Return (logits ``(N, C)``, hit) — loaded from the cache or computed and stored. With
    ``known`` (this teacher's rows computed earlier in the run) only the examples it lacks are run
    through the teacher, and every row of the result is added to it."""
    known = KnownRows() if known is None else known
    key = cache_key(teacher_fingerprint, data, bf16)
    path = Path(cache_dir) / "logits" / f"{key}.safetensors"
    if path.is_file():
        logits = load_file(str(path))["logits"]
        if logits.shape[0] == len(data):
            known.add(data, logits)
            return logits, True
    logits = known.predict(teacher, data, batch_size, bf16)
    with atomic_path(path) as tmp:
        save_file({"logits": logits.contiguous()}, str(tmp), metadata={"teacher": teacher_fingerprint})
    return logits, False
