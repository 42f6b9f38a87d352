"""Plain-language notes on compression stages: what each step bought against the stage it came from.

One sentence per compressed stage (size, speed and metric relative to its parent), plus what a
reader would otherwise get wrong: unstructured sparsity saved dense is not smaller or faster on a
CPU, 4-bit weights save bytes but cost time, and int8's speed is whatever was measured here. A
``runtime: fastest`` stage's note says which candidate it kept and why it refused the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tinyplm.report.records import RunRecord, StageRecord
from tinyplm.report.tables import primary, ratio

#: Below this throughput ratio a step is reported as "not faster".
FASTER = 1.05


#: How a runtime choice's ``control`` names where its examples came from.
CONTROL = {"holdout": "held-out examples", "longest_training": "longest training examples"}


@dataclass(frozen=True)
class RuntimeChoice:
    """What a ``runtime: fastest`` stage recorded of its choice (its ``chosen_by`` detail): the
    candidate kept, the ``examples`` judged on and where they came from, whether the kept one was
    within the limits, and each refused candidate with the reason."""

    chosen: str
    examples: int | None = None
    control: str | None = None
    within_limits: bool = True
    refused: dict[str, str] | None = None

    @classmethod
    def from_details(cls, details: dict[str, Any]) -> RuntimeChoice | None:
        """The choice in a compress step's ``details``, or None where there is none (records made
        before refusals were recorded read as within the limits, refusing nothing)."""
        by = details.get("chosen_by")
        if not isinstance(by, dict) or "chosen" not in by:
            return None
        measured = by.get("candidates") or {}
        refused = {k: str(v["refused"]) for k, v in measured.items() if isinstance(v, dict) and v.get("refused")}
        return cls(str(by["chosen"]), by.get("examples"), by.get("control"), bool(by.get("within_limits", True)),
                   refused or None)

    def sentence(self) -> str:
        """The choice in words, refusals and their reasons included."""
        on = f" on {self.examples} {CONTROL.get(self.control or '', 'examples')}" if self.examples else ""
        text = (f"Kept `{self.chosen}`{on}." if self.within_limits else
                f"No candidate was shown within the limits{on}; kept `{self.chosen}`, the closest to its parent.")
        refused = [f"`{k}`: {why}" for k, why in (self.refused or {}).items()]
        return text + (" Refused " + "; ".join(refused) + "." if refused else "")


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
    if made is not None and (choice := RuntimeChoice.from_details(made.details)) is not None:
        parts.append(choice.sentence())
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


def cut_notes(record: RunRecord) -> list[str]:
    """One sentence per split of which ``task.max_length`` cut examples (``info.cut``): every stage
    trained and was measured on their first pieces only."""
    return [f"`task.max_length`: {c.sentence()}; the transformer stages read only their first {c.width} pieces."
            for c in record.info.cut or []]
