"""Plain-language notes on compression stages: what each step bought against the stage it came from.

One sentence per compressed stage (size, speed and metric relative to its parent), plus what a
reader would otherwise get wrong: unstructured sparsity saved dense is not smaller or faster on a
CPU, 4-bit weights save bytes but cost time, and int8's speed is whatever was measured here.
"""

from __future__ import annotations

from tinyplm.report.records import RunRecord, StageRecord
from tinyplm.report.tables import primary, ratio

#: Below this throughput ratio a step is reported as "not faster".
FASTER = 1.05


def _note(record: RunRecord, stage: StageRecord, parent: StageRecord) -> str:
    kind = stage.compress_step
    speed = ratio(stage.throughput_sent_per_s, parent.throughput_sent_per_s)
    size = ratio(parent.disk_bytes, stage.disk_bytes)
    value, before = primary(record, stage), primary(record, parent)
    parts = [f"`{stage.name}` ({kind}, from `{parent.name}`):"]
    if size:
        parts.append(f"{stage.disk_bytes / 1e6:.1f} MB on disk ({size:.2f}× smaller),")
    if speed:
        parts.append(f"throughput {speed:.2f}× the parent's{' (not faster)' if speed < FASTER else ''},")
    if value is not None and before is not None:
        parts.append(f"{record.metric} {value:.4f} ({value - before:+.4f}).")
    made = stage.info.compress
    if made is not None and made.sparsity is not None:
        csr = f"; in CSR form {made.sparse_bytes / 1e6:.1f} MB" if made.sparse_bytes else ""
        parts.append(f"{made.sparsity:.0%} of the encoder's Linear weights are zero, but the model is stored "
                     f"dense{csr}, and dense CPU kernels do not skip zeros"
                     + (": it is not faster." if not speed or speed < FASTER else "."))
    if kind == "int4_weight":
        parts.append("4-bit weights are dequantized at every call: they save bytes, not time.")
    return " ".join(parts)


def compression_notes(record: RunRecord) -> list[str]:
    """One note per stage made by a compress step whose parent stage is in the record."""
    notes = []
    for stage in record.stages:
        parent = record.stage(stage.parent) if stage.compress_step and stage.parent else None
        if parent is not None:
            notes.append(_note(record, stage, parent))
    return notes
