"""Training examples held out of training, to choose on instead of the split that is reported.

A run that keeps each stage's best checkpoint by its dev score, and picks its final model by the
share of the teacher's dev score it keeps, reports a dev score it was chosen on: a few dev examples
either way decide the headline. With ``task.holdout: N`` the run draws N training examples (a
seeded random draw, so a resumed or repeated run draws the same ones), never trains on them, and
makes every choice on them; the eval splits (dev) are then only measured and reported.

The held-out examples become one more eval split, :data:`HOLDOUT`, whose metric keys end in
``_holdout`` (``accuracy_holdout``); everything that measures eval splits measures it too.
"""

from __future__ import annotations

import random
from dataclasses import replace

from tinyplm.errors import RecipeError
from tinyplm.tasks.base import Example, TaskData
from tinyplm.tasks.heads import Head

#: The name of the held-out split among a task's eval splits, and its metric keys' suffix.
HOLDOUT = "holdout"
HOLDOUT_SUFFIX = "_holdout"
#: The embedding task's held-out corpus paragraphs, a retrieval set (``task.holdout_passages``).
HOLDOUT_PASSAGES = "holdout_passages"


def words(example: Example) -> int:
    """Whitespace-separated words of an example, its second text included."""
    return len(example.text.split()) + (len(example.text_pair.split()) if example.text_pair else 0)


def _runs(text: str) -> set[tuple[str, ...]]:
    """Every contiguous run of ``text``'s lower-cased whitespace-separated words."""
    w = tuple(text.lower().split())
    return {w[i:j] for i in range(len(w)) for j in range(i + 1, len(w) + 1)}


def parts_of(held: list[Example], train: list[Example]) -> set[int]:
    """Indices of the ``train`` examples that are part of a ``held`` example: their words (lower-
    cased, whitespace-separated) a contiguous run of its words, and for text pairs the second text a
    run of its second text too. SST-2's training examples are the phrases of its sentences' parse
    trees, so a held-out sentence's phrases are training examples of their own."""
    firsts: set[tuple[str, ...]] = set()
    pairs: set[tuple[tuple[str, ...], tuple[str, ...]]] = set()
    for ex in held:
        if ex.text_pair is None:
            firsts |= _runs(ex.text)
        else:
            pairs |= {(a, b) for a in _runs(ex.text) for b in _runs(ex.text_pair)}
    return {i for i, ex in enumerate(train)
            if (tuple(ex.text.lower().split()) in firsts if ex.text_pair is None
                else (tuple(ex.text.lower().split()), tuple(ex.text_pair.lower().split())) in pairs)}


def holdout_size(value: int | float, total: int) -> int:
    """How many of ``total`` training examples ``task.holdout: value`` holds out: ``value`` itself
    when it is a count (an int), else that share of ``total`` (rounded, at least 1)."""
    return value if isinstance(value, int) else max(1, round(value * total))


def hold_out(data: TaskData, n: int | float, seed: int = 0, min_words: int = 0,
             drop_parts: bool = False, context: bool = False) -> TaskData:
    """``data`` with ``n`` training examples (a share of them where ``n`` is a float, see
    :func:`holdout_size`), drawn at random with ``seed`` among those of at
    least ``min_words`` words, moved from the training split into the eval split :data:`HOLDOUT`
    (added last, so the first eval split is still the one that is timed and reported first). The
    training examples keep their order.

    ``min_words`` makes the held-out examples look like the split that is reported where the
    training split does not: SST-2's training set is mostly short phrases (median 7 words), its
    dev set whole sentences (median 19), so a choice made on random training phrases can favour
    a checkpoint that reads phrases well and sentences less so. With ``min_words: 0`` the draw is
    the one made before the option existed.

    ``drop_parts`` also drops from training every training example that is part of a held-out one
    (:func:`parts_of`): a held-out SST-2 sentence whose phrases are trained on is half seen, and
    reads easier than a dev sentence, which no phrase of the training set comes from. The draw is
    the same with or without it.

    Where the head table groups examples (``HeadRow.holdout_group``, SQuAD's ``title``), whole groups
    are drawn until they hold ``n`` (:func:`whole_groups`): no held-out question's paragraph is
    trained on through another question. So are the groups the examples name (``Example.group``: a
    Goodreads sentence's book), so that no held-out sentence's book is trained on. With ``context``
    (each example's text pair is its neighbours, ``context_sentences``/``context_after``) examples
    that name no group are refused: a held-out sentence would be trained on in its neighbours' pairs.

    Raises ``RecipeError`` naming the key: ``task.holdout`` for a head that cannot hold out (token
    tags) or more than half held out; ``holdout_min_words`` or ``holdout_drop_parts`` where groups
    are drawn, or (the first) when fewer than ``n`` examples are that long."""
    row = Head(data.head).row
    if not row.holdout:
        raise RecipeError(f"task.holdout: held-out examples are for sentence tasks and SQuAD; task '{data.task}' "
                          f"has a {data.head} head")
    total = len(data.train)
    n = holdout_size(n, total)
    if n * 2 > total:
        raise RecipeError(f"task.holdout: {n} would hold out more than half of {data.task}'s {total} training "
                          f"examples ({data.train.source}); give at most {total // 2}")
    field = _group_field(data, context, min_words, drop_parts)
    if field:
        return _held_in_groups(data, n, seed, field)
    pool: range | list[int] = range(total)
    if min_words:
        pool = [i for i, ex in enumerate(data.train.examples) if words(ex) >= min_words]
        if len(pool) < n:
            raise RecipeError(f"task.holdout_min_words: only {len(pool)} of {data.task}'s training examples "
                              f"({data.train.source}) have {min_words} words or more, fewer than task.holdout "
                              f"{n}; hold out fewer or lower the minimum")
    held = set(random.Random(seed).sample(pool, n))
    out = [ex for i, ex in enumerate(data.train.examples) if i in held]
    rest = [ex for i, ex in enumerate(data.train.examples) if i not in held]
    parts = parts_of(out, rest) if drop_parts else set()
    kept = [ex for i, ex in enumerate(rest) if i not in parts]
    if not kept:
        raise RecipeError(f"task.holdout_drop_parts: every training example of {data.task} ({data.train.source}) "
                          f"is part of one of the {n} held out; hold out fewer")
    among = f" among those of {min_words}+ words" if min_words else ""
    dropped = f" ({len(parts)} training examples that are parts of them not trained on either)" if drop_parts else ""
    return _with_split(data, out, kept, f"{n} training examples drawn with seed {seed}{among}, never trained "
                       f"on{dropped}")


def _group_field(data: TaskData, context: bool, min_words: int, drop_parts: bool) -> str | None:
    """The example field whose equal values are held out together (the head table's, else
    ``group`` where every training example names one), or None; raises ``RecipeError`` for options
    that draw single sentences there, and for a task read with context whose examples name no group."""
    row = Head(data.head).row
    examples = data.train.examples
    named = "group" if examples and all(getattr(ex, "group", None) is not None for ex in examples) else None
    if context and not (row.holdout_group or named):
        raise RecipeError(f"task.holdout: task '{data.task}' reads each sentence with its neighbours as its "
                          "second text (task.context_sentences, task.context_after), so a held-out sentence "
                          "would be trained on in its neighbours' pairs, and its file names no page to hold out "
                          "whole; drop task.holdout (dev chooses) or the context")
    field = row.holdout_group or named
    if field and (min_words or drop_parts):
        key = "task.holdout_min_words" if min_words else "task.holdout_drop_parts"
        raise RecipeError(f"{key} is for sentence tasks; task '{data.task}' holds out whole groups of "
                          f"examples of the same {row.holdout_group or 'book'}")
    return field


def whole_groups(keys: list, n: int, seed: int) -> set[int]:
    """Indices of whole groups of equal ``keys``, the groups in a seeded random order (of their first
    appearance, shuffled with ``seed``), taken until they hold at least ``n`` indices."""
    groups: dict = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, []).append(i)
    order = list(groups)
    random.Random(seed).shuffle(order)
    held: set[int] = set()
    for key in order:
        if len(held) >= n:
            break
        held.update(groups[key])
    return held


def _held_in_groups(data: TaskData, n: int, seed: int, field: str) -> TaskData:
    examples = data.train.examples
    keys = [getattr(ex, field) for ex in examples]
    held = whole_groups(keys, n, seed)
    groups = len({keys[i] for i in held})
    if len(held) * 2 > len(examples):
        raise RecipeError(f"task.holdout: {n} examples take {groups} whole {field}s of {data.task} holding "
                          f"{len(held)} of its {len(examples)} training examples ({data.train.source}), more "
                          f"than half; give fewer (the groups are {len(set(keys))})")
    out = [ex for i, ex in enumerate(examples) if i in held]
    kept = [ex for i, ex in enumerate(examples) if i not in held]
    return _with_split(data, out, kept, f"{len(out)} training examples, those of {groups} whole {field}s drawn "
                       f"with seed {seed} (at least {n}), never trained on")


def _with_split(data: TaskData, out: list, kept: list, what: str) -> TaskData:
    """``data`` training on ``kept`` with ``out`` as the :data:`HOLDOUT` split, ``what`` in its info."""
    train = replace(data.train, examples=kept)
    split = replace(data.train, name=HOLDOUT, examples=out)
    info = {**data.info, "holdout": f"{what}: every kept checkpoint and the final model are chosen on them"}
    return replace(data, train=train, evals={**data.evals, HOLDOUT: split},
                   metric_suffix={**data.metric_suffix, HOLDOUT: HOLDOUT_SUFFIX}, info=info)


def selection_split(data: TaskData) -> str:
    """The eval split that chooses checkpoints and the final model: :data:`HOLDOUT` when the task
    holds examples out, else the first eval split (dev), as before held-out examples existed."""
    return HOLDOUT if HOLDOUT in data.evals else next(iter(data.evals))


def selection_metric(data: TaskData) -> str:
    """The metric key the choices read: the primary metric on :func:`selection_split`
    (``accuracy_holdout``, or ``accuracy`` on dev)."""
    return data.primary_metric + data.metric_suffix.get(selection_split(data), "")


def selection_evals(data: TaskData, evals: dict) -> dict:
    """The encoded eval splits a training stage evaluates to keep its best checkpoint: only the
    held-out one when the task has it (dev is not looked at during training), else all (as
    before)."""
    return {HOLDOUT: evals[HOLDOUT]} if HOLDOUT in evals else evals
