"""Weights and outputs that are not numbers are refused where they would be read as answers
(tinyplm.models.finite): at load, at evaluation, in predict (named by line, or skipped) and in
serve (only the requests holding such inputs fail)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from safetensors.torch import load_file, save_file

from conftest import make_tiny_model_dir
from tinyplm.errors import DataError, ModelError
from tinyplm.evaluate.model_eval import eval_logits, metrics_from_logits
from tinyplm.inference.predictor import Predictor
from tinyplm.inference.records import TextInput
from tinyplm.models import load_classifier
from tinyplm.models.finite import NanOutputs, nan_rows
from tinyplm.models.pooling import Pooling, SentenceLayout
from tinyplm.models.sentence import load_sentence_encoder
from tinyplm.predict.predict import PredictJob, predict_file
from tinyplm.predict.sources import Source
from tinyplm.serve.batcher import MicroBatcher
from tinyplm.tasks.base import Example, Split, TaskData
from tinyplm.tasks.encoding import encode_split
from tinyplm.tasks.heads import Head

LABELS = ("negative", "positive")


@settings(max_examples=40, deadline=None)
@given(arrays(np.float32, st.tuples(st.integers(1, 6), st.integers(1, 4), st.integers(1, 3)),
              elements=st.sampled_from([0.0, -1.5, 2.0, np.inf, -np.inf, np.nan])))
def test_nan_rows_are_exactly_the_rows_holding_a_nan(outputs: np.ndarray) -> None:
    expected = tuple(i for i in range(len(outputs)) if any(np.isnan(v) for v in outputs[i].ravel()))
    assert nan_rows(outputs) == expected
    assert nan_rows(torch.from_numpy(outputs)) == expected
    assert nan_rows(np.zeros(outputs.shape, np.int64)) == ()  # integers are always numbers


def _poisoned(model_dir: Path, out: Path) -> Path:
    """A copy of ``model_dir`` with one weight NaN, as a checkpoint saved after divergence holds."""
    out.mkdir()
    for f in model_dir.iterdir():
        (out / f.name).write_bytes(f.read_bytes())
    state = load_file(str(out / "model.safetensors"))
    name = next(k for k in state if k.endswith("attention.self.query.weight"))
    state[name][0, 0] = float("nan")
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


def test_a_checkpoint_with_a_nan_weight_is_refused_when_it_loads(tmp_path: Path) -> None:
    bad = _poisoned(make_tiny_model_dir(tmp_path / "m"), tmp_path / "bad")
    with pytest.raises(ModelError, match=rf"{bad}: weight \S*attention\.self\.query\.weight holds values that are "
                                         r"not numbers .*load the checkpoint from before"):
        load_classifier(bad, LABELS, False)
    with pytest.raises(ModelError, match=r"query\.weight holds values that are not numbers"):
        load_sentence_encoder(bad, SentenceLayout(Pooling("mean")))


def _nan_for_long_texts(model: torch.nn.Module, words: int) -> None:
    """Make ``model`` answer NaN for each text of more than ``words`` tokens, as an overflow would."""

    def hook(_module, _args, kwargs, output):
        long = kwargs["attention_mask"].sum(1) > words + 2  # [CLS] and [SEP]
        output.logits[long] = float("nan")
        return output

    model.register_forward_hook(hook, with_kwargs=True)


def test_evaluation_refuses_nan_outputs_naming_the_split_and_examples(tmp_path: Path) -> None:
    model, tok = load_classifier(make_tiny_model_dir(tmp_path / "m"), LABELS, False)
    _nan_for_long_texts(model, 3)
    texts = ["a", "a b c d e f", "b c", "a b c d e"]
    split = Split("validation", [Example(t, None, i % 2) for i, t in enumerate(texts)], tmp_path / "dev.tsv")
    data = TaskData("sst2", split, {"validation": split}, LABELS, False, ("accuracy",), "accuracy")
    enc = {"validation": encode_split(split, tok, 32)}
    with pytest.raises(NanOutputs, match=r"task sst2, split validation: the model's outputs are NaN for 2 of 4 "
                                         r"inputs \(input 1, 3, counted from 0\)") as caught:
        metrics_from_logits(data, enc, eval_logits(model, enc))
    assert caught.value.rows == (1, 3)


def _nan_predictor(tmp_path: Path, words: int) -> Predictor:
    predictor = Predictor.load(make_tiny_model_dir(tmp_path / "m"), batch_size=4)
    _nan_for_long_texts(predictor.model, words)
    return predictor


def test_predict_names_the_inputs_whose_outputs_are_nan(tmp_path: Path) -> None:
    predictor = _nan_predictor(tmp_path, 3)
    texts = ["a", "a b c d e f", "b c", "d", "a b c d e", "e"]
    with pytest.raises(NanOutputs, match=r"NaN for 2 of 6 inputs \(input 1, 4,") as caught:
        predictor.predict([TextInput(t) for t in texts])
    assert caught.value.rows == (1, 4)
    answered = predictor.predict([TextInput(t) for t in ("a", "b c")])
    assert [p.label in predictor.info.labels for p in answered] == [True] * 2


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_predict_on_a_file_names_or_skips_the_lines_whose_outputs_are_nan(tmp_path: Path, on_error: str) -> None:
    predictor = _nan_predictor(tmp_path, 3)
    lines = ["a", "a b c d e f", "b c", "d", "a b c d e", "e"]
    source_file = tmp_path / "in.txt"
    source_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out, side = tmp_path / "out.jsonl", tmp_path / "out.skipped.jsonl"
    job = PredictJob(Source(str(source_file), "text", Head.SEQUENCE), str(out), on_error=on_error,
                     skipped=side if on_error == "skip" else None, window=4)
    if on_error == "raise":
        with pytest.raises(DataError, match=rf"{source_file}:2: the model's outputs for this row are NaN"):
            predict_file(predictor, job)
        assert not out.exists()  # nothing half written
        return
    summary = predict_file(predictor, job)
    assert (summary.predicted, summary.skipped) == (4, 2)
    written = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [w["label"] in predictor.info.labels for w in written] == [True] * 4
    listed = [json.loads(line) for line in side.read_text(encoding="utf-8").splitlines()]
    assert [x["line"] for x in listed] == [2, 5] and all("NaN" in x["error"] for x in listed)


def test_serve_fails_only_the_requests_holding_nan_inputs() -> None:
    """Three requests share a batch; the one holding a text the model answers NaN for fails with
    its own position named, and the other two are answered."""

    def run(items):
        bad = tuple(i for i, x in enumerate(items) if x.text == "overflow")
        if bad:
            raise NanOutputs("nan", bad)
        return [x.text.upper() for x in items]

    async def scenario():
        b = MicroBatcher(run, max_batch=8, max_wait_s=0.0, max_queue=100)
        b.start()
        jobs = [b.submit([TextInput("a"), TextInput("b")], 5),
                b.submit([TextInput("c"), TextInput("overflow")], 5),
                b.submit([TextInput("d")], 5)]
        results = await asyncio.gather(*jobs, return_exceptions=True)
        await b.stop()
        return results

    first, second, third = asyncio.run(scenario())
    assert first[0] == ["A", "B"] and third[0] == ["D"]
    assert isinstance(second, NanOutputs) and second.rows == (1,)
    assert "NaN for 1 of 2 inputs (input 1," in str(second)
