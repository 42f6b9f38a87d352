"""What a classic student's vocabulary settings leave it, checked before the teacher trains.

A ``min_df`` or ``min_count`` that no n-gram or word reaches made scikit-learn or gensim fail after
the teacher's fine-tune (``max_df corresponds to < documents than min_df``, ``you must first build
vocabulary``), or (GloVe, the LSTM's own words) let a student train on nothing but ``[UNK]`` and be
reported as any other. Each is counted here, on the training texts or the corpus the student reads,
with the students' own word splitting, and refused naming the key and what the data holds. The
corpus is read whole here as the student would read it (an empty or undecodable file is named now).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from tinyplm.config.schema import RunConfig, student_name
from tinyplm.errors import DataError, RecipeError
from tinyplm.models.classic.words import words
from tinyplm.pretrain.corpus import read_corpus
from tinyplm.tasks.base import TaskData


def check_vocabularies(cfg: RunConfig, data: TaskData) -> None:
    """Each classic student's ``tfidf.min_df``, ``min_count`` and ``embeddings.min_count`` against the
    texts they count over (see the module docstring). Raises ``RecipeError``/``DataError``.

    Students reading the same texts share one reading and one count: a recipe of a dozen BiLSTMs
    over one corpus read it a dozen times, most of ``validate``'s time."""
    # classic students classify sentences (the family check comes first): their examples are texts
    texts = [t for ex in data.train.examples for t in (getattr(ex, "text", None), getattr(ex, "text_pair", None))
             if isinstance(t, str)] if any(s.family is not None for s in cfg.students) else []
    tops: dict[object, int] = {}  # the most frequent word's count, per text set
    corpora: dict[tuple[tuple[str, ...], int | None, str | None], list[str]] = {}
    for spec in cfg.students:
        fam = spec.family
        if fam is None:
            continue
        where = f"student {student_name(spec)}: family"
        if fam.arch == "tfidf_lr" and fam.tfidf.min_df > len(data.train):
            raise RecipeError(f"{where}.tfidf.min_df {fam.tfidf.min_df} is more than the {len(data.train)} training "
                              "texts, so no n-gram can be kept; lower it")
        if fam.arch in ("lstm", "bilstm", "elmo_bilstm"):
            if "train" not in tops:
                tops["train"] = _top_count(texts)
            _check_top(f"{where}.min_count", fam.min_count, tops["train"], f"the {len(data.train)} training texts")
        if fam.corpus_needed:
            key = "bilm" if fam.arch == "elmo_bilstm" else "embeddings"
            paths = fam.own_corpus or cfg.corpus.paths
            field = fam.own_text_field if fam.own_corpus else cfg.corpus.text_field  # as run/classic.py reads it
            section = getattr(fam, key)
            source = (tuple(paths), section.max_docs, field)
            if source not in corpora:
                try:
                    corpora[source] = read_corpus([Path(p) for p in paths], max_docs=section.max_docs,
                                                  text_field=field)
                except DataError as exc:
                    raise DataError(f"{where}.{key}.corpus: {exc}") from None
            if key == "embeddings":
                if source not in tops:
                    tops[source] = _top_count(corpora[source])
                _check_top(f"{where}.embeddings.min_count", section.min_count, tops[source],
                           f"the {len(corpora[source])} corpus texts of {', '.join(paths)}")


def _top_count(texts: Iterable[str]) -> int:
    """How often the most frequent word of ``texts`` is seen (0 when there is none)."""
    return max(Counter(w for t in texts for w in words(t)).values(), default=0)


def _check_top(key: str, min_count: int, top: int, what: str) -> None:
    """Refuse ``min_count`` when no word of the texts ``what`` names is seen that often (``top``)."""
    if top < min_count:
        raise RecipeError(f"{key} {min_count} keeps no word of {what} (the most frequent is seen {top} times), "
                          f"so the student would read only [UNK]; lower it to at most {max(top, 1)}")
