"""SQuAD EM/F1 against hand-computed values with the official v1.1 and v2.0 semantics."""

from __future__ import annotations

import pytest

from tinyplm.evaluate.squad import Question, exact_match, f1, normalize_answer, squad_scores


def test_normalisation_follows_the_official_order() -> None:
    assert normalize_answer("The  Denver Broncos!") == "denver broncos"
    assert normalize_answer("an apple, a day") == "apple day"
    assert normalize_answer("Theatre") == "theatre"  # articles only as whole words
    assert normalize_answer("A-Team") == "ateam"  # punctuation is removed before articles
    assert normalize_answer("  ¿Qué?  ") == "¿qué"  # only ASCII punctuation is removed
    assert normalize_answer("the") == ""


def test_f1_counts_shared_tokens_with_multiplicity() -> None:
    assert f1("denver broncos", "the Denver Broncos") == 1.0
    # pred: [the->dropped] "broncos broncos win"; gold "broncos win": same = 2, p = 2/3, r = 1
    assert f1("broncos broncos win", "broncos win") == pytest.approx(0.8)
    assert f1("carolina", "denver") == 0.0
    assert f1("", "denver") == 0.0
    assert f1("the", "a", v2=False) == 0.0  # v1.1: no shared token, F1 0 ...
    assert exact_match("the", "a") == 1  # ... while both normalise to "" for EM
    assert f1("", "", v2=True) == 1.0 and f1("a", "", v2=True) == 1.0 and f1("x", "", v2=True) == 0.0


QUESTIONS_V1 = [Question("q1", ("Denver Broncos", "the Broncos")), Question("q2", ("February 7, 2016",)),
                Question("q3", ("Santa Clara, California",)), Question("q4", ("gold",))]


def test_v1_scores_take_the_best_gold_and_count_missing_as_zero() -> None:
    preds = {"q1": "Broncos", "q2": "February 7", "q3": "Santa Clara, California."}  # q4 missing
    out = squad_scores(QUESTIONS_V1, preds)
    # q1: EM 1 ("the Broncos" -> "broncos"), F1 1; q2: EM 0, F1 2*(1)(2/3)/(5/3) = 0.8 (pred 2 tokens,
    # gold "february 7 2016": same 2, p = 1, r = 2/3); q3: EM 1, F1 1; q4: missing -> 0, 0
    assert out["exact_match"] == pytest.approx(100 * 2 / 4)
    assert out["f1"] == pytest.approx(100 * (1 + 0.8 + 1 + 0) / 4)
    assert out["total"] == 4 and out["missing"] == 1


QUESTIONS_V2 = [Question("a", ("Denver Broncos",)), Question("b", ()), Question("c", ()), Question("d", ("1990s",))]


def test_v2_scores_with_no_answer_questions_and_splits() -> None:
    preds = {"a": "Denver", "b": "", "c": "Carolina", "d": ""}
    out = squad_scores(QUESTIONS_V2, preds, v2=True)
    # a: EM 0, F1 2*(1)(1/2)/(3/2) = 2/3; b: EM 1, F1 1; c: 0, 0; d: empty vs "1990s": 0, 0
    assert out["exact"] == pytest.approx(25.0)
    assert out["f1"] == pytest.approx(100 * (2 / 3 + 1) / 4)
    assert out["HasAns_total"] == 2 and out["NoAns_total"] == 2
    assert out["HasAns_exact"] == 0.0 and out["HasAns_f1"] == pytest.approx(100 * (2 / 3) / 2)
    assert out["NoAns_exact"] == 50.0 and out["NoAns_f1"] == 50.0


def test_v2_missing_prediction_is_the_empty_answer() -> None:
    out = squad_scores([Question("b", ())], {}, v2=True)
    assert out["exact"] == 100.0 and out["missing"] == 1


def test_evaluate_squad_cli(tmp_path) -> None:
    import json

    from typer.testing import CliRunner

    from tinyplm.cli import app

    context = "Denver Broncos won on February 7, 2016 in Santa Clara, California."

    def qa(qid: str, *answers: str) -> dict:
        return {"id": qid, "question": "?", "answers": [{"text": a, "answer_start": context.index(a)} for a in answers]}

    raw = {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": context, "qas": [
        qa("q1", "Denver Broncos", "Broncos"), qa("q2", "February 7, 2016"), qa("q3", "Santa Clara, California"),
        qa("q4", "won")]}]}]}
    data = tmp_path / "dev.json"
    data.write_text(json.dumps(raw), encoding="utf-8")
    preds = tmp_path / "p.json"
    preds.write_text(json.dumps({"q1": "Broncos", "q2": "February 7", "q3": "Santa Clara, California.", "zz": "x"}))
    result = CliRunner().invoke(app, ["evaluate-squad", str(preds), str(data)])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    # as test_v1_scores...: EM 1, 0, 1, missing; F1 1, 0.8, 1, 0
    assert out["exact_match"] == pytest.approx(50.0) and out["f1"] == pytest.approx(70.0)
    assert out["missing"] == 1 and out["unknown_ids"] == 1
    preds.write_text("[1, 2]")
    bad = CliRunner().invoke(app, ["evaluate-squad", str(preds), str(data)])
    assert bad.exit_code != 0
    # a folder, or a file answering none of the questions (another split's): refused, naming it
    preds.write_text(json.dumps({"other-1": "x", "other-2": "y"}))
    from helpers_cli import assert_bad_input, cli

    for where, said in ((tmp_path, "is a folder"), (preds, "none of its 2 question ids (e.g. 'other-1', 'other-2')")):
        assert_bad_input(cli(["evaluate-squad", where, data], cwd=tmp_path), f"{where}: {said}")
    # tinyplm predict's JSON lines (a record per question) score as the same answers in one object
    lines = [{"id": "q1", "answer": "Broncos", "start": 7, "end": 14, "score": 1.0},
             {"id": "q2", "answer": "February 7"}, {"id": "q3", "answer": "Santa Clara, California."},
             {"id": "zz", "answer": "x"}]
    preds.write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    again = CliRunner().invoke(app, ["evaluate-squad", str(preds), str(data)])
    assert again.exit_code == 0 and json.loads(again.output)["f1"] == pytest.approx(70.0)
    preds.write_text('{"q1": "x"}\n{"q2": "y"}\n')  # lines of another kind: not such a file
    assert_bad_input(cli(["evaluate-squad", preds, data], cwd=tmp_path), "not a JSON file",
                     "the JSON lines tinyplm predict writes")
