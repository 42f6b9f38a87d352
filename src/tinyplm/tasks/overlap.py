"""How much of a task's evaluation splits its training examples hold.

A dev file that is the training file (a custom task given one file twice, or a dev file cut from a
copy of train) makes every figure of the run a measure of what the models were trained on: the
teacher's fine-tune reads near 100% and a student keeps it, and the report's retention says
nothing of texts the models have not seen. The run still runs (a smoke test may want just that),
but ``tinyplm validate`` prints, and the run logs, a note naming the split, the share and the two
files, before any work.
"""

from __future__ import annotations

from tinyplm.tasks.base import TaskData

#: The share of an evaluation split's examples found among the training examples (the same input:
#: :data:`INPUT_FIELDS`, as written) at or above which the run says so. Real dev sets share a few
#: examples with train (repeated sentences); half is far above that and far below a copy.
OVERLAP_NOTE_SHARE = 0.5
#: The fields that make two examples one input, by the kind of example a split holds: a text and its
#: pair (``base.Example``), a question on a context (``squad.QAExample``), a sentence's tokens (CoNLL).
INPUT_FIELDS = (("text", "text_pair"), ("question", "context"), ("tokens",))


def _input(example: object) -> tuple:
    fields = next((f for f in INPUT_FIELDS if all(hasattr(example, k) for k in f)), None)
    return tuple(getattr(example, k) for k in fields) if fields else (repr(example),)


def eval_overlap_note(data: TaskData, max_train_examples: int | None = None) -> str | None:
    """A line naming each evaluation split of ``data`` at least :data:`OVERLAP_NOTE_SHARE` of whose
    examples are among the training examples the run trains on (the first ``max_train_examples``);
    None when no split is."""
    train = data.train.examples[:max_train_examples]
    if not train:
        return None
    seen = {_input(e) for e in train}
    said = []
    for name, split in data.evals.items():
        total = len(split.examples)
        shared = sum(_input(e) in seen for e in split.examples)
        if total and shared >= OVERLAP_NOTE_SHARE * total:
            said.append(f"{shared} of the {total} examples of split '{name}' ({split.source})")
    if not said:
        return None
    return (f"{'; '.join(said)} are training examples too ({data.train.source}): the run's figures on them "
            "measure what the models were trained on, not how they do on texts they have not seen; give an "
            "evaluation file of other examples (a custom task's task.dev_file) to measure that")
