"""The training sample of the embedding task (:mod:`tinyplm.tasks.embedding_task`): the share of
it each source takes (``task.train_shares``, :func:`mixed`) and questions beside the passages they
were made from (``task.pair_questions``, :func:`paired`)."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Mix:
    """A training sample mixed by ``task.train_shares``: its texts, in a seeded order, and what it holds."""

    texts: list[str]
    said: str


def mixed(order: list[str], kept: dict[str, list[str]], shares: dict[str, float], size: int,
           rng: random.Random) -> Mix:
    """``size`` texts of ``order`` (all sources, shuffled): each source ``shares`` names gives its share
    of them (rounded down; all it has when that is fewer), the others fill the rest in proportion to
    their size."""
    owner = {t: entry for entry, texts in kept.items() for t in texts}
    quota = {entry: int(share * size) for entry, share in shares.items()}  # floors: together under size
    taken: dict[str, list[str]] = {entry: [] for entry in shares}
    for t in order:
        entry = owner[t]
        if entry in taken and len(taken[entry]) < quota[entry]:
            taken[entry].append(t)
    rest = [t for t in order if owner[t] not in taken][: max(0, size - sum(map(len, taken.values())))]
    texts = [t for group in taken.values() for t in group] + rest
    rng.shuffle(texts)
    said = ", ".join(f"{entry} {len(group)} of {len(kept[entry])} ({shares[entry]:.0%} asked)"
                     for entry, group in taken.items())
    return Mix(texts, f"task.train_shares: {said}, the other sources {len(rest)}")


@dataclass(frozen=True)
class Paired:
    """A training sample with each question beside its passage (``task.pair_questions``): its texts,
    in a seeded order of units, each text's unit id (``groups``) and what it holds (``said``)."""

    texts: list[str]
    groups: tuple[int, ...]
    said: str


def paired(texts: list[str], passage_of: dict[str, str], excluded: set[str], rng: random.Random) -> Paired:
    """``texts`` (a sample in a seeded order) as units: each question of ``passage_of`` with its
    passage (one unit per passage, with every sampled question made from it; a question that is its
    whole paragraph stays alone), the other texts one each. A passage not in ``texts`` takes the
    place of the last text that is not a question, so the sample keeps its size; an ``excluded``
    passage (evaluated or held out) is never added, its questions stay alone. Units come in a
    seeded order (``rng``); each text is in the sample once."""
    units: dict[str, list[str]] = {}
    for text in texts:
        passage = passage_of.get(text)
        if passage is not None and passage != text and passage not in excluded:
            units.setdefault(passage, [passage]).append(text)
    in_units = {t for unit in units.values() for t in unit}
    sampled = set(texts)
    added = sum(p not in sampled for p in units)
    others = [t for t in texts if t not in in_units and t not in passage_of]
    dropped = set(others[len(others) - min(added, len(others)):])  # a question stays, passage or not
    order = [*units.values(), *([t] for t in texts if t not in in_units and t not in dropped)]
    rng.shuffle(order)
    flat: dict[str, int] = {}
    for g, unit in enumerate(order):
        for text in unit:
            flat.setdefault(text, g)
    questions = len(in_units) - len(units)
    said = (f"task.pair_questions: {questions} questions trained beside the {len(units)} corpus paragraphs they were "
            f"made from ({added} of them added to the sample in place of other texts)")
    return Paired(list(flat), tuple(flat.values()), said)
