"""Probing tasks: the labelled items a linear probe is trained and scored on, and their encoding.

A :class:`ProbeTask` says which tinyplm task's files it reads and at which level it labels:

- ``word`` (CoNLL-2003 POS, chunk, NER): one item per word, labelled from one column of the file;
  its feature is the hidden state of the word's first word piece (words cut off by ``max_length``
  are dropped, in train and dev alike).
- ``sentence`` (SST-2): one item per sentence; its feature is the mean of its real tokens' states
  (or the ``[CLS]`` state).

:func:`load_probe_data` reads a random sample of each split (bounded, so a probe runs in minutes on
a CPU); :func:`encode_items` tokenises either level into an :class:`Encoded` plus, for words, each
kept word's first-piece index.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import torch

from tinyplm.errors import TinyplmError, did_you_mean
from tinyplm.tasks import get as get_task
from tinyplm.tasks.encoding import Encoded


class Level(StrEnum):
    """What one probed item is: a word or a sentence."""

    WORD = "word"
    SENTENCE = "sentence"


@dataclass(frozen=True)
class ProbeTask:
    """A probing task: the tinyplm ``task`` whose files it reads, the ``level`` it labels at, and
    for word-level tasks the :class:`~tinyplm.tasks.conll.Sentence` field holding the labels."""

    name: str
    level: Level
    task: str
    column: str | None
    description: str


#: The probing tasks, by name.
PROBE_TASKS: dict[str, ProbeTask] = {t.name: t for t in (
    ProbeTask("conll2003-pos", Level.WORD, "conll2003", "pos", "part of speech (Penn Treebank tags), per word"),
    ProbeTask("conll2003-chunk", Level.WORD, "conll2003", "chunk", "syntactic chunk (IOB tags), per word"),
    ProbeTask("conll2003-ner", Level.WORD, "conll2003", "tags", "named entity (IOB2 tags), per word"),
    ProbeTask("sst2", Level.SENTENCE, "sst2", None, "sentence sentiment (SST-2), per sentence"),
)}


def probe_task(name: str) -> ProbeTask:
    """The probing task ``name``; ``TinyplmError`` naming the nearest and the known ones otherwise."""
    key = name.strip().lower()
    if key not in PROBE_TASKS:
        hint = did_you_mean(key, PROBE_TASKS) or "."
        raise TinyplmError(f"unknown probing task '{name}'{hint} Probing tasks: {', '.join(PROBE_TASKS)}")
    return PROBE_TASKS[key]


@dataclass(frozen=True)
class ProbeSplit:
    """The items of one split. ``texts``: word tuples (word level) or ``(text, pair)`` pairs
    (sentence level); ``labels``: per-word label ids per sentence, or one label id per sentence."""

    texts: list
    labels: list

    def __len__(self) -> int:
        return len(self.texts)


@dataclass(frozen=True)
class ProbeData:
    """A probing task's sampled train and dev splits and its label names (ids index them)."""

    task: ProbeTask
    label_names: tuple[str, ...]
    train: ProbeSplit
    dev: ProbeSplit


def read_split(task: ProbeTask, split: str, data_dir: str | Path | None = None) -> tuple[list, list]:
    """Every item of ``split`` as (texts, label strings); see :class:`ProbeSplit` for the shapes.

    Raises ``DataError`` naming the file when it is missing or malformed."""
    examples = get_task(task.task, data_dir).read(split).examples
    if task.level == Level.WORD:
        return [s.tokens for s in examples], [getattr(s, task.column) for s in examples]
    return [(ex.text, ex.text_pair) for ex in examples], [ex.label for ex in examples]


def _sample(n: int, limit: int | None, seed: int) -> list[int]:
    """``limit`` random indices of ``range(n)`` in file order (all when ``limit`` is None or larger)."""
    if limit is None or limit >= n:
        return list(range(n))
    return sorted(random.Random(seed).sample(range(n), limit))


def load_probe_data(task: ProbeTask, data_dir: str | Path | None = None, train_limit: int | None = 2000,
                    dev_limit: int | None = 500, seed: int = 0) -> ProbeData:
    """A random sample (``seed``) of at most ``train_limit`` train and ``dev_limit`` dev sentences.

    Labels are ids into the sorted labels seen in either split (word level) or the task's label
    names (sentence level). Raises ``DataError`` naming a missing or malformed file."""
    train_texts, train_labels = read_split(task, "train", data_dir)
    dev_texts, dev_labels = read_split(task, "dev", data_dir)
    take_train = _sample(len(train_texts), train_limit, seed)
    take_dev = _sample(len(dev_texts), dev_limit, seed + 1)
    if task.level == Level.WORD:
        names = tuple(sorted({t for i in take_train for t in train_labels[i]} |
                             {t for i in take_dev for t in dev_labels[i]}))
        ids = {name: k for k, name in enumerate(names)}
        def convert(labels: list, take: list[int]) -> list:
            return [[ids[t] for t in labels[i]] for i in take]
    else:
        names = tuple(get_task(task.task, data_dir).labels)
        def convert(labels: list, take: list[int]) -> list:
            return [int(labels[i]) for i in take]
    train = ProbeSplit([train_texts[i] for i in take_train], convert(train_labels, take_train))
    dev = ProbeSplit([dev_texts[i] for i in take_dev], convert(dev_labels, take_dev))
    return ProbeData(task, names, train, dev)


@dataclass(frozen=True)
class EncodedItems:
    """Tokenised items: ``enc`` (ids, token types; ``labels`` unused zeros) and, for the word level,
    each sentence's first-piece index of every kept word (``first_pieces``; None for sentences)."""

    enc: Encoded
    first_pieces: list[list[int]] | None


def encode_items(level: Level, texts: list, tokenizer, max_length: int) -> EncodedItems:
    """Tokenise ``texts`` of ``level`` (truncating to ``max_length`` pieces).

    Raises ``ValueError`` for a tokenizer that is not fast (word alignment needs one)."""
    pad = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0)
    if level == Level.WORD:
        from tinyplm.tasks.tagging import encode_tagged

        tagged = encode_tagged(texts, None, tokenizer, {}, max_length)
        enc = Encoded(tagged.input_ids, tagged.token_type_ids, torch.zeros(len(texts), dtype=torch.long), pad)
        return EncodedItems(enc, tagged.first_pieces)
    firsts = [t for t, _ in texts]
    pairs = [p for _, p in texts]
    has_pairs = any(p is not None for p in pairs)
    out = tokenizer(firsts, [p or "" for p in pairs] if has_pairs else None, truncation=True,
                    max_length=max_length, return_token_type_ids=True)
    ids = [list(x) for x in out["input_ids"]]
    types = [list(x) for x in out["token_type_ids"]]
    return EncodedItems(Encoded(ids, types, torch.zeros(len(ids), dtype=torch.long), pad), None)
