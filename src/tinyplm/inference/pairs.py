"""Whether a sequence model reads pairs of texts, from the task it was trained for, and why an
example does not fit it.

A model fine-tuned on a GLUE pair task (MRPC, STS-B, QQP, MNLI, QNLI, RTE, WNLI), or on a custom
task with a ``text_pair_column``, saw pairs only: a text alone is an input of a kind it never
saw. One fine-tuned on a single-text task (SST-2, CoLA, a custom task without a pair column) never
saw a second text: a pair is read as one long text of another kind. Either way its answer would
look like any other and mean nothing, so ``predict`` refuses the row and ``serve`` the request,
naming the field. A model whose task is not recorded (a bare checkpoint), or whose task takes an
optional second text (the spoiler tasks' context), takes both.
"""

from __future__ import annotations

from tinyplm.tasks import canonical
from tinyplm.tasks.glue import GLUE_SPECS

#: The name a recipe gives its own CSV/JSONL task (its pair column is the recipe's ``text_pair_column``).
CUSTOM_TASK = "custom"


def task_pairs(name: str | None, custom_pair_column: bool | None = None, context: bool = False) -> bool | None:
    """True when every example of the task ``name`` is a pair of texts, False when it is one text,
    None when the task is unknown or its second text is optional. ``custom_pair_column``: whether a
    custom task's recipe names a ``text_pair_column`` (None: not recorded). A spoiler task's second
    text is the context its model was trained with (``context``: the sentences around, absent at
    the ends of a file): one text without it."""
    from tinyplm.tasks.spoilers import SPOILER_TASKS

    if name == CUSTOM_TASK:
        return custom_pair_column
    if canonical(name or "") in SPOILER_TASKS:
        return None if context else False
    spec = GLUE_SPECS.get(canonical(name or "") or "")
    return None if spec is None else spec.pair is not None


def trained_on(task: str | None, pairs: bool) -> str:
    """What a model of ``task`` was trained on, in words."""
    kind = "pairs of texts" if pairs else "one text per example"
    return f"the model was trained for {task or 'its task'} on {kind}"


def pair_mismatch(task: str | None, pairs: bool | None, paired: bool) -> str | None:
    """Why an example with (``paired``) or without a second text does not fit a model trained for
    ``task``, whose examples are pairs (``pairs``; None: either), or None when it fits."""
    if pairs is None or paired == pairs:
        return None
    if pairs:
        return f"{trained_on(task, True)}; give each example its second text"
    return f"{trained_on(task, False)}; leave the second text out"
