"""A recipe that asks for bf16 training (``precision: bf16``) on a CPU without native bf16 is said
before the run: autocast then runs bf16 in emulation, usually slower than fp32 there, and every
timing the run reports is of that. No error: the user asked for it (to see bf16's accuracy, or to
match a machine that has it), but ``precision: auto`` would have chosen fp32 here."""

from __future__ import annotations

from tinyplm.config.finetune import trained_sections
from tinyplm.config.schema import RunConfig
from tinyplm.models.infer import cpu_supports_bf16

#: How many places a note lists before "...".
SHOWN = 4


def precision_notes(cfg: RunConfig) -> tuple[str, ...]:
    """One note naming the training sections of ``cfg`` with ``precision: bf16`` when this CPU has
    no native bf16 (:func:`~tinyplm.models.infer.cpu_supports_bf16`); none otherwise."""
    places = [where for where, spec in trained_sections(cfg) if spec.precision == "bf16"]
    if not places or cpu_supports_bf16():
        return ()
    shown = ", ".join(places[:SHOWN]) + (", ..." if len(places) > SHOWN else "")
    return (f"precision: bf16 in {shown}: this CPU has no native bf16 (neither AVX512-BF16 nor AMX), so autocast "
            "runs bf16 in emulation, usually slower than fp32 here, and the run's training times are of that; "
            "precision: auto trains in fp32 on this CPU",)
