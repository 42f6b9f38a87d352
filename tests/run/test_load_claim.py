"""The README's load claim on a tiny run shaped like the demo: every saved stage loads the way its
config (``load_route``) and its model card say, and gives the logits tinyplm's loader gives."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import TINY_TRAIN, make_tiny_glue, make_tiny_model_dir, tiny_recipe, write_recipe
from tinyplm.config import load_recipe
from tinyplm.models import load_classifier
from tinyplm.models.load_route import Loader, LoadRoute, load_route, route_of_config
from tinyplm.run import run

pytestmark = pytest.mark.slow
LABELS = ("negative", "positive")
SENTENCES = ["a gripping , funny film", "dull and far too long", "the best thing this year"]
# The TINYPLM snippet is its code line: an OpenVINO card names load_classifier as an alternative.
SNIPPET = {Loader.TRANSFORMERS: "AutoModelForSequenceClassification.from_pretrained(model_dir)",
           Loader.TINYPLM: "model, tokenizer = load_classifier(model_dir, labels",
           Loader.OPENVINO: "compile_model(",
           Loader.ONNXRUNTIME: "ort.InferenceSession("}


def _demo_shaped(tmp_path: Path) -> dict:
    """The demo's stages on a tiny model: teacher, its runtime-best copy, a student from teacher
    layers, FFN pruning (one width), head pruning (global ranking), vocabulary trimming, an int8
    runtime."""
    short = {**TINY_TRAIN, "max_steps": 2}
    def runtime(candidate: str) -> dict:
        """A runtime step with one candidate: which runtime is fastest depends on the CPU, and the
        test must see both routes on every CPU."""
        return {"kind": "runtime", "runtime": "fastest", "candidates": [candidate], "calibration_examples": 16,
                "control_examples": 16}

    students = [
        {"name": "teacher-best", "init_from": "teacher", "stages": [], "compress": [runtime("openvino_int8")]},
        {"name": "teacher-w8", "init_from": "teacher", "stages": [],
         "compress": [{"kind": "openvino", "weights": "int8", "embeddings": True}]},
        {"name": "student", "teacher_layers": [0, 1], "train": short, "compress": [
            {"kind": "prune_ffn", "keep": 0.5, "scope": "layer", "score_batches": 2},
            {"kind": "prune_heads", "keep": 0.75, "score_batches": 2},
            {"kind": "trim_vocab"},
            runtime("onnx_dynamic_int8")]},
    ]
    model = make_tiny_model_dir(tmp_path / "tiny-bert")
    glue = make_tiny_glue(tmp_path / "glue", n_train=48, n_dev=24)
    return tiny_recipe(tmp_path, model, glue, students=students,
                       teacher={"model": str(model), "finetune": {**TINY_TRAIN, "max_steps": 2}},
                       final={"rule": "fastest", "min_retention": 0.01})


def _logits_as_stated(route: LoadRoute, folder: Path) -> np.ndarray:
    """The logits of SENTENCES, loaded as the model card says for ``route``."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    if route.loader == Loader.TRANSFORMERS:
        from transformers import AutoModelForSequenceClassification

        model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
        with torch.no_grad():
            return model(**tokenizer(SENTENCES, return_tensors="pt", padding=True)).logits.numpy()
    if route.loader == Loader.OPENVINO:
        import openvino as ov

        compiled = ov.Core().compile_model(str(folder / "model.xml"), "CPU")
        out = []
        for text in SENTENCES:  # one at a time, as the card's snippet feeds it
            inputs = tokenizer([text], return_tensors="np", truncation=True)
            out.append(compiled({k: v.astype("int64") for k, v in inputs.items()})[0][0])
        return np.stack(out)
    if route.loader == Loader.ONNXRUNTIME:
        import onnxruntime as ort

        session = ort.InferenceSession(str(folder / "model.onnx"), providers=["CPUExecutionProvider"])
        feeds = tokenizer(SENTENCES, return_tensors="np", padding=True)
        names = {i.name for i in session.get_inputs()}
        return session.run(["logits"], {k: v.astype("int64") for k, v in feeds.items() if k in names})[0]
    model, tok = load_classifier(folder, LABELS, False)
    with torch.no_grad():
        return model(**tok(SENTENCES, return_tensors="pt", padding=True)).logits.numpy()


def test_every_saved_stage_loads_as_its_card_says(tmp_path: Path) -> None:
    cfg = load_recipe(write_recipe(tmp_path / "r.yaml", _demo_shaped(tmp_path)))
    record = run(cfg)
    run_dir = Path(cfg.output_dir)
    folders = {s.name: run_dir / s.model_dir for s in record.stages if s.model_dir}
    folders["model"] = run_dir / "model"
    routes = {name: load_route(folder) for name, folder in folders.items()}
    assert routes["teacher"].loader == Loader.TRANSFORMERS
    assert routes["student.prune_ffn"].loader == Loader.TRANSFORMERS  # one FFN width: still a plain BERT
    assert routes["student.prune_heads"].loader == Loader.TINYPLM
    assert routes["student.trim_vocab"].loader == Loader.TINYPLM  # inherits the pruned heads
    assert routes["teacher-best.runtime"].loader == Loader.OPENVINO
    assert routes["student.runtime"].loader == Loader.ONNXRUNTIME
    assert routes["teacher-w8.openvino"].loader == Loader.OPENVINO
    widen = "manager.run_passes(graph)"  # the card folds int8-stored weights before compiling
    assert widen in (folders["teacher-w8.openvino"] / "README.md").read_text(encoding="utf-8")
    assert widen not in (folders["teacher-best.runtime"] / "README.md").read_text(encoding="utf-8")
    for name, folder in folders.items():
        route = routes[name]
        card = (folder / "README.md").read_text(encoding="utf-8")
        assert SNIPPET[route.loader] in card, (name, route)
        assert all(snippet not in card for loader, snippet in SNIPPET.items() if loader != route.loader), name
        if route.loader == Loader.TINYPLM:
            assert route.why in card
        ours, _ = load_classifier(folder, LABELS, False)
        stated = _logits_as_stated(route, folder)
        with torch.no_grad():
            _, tok = load_classifier(folder, LABELS, False)
            want = [ours(**tok([t], return_tensors="pt")).logits[0].numpy() for t in SENTENCES]
        np.testing.assert_allclose(stated, np.stack(want), atol=2e-2, rtol=0, err_msg=name)


def test_routes_name_why_plain_transformers_cannot_load() -> None:
    assert route_of_config({"model_type": "bert"}) == LoadRoute(Loader.TRANSFORMERS)
    assert "different sizes" in route_of_config({"tinyplm_shape": {"heads": [4, 3], "ffn": [8, 8]}}).why
    assert "heads removed" in route_of_config({"tinyplm_shape": {"heads": [3, 3], "ffn": [8, 8]}}).why
    assert "low-rank" in route_of_config({"tinyplm_shape": {"heads": [4], "ffn": [8], "ranks": {"x": 2}}}).why
    assert "quantized" in route_of_config({"tinyplm_quant": {"bits": 8}}).why
    assert route_of_config({"tinyplm_format": "openvino"}).loader == Loader.OPENVINO
    assert route_of_config({"tinyplm_format": "onnx"}).loader == Loader.ONNXRUNTIME


def test_an_unreadable_config_is_named(tmp_path: Path) -> None:
    from tinyplm.errors import ModelError

    (tmp_path / "config.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ModelError, match="config.json: cannot read it"):
        load_route(tmp_path)
