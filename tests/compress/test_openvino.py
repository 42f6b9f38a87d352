"""OpenVINO on tiny models: f32 conversion, save/load round trip, NNCF int8, the fastest-runtime
choice, runtime descriptions, and a clear error for a dir without its .bin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from conftest import make_tiny_model_dir, tiny_sentiment_rows
from tinyplm.compress import CompressContext, apply_step
from tinyplm.compress.openvino import openvino_float, openvino_int8
from tinyplm.compress.runtime import choose_fastest, control_indices
from tinyplm.config.compress import FastestRuntime, OpenVino
from tinyplm.errors import ModelError, TinyplmError
from tinyplm.evaluate.agreement import prediction_agreement
from tinyplm.evaluate.runtime import describe
from tinyplm.evaluate.size import disk_bytes
from tinyplm.models import load_classifier, save_model
from tinyplm.models.infer import predict_logits
from tinyplm.models.openvino import OV_BIN, OV_XML, RUNTIME_KEY, OvClassifier
from tinyplm.tasks.base import Example, Split
from tinyplm.tasks.encoding import encode_split

pytest.importorskip("openvino")


@pytest.fixture
def tiny(tmp_path: Path):
    model, tok = load_classifier(make_tiny_model_dir(tmp_path / "tiny-bert"), ("0", "1"), False)
    rows = tiny_sentiment_rows(160, 0)
    split = Split("train", [Example(t, None, y, i) for i, (t, y) in enumerate(rows)], tmp_path / "train.tsv")
    return model, tok, encode_split(split, tok, 32)


def test_f32_openvino_predicts_what_pytorch_predicts_and_round_trips(tiny, tmp_path: Path) -> None:
    model, tok, enc = tiny
    ov = openvino_float(model, tmp_path / "work", precision="f32")
    assert ov.precision == "f32" and not ov.int8_matmuls
    torch.testing.assert_close(predict_logits(ov, enc), predict_logits(model, enc), atol=1e-4, rtol=1e-4)
    out = save_model(ov, tok, tmp_path / "saved")
    assert {OV_XML, OV_BIN, "config.json"} <= {p.name for p in out.iterdir()}
    config = json.loads((out / "config.json").read_text())
    assert config["tinyplm_format"] == "openvino"
    assert config[RUNTIME_KEY]["runtime"] == "openvino" and config[RUNTIME_KEY]["inference_precision"] == "f32"
    assert disk_bytes(out) >= (out / OV_BIN).stat().st_size > 0
    loaded, _ = load_classifier(out, ("0", "1"), False)
    assert isinstance(loaded, OvClassifier) and loaded.precision == "f32"
    assert torch.equal(predict_logits(loaded, enc), predict_logits(ov, enc))  # identical after the round trip
    assert describe(loaded).runtime == "openvino" and describe(loaded).precision == "f32"


def test_streams_run_batches_from_several_threads_with_the_same_logits(tiny, tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from tinyplm.models.openvino import compile_config

    model, _, enc = tiny
    ov = openvino_float(model, tmp_path / "work", precision="f32")
    one = predict_logits(ov, enc, batch_size=16)
    ov.streams = 2
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda _: predict_logits(ov, enc, batch_size=16), range(4)))
    assert ov._ensure_compiled().get_property("NUM_STREAMS") == 2
    for logits in runs:
        torch.testing.assert_close(logits, one, atol=1e-5, rtol=1e-5)
    assert compile_config("auto", 1, 2)["INFERENCE_NUM_THREADS"] == "2"  # at least a thread per stream
    with pytest.raises(ModelError, match="streams must be at least 1"):
        compile_config("auto", 2, 0)


def test_nncf_int8_quantizes_and_mostly_agrees(tiny, tmp_path: Path) -> None:
    model, tok, enc = tiny
    q = openvino_int8(model, enc, tmp_path / "work", examples=32, precision="f32", embeddings=True)
    assert q.int8_matmuls and describe(q).precision == "int8"
    agree = prediction_agreement(model, q, {"train": enc}, is_regression=False)
    assert agree.examples == len(enc) and agree.agreement >= 0.9  # a random tiny model: close to its parent
    saved = save_model(q, tok, tmp_path / "q")
    f32 = save_model(openvino_float(model, tmp_path / "w2", precision="f32"), tok, tmp_path / "f")
    # int8 weights and embeddings take fewer bytes (a tiny model's graph file is larger than its weights)
    assert (saved / OV_BIN).stat().st_size < 0.5 * (f32 / OV_BIN).stat().st_size


def test_int8_stored_weights_are_smaller_on_disk_and_widened_before_compiling(tiny, tmp_path: Path) -> None:
    from tinyplm.models.openvino import widened

    model, tok, enc = tiny
    f32 = openvino_float(model, tmp_path / "f", precision="f32")
    w8 = openvino_float(model, tmp_path / "w", precision="f32", weights="int8")
    assert w8.widen and not f32.widen and not w8.int8_matmuls  # stored in int8, computed in float

    def int8_constants(graph) -> int:
        return sum(op.get_type_name() == "Constant" and op.get_output_element_type(0).get_type_name() == "i8"
                   for op in graph.get_ops())

    assert int8_constants(w8.model) >= 6  # every encoder Linear of the 2-layer model (4 + 2 FFN per layer)
    assert int8_constants(widened(w8.model)) == 0 and int8_constants(w8.model) > 0  # folded on a copy only
    # per-channel int8 weights: the logits stay close to float's, the predictions the same on nearly all
    torch.testing.assert_close(predict_logits(w8, enc), predict_logits(f32, enc), atol=2e-2, rtol=0)
    saved = save_model(w8, tok, tmp_path / "saved")
    plain = save_model(f32, tok, tmp_path / "plain")
    config = json.loads((saved / "config.json").read_text())[RUNTIME_KEY]
    assert config["widen_weights"] is True and "int8-stored weights" in config["quantization"]
    assert json.loads((plain / "config.json").read_text())[RUNTIME_KEY]["widen_weights"] is False
    # the tiny model's weights are a small part of its file; the int8 ones still take fewer bytes
    assert (saved / OV_BIN).stat().st_size < 0.6 * (plain / OV_BIN).stat().st_size
    loaded, _ = load_classifier(saved, ("0", "1"), False)
    assert isinstance(loaded, OvClassifier) and loaded.widen
    assert torch.equal(predict_logits(loaded, enc), predict_logits(w8, enc))  # identical after the round trip
    assert describe(loaded).precision == "f32" and "widened when compiled" in describe(loaded).detail


def test_the_fastest_runtime_gives_its_openvino_candidate_int8_stored_weights() -> None:
    from tinyplm.compress.runtime import candidate_step

    step = FastestRuntime(kind="runtime", weights="int8")
    assert candidate_step("openvino", step).weights == "int8"
    assert candidate_step("openvino", FastestRuntime(kind="runtime")).weights == "float"  # the default


def test_a_dir_without_its_bin_is_refused_by_name(tiny, tmp_path: Path) -> None:
    model, tok, _ = tiny
    out = save_model(openvino_float(model, tmp_path / "work", precision="f32"), tok, tmp_path / "saved")
    (out / OV_BIN).unlink()
    with pytest.raises(ModelError, match=rf"holds no {OV_BIN} \(an OpenVINO model is {OV_XML} and {OV_BIN}"):
        load_classifier(out, ("0", "1"), False)


def test_the_openvino_step_records_its_precision(tiny, tmp_path: Path) -> None:
    model, tok, enc = tiny
    ctx = CompressContext(enc, None, False, tmp_path / "work", tokenizer=tok)
    out, info = apply_step(model, OpenVino(kind="openvino", precision="f32"), ctx)
    assert isinstance(out, OvClassifier) and info == {"runtime": "openvino", "precision": "f32"}
    out, info = apply_step(model, OpenVino(kind="openvino", precision="f32", weights="int8", embeddings=True), ctx)
    assert out.widen and info == {"runtime": "openvino", "precision": "f32",
                                  "int8": "weights (stored; widened when compiled), embeddings"}


class _Stub(torch.nn.Module):
    """Predicts from a lookup of each example's ids: the gold label (an oracle) or always class 0."""

    def __init__(self, enc, config, oracle: bool) -> None:
        super().__init__()
        self.config, self.oracle = config, oracle
        self.gold = {tuple(ids): int(y) for ids, y in zip(enc.input_ids, enc.labels, strict=True)}

    def forward(self, input_ids, attention_mask, **_):
        from types import SimpleNamespace

        rows = []
        for ids, mask in zip(input_ids.tolist(), attention_mask.tolist(), strict=True):
            label = self.gold[tuple(i for i, m in zip(ids, mask, strict=True) if m)] if self.oracle else 0
            rows.append([1.0 - label, float(label)])
        return SimpleNamespace(logits=torch.tensor(rows))


def test_fastest_runtime_keeps_the_fastest_within_the_drop(tiny) -> None:
    model, _, enc = tiny
    step = FastestRuntime(kind="runtime", candidates=["openvino"], max_drop=0.01, control_examples=40,
                          calibration_examples=50)
    held = control_indices(len(enc), 50, 40, seed=0)
    calibration = torch.randperm(len(enc), generator=torch.Generator().manual_seed(0))[:50].tolist()
    assert len(held) == 40 and not set(held) & set(calibration)  # never the examples calibration saw
    oracle, zeros = _Stub(enc, model.config, True), _Stub(enc, model.config, False)
    assert 0 < float(enc.subset(held).labels.float().mean()) < 1  # both classes among the held-out examples
    candidates = {"slow": oracle, "fast-but-wrong": zeros, "fast": _Stub(enc, model.config, True)}
    timings = {"slow": 10.0, "fast-but-wrong": 1000.0, "fast": 20.0}
    choice = choose_fastest(oracle, candidates, enc, lambda models, _: timings, step, 0, False)
    assert choice.chosen == "fast" and choice.reference_accuracy == 1.0 and choice.examples == 40
    assert choice.candidates["fast-but-wrong"]["accuracy"] < 1.0 - step.max_drop
    del candidates["fast"]
    assert choose_fastest(oracle, candidates, enc, lambda models, _: timings, step, 0, False).chosen == "slow"


def test_bench_runs_each_model_in_each_runtime_and_names_the_fastest(tmp_path: Path) -> None:
    from conftest import make_tiny_glue
    from tinyplm.config import TaskSpec
    from tinyplm.run import bench

    model = make_tiny_model_dir(tmp_path / "tiny-bert")
    task = TaskSpec(name="sst2", data_dir=str(make_tiny_glue(tmp_path / "glue", n_train=16, n_dev=24)), max_length=32)
    record = bench([model], task, rounds=1, runtimes=["torch", "onnxruntime", "openvino"], work=tmp_path / "w")
    assert [s.name for s in record.stages] == ["teacher", "teacher@onnxruntime", "teacher@openvino"]
    assert [s.runtime for s in record.stages] == ["torch", "onnxruntime", "openvino"]
    accuracy = {s.metrics["accuracy"] for s in record.stages}
    assert len(accuracy) == 1  # fp32 graphs (f32 or bf16 on this CPU) predict the same
    fastest = record.info.fastest["teacher"]
    speeds = {name: c["sent_per_s"] for name, c in fastest.candidates.items()}
    assert fastest.fastest == max(speeds, key=speeds.get)
    with pytest.raises(TinyplmError, match="unknown tensorrt"):
        bench([model], task, runtimes=["torch", "tensorrt"])
