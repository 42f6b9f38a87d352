"""The evaluation sets of an embedding model, read up front, and every one scored with one model.

A set is a pairs file with gold scores (STS-B dev, or your own: :func:`~tinyplm.tasks.retrieval.read_pairs`)
or a retrieval set (SQuAD v1.1 dev as questions ranking paragraphs, or a BEIR folder). Every file
is read and checked by :func:`read_sets` before the model is loaded, so a missing or malformed file
is named before any vectors are computed. :func:`score_sets` then scores each set with one
``embed`` callable (:mod:`tinyplm.evaluate.embedding`), the way :func:`model_scoring` reads off the
model (its similarity function and prompts, as sentence-transformers' own evaluators use them).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path

from tinyplm.evaluate.embedding import Embed, retrieval_scores, similarity_scores
from tinyplm.evaluate.similarity import DOCUMENT_PROMPTS, QUERY_PROMPTS, Scoring, first_prompt, similarity_of
from tinyplm.tasks.paths import resolve_data_root
from tinyplm.tasks.retrieval import RetrievalSet, ScoredPairs, read_beir, read_pairs, squad_retrieval, stsb_pairs

#: Where the standard sets lie under the data root (``--data-dir``, TINYPLM_DATA, ../shared/data).
STSB_DEV = Path("glue") / "STS-B" / "dev.tsv"
SQUAD_DEV = Path("squad") / "dev-v1.1.json"


class SetKind(StrEnum):
    """What a set measures: similarity against gold scores, or retrieval."""

    PAIRS = "pairs"
    RETRIEVAL = "retrieval"


@dataclass(frozen=True)
class SetRequest:
    """One set asked for: its name in reports, its kind, where it is, and (BEIR) the qrels split."""

    name: str
    kind: SetKind
    path: Path
    split: str = "test"
    reader: str = "pairs"  # stsb | pairs | squad | beir

    def read(self) -> ScoredPairs | RetrievalSet:
        """The set's examples; raises ``DataError`` naming the file (and line) at fault."""
        readers = {"stsb": stsb_pairs, "pairs": read_pairs, "squad": squad_retrieval,
                   "beir": lambda path: read_beir(path, self.split)}
        return readers[self.reader](self.path)


@dataclass(frozen=True)
class EvalSet:
    """A set read: its request and its examples."""

    request: SetRequest
    data: ScoredPairs | RetrievalSet


@dataclass(frozen=True)
class SetScore:
    """One set's scores: ``metrics`` maps a metric name to its value (x 100), ``size`` what was
    scored (pairs; queries and documents), ``seconds`` the time spent embedding and ranking."""

    name: str
    kind: SetKind
    source: str
    metrics: dict[str, float]
    size: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return asdict(self)


def standard_sets(data_dir: str | Path | None, stsb: bool, squad: bool) -> list[SetRequest]:
    """The standard sets asked for, under the data root: STS-B dev (Spearman of similarities) and SQuAD
    v1.1 dev as a retrieval set (each question ranks every paragraph)."""
    root = resolve_data_root(data_dir)
    out = []
    if stsb:
        out.append(SetRequest("stsb", SetKind.PAIRS, root / STSB_DEV, reader="stsb"))
    if squad:
        out.append(SetRequest("squad", SetKind.RETRIEVAL, root / SQUAD_DEV, reader="squad"))
    return out


def own_sets(pairs: list[Path], beir: list[Path], split: str = "test") -> list[SetRequest]:
    """Your own sets: pairs files (named by their file stem) and BEIR folders (by their folder name)."""
    return ([SetRequest(p.stem, SetKind.PAIRS, p, reader="pairs") for p in pairs]
            + [SetRequest(b.name, SetKind.RETRIEVAL, b, split, reader="beir") for b in beir])


def read_sets(requests: list[SetRequest]) -> list[EvalSet]:
    """Every set read and checked, in order (before any model work). Raises ``TinyplmError`` when
    none is asked for or two share a name, ``DataError`` naming the file of a bad one."""
    from tinyplm.errors import TinyplmError

    if not requests:
        raise TinyplmError("no evaluation set asked for: keep --stsb or --squad, or give --pairs FILE or --beir DIR")
    seen: set[str] = set()
    for r in requests:
        if r.name in seen:
            raise TinyplmError(f"two evaluation sets are named {r.name!r} ({r.path}): rename one file or folder")
        seen.add(r.name)
    return [EvalSet(r, r.read()) for r in requests]


def model_scoring(embedder, prompts: bool = True, similarity: str | None = None) -> Scoring:
    """How ``embedder`` (a :class:`~tinyplm.models.embedder.Embedder`) is judged, as
    sentence-transformers' evaluators judge it: by its own similarity function (``similarity``
    overrides it), and with ``prompts`` its ``query`` prompt before retrieval queries and its
    ``document`` (or ``passage``, ``corpus``) prompt before documents. A static encoder compares by
    cosine and has no prompts. Raises ``ModelError`` for prompts its pooling leaves out
    (``include_prompt: false``, which tinyplm's pooling does not do) and ``TinyplmError`` for an
    unknown similarity."""
    from tinyplm.errors import ModelError
    from tinyplm.models.embedder import EmbedderKind
    from tinyplm.models.onnx import sentence_layout
    from tinyplm.models.pooling import MODEL_SETTINGS_FILE

    layout = sentence_layout(embedder.model) if embedder.kind is EmbedderKind.TRANSFORMER else None
    if similarity is not None:
        chosen = similarity_of(similarity, "--similarity")
    else:
        chosen = similarity_of(layout.similarity if layout else None,
                               f"{embedder.path / MODEL_SETTINGS_FILE}: similarity_fn_name")
    named = dict(layout.prompts) if layout is not None and prompts else {}
    query, document = first_prompt(named, QUERY_PROMPTS), first_prompt(named, DOCUMENT_PROMPTS)
    if (query or document) and not layout.pooling.include_prompt:
        raise ModelError(f"{embedder.path}: its pooling leaves the prompt's tokens out (include_prompt: false), "
                         "which tinyplm's pooling does not do, so its query/document prompts cannot be applied as "
                         "sentence-transformers applies them; score it without prompts (--no-prompts)")
    return Scoring(chosen, query, document)


def score_sets(embed: Embed, sets: list[EvalSet], scoring: Scoring = Scoring()) -> list[SetScore]:
    """Each set scored with ``embed`` as ``scoring`` says: pairs -> spearman, pearson; retrieval ->
    ndcg_at_10, mrr_at_10, recall_at_1, recall_at_10 (each x 100)."""
    out = []
    for s in sets:
        start = time.perf_counter()
        if s.request.kind is SetKind.PAIRS:
            sim = similarity_scores(embed, s.data, scoring)
            metrics, size = {"spearman": sim.spearman, "pearson": sim.pearson}, {"pairs": sim.pairs}
        else:
            ret = retrieval_scores(embed, s.data, scoring=scoring)
            metrics = {"ndcg_at_10": ret.ndcg_at_10, "mrr_at_10": ret.mrr_at_10, "recall_at_1": ret.recall_at_1,
                       "recall_at_10": ret.recall_at_10}
            size = {"queries": ret.queries, "documents": ret.documents}
        out.append(SetScore(s.request.name, s.request.kind, str(s.request.path),
                            {k: round(float(v), 2) for k, v in metrics.items()}, size,
                            round(time.perf_counter() - start, 1)))
    return out
