"""How much the markup gaps in the TV Tropes sentences give the label away -> JSON; last line its path.

    .venv/bin/python benchmarks/tvtropes_gaps.py                          # about a minute
    .venv/bin/python benchmarks/tvtropes_gaps.py --teacher runs/tvtropes_family/teacher

The shipped TV Tropes sentences keep the spaces left where the wiki's spoiler tags and links were
cut out ("Dukat becomes this after   Ziyal's death ."). ``tvtropes_spoilers`` closes those gaps
when it reads the files (:func:`tinyplm.tasks.spoilers.close_markup_gaps`); this script measures
why, on the raw files, fitting on train and scoring dev only:

* ``gap_rates``: per split, the share of sentences with a run of three or more spaces and the
  spoiler rate among them and among the rest;
* ``gaps_only``: class-balanced logistic regression (scikit-learn) on five gap counts alone;
* ``char_tfidf``: character 1-5-gram TF-IDF + the same regression, on the raw and on the closed
  text (a model that keeps spaces, as a byte-level BPE does); ``word_tfidf`` the same with word
  1-2-grams, which cannot see the gaps;
* ``tokens_changed``: sentences (train and dev) whose tinyplm word tokens differ between the raw
  and the closed text (with ``--teacher`` also ``teacher_tokens_changed``, its tokenizer's ids):
  0 means those models never saw the gaps anyway;
* with ``--teacher DIR`` (a fine-tuned ``tvtropes_spoilers`` classifier): its dev accuracy and ROC
  AUC as ``tinyplm evaluate`` reads dev for it (its length and page context), and the same after
  adding the gap regression's log-odds. The second figure is what a model that learned the gaps
  could report; it is a leak, not a result.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np

import _harness as harness

GAP_PATTERNS = {"double_space": r"\S  \S", "three_spaces": r"   ", "space_before_closing": r" [.,;:!?)\]}]",
                "space_after_opening": r"[(\[{] ", "space_at_ends": r"^\s|\s$"}


def raw_split(path: Path) -> tuple[list[int], list[str], np.ndarray]:
    """(line, raw sentence, label) of every row of a TV Tropes file, read as tinyplm reads it but
    without closing the gaps."""
    from tinyplm.tasks.spoilers import TVTROPES_COLUMNS, csv_rows

    rows = list(csv_rows(path))
    text_at, label_at = TVTROPES_COLUMNS.index("sentence"), TVTROPES_COLUMNS.index("label")
    return ([line for line, _ in rows], [f[text_at] for _, f in rows],
            np.array([int(f[label_at]) for _, f in rows]))


def gap_counts(texts: list[str]) -> np.ndarray:
    """log(1 + count) of each of :data:`GAP_PATTERNS` per text."""
    return np.log1p(np.array([[len(re.findall(p, t)) for p in GAP_PATTERNS.values()] for t in texts], dtype=float))


def scored(y: np.ndarray, logodds: np.ndarray) -> dict[str, float]:
    """Accuracy (spoiler when the log-odds are above 0) and ROC AUC of ``logodds`` against ``y``."""
    from sklearn.metrics import roc_auc_score

    return {"accuracy": round(float(((logodds > 0) == y).mean()), 4),
            "roc_auc": round(float(roc_auc_score(y, logodds)), 4)}


def tfidf_scores(train: list[str], y: np.ndarray, dev: list[str], yd: np.ndarray, analyzer: str,
                 ngrams: tuple[int, int]) -> dict[str, float]:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    vec = TfidfVectorizer(analyzer=analyzer, ngram_range=ngrams, min_df=2, sublinear_tf=True)
    reg = LogisticRegression(max_iter=2000, class_weight="balanced").fit(vec.fit_transform(train), y)
    return scored(yd, reg.decision_function(vec.transform(dev)))


def teacher_rows(teacher: Path, lines: list[int], gap_logodds: np.ndarray, data_dir: Path | None,
                 raw: list[str], closed: list[str]) -> dict:
    """The teacher on dev as tinyplm reads it for that teacher (the length and page context it was
    trained with, as ``evaluate`` uses), alone and with the gap regression's log-odds added, and
    how many of ``raw`` its tokenizer splits otherwise than their ``closed`` form."""
    from tinyplm.config.schema import TaskSpec
    from tinyplm.inference.model_info import model_info
    from tinyplm.models import load_classifier
    from tinyplm.models.infer import predict_logits
    from tinyplm.run import load_task
    from tinyplm.tasks.encoding import encode_split

    info = model_info(teacher)
    data = load_task(TaskSpec(name="tvtropes_spoilers", data_dir=str(data_dir) if data_dir else None,
                              max_length=info.max_length, context_sentences=info.context_sentences,
                              context_after=info.context_after))
    split = data.evals["dev"]
    model, tok = load_classifier(teacher, data.labels, data.is_regression)
    # fp32, as `tinyplm evaluate` scores: bf16 here made the figure depend on the CPU (ROC AUC 0.415
    # against evaluate's 0.54 for the same model on a CPU with native bf16)
    logits = predict_logits(model, encode_split(split, tok, info.max_length)).numpy()
    logodds = logits[:, 1] - logits[:, 0]
    y = np.array([e.label for e in split.examples])
    at = {line: i for i, line in enumerate(lines)}
    gaps = gap_logodds[[at[e.line] for e in split.examples]]
    changed = sum(tok(a)["input_ids"] != tok(b)["input_ids"] for a, b in zip(raw, closed, strict=True))
    return {"teacher": scored(y, logodds), "teacher_plus_gaps_leak": scored(y, logodds + gaps),
            "teacher_tokens_changed": changed}


def main() -> None:
    p = harness.parser(__doc__, out=harness.REPO / "runs" / "tvtropes_gaps.json")
    p.add_argument("--data-dir", type=Path, default=None, help="data root (default: tinyplm's, ../shared/data)")
    p.add_argument("--teacher", type=Path, default=None, help="a fine-tuned tvtropes_spoilers classifier")
    args = p.parse_args()

    from sklearn.linear_model import LogisticRegression

    from tinyplm.errors import TinyplmError
    from tinyplm.models.classic.words import words
    from tinyplm.tasks import resolve_data_root
    from tinyplm.tasks.spoilers import TVTROPES_DIR, close_markup_gaps

    try:
        folder = resolve_data_root(args.data_dir) / TVTROPES_DIR
        (_, train, y), (dev_lines, dev, yd) = raw_split(folder / "train.csv"), raw_split(folder / "dev.csv")
    except (TinyplmError, OSError) as exc:
        sys.exit(f"tvtropes_gaps: {exc}")
    closed_train, closed_dev = [close_markup_gaps(t) for t in train], [close_markup_gaps(t) for t in dev]
    result: dict = {"task": "tvtropes_spoilers", "data": str(folder), "train": len(train), "dev": len(dev)}
    result["gap_rates"] = {}
    for name, texts, labels in (("train", train, y), ("dev", dev, yd)):
        has = np.array(["   " in t for t in texts])
        result["gap_rates"][name] = {"share_with_three_spaces": round(float(has.mean()), 3),
                                     "spoiler_rate_with": round(float(labels[has].mean()), 3),
                                     "spoiler_rate_without": round(float(labels[~has].mean()), 3)}
    reg = LogisticRegression(max_iter=1000, class_weight="balanced").fit(gap_counts(train), y)
    gap_logodds = reg.decision_function(gap_counts(dev))
    result["gaps_only"] = {"features": list(GAP_PATTERNS), **scored(yd, gap_logodds)}
    result["char_tfidf"] = {"raw": tfidf_scores(train, y, dev, yd, "char", (1, 5)),
                            "closed": tfidf_scores(closed_train, y, closed_dev, yd, "char", (1, 5))}
    result["word_tfidf"] = {"raw": tfidf_scores(train, y, dev, yd, "word", (1, 2)),
                            "closed": tfidf_scores(closed_train, y, closed_dev, yd, "word", (1, 2))}
    raw_all, closed_all = train + dev, closed_train + closed_dev
    result["tokens_changed"] = {"word": sum(words(a) != words(b) for a, b in zip(raw_all, closed_all, strict=True))}
    if args.teacher is not None:
        try:
            result.update(teacher_rows(args.teacher, dev_lines, gap_logodds, args.data_dir, raw_all, closed_all))
        except TinyplmError as exc:
            sys.exit(f"tvtropes_gaps: {exc}")
    harness.save(args.out, result)
    print(json.dumps(result, indent=1))
    harness.finish(args.out)


if __name__ == "__main__":
    main()
