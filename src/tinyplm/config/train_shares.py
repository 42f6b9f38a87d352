"""``task.train_shares`` checked: the share of a ``max_train_examples`` sample each named source of
the embedding task's ``train_texts`` takes (tinyplm.tasks.embedding_task draws the sample); and
``task.pair_questions``, which pairs the sample's questions with their passages."""

from __future__ import annotations


def check_train_shares(shares: dict[str, float] | None, train_texts: list[str] | None,
                       max_train_examples: int | None, pair_questions: bool = False) -> None:
    """Raise ``ValueError`` naming ``task.train_shares`` unless every share names a source of
    ``train_texts`` (default ``[stsb]``), lies in (0, 1), leaves a source unnamed to fill the rest,
    and all add up to under 1 of a ``max_train_examples`` sample; naming ``task.pair_questions``
    when it is set and ``train_texts`` has no ``questions`` to pair."""
    if pair_questions and "questions" not in (train_texts or []):
        raise ValueError(f"task.pair_questions trains questions beside their passages, but task.train_texts "
                         f"{train_texts or ['stsb']} has no 'questions' (the embedding task's source of them)")
    if not shares:
        return
    named = train_texts or ["stsb"]
    unknown = [k for k in shares if k not in named]
    if unknown:
        raise ValueError(f"task.train_shares names {unknown}, which task.train_texts {named} does not hold")
    bad = {k: v for k, v in shares.items() if not 0 < v < 1}
    if bad:
        raise ValueError(f"task.train_shares {bad}: each share is a fraction of the sample, above 0 and below 1")
    if set(named) <= set(shares):
        raise ValueError(f"task.train_shares names every source of task.train_texts {named}: leave one out "
                         "to fill the rest of the sample")
    if sum(shares.values()) >= 1:
        raise ValueError(f"task.train_shares add up to {sum(shares.values()):g}: they must leave room (under 1) "
                         "for the sources they do not name")
    if not max_train_examples:
        raise ValueError("task.train_shares are shares of a sample of task.max_train_examples texts: give it")
