"""SQuAD windows (labels, stride) and post-processing (n-best spans, v2.0 null threshold)."""

from __future__ import annotations

import numpy as np
import pytest
from tests.conftest import make_tiny_model_dir

from tinyplm.evaluate.squad import answers_with_threshold, best_null_threshold
from tinyplm.tasks.squad import Answer, QAExample
from tinyplm.tasks.squad_features import Prediction, build_features, predict_answers

CONTEXT = " ".join(["the movie was good and the plot was dull"] * 6)  # 54 words


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(make_tiny_model_dir(tmp_path_factory.mktemp("tok"))))


def _example(answer_word_index: int | None, qid: str = "q") -> QAExample:
    words = CONTEXT.split()
    if answer_word_index is None:
        return QAExample(qid, "what was dull", CONTEXT, ())
    start = len(" ".join(words[:answer_word_index])) + (1 if answer_word_index else 0)
    text = " ".join(words[answer_word_index : answer_word_index + 2])
    return QAExample(qid, "what was dull", CONTEXT, (Answer(text, start),))


def test_windows_overlap_and_labels_point_at_the_answer(tok) -> None:
    examples = [_example(3), _example(50), _example(None, "n")]
    f = build_features(examples, tok, max_length=32, doc_stride=8, max_query_length=8)
    assert len(f) > 3 and all(len(ids) <= 32 for ids in f.input_ids)
    per_example = [f.example.count(i) for i in range(3)]
    assert all(n > 1 for n in per_example)  # the context needs several windows
    for i, (s, e) in enumerate(f.labels.tolist()):
        ex = examples[f.example[i]]
        if s:
            assert ex.context[f.offsets[i][s][0] : f.offsets[i][e][1]] == ex.answers[0].text
    # each answerable example is found in at least one window; the unanswerable in none
    hit = {f.example[i] for i, (s, _) in enumerate(f.labels.tolist()) if s}
    assert hit == {0, 1}
    # consecutive windows of one example share doc_stride context tokens
    w0, w1 = [i for i, o in enumerate(f.example) if o == 0][:2]
    ctx0 = [o for o in f.offsets[w0] if o is not None]
    ctx1 = [o for o in f.offsets[w1] if o is not None]
    assert ctx0[-8:] == ctx1[:8]


def test_an_answer_no_piece_covers_is_labelled_no_answer(tok) -> None:
    """An answer of characters the tokenizer drops (zero-width spaces) lies between two pieces: its
    label is [CLS] (no answer here), not a reversed span (end before start)."""
    context = "the movie was \u200b\u200b and good"
    ex = QAExample("z", "what was it", context, (Answer("\u200b\u200b", context.index("\u200b")),))
    f = build_features([ex], tok, max_length=32, doc_stride=8, max_query_length=8)
    assert f.labels.tolist() == [[0, 0]]


def test_stride_must_leave_room(tok) -> None:
    with pytest.raises(ValueError, match="doc_stride"):
        build_features([_example(3)], tok, max_length=32, doc_stride=24, max_query_length=8)


def test_post_processing_picks_the_best_valid_span(tok) -> None:
    ex = _example(3)
    f = build_features([ex], tok, max_length=64, doc_stride=16, max_query_length=8)
    starts, ends = [], []
    for i in range(len(f)):
        n = len(f.input_ids[i])
        s, e = np.full(n, -100.0), np.full(n, -100.0)
        s[0] = e[0] = 0.0  # [CLS]: the null score
        ctx = [j for j, o in enumerate(f.offsets[i]) if o is not None]
        s[1], e[1] = 50, 50  # a question token: never an answer
        s[ctx[6]], e[ctx[0]] = 20, 20  # their pair is reversed: skipped
        s[ctx[1]], e[ctx[2]] = 10, 9  # the best valid span
        starts.append(s)
        ends.append(e)
    pred = predict_answers([ex], f, starts, ends, n_best=5, max_answer_length=30)[0]
    o = f.offsets[0]
    ctx = [j for j, x in enumerate(o) if x is not None]
    assert pred.text == ex.context[o[ctx[1]][0] : o[ctx[2]][1]]
    assert pred.score == pytest.approx(19.0)
    assert pred.null_score == pytest.approx(0.0)
    short = predict_answers([ex], f, starts, ends, n_best=5, max_answer_length=1)[0]
    assert short.text != pred.text  # the 2-token span is too long now


def test_null_threshold_is_tuned_for_f1() -> None:
    examples = [QAExample("a", "?", "x", (Answer("x", 0),)), QAExample("b", "?", "y", ())]
    preds = [Prediction("x", score=5.0, null_score=4.0), Prediction("y", score=1.0, null_score=3.0)]
    t = best_null_threshold(examples, preds)
    # gaps: a -1, b +2: any threshold in [-1, 2) answers a and leaves b empty
    assert -1.0 <= t < 2.0
    assert answers_with_threshold(preds, t) == ["x", ""]
