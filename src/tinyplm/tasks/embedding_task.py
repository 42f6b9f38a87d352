"""The ``embedding`` task of a recipe: texts to distil a sentence encoder on, sets to judge it on.

An embedding student learns the teacher's vectors of unlabelled texts, so the task's training split
is texts only (:class:`~tinyplm.tasks.base.Example` with no label), gathered from
``task.train_texts``:

- ``stsb``: the distinct sentences of GLUE STS-B's ``train.tsv`` (its scores are not used);
- ``corpus``: the paragraphs of the run's ``corpus`` section, cut into sentences
  (:func:`sentences_of`), read by the run and handed in (``corpus_texts``);
- ``paragraphs``: the same paragraphs whole, each of at least :data:`MIN_PARAGRAPH_WORDS` words:
  long texts, for students that must also embed passages (retrieval reads paragraphs, and a
  student shown only sentences drifts on them); they are cut at ``task.max_length`` pieces;
- ``questions``: questions made from the corpus sentences (:mod:`tinyplm.tasks.questions`: those
  the text asks, and statements about a name asked as who/what questions), for students that
  will embed search questions: a student never shown a question drifts on them;
- a path: your own texts, one per line of a text file, or every ``*.txt`` file of a folder.

Its eval splits (``task.eval_sets``, :func:`eval_set`) are similarity and retrieval sets made eval
splits by :func:`~tinyplm.tasks.retrieval.embedding_split`: ``stsb`` (STS-B dev), ``squad`` (SQuAD
v1.1 dev, questions ranking paragraphs), ``pairs:FILE`` (your scored pairs) and ``beir:FOLDER``
(a BEIR folder, its ``test`` qrels; ``beir:FOLDER:dev`` another split). The first set of each kind
has plain metric keys (``spearman``, ``ndcg_at_10``); later ones end in ``_<name>``.

``task.holdout: N`` holds N *training* pairs of STS-B out (a seeded draw) as the ``holdout`` split,
which chooses checkpoints and the final model (``spearman_holdout``): their sentences are left out
of the training texts, and no evaluated text is ever trained on. Pairs of sentences say nothing
of retrieval, so ``task.holdout_passages: N`` also holds N corpus paragraphs out as a retrieval
set, the :data:`~tinyplm.tasks.holdout.HOLDOUT_PASSAGES` split (:func:`passage_cloze`: the inverse
cloze task of Lee et al. 2019, a sentence cut out of a paragraph ranks what is left of all N):
the final model must also keep ``final.min_retention`` of the teacher's ``ndcg_at_10`` there
(``TaskData.guard_metrics``). Each eval split is encoded at
``task.eval_max_length`` word pieces (paragraphs are longer than sentences), training texts at
``task.max_length``. The training texts come in a seeded random order (``task.holdout_seed``), so
``task.max_train_examples`` takes a sample of every source in proportion to its size, unless
``task.train_shares`` gives a source its own share of that sample (``{questions: 0.2}``: a small
source that would otherwise be a few per cent of it). ``task.pair_questions`` puts each sampled
question's corpus paragraph (cut at ``task.max_length``) beside it, in place of as many other texts
of the sample, and makes the two one batching unit
(:func:`~tinyplm.tasks.embedding_sample.paired`): retrieval compares a question with passages, and
a similarity term that only ever sees a question among texts of its own length never compares it
with the passage it asks about.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tinyplm.errors import DataError, RecipeError
from tinyplm.tasks.base import Example, Split, TaskData
from tinyplm.tasks.embedding_sample import mixed, paired
from tinyplm.tasks.glue import GLUE_SPECS, read_glue_file
from tinyplm.tasks.heads import Head
from tinyplm.tasks.holdout import HOLDOUT, HOLDOUT_PASSAGES, HOLDOUT_SUFFIX, holdout_size
from tinyplm.tasks.paths import resolve_data_root, resolve_glue_dir
from tinyplm.tasks.questions import question_sources
from tinyplm.tasks.retrieval import (
    GROUPS_OPTION,
    MAX_LENGTH_OPTION,
    RetrievalSet,
    ScoredPairs,
    embedding_split,
    read_beir,
    read_pairs,
    squad_retrieval,
)

#: The task name a recipe gives (``task.name: embedding``).
EMBEDDING_TASK = "embedding"
#: The named sources of ``task.train_texts`` besides paths.
STSB, CORPUS, PARAGRAPHS, QUESTIONS = "stsb", "corpus", "paragraphs", "questions"
#: Default training sources and eval sets.
DEFAULT_TRAIN = (STSB,)
DEFAULT_EVALS = ("stsb", "squad")
#: Fewest words a corpus sentence keeps (shorter pieces are headings and fragments).
MIN_SENTENCE_WORDS = 4
#: Fewest words a corpus paragraph needs to be a ``paragraphs`` training text (a passage, not a line).
MIN_PARAGRAPH_WORDS = 20

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[A-Z0-9\u201c\u2018])")
#: Words whose full stop ends no sentence (titles before a name).
_ABBREVIATIONS = frozenset({"mr.", "mrs.", "ms.", "dr.", "st.", "prof.", "jr.", "sr.", "messrs.", "mme.", "mlle.",
                            "rev.", "capt.", "col.", "gen.", "lt.", "sgt.", "vs.", "no.", "e.g.", "i.e."})


@dataclass(frozen=True)
class EvalSetRef:
    """One entry of ``task.eval_sets`` read: its split ``name``, its ``kind`` (``stsb``, ``squad``,
    ``pairs``, ``beir``) and the ``path`` it reads (a BEIR ``split`` too)."""

    name: str
    kind: str
    path: Path
    split: str = "test"


def parse_eval_set(entry: str, data_dir: str | None) -> EvalSetRef:
    """``task.eval_sets``' ``entry`` -> where its set lives. Raises ``RecipeError`` naming the entry
    for an unknown kind or a ``pairs:``/``beir:`` without a path."""
    kind, _, rest = entry.partition(":")
    if kind == "stsb" and not rest:
        return EvalSetRef("stsb", kind, resolve_glue_dir(data_dir) / "STS-B" / "dev.tsv")
    if kind == "squad" and not rest:
        return EvalSetRef("squad", kind, resolve_data_root(data_dir) / "squad" / "dev-v1.1.json")
    if kind in ("pairs", "beir") and rest:
        split = "test"
        if kind == "beir" and rest.count(":") and not Path(rest).exists():
            rest, _, split = rest.rpartition(":")
        path = Path(rest)
        stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", path.stem if kind == "pairs" else path.name) or kind
        return EvalSetRef(f"{kind}-{stem}", kind, path, split)
    raise RecipeError(f"task.eval_sets entry {entry!r}: expected 'stsb', 'squad', 'pairs:FILE' (scored pairs) or "
                      "'beir:FOLDER' (a BEIR folder; 'beir:FOLDER:SPLIT' for other qrels than test)")


def read_eval_set(ref: EvalSetRef) -> ScoredPairs | RetrievalSet:
    """The set ``ref`` names, read (raises ``DataError`` naming the file and line)."""
    if ref.kind == "squad":
        if not ref.path.is_file():
            raise DataError(f"{ref.path}: file not found (expected SQuAD v1.1 dev, the 'squad' eval set)")
        return squad_retrieval(ref.path)
    if ref.kind == "beir":
        return read_beir(ref.path, ref.split)
    if not ref.path.is_file():
        raise DataError(f"{ref.path}: file not found (expected the pairs of eval set '{ref.name}')")
    if ref.kind == "stsb":
        return ScoredPairs.of(read_glue_file(ref.path, "dev", GLUE_SPECS["stsb"]), ref.path)
    return read_pairs(ref.path)


def sentences_of(paragraphs: Sequence[str], min_words: int = MIN_SENTENCE_WORDS) -> list[str]:
    """The sentences of ``paragraphs`` (split after ``.``, ``!`` or ``?`` before a capital, a digit or
    a quote; whitespace runs made single spaces), each of at least ``min_words`` words, in order.
    Deliberately a plain rule, not a trained sentence splitter: the texts only need to be
    sentence-sized, and no tokenizer model is shipped with the data."""
    out = []
    for paragraph in paragraphs:
        merged: list[str] = []
        for piece in _SENTENCE_END.split(" ".join(paragraph.split())):
            if merged and merged[-1].rsplit(" ", 1)[-1].lower() in _ABBREVIATIONS:
                merged[-1] = f"{merged[-1]} {piece}"
            else:
                merged.append(piece)
        out += [piece for piece in merged if len(piece.split()) >= min_words]
    return out


def read_text_lines(path: Path) -> list[str]:
    """Your own training texts: every non-empty line of ``path``, or of every ``*.txt`` file under a
    folder (sorted). Raises ``DataError`` naming the path when it is missing, not UTF-8 (with the
    line) or holds no text."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: not found (expected a text file, one text per line, or a folder of *.txt files "
                        "for task.train_texts)")
    files = sorted(path.rglob("*.txt")) if path.is_dir() else [path]
    texts: list[str] = []
    for file in files:
        with open(file, encoding="utf-8") as handle:
            try:
                for line in handle:
                    if line.strip():
                        texts.append(" ".join(line.split()))
            except UnicodeDecodeError as exc:
                raise DataError(f"{file}: line {len(texts) + 1} or after is not UTF-8 ({exc.reason})") from exc
    if not texts:
        raise DataError(f"{path}: holds no text (expected one text per line)")
    return texts


@dataclass(frozen=True)
class PassageCloze:
    """A retrieval set made of held-out paragraphs (:func:`passage_cloze`) and the texts it was made
    of (``used``: each paragraph, its sentences and its documents), which no training text may be."""

    set: RetrievalSet
    used: frozenset[str]


#: Fewest sentences a paragraph needs to give a cloze query and a document of two or more sentences.
CLOZE_MIN_SENTENCES = 3


def passage_cloze(paragraphs: Sequence[str], n: int, seed: int, source: Path,
                  cuts: Sequence[list[str]] | None = None) -> PassageCloze:
    """``n`` of ``paragraphs`` (a seeded draw among those of :data:`MIN_PARAGRAPH_WORDS` words and
    :data:`CLOZE_MIN_SENTENCES` sentences) as an inverse-cloze retrieval set: each paragraph's middle
    sentence is a query whose one relevant document is the rest of that paragraph, among the rest
    of all ``n``. ``cuts``: each paragraph's :func:`sentences_of`, where the caller has them already.
    Raises ``RecipeError`` naming ``task.holdout_passages`` when fewer than ``n`` paragraphs qualify
    or ``n`` < 2."""
    distinct: dict[str, list[str] | None] = {}  # a paragraph written twice (whitespace aside) is drawn once
    for k, paragraph in enumerate(paragraphs):
        distinct.setdefault(" ".join(paragraph.split()), cuts[k] if cuts is not None else None)
    pool = [(p, cut) for p, c in distinct.items() if len(p.split()) >= MIN_PARAGRAPH_WORDS
            and len(cut := c if c is not None else sentences_of([p])) >= CLOZE_MIN_SENTENCES]
    if not 2 <= n <= len(pool):
        raise RecipeError(f"task.holdout_passages: {n} paragraphs; the corpus has {len(pool)} of at least "
                          f"{MIN_PARAGRAPH_WORDS} words and {CLOZE_MIN_SENTENCES} sentences: give 2 to {len(pool)}")
    queries, corpus, qrels, used = {}, {}, {}, set()
    for k, i in enumerate(sorted(random.Random(seed).sample(range(len(pool)), n))):
        paragraph, cut = pool[i]
        middle = len(cut) // 2
        queries[f"q{k}"], corpus[f"p{k}"] = cut[middle], " ".join(cut[:middle] + cut[middle + 1:])
        qrels[f"q{k}"] = {f"p{k}": 1}
        used |= {paragraph, corpus[f"p{k}"], *cut}
    return PassageCloze(RetrievalSet.of(queries, corpus, qrels, source), frozenset(used))


@dataclass(frozen=True)
class StsbTrain:
    """STS-B's training pairs and where they were read from."""

    pairs: ScoredPairs
    source: Path


def _stsb_train(data_dir: str | None) -> StsbTrain:
    path = resolve_glue_dir(data_dir) / "STS-B" / "train.tsv"
    if not path.is_file():
        raise DataError(f"{path}: file not found (expected GLUE STS-B train, for task.train_texts 'stsb' or "
                        "task.holdout)")
    return StsbTrain(ScoredPairs.of(read_glue_file(path, "train", GLUE_SPECS["stsb"]), path), path)


def _held_pairs(train: StsbTrain, value: int | float, seed: int) -> ScoredPairs:
    total = len(train.pairs.scores)
    n = holdout_size(value, total)
    if not 2 <= n <= total // 2:
        raise RecipeError(f"task.holdout: {n} STS-B training pairs; give 2 to {total // 2} (half of {train.source})")
    drawn = sorted(random.Random(seed).sample(range(total), n))
    p = train.pairs
    return ScoredPairs(tuple(p.texts_a[i] for i in drawn), tuple(p.texts_b[i] for i in drawn),
                       tuple(p.scores[i] for i in drawn), train.source)


def embedding_task_data(spec, corpus_texts: Callable[[], list[str]] | None = None) -> TaskData:
    """The :class:`TaskData` of an ``embedding`` task (``spec`` a ``TaskSpec``; module docstring).

    ``corpus_texts`` reads the run's ``corpus`` section's paragraphs (needed when
    ``task.train_texts`` names ``corpus``). Raises ``RecipeError`` for a bad entry, ``DataError``
    naming the file of a missing or bad set; every eval set is read (and checked) here, before any
    work."""
    refs = [parse_eval_set(e, spec.data_dir) for e in (spec.eval_sets or DEFAULT_EVALS)]
    names = [r.name for r in refs]
    if len(set(names)) != len(names) or HOLDOUT in names:
        raise RecipeError(f"task.eval_sets name the splits {names}: each must be distinct and none 'holdout'")
    evals: dict[str, Split] = {}
    suffix: dict[str, str] = {}
    seen_kinds: set[type] = set()
    for ref in refs:
        data = read_eval_set(ref)
        evals[ref.name] = _sized(embedding_split(ref.name, data), spec.eval_max_length)
        suffix[ref.name] = "" if type(data) not in seen_kinds else f"_{ref.name}"
        seen_kinds.add(type(data))
    stsb = _stsb_train(spec.data_dir) if (STSB in (spec.train_texts or DEFAULT_TRAIN) or spec.holdout) else None
    held = _held_pairs(stsb, spec.holdout, spec.holdout_seed) if spec.holdout else None
    corpus = _Corpus(corpus_texts)
    cloze = (passage_cloze(corpus.paragraphs("task.holdout_passages"), spec.holdout_passages, spec.holdout_seed,
                           Path("corpus"), corpus.cuts("task.holdout_passages")) if spec.holdout_passages else None)
    evaluated = {ex.text for split in evals.values() for ex in split.examples}
    excluded = evaluated | (set(held.texts_a + held.texts_b) if held else set()) | (cloze.used if cloze else set())
    source = stsb.source if stsb else Path((spec.train_texts or DEFAULT_TRAIN)[0])
    train, said = _train_split(spec, *_training_texts(spec, stsb, corpus, excluded), excluded, source)
    info = {"train_texts": said}
    if held is not None:
        evals[HOLDOUT] = _sized(embedding_split(HOLDOUT, held), spec.eval_max_length)
        suffix[HOLDOUT] = HOLDOUT_SUFFIX
        info["holdout"] = (f"{len(held.scores)} STS-B training pairs drawn with seed {spec.holdout_seed}, their "
                           "sentences never trained on: every kept checkpoint and the final model are chosen on them")
    if cloze is not None:
        evals[HOLDOUT_PASSAGES] = _sized(embedding_split(HOLDOUT_PASSAGES, cloze.set), spec.eval_max_length)
        suffix[HOLDOUT_PASSAGES] = f"_{HOLDOUT_PASSAGES}"
        info[HOLDOUT_PASSAGES] = (f"{spec.holdout_passages} corpus paragraphs drawn with seed {spec.holdout_seed}, "
                                  "never trained on: a sentence cut out of each ranks what is left of them all; the "
                                  "final model must keep final.min_retention of the teacher's nDCG@10 there too")
    first = next(iter(evals.values())).options["set"]
    primary = "spearman" if isinstance(first, ScoredPairs) else "ndcg_at_10"
    metrics = (primary, *(m for m in ("spearman", "ndcg_at_10") if m != primary))
    return TaskData(task=EMBEDDING_TASK, train=train, evals=evals, labels=(), is_regression=False, metrics=metrics,
                    primary_metric=primary, metric_suffix=suffix, head=Head.EMBEDDING, info=info,
                    guard_metrics=(f"ndcg_at_10_{HOLDOUT_PASSAGES}",) if cloze is not None else ())


def _train_split(spec, sources: dict[str, list[str]], passage_of: dict[str, str], excluded: set[str],
                 source: Path) -> tuple[Split, str]:
    """The training split of ``sources`` (:func:`_training_texts`) less ``excluded`` texts, in a seeded
    order, sampled by ``task.train_shares`` and paired by ``task.pair_questions``; and what it holds.
    Raises ``RecipeError`` when no text is left."""
    kept = _distinct(sources, excluded)
    rng = random.Random(spec.holdout_seed)
    order = [t for texts in kept.values() for t in texts]
    rng.shuffle(order)  # so max_train_examples takes a sample of every source
    if not order:
        raise RecipeError("task.train_texts give no text to train on once the evaluated and held-out texts are "
                          "left out")
    mix = mixed(order, kept, spec.train_shares, spec.max_train_examples, rng) if spec.train_shares else None
    texts = mix.texts if mix else order
    pairs = paired(texts[: spec.max_train_examples], passage_of, excluded, rng) if spec.pair_questions else None
    train = Split("train", [Example(t, None, None) for t in (pairs.texts if pairs else texts)], source,
                  Head.EMBEDDING, {GROUPS_OPTION: pairs.groups} if pairs else {})
    total = sum(len(texts) for texts in sources.values())
    said = (f"{len(order)} distinct texts from {', '.join(spec.train_texts or DEFAULT_TRAIN)}; "
            f"{total - len(order)} evaluated, held-out or repeated ones left out"
            + (f"; {mix.said}" if mix else "") + (f"; {pairs.said}" if pairs else ""))
    return train, said


def _sized(split: Split, max_length: int) -> Split:
    """``split`` with the word pieces its texts are encoded at."""
    return Split(split.name, split.examples, split.source, split.head, {**split.options, MAX_LENGTH_OPTION: max_length})


class _Corpus:
    """The run's corpus paragraphs (``corpus_texts``), read once when first asked for, and their
    sentences, cut once (``corpus``, ``questions`` and the held-out passages all read them), with the
    paragraph each sentence is of (``owners``: indices into the paragraphs)."""

    def __init__(self, read: Callable[[], list[str]] | None) -> None:
        self._read, self._paragraphs, self._sentences, self.owners = read, None, None, []
        self._cuts: list[list[str]] | None = None

    def paragraphs(self, wanted_by: str) -> list[str]:
        if self._read is None:
            raise RecipeError(f"{wanted_by} reads the corpus, but the recipe has no 'corpus' section")
        if self._paragraphs is None:
            self._paragraphs = self._read()
        return self._paragraphs

    def cuts(self, wanted_by: str) -> list[list[str]]:
        """Each paragraph's sentences (:func:`sentences_of`)."""
        if self._cuts is None:
            self._cuts = [sentences_of([paragraph]) for paragraph in self.paragraphs(wanted_by)]
        return self._cuts

    def sentences(self, wanted_by: str) -> list[str]:
        if self._sentences is None:
            self._sentences, self.owners = [], []
            for i, cut in enumerate(self.cuts(wanted_by)):
                self._sentences += cut
                self.owners += [i] * len(cut)
        return self._sentences


def _training_texts(spec, stsb: StsbTrain | None, corpus: _Corpus,
                    excluded: set[str]) -> tuple[dict[str, list[str]], dict[str, str]]:
    """(each entry of ``task.train_texts`` -> its texts, in the recipe's order; with
    ``task.pair_questions``, each question -> the corpus paragraph it was made from, whitespace
    made single). Questions are made only of
    sentences not ``excluded``, so none is a held-out or evaluated sentence reworded."""
    texts: dict[str, list[str]] = {}
    passage_of: dict[str, str] = {}
    for entry in spec.train_texts or DEFAULT_TRAIN:
        if entry == STSB:
            texts[entry] = [*stsb.pairs.texts_a, *stsb.pairs.texts_b]
        elif entry == CORPUS:
            texts[entry] = corpus.sentences(f"task.train_texts '{entry}'")
        elif entry == QUESTIONS:
            sentences = corpus.sentences(f"task.train_texts '{entry}'")
            kept = [(s, o) for s, o in zip(sentences, corpus.owners, strict=True) if s not in excluded]
            made = question_sources(s for s, _ in kept)
            texts[entry] = list(made)
            if spec.pair_questions:
                paragraphs = corpus.paragraphs(f"task.train_texts '{entry}'")
                passage_of = {q: " ".join(paragraphs[kept[i][1]].split()) for q, i in made.items()}
        elif entry == PARAGRAPHS:
            texts[entry] = [" ".join(p.split()) for p in corpus.paragraphs(f"task.train_texts '{entry}'")
                            if len(p.split()) >= MIN_PARAGRAPH_WORDS]
        else:
            texts[entry] = read_text_lines(Path(entry))
    return texts, passage_of


def _distinct(sources: dict[str, list[str]], excluded: set[str]) -> dict[str, list[str]]:
    """Each source's texts less ``excluded`` ones and those an earlier source (or itself) already gave."""
    seen = set(excluded)
    out: dict[str, list[str]] = {}
    for entry, texts in sources.items():
        out[entry] = [t for t in dict.fromkeys(texts) if t not in seen]
        seen.update(out[entry])
    return out
