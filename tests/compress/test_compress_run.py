"""Compression steps in a run: each step its own stage, saved, reloadable, smaller, resumable."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import TINY_TRAIN, make_tiny_glue, make_tiny_model_dir, tiny_recipe, write_recipe
from tinyplm.config import load_recipe
from tinyplm.errors import ModelError, RecipeError
from tinyplm.models import load_classifier
from tinyplm.models.shape import params_from_config
from tinyplm.run import preflight, run

pytestmark = pytest.mark.slow
LABELS = ("negative", "positive")


def _recipe(tmp_path: Path) -> dict:
    model = make_tiny_model_dir(tmp_path / "tiny-bert")
    glue = make_tiny_glue(tmp_path / "glue", n_train=64, n_dev=32)
    short = {**TINY_TRAIN, "max_steps": 3}
    students = [
        {"name": "small", "teacher_layers": [0, 1], "train": short, "compress": [
            {"kind": "prune_heads", "keep": 0.5, "score_batches": 2, "recover": {"train": short}},
            {"kind": "prune_ffn", "keep": 0.5, "score_batches": 2},
            {"kind": "drop_layers", "count": 1, "score_batches": 2},
        ]},
        {"name": "teacher-pruned", "init_from": "teacher", "stages": [], "compress": [
            {"kind": "prune_heads", "keep": 0.75, "scope": "global", "score_batches": 2}]},
        {"name": "small-int8", "init_from": "small", "stages": [], "compress": [{"kind": "dynamic_int8"}]},
    ]
    return tiny_recipe(tmp_path, model, glue, students=students)


def test_compress_steps_are_stages(tmp_path: Path) -> None:
    cfg = load_recipe(write_recipe(tmp_path / "r.yaml", _recipe(tmp_path)))
    record = run(cfg)
    names = [s.name for s in record.stages]
    # compress-only students are not reported twice: their steps say where they started
    assert names == ["teacher", "small", "small.prune_heads", "small.prune_ffn", "small.drop_layers",
                     "teacher-pruned.prune_heads", "small-int8.dynamic_int8"]
    by = {s.name: s for s in record.stages}
    chain = ["small", "small.prune_heads", "small.prune_ffn", "small.drop_layers"]
    assert all(by[a].params > by[b].params for a, b in zip(chain, chain[1:], strict=False))
    assert all(by[a].disk_bytes > by[b].disk_bytes for a, b in zip(chain, chain[1:], strict=False))
    assert by["small.prune_heads"].shape["heads_per_layer"] == [2, 2]
    assert by["small.prune_heads"].info.compress.recover.steps == 3
    assert by["small.prune_ffn"].info.compress.details["ffn_after"] == [18, 18]
    assert by["small.drop_layers"].info.compress.details["layers_after"] == 1
    assert by["teacher-pruned.prune_heads"].parent == "teacher"
    assert sum(by["teacher-pruned.prune_heads"].shape["heads_per_layer"]) == 6
    # branching from an earlier student: a copy of the distilled model, not of its pruned steps
    assert by["small-int8.dynamic_int8"].parent == "small"
    assert by["small-int8.dynamic_int8"].params == by["small"].params
    assert by["small-int8.dynamic_int8"].disk_bytes < by["small"].disk_bytes
    run_dir = Path(cfg.output_dir)
    # contract: every saved step reloads to the same predictions, and the config says its size
    for name in chain[1:] + ["teacher-pruned.prune_heads"]:
        model, _ = load_classifier(run_dir / "students" / name, LABELS, False)
        assert sum(p.numel() for p in model.parameters()) == params_from_config(model.config) == by[name].params
    # an interrupted run (the last step not saved) resumes: finished steps are reloaded
    import shutil

    (run_dir / "results.json").unlink()
    shutil.rmtree(run_dir / "students" / "small.drop_layers")
    again = run(cfg, resume=True)
    for a, b in zip(record.stages, again.stages, strict=True):
        assert a.name == b.name and a.metrics == b.metrics
    assert again.stage("small.prune_ffn").info.reused is True
    assert again.stage("small.prune_ffn").info.compress.details["ffn_after"] == [18, 18]  # as when it was made
    assert again.stage("small.drop_layers").info.reused is False


def test_missing_init_from_is_refused_before_writing(tmp_path: Path) -> None:
    recipe = _recipe(tmp_path)
    recipe["students"][1]["init_from"] = str(tmp_path / "nowhere")
    cfg = load_recipe(write_recipe(tmp_path / "r.yaml", recipe))
    with pytest.raises(ModelError,
                       match="init_from: .*nowhere: model directory not found.*earlier student: \\['small'\\]"):
        preflight(cfg)
    assert not Path(cfg.output_dir).exists()


def test_repeated_step_kinds_need_names(tmp_path: Path) -> None:
    from tinyplm.errors import RecipeError

    recipe = _recipe(tmp_path)
    recipe["students"][1]["compress"].append({"kind": "prune_heads", "keep": 0.5})
    with pytest.raises(RecipeError, match="unique"):
        load_recipe(write_recipe(tmp_path / "r.yaml", recipe))
    recipe["students"][1]["compress"][1]["name"] = "prune_heads_2"
    assert len(load_recipe(write_recipe(tmp_path / "r.yaml", recipe)).students[1].compress) == 2


def test_sparsity_is_learnt_during_recovery(tmp_path: Path) -> None:
    recipe = _recipe(tmp_path)
    short = {**TINY_TRAIN, "max_steps": 6, "eval_every": 2}
    recipe["students"] = [{"name": "sparse", "init_from": "teacher", "stages": [], "compress": [
        {"kind": "movement", "sparsity": 0.6, "update_every": 2, "recover": {"train": short}},
        {"kind": "magnitude", "sparsity": 0.8, "scope": "layer", "recover": {"train": short}}]}]
    cfg = load_recipe(write_recipe(tmp_path / "r.yaml", recipe))
    record = run(cfg)
    run_dir = Path(cfg.output_dir)
    for name, target in (("sparse.movement", 0.6), ("sparse.magnitude", 0.8)):
        stage = record.stage(name)
        assert stage.info.compress.sparsity == pytest.approx(target, abs=0.01)
        assert stage.info.compress.recover.steps == 6
        csr = run_dir / "students" / name / "sparse" / "model.csr.safetensors"
        assert stage.info.compress.sparse_bytes == csr.stat().st_size
        model, _ = load_classifier(run_dir / "students" / name, LABELS, False)
        from tinyplm.compress.sparse import sparsity_of

        assert sparsity_of(model) == pytest.approx(target, abs=0.01)  # the zeros were saved
    assert record.stage("sparse.magnitude").info.compress.sparse_bytes < record.stage("sparse.magnitude").disk_bytes


def test_report_says_plainly_what_sparsity_did(tmp_path: Path) -> None:
    from tinyplm.report import RunRecord, StageRecord
    from tinyplm.report.info import CompressInfo, StageInfo
    from tinyplm.report.notes import compression_notes
    from tinyplm.report.records import StageKind

    def stage(name, **kw):
        base = dict(metrics={"accuracy": 0.9}, params=10, params_no_embeddings=5, disk_bytes=4_000_000,
                    latency_ms_p50_b1=1.0, latency_ms_p90_b1=1.2, throughput_sent_per_s=100.0)
        base.update(kw)
        return StageRecord(name=name, **base)

    record = RunRecord(task="sst2", metric="accuracy", stages=[
        stage("teacher"), stage("s"),
        stage("s.magnitude", throughput_sent_per_s=98.0, metrics={"accuracy": 0.88}, kind=StageKind.COMPRESSED,
              parent="s", compress_step="magnitude",
              info=StageInfo(compress=CompressInfo(sparsity=0.8, sparse_bytes=1_500_000))),
        stage("s.onnx_dynamic_int8", throughput_sent_per_s=210.0, disk_bytes=1_000_000, kind=StageKind.COMPRESSED,
              parent="s", compress_step="onnx_dynamic_int8"),
    ])
    notes = compression_notes(record)
    assert len(notes) == 2
    assert "80% of the encoder's Linear weights are zero" in notes[0] and "not faster" in notes[0]
    assert "CSR form 1.5 MB" in notes[0] and "-0.0200" in notes[0]
    assert "2.10× the parent's" in notes[1] and "not faster" not in notes[1] and "4.00× smaller" in notes[1]


def test_trimmed_vocabulary_is_measured_with_its_own_tokenizer(tmp_path: Path) -> None:
    recipe = _recipe(tmp_path)
    recipe["students"] = [{"name": "t", "init_from": "teacher", "stages": [], "compress": [
        {"kind": "trim_vocab"}, {"kind": "onnx_dynamic_int8", "embeddings": True}]}]
    cfg = load_recipe(write_recipe(tmp_path / "r.yaml", recipe))
    record = run(cfg)
    trimmed = record.stage("t.trim_vocab")
    vocab = trimmed.info.compress.details
    assert vocab["vocab_after"] < vocab["vocab_before"] == 99
    assert trimmed.metrics == record.stage("teacher").metrics  # same pieces, same predictions
    assert trimmed.params < record.stage("teacher").params
    run_dir = Path(cfg.output_dir)
    _, tok = load_classifier(run_dir / "students" / "t.onnx_dynamic_int8", LABELS, False)
    assert len(tok) == vocab["vocab_after"]  # the remapped tokenizer travels with each later step
    assert record.stage("t.onnx_dynamic_int8").metrics["accuracy"] > 0


def test_nothing_trains_after_trim_vocab(tmp_path: Path) -> None:
    from tinyplm.errors import RecipeError

    recipe = _recipe(tmp_path)
    recipe["students"][1]["compress"] = [{"kind": "trim_vocab"}, {"kind": "prune_heads", "keep": 0.5}]
    with pytest.raises(RecipeError, match="cannot follow trim_vocab"):
        load_recipe(write_recipe(tmp_path / "r.yaml", recipe))


@pytest.mark.parametrize(("steps", "refused"), [
    ([{"kind": "prune_heads", "keep": 0.5}, {"kind": "share", "mode": "all"}], "cannot follow prune_heads"),
    ([{"kind": "prune_ffn", "keep": 0.5, "scope": "global"}, {"kind": "share", "mode": "ffn"}],
     "cannot follow prune_ffn"),
    ([{"kind": "svd", "ratio": 0.5}, {"kind": "share", "mode": "attention"}], "cannot follow svd"),
    ([{"kind": "prune_heads", "keep": 0.5}, {"kind": "share", "mode": "ffn"}], None),  # heads only: FFNs stay even
    ([{"kind": "prune_ffn", "keep": 0.5}, {"kind": "share", "mode": "all"}], None),  # per layer: one width
    ([{"kind": "share", "mode": "all"}, {"kind": "prune_heads", "keep": 0.5}], None),
])
def test_share_after_a_step_that_leaves_layers_uneven_is_refused_up_front(tmp_path: Path, steps: list,
                                                                          refused: str | None) -> None:
    recipe = _recipe(tmp_path)
    recipe["students"] = [{"name": "s", "teacher_layers": [0, 1], "compress": steps}]
    path = write_recipe(tmp_path / "r.yaml", recipe)
    if refused is None:
        assert [s.kind for s in load_recipe(path).students[0].compress] == [s["kind"] for s in steps]
        return
    with pytest.raises(RecipeError, match=refused) as error:
        load_recipe(path)
    assert "share before it" in str(error.value)
