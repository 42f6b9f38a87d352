"""The checks of a run's preflight on its compress steps against the task's head: a step that has
no rule for the head is refused before the teacher trains, not when the step is reached. Run by
:func:`tinyplm.run.preflight.preflight`, before anything is written."""

from __future__ import annotations

from tinyplm.config.compress import step_name
from tinyplm.config.schema import RunConfig, student_name
from tinyplm.errors import RecipeError
from tinyplm.tasks.heads import Head


def check_compress_heads(cfg: RunConfig, head: Head) -> None:
    """Refuse, naming the student and the step, accuracy-controlled int8 (``openvino_int8`` with
    ``max_drop``) for a head whose held-out score it has no rule for (``compress.openvino.CONTROLS``:
    a tagger's or a reader's examples are not scored one by one)."""
    from tinyplm.compress.openvino import CONTROLS

    if head in CONTROLS:
        return
    for spec in cfg.students:
        for step in spec.compress:
            if step.kind == "openvino_int8" and getattr(step, "max_drop", None) is not None:
                have = ", ".join(h.value for h in CONTROLS)
                raise RecipeError(f"student {student_name(spec)}, compress step {step_name(step)}: max_drop "
                                  f"(accuracy-controlled int8) has no rule for the {head.value} head of task "
                                  f"'{cfg.task.name}' (it has one for: {have}); drop max_drop, or use "
                                  "{kind: runtime, runtime: fastest}, which judges a tagger word by word and a "
                                  "reader window by window")
