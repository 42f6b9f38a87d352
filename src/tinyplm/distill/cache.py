"""Teacher logits computed once and cached on disk.

The cache key covers the teacher (hash of its weights and config), the encoded task data (hash of
the token ids and labels, so the data file, the tokenizer and ``max_length`` are all in it) and
the precision; any change makes a new entry. Entries are safetensors files written atomically.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from tinyplm.files import atomic_path
from tinyplm.models.infer import predict_logits
from tinyplm.tasks.encoding import Encoded


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


def cached_teacher_logits(
    teacher: torch.nn.Module,
    teacher_fingerprint: str,
    data: Encoded,
    cache_dir: Path,
    batch_size: int = 128,
    bf16: bool = False,
) -> tuple[torch.Tensor, bool]:
    """Return (logits ``(N, C)``, hit) — loaded from the cache or computed and stored."""
    key = cache_key(teacher_fingerprint, data, bf16)
    path = Path(cache_dir) / "logits" / f"{key}.safetensors"
    if path.is_file():
        logits = load_file(str(path))["logits"]
        if logits.shape[0] == len(data):
            return logits, True
    logits = predict_logits(teacher, data, batch_size=batch_size, bf16=bf16)
    with atomic_path(path) as tmp:
        save_file({"logits": logits.contiguous()}, str(tmp), metadata={"teacher": teacher_fingerprint})
    return logits, False
