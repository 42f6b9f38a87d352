"""Read a safetensors file's header and check the file against it, without loading any tensor.

``models.loading`` calls it before a checkpoint is loaded, so a truncated or damaged weight file is
reported naming the file and what is wrong with it, not as an error from deep inside the loader.
"""

from __future__ import annotations

import json
from pathlib import Path

from tinyplm.errors import ModelError
from tinyplm.tasks.json_layout import shown

#: The largest safetensors header the format allows (100 MB); a bigger length means a damaged file.
MAX_HEADER = 100_000_000


def safetensors_shapes(file: Path) -> dict[str, tuple[int, ...]]:
    """Tensor name -> shape from a safetensors header, after checking the file holds exactly the
    bytes the header describes. Raises ``ModelError`` naming the file when it is truncated, longer
    than its header says, or its header is not the JSON that safetensors writes."""
    size = file.stat().st_size
    with file.open("rb") as fh:
        length = int.from_bytes(fh.read(8), "little") if size >= 8 else 0
        if size < 8 or length > min(size - 8, MAX_HEADER):
            raise ModelError(f"{file}: truncated or not a safetensors file ({size} bytes; its header length field "
                             f"says {length}); copy or save the model again")
        raw = fh.read(length)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ModelError(f"{file}: damaged safetensors header (not UTF-8 JSON); copy or save the model again") from None
    shapes, end = _header_tensors(header, file)
    expected = 8 + length + end
    if size != expected:
        what = "truncated" if size < expected else "longer than its header says"
        raise ModelError(f"{file}: {what}: {size} bytes where its header describes {expected}; "
                         "copy or save the model again")
    return shapes


def _header_tensors(header: object, file: Path) -> tuple[dict[str, tuple[int, ...]], int]:
    """(name -> shape, end of the data) from a parsed safetensors header; raises ``ModelError``."""
    if not isinstance(header, dict):
        raise ModelError(f"{file}: damaged safetensors header (expected an object, got {shown(header)})")
    shapes, end = {}, 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        offsets = info.get("data_offsets") if isinstance(info, dict) else None
        shape = info.get("shape") if isinstance(info, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int and o >= 0 for o in offsets)
                and isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape)):
            raise ModelError(f"{file}: damaged safetensors header (tensor {name[:80]!r} has no valid "
                             "shape and data_offsets)")
        shapes[name] = tuple(shape)
        end = max(end, offsets[1])
    return shapes, end
