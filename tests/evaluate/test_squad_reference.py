"""``tinyplm evaluate-squad`` against a second, independent statement of the official semantics.

The reference below is written from the official v1.1 / v2.0 scripts' *documented behaviour*
(not from ``tinyplm.evaluate.squad``), in a different style, and both are run on a predictions
file with deliberately varied answers: exact, re-cased, articles and punctuation added or moved,
truncated, extended, repeated tokens, unicode punctuation, empty answers, wrong answers, missing
ids, several gold answers and (v2.0) unanswerable questions. The scores must agree exactly.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tinyplm.cli import app

ASCII_PUNCT = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def ref_normalise(s: str) -> str:
    s = s.lower()
    s = "".join(c for c in s if c not in ASCII_PUNCT)
    s = re.sub(r"\b(?:the|an|a)\b", " ", s)  # word boundaries, so '«the»x' loses its article too
    return " ".join(s.split())


def ref_f1_v1(pred: str, gold: str) -> float:
    p, g = ref_normalise(pred).split(), ref_normalise(gold).split()
    common = Counter(p) & Counter(g)
    n = sum(common.values())
    return 0.0 if n == 0 else 2 * n / (len(p) + len(g))  # harmonic mean of n/|p| and n/|g|


def ref_f1_v2(pred: str, gold: str) -> float:
    p, g = ref_normalise(pred).split(), ref_normalise(gold).split()
    if not p or not g:
        return float(p == g)
    return ref_f1_v1(pred, gold)


def ref_scores(data: dict, preds: dict, v2: bool) -> dict[str, float]:
    """v1.1: every question counts, a missing one scores 0. v2.0: gold answers normalising to
    nothing are dropped (none left: the gold is ''), HasAns/NoAns by the raw answer list."""
    em, f1, has = {}, {}, {}
    for article in data["data"]:
        for para in article["paragraphs"]:
            for qa in para["qas"]:
                golds = [a["text"] for a in qa["answers"]]
                has[qa["id"]] = bool(golds)
                if v2:
                    golds = [g for g in golds if ref_normalise(g)] or [""]
                if qa["id"] not in preds and not v2:
                    em[qa["id"]] = f1[qa["id"]] = 0.0
                    continue
                pred = preds.get(qa["id"], "")
                em[qa["id"]] = float(any(ref_normalise(pred) == ref_normalise(g) for g in golds))
                f1[qa["id"]] = max((ref_f1_v2 if v2 else ref_f1_v1)(pred, g) for g in golds)
    pct = lambda vals: 100.0 * sum(vals) / len(vals)  # noqa: E731
    if not v2:
        return {"exact_match": pct(list(em.values())), "f1": pct(list(f1.values()))}
    out = {"exact": pct(list(em.values())), "f1": pct(list(f1.values()))}
    for name, flag in (("HasAns", True), ("NoAns", False)):
        ids = [k for k in em if has[k] is flag]
        out[f"{name}_exact"] = pct([em[k] for k in ids])
        out[f"{name}_f1"] = pct([f1[k] for k in ids])
    return out


def vary(gold: str, context: str, rng: random.Random) -> str | None:
    """One deliberately varied prediction for a question (None: leave the id out)."""
    words = gold.split()
    kind = rng.randrange(15)
    if kind == 0:
        return gold
    if kind == 1:
        return gold.upper()
    if kind == 2:
        return f"The {gold}."
    if kind == 3:
        return f"an {gold}, a"
    if kind == 4:
        return " ".join(words[: max(1, len(words) // 2)])
    if kind == 5:
        extra = rng.choice(context.split())
        return f"{gold} {extra}"
    if kind == 6:
        return f"{words[0]} {words[0]} {gold}"
    if kind == 7:
        return f"«{gold}» — ¿"  # unicode punctuation is kept by the official normalisation
    if kind == 8:
        return ""
    if kind == 9:
        return "the"
    if kind == 10:
        return " ".join(rng.sample(context.split(), k=min(3, len(context.split()))))
    if kind == 11:
        return None
    if kind == 12:
        return gold.replace(" ", "  \t") + " !!"
    if kind == 13:
        return f"{gold} «the»{words[-1]}"  # an article between non-ASCII punctuation still splits
    return "-".join(words)  # punctuation removed joins the words: a different token


def _dataset(rng: random.Random) -> dict:
    """Small official-layout data with several golds per question (spans of the context that
    differ in articles, punctuation and length), some gold answers normalising to nothing."""
    contexts = ["The Denver Broncos defeated the Carolina Panthers 24-10 to earn their third Super Bowl title.",
                "A game was played on February 7, 2016, at Levi's Stadium in the San Francisco Bay Area.",
                "Beyoncé, with Bruno Mars and Coldplay, headlined the halftime show; it was the 50th game.",
                "The an a the: articles, punctuation (like 'this') and an apple a day!"]
    data = []
    qid = 0
    for a in range(6):
        paras = []
        for context in contexts:
            qas = []
            words = context.split()
            for _ in range(8):
                start = rng.randrange(len(words))
                gold = " ".join(words[start: start + rng.randint(1, 4)])
                wider = " ".join(words[max(0, start - 1): start + rng.randint(1, 5)])
                golds = [gold, wider, gold.rstrip(".,;:!") or gold]
                if rng.random() < 0.2 and " the " in context:
                    golds.append("the")  # normalises to nothing
                golds = golds[: rng.randint(1, 4)]
                qas.append({"id": f"q{qid}", "question": "?",
                            "answers": [{"text": g, "answer_start": context.index(g)} for g in golds]})
                qid += 1
            paras.append({"context": context, "qas": qas})
        data.append({"title": f"t{a}", "paragraphs": paras})
    return {"version": "1.1", "data": data}


def _predictions(data: dict, rng: random.Random) -> dict[str, str]:
    preds = {}
    for article in data["data"]:
        for para in article["paragraphs"]:
            for qa in para["qas"]:
                gold = qa["answers"][0]["text"] if qa["answers"] else rng.choice(para["context"].split())
                p = vary(gold, para["context"], rng)
                if p is not None:
                    preds[qa["id"]] = p
    return preds


def _cli_scores(tmp_path: Path, data: dict, preds: dict) -> dict:
    data_file, pred_file = tmp_path / "data.json", tmp_path / "preds.json"
    data_file.write_text(json.dumps(data), encoding="utf-8")
    pred_file.write_text(json.dumps(preds), encoding="utf-8")
    result = CliRunner().invoke(app, ["evaluate-squad", str(pred_file), str(data_file)])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_v1_agrees_with_the_reference(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    data = _dataset(rng)
    preds = _predictions(data, rng)
    ours = _cli_scores(tmp_path, data, preds)
    ref = ref_scores(data, preds, v2=False)
    assert 0 < ref["f1"] < 100 and ref["exact_match"] < ref["f1"]  # the variation does vary the scores
    for key, value in ref.items():
        assert ours[key] == pytest.approx(value, abs=1e-9), key


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_v2_agrees_with_the_reference(tmp_path: Path, seed: int) -> None:
    rng = random.Random(100 + seed)
    data = _dataset(rng)
    data["version"] = "v2.0"
    for article in data["data"]:
        for para in article["paragraphs"]:
            for qa in para["qas"]:
                impossible = rng.random() < 0.35
                qa["is_impossible"] = impossible
                if impossible:
                    qa["answers"] = []
    preds = _predictions(data, rng)
    for qid in list(preds)[::5]:  # some unanswerable ones answered empty, as a v2.0 model would
        preds[qid] = ""
    ours = _cli_scores(tmp_path, data, preds)
    ref = ref_scores(data, preds, v2=True)
    assert 0 < ref["NoAns_f1"] < 100 and 0 < ref["HasAns_f1"] < 100
    for key, value in ref.items():
        assert ours[key] == pytest.approx(value, abs=1e-9), key


def test_shipped_dev_file_agrees_with_the_reference(tmp_path: Path, shared_data: Path) -> None:
    """The real dev-v1.1.json (10,570 questions, up to 6 golds each) with varied predictions."""
    path = shared_data / "squad" / "dev-v1.1.json"
    if not path.is_file():
        pytest.skip(f"{path} not found in the shared data")
    data = json.loads(path.read_text(encoding="utf-8"))
    preds = _predictions(data, random.Random(7))
    pred_file = tmp_path / "preds.json"
    pred_file.write_text(json.dumps(preds), encoding="utf-8")
    result = CliRunner().invoke(app, ["evaluate-squad", str(pred_file), str(path)])
    assert result.exit_code == 0, result.output
    ours = json.loads(result.output)
    ref = ref_scores(data, preds, v2=False)
    assert ours["total"] == 10570
    for key, value in ref.items():
        assert ours[key] == pytest.approx(value, abs=1e-9), key
