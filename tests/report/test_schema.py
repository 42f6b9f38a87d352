"""results.json schema 3: files of schema 1 and 2 (small fixtures in the shapes those versions wrote)
load into the typed records with the same values, a schema-3 record survives JSON unchanged, and what
no schema has is said, not silently kept or silently lost."""

from __future__ import annotations

import json

import pytest

from tinyplm.evaluate.agreement import Agreement
from tinyplm.evaluate.roc import RocCurve
from tinyplm.evaluate.speed import Measurement
from tinyplm.report.info import (
    BiLMInfo,
    ClassicInfo,
    CompressInfo,
    StageInfo,
    TrainingInfo,
    WordVectorsInfo,
)
from tinyplm.report.records import SCHEMA_VERSION, RunRecord, StageKind
from tinyplm.report.run_info import BenchmarkInfo, FastestRuntime, Machine, RunInfo, RunPrecision

SHAPE = {"layers": 2, "hidden": 32, "heads": 4, "ffn": 64}
HISTORY = [{"step": 10, "elapsed_s": 3.5, "accuracy": 0.8}]
MEASURED = {"metrics": {"accuracy": 0.9}, "params": 10, "params_no_embeddings": 5, "disk_bytes": 40,
            "latency_ms_p50_b1": 1.0, "latency_ms_p90_b1": 1.5}


def _v1() -> dict:
    """What schema 1 (no ``schema_version``) wrote: typed facts inside ``info``, ``throughput_b32``."""
    trained = {"train_seconds": 12.0, "steps": 30, "stopped_by": "epochs", "best_step": 20, "budget_minutes": None,
               "precision": "fp32", "objective": {"kd_weight": 1.0, "temperature": 2.0}, "history": HISTORY}
    return {"task": "sst2", "metric": "accuracy", "stages": [
        {"name": "teacher", **MEASURED, "throughput_b32": 50.0,
         "info": {"model_dir": "teacher", "source": "minilm-l6", "shape": SHAPE}},
        {"name": "s", **MEASURED, "throughput_b32": 120.0,
         "info": {"model_dir": "students/s", "init": "random", "shape": SHAPE, "stage": "", "data": "task",
                  "teacher": "finetuned", **trained, "examples": 64}},
        {"name": "s.prune_heads", **MEASURED, "throughput_b32": 150.0,
         "info": {"step": {"kind": "prune_heads", "keep": 0.5}, "heads_before": [4, 4], "heads_after": [2, 2],
                  "kept": [[0, 3], [1, 2]], "step_seconds": 0.4, "recover": {**trained, "examples": 64},
                  "model_dir": "students/s.prune_heads", "from": "s", "kind": "prune_heads", "shape": SHAPE}},
        {"name": "s.drop_layers", **MEASURED, "throughput_b32": 160.0,
         "info": {"reused": True, "model_dir": "students/s.drop_layers", "from": "s.prune_heads",
                  "kind": "drop_layers", "shape": SHAPE}}],
        "info": {"run_name": "demo", "run_dir": "runs/demo", "created": "2026-01-02 03:04:05",
                 "started_unix": 1.5, "machine": {"cpu": "x86_64", "threads": 2, "torch": "2.13.0",
                                                  "bf16_native": False},
                 "processes": 1, "seconds": 99.0, "final_model": "s.prune_heads"}}


def test_schema_1_loads_into_the_typed_records() -> None:
    record = RunRecord.from_dict(_v1())
    teacher, student, pruned, dropped = record.stages
    assert (teacher.kind, teacher.model_dir, teacher.shape, teacher.throughput_sent_per_s, teacher.throughput_batch) \
        == (StageKind.TEACHER, "teacher", SHAPE, 50.0, 32)
    assert teacher.info == StageInfo(source="minilm-l6")
    trained = dict(train_seconds=12.0, steps=30, stopped_by="epochs", best_step=20, precision="fp32",
                   objective={"kd_weight": 1.0, "temperature": 2.0}, history=HISTORY, examples=64)
    assert student.info == StageInfo(init="random", training=[
        TrainingInfo(stage="", data="task", teacher="finetuned", **trained)])
    assert (pruned.kind, pruned.parent, pruned.compress_step) == (StageKind.COMPRESSED, "s", "prune_heads")
    assert pruned.info == StageInfo(compress=CompressInfo(
        step={"kind": "prune_heads", "keep": 0.5}, step_seconds=0.4, kept=[[0, 3], [1, 2]],
        recover=TrainingInfo(**trained), details={"heads_before": [4, 4], "heads_after": [2, 2]}))
    assert dropped.info == StageInfo(compress=CompressInfo(), reused=True) and dropped.parent == "s.prune_heads"
    assert record.info == RunInfo(
        run_name="demo", run_dir="runs/demo", created="2026-01-02 03:04:05", started_unix=1.5, seconds=99.0,
        machine=Machine(cpu="x86_64", threads=2, torch="2.13.0", bf16_native=False), processes=1,
        final_model="s.prune_heads")


def _v2() -> dict:
    """What schema 2 wrote (as a run of this repository's demo did): typed stage fields, free ``info``."""
    cost = {"trainable_params": 100, "total_params": 100, "trainable_share": 1.0, "peak_rss_mib": 900.5,
            "rss_scope": "stage", "train_seconds": 8.0}
    trained = {**cost, "finetune_method": "full", "steps": 40, "stopped_by": "budget", "best_step": 40,
               "budget_minutes": 1.0, "precision": "bf16", "eval_precision": "fp32",
               "objective": {"hard_weight": 1.0}, "history": HISTORY}
    roc = {"split": "dev", "fpr": [0.0, 0.5, 1.0], "tpr": [0.0, 0.8, 1.0], "auc": 0.75}
    agreement = {"examples": 20, "disagreements": 1, "agreement": 0.95, "max_abs_logit_diff": 0.25}

    def stage(name: str, kind: str, info: dict, **typed) -> dict:
        return {"name": name, **MEASURED, "throughput_sent_per_s": 100.0, "throughput_batch": 16, "kind": kind,
                "model_dir": name, "parent": None, "compress_step": None, "shape": SHAPE, "runtime": "torch",
                "precision": "fp32", "compute": None, "metric_precision": "fp32", "info": info, **typed}

    return {"schema_version": 2, "task": "sst2", "metric": "accuracy", "stages": [
        stage("teacher", "teacher", {"source": "minilm-l6", **trained, "roc": roc}),
        stage("two", "student", {"init": "teacher layers [1]", "stages": [
            {"stage": "general", "data": "corpus", "teacher": "base", **trained, "examples": 300},
            {"stage": "task", "data": "task", "teacher": "finetuned", **trained, "examples": 60, "reused": True}]}),
        stage("two.runtime", "compressed", {
            "step": {"kind": "runtime", "runtime": "fastest"}, "runtime": "openvino", "int8": "weights",
            "chosen_by": {"chosen": "openvino_int8"}, "step_seconds": 5.0, "agreement_with_parent": agreement,
            "runtime_detail": "int8 MatMuls, the rest bf16"},
              parent="two", compress_step="runtime", runtime="openvino", precision="int8"),
        stage("two.magnitude", "compressed", {
            "step": {"kind": "magnitude", "sparsity": 0.5}, "schedule": "cubic", "target_sparsity": 0.5,
            "method": "magnitude", "sparsity": 0.4998, "step_seconds": 0.1, "recover": {**trained, "examples": 60},
            "sparse_bytes": 1234, "reused": True}, parent="two", compress_step="magnitude"),
        stage("tfidf", "student", {"init": "scikit-learn fit", "fit_seconds": 0.7, "examples": 60,
                                   "trainable_params": 40, "total_params": 50, "features": 18, "iterations": 7,
                                   "class_weight": "balanced"}),
        stage("elmo", "student", {"init": "frozen biLM, scalar mix", "words": 120, "vectors": {
            "kind": "glove", "cached": "/c/glove.npz"}, "vocabulary_found": 0.91, "bilm": {
            "paragraphs": 30, "held_out": 3, "steps": 9, "train_seconds": 1.0, "perplexity": 80.5,
            "unigram_perplexity": 300.25, "predictions": 500, "reused": "/c/bilm"},
            "stage": "", "data": "task", **trained, "examples": 60})],
        "info": {"run_name": "demo", "machine": {"cpu": "x86_64", "threads": 2, "torch": "2.13.0", "bf16_native": True,
                                                 "bf16_switch": None, "auto_means": "bf16"},
                 "precision": {"metrics": "fp32", "teacher_logits": "fp32"}, "teacher_fingerprint": "ab" * 32,
                 "measurement": {"latency": "batch 1", "throughput": "batches of 16", "threads": 2,
                                 "warmup_batches": 1, "rounds": 3, "same batches": "interleaved",
                                 "statistic": "median"},
                 "bench": ["a", "b"], "fastest": {"teacher": {
                     "fastest": "teacher@openvino", "runtime": "openvino f32", "tolerance": 0.005,
                     "candidates": {"teacher": {"sent_per_s": 10.0, "accuracy": 0.9}}}},
                 "benchmark": "distill_ablation", "budget_minutes": 4.0, "variants": ["kd"],
                 "final_model": "two.runtime", "final_rule": "the fastest"}}


def test_schema_2_loads_into_the_typed_records() -> None:
    record = RunRecord.from_dict(_v2())
    by = {s.name: s for s in record.stages}
    cost = dict(trainable_params=100, total_params=100, trainable_share=1.0, peak_rss_mib=900.5, rss_scope="stage",
                train_seconds=8.0, finetune_method="full", steps=40, stopped_by="budget", best_step=40,
                budget_minutes=1.0, precision="bf16", eval_precision="fp32", objective={"hard_weight": 1.0},
                history=HISTORY)
    assert by["teacher"].info == StageInfo(source="minilm-l6", training=[TrainingInfo(**cost)], roc=RocCurve(
        split="dev", fpr=[0.0, 0.5, 1.0], tpr=[0.0, 0.8, 1.0], auc=0.75))
    assert by["two"].info == StageInfo(init="teacher layers [1]", training=[
        TrainingInfo(stage="general", data="corpus", teacher="base", examples=300, **cost),
        TrainingInfo(stage="task", data="task", teacher="finetuned", examples=60, reused=True, **cost)])
    assert by["two.runtime"].info == StageInfo(runtime_detail="int8 MatMuls, the rest bf16", compress=CompressInfo(
        step={"kind": "runtime", "runtime": "fastest"}, step_seconds=5.0,
        agreement=Agreement(examples=20, disagreements=1, agreement=0.95, max_abs_logit_diff=0.25),
        details={"runtime": "openvino", "int8": "weights", "chosen_by": {"chosen": "openvino_int8"}}))
    assert by["two.magnitude"].info == StageInfo(reused=True, compress=CompressInfo(
        step={"kind": "magnitude", "sparsity": 0.5}, step_seconds=0.1, sparsity=0.4998, sparse_bytes=1234,
        recover=TrainingInfo(examples=60, **cost),
        details={"schedule": "cubic", "target_sparsity": 0.5, "method": "magnitude"}))
    assert by["tfidf"].info == StageInfo(
        init="scikit-learn fit", training=[TrainingInfo(train_seconds=0.7, examples=60, trainable_params=40,
                                                        total_params=50)],
        classic=ClassicInfo(features=18, iterations=7, class_weight="balanced"))
    assert by["elmo"].info == StageInfo(
        init="frozen biLM, scalar mix", training=[TrainingInfo(stage="", data="task", examples=60, **cost)],
        classic=ClassicInfo(words=120, vectors=WordVectorsInfo(kind="glove", cached="/c/glove.npz"),
                            vocabulary_found=0.91, bilm=BiLMInfo(
                                paragraphs=30, held_out=3, steps=9, train_seconds=1.0, perplexity=80.5,
                                unigram_perplexity=300.25, predictions=500, reused="/c/bilm")))
    assert record.info == RunInfo(
        run_name="demo", machine=Machine(cpu="x86_64", threads=2, torch="2.13.0", bf16_native=True,
                                         auto_means="bf16"),
        precision=RunPrecision(metrics="fp32", teacher_logits="fp32"), teacher_fingerprint="ab" * 32,
        measurement=Measurement(latency="batch 1", throughput="batches of 16", threads=2, warmup_batches=1, rounds=3,
                                same_batches="interleaved", statistic="median"),
        bench=["a", "b"], fastest={"teacher": FastestRuntime(
            fastest="teacher@openvino", runtime="openvino f32", tolerance=0.005,
            candidates={"teacher": {"sent_per_s": 10.0, "accuracy": 0.9}})},
        benchmark=BenchmarkInfo(name="distill_ablation", settings={"budget_minutes": 4.0, "variants": ["kd"]}),
        final_model="two.runtime", final_rule="the fastest")
    assert record.stage("two.runtime").info.trained is None and by["two.magnitude"].info.trained.steps == 40


@pytest.mark.parametrize("old", [_v1, _v2], ids=["schema-1", "schema-2"])
def test_a_schema_3_record_survives_json_unchanged(old) -> None:
    record = RunRecord.from_dict(old())
    written = json.loads(json.dumps(record.to_dict()))
    assert written["schema_version"] == SCHEMA_VERSION == 3
    assert RunRecord.from_dict(written) == record
    assert json.loads(json.dumps(RunRecord.from_dict(written).to_dict())) == written


def test_keys_no_schema_has_are_said() -> None:
    old = _v1()
    old["stages"][1]["info"]["colour"] = "blue"
    del old["info"]["run_name"]
    old["info"]["mood"] = "good"
    with pytest.warns(UserWarning) as caught:
        record = RunRecord.from_dict(old)
    said = [str(w.message) for w in caught]
    assert any("stage info keys ['colour']" in m for m in said) and any("run info keys ['mood']" in m for m in said)
    assert record.stage("s").info.init == "random"  # the rest of the stage still loads
    new = record.to_dict()
    new["stages"][0]["info"]["colour"] = "blue"
    with pytest.raises(ValueError, match="StageInfo has no field 'colour'"):
        RunRecord.from_dict(new)
    with pytest.raises(ValueError, match="schema_version 4: this tinyplm reads schema 1 to 3"):
        RunRecord.from_dict({**new, "schema_version": 4})
