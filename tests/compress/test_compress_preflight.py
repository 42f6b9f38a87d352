"""Compress steps whose settings the student's shape or the step order cannot take are refused
before anything runs (``tinyplm validate`` and the run's preflight), not after the teacher's
fine-tune: each names the student, the step and what would work, and leaves no run directory."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import make_tiny_glue, make_tiny_model_dir, tiny_recipe, write_recipe
from tinyplm.config import load_recipe
from tinyplm.errors import RecipeError
from tinyplm.run import preflight


def _recipe(tmp_path: Path, steps: list, **student) -> dict:
    model = make_tiny_model_dir(tmp_path / "tiny-bert")  # 2 layers, hidden 32, FFN 37, vocab 99
    glue = make_tiny_glue(tmp_path / "glue", n_train=16, n_dev=8)
    spec = {"name": "s", "init_from": "teacher", "stages": [], "compress": steps, **student}
    return tiny_recipe(tmp_path, model, glue, students=[spec])


@pytest.mark.parametrize(("steps", "student", "refused"), [
    ([{"kind": "drop_layers", "layers": [5]}], {}, r"layers \[5\] are out of range: the model has layers 0..1"),
    ([{"kind": "drop_layers", "count": 2}], {}, "count 2 would drop all 2 layers; at most 1"),
    ([{"kind": "drop_layers", "layers": [0, 1]}], {}, "drop all 2 layers"),
    ([{"kind": "drop_layers", "layers": [1], "name": "d1"}, {"kind": "drop_layers", "layers": [1], "name": "d2"}],
     {}, r"d2 \(drop_layers\): layers \[1\] are out of range: the model has layers 0..0"),
    ([{"kind": "share", "groups": [[0, 5]]}], {}, r"groups \[\[0, 5\]\] must list distinct layers in 0..1"),
    ([{"kind": "drop_layers", "count": 1}, {"kind": "share", "groups": [[0, 1]]}], {}, "in 0..0"),
    ([{"kind": "share", "groups": [[0, 2]]}], {"init_from": None, "teacher_layers": [0, 1, 1], "stages": None},
     None),  # a student of three teacher layers has a layer 2
    ([{"kind": "factorize_embeddings", "rank": 32}], {}, r"rank 32 is not below the word table's size \(99 x 32\)"),
    ([{"kind": "factorize_embeddings", "rank": 31}], {}, None),
    ([{"kind": "factorize_embeddings", "rank": 20}], {"init_from": None, "teacher_layers": [0], "stages": None,
      "shape": {"layers": 1, "hidden": 16, "heads": 4, "ffn": 20}},
     r"rank 20 is not below the word table's size \(99 x 16\)"),  # a narrowed student's own table
    ([{"kind": "factorize_embeddings", "rank": 15}], {"init_from": None, "teacher_layers": [0], "stages": None,
      "shape": {"layers": 1, "hidden": 16, "heads": 4, "ffn": 20}}, None),
    ([{"kind": "int4_weight", "group_size": 64}], {}, "group_size 64 is wider than any row .* at most 37"),
    ([{"kind": "int4_weight", "group_size": 36}], {}, None),
])
def test_steps_the_shape_cannot_take_are_refused_before_the_teacher_trains(
        tmp_path: Path, steps: list, student: dict, refused: str | None) -> None:
    cfg = load_recipe(write_recipe(tmp_path / "r.yaml", _recipe(tmp_path, steps, **student)))
    if refused is None:
        preflight(cfg)
        return
    with pytest.raises(RecipeError, match=refused) as error:
        preflight(cfg)
    assert str(error.value).startswith("student s, compress step ")
    assert not Path(cfg.output_dir).exists()


@pytest.mark.parametrize(("steps", "said"), [
    ([{"kind": "prune_heads", "keep": 1.0}], [r"prune_heads \(prune_heads\): keep 1 keeps all 8 attention heads "
                                              r"\(4 in each of 2 layers\): it removes nothing"]),
    ([{"kind": "prune_heads", "keep": 0.95}], ["keeps all 8 attention heads"]),  # 7.6 heads round to 8
    ([{"kind": "prune_heads", "keep": 0.9}], []),
    ([{"kind": "prune_ffn", "keep": 0.99}], [r"keep 0.99 keeps all 74 FFN neurons \(37 in each of 2 layers\)"]),
    ([{"kind": "prune_ffn", "keep": 0.9}], []),
    ([{"kind": "share", "groups": [[0], [1]]}], ["every group is one layer: nothing is shared"]),
    ([{"kind": "share"}], []),
    ([{"kind": "drop_layers", "count": 1}, {"kind": "share"}], [r"share \(share\): every group is one layer"]),
    ([{"kind": "svd", "ratio": 0.6}], [r"query rank 19 of 32 x 32 \(below 16 is smaller\).*ffn_in rank 19 of 37 x 32 "
                                       r"\(below 18 is smaller\).*lower ratio"]),
    ([{"kind": "svd", "ratio": 0.4}], []),
    # heads halved in each layer first: query is 16 x 32 there, where rank 10 is smaller; ffn_in is not
    ([{"kind": "prune_heads", "keep": 0.5, "scope": "layer"},
      {"kind": "svd", "ratio": 0.6, "roles": ["query", "ffn_in"]}],
     [r"svd \(svd\): .*: ffn_in rank 19 of 37 x 32 \(below 18 is smaller\); lower"]),
    # layers left unlike by global pruning: the steps after it are not judged
    ([{"kind": "prune_heads", "keep": 0.5}, {"kind": "prune_heads", "keep": 1.0, "name": "again"}], []),
])
def test_steps_that_cannot_make_the_student_smaller_are_said_before_the_run(
        tmp_path: Path, steps: list, said: list[str]) -> None:
    """A step that removes nothing (or, an SVD, adds weights) is no error, but costs its scoring and
    recovery and repeats its parent in the report: the preflight's notes say so, naming the step."""
    notes = [n for n in preflight(load_recipe(write_recipe(tmp_path / "r.yaml", _recipe(tmp_path, steps)))).notes
             if n.startswith("student s, compress step ")]
    assert len(notes) == len(said), notes
    for note, pattern in zip(notes, said, strict=True):
        assert re.search(pattern, note), (pattern, note)


@pytest.mark.parametrize(("steps", "refused"), [
    ([{"kind": "svd", "ratio": 0.5}, {"kind": "prune_heads", "keep": 0.5}], "prune_heads .* cannot follow svd"),
    ([{"kind": "svd", "ratio": 0.5, "roles": ["ffn_out"]}, {"kind": "prune_ffn", "keep": 0.5}],
     "cannot follow svd .* the ffn_out Linear"),
    ([{"kind": "svd", "ratio": 0.5, "roles": ["ffn_in", "ffn_out"]}, {"kind": "prune_heads", "keep": 0.5}], None),
    ([{"kind": "int4_weight", "group_size": 7}], "group_size.*multiple of 2"),
    ([{"kind": "magnitude", "sparsity": 0.5, "recover": {"train": {"ema_decay": 0.5}}}],
     r"magnitude learns masks during its recovery, and recover\.train\.ema_decay would average"),
    ([{"kind": "movement", "sparsity": 0.5, "recover": {"train": {"ema_decay": 0.5, "method": "bitfit"}}}],
     r"movement learns masks"),
    ([{"kind": "prune_heads", "keep": 0.5,
       "recover": {"objective": {"kd_weight": 0.0, "hidden": 1.0, "mlm_hard": 1.0}}}],
     r"r\.yaml:\d+: students\[0\]\.compress\[0\]\.prune_heads\.recover: mlm_soft/mlm_hard need a teacher with a "
     "masked-LM head, and a recovery distils from"),
])
def test_step_orders_and_settings_that_cannot_work_are_refused_by_the_recipe(
        tmp_path: Path, steps: list, refused: str | None) -> None:
    path = write_recipe(tmp_path / "r.yaml", _recipe(tmp_path, steps))
    if refused is None:
        assert [s.kind for s in load_recipe(path).students[0].compress] == [s["kind"] for s in steps]
        return
    with pytest.raises(RecipeError, match=refused):
        load_recipe(path)


@pytest.mark.parametrize("kind", ["dynamic_int8", "int4_weight", "bf16"])
def test_torch_quantization_of_an_embedding_model_is_refused_before_the_run(tmp_path: Path, kind: str) -> None:
    """dynamic_int8, int4_weight and bf16 on a sentence-embedding model: a traceback at the step,
    or a saved model that could not be loaded again (resume, predict, serve). Refused up front."""
    from helpers_doc_world import write_tiny_data
    from helpers_embedding import make_sentence_dir

    write_tiny_data(tmp_path / "data")
    recipe = {"name": "emb", "output_dir": str(tmp_path / "runs" / "emb"), "cache_dir": str(tmp_path / "cache"),
              "task": {"name": "embedding", "data_dir": str(tmp_path / "data"), "max_length": 32,
                       "eval_max_length": 48},
              "teacher": {"model": str(make_sentence_dir(tmp_path / "teacher"))},
              "students": [{"name": "s", "init_from": "teacher", "stages": [], "compress": [{"kind": kind}]}]}
    cfg = load_recipe(write_recipe(tmp_path / "r.yaml", recipe))
    with pytest.raises(RecipeError, match=f"student s, compress step {kind}: .* onnx_dynamic_int8"):
        preflight(cfg)
    assert not Path(cfg.output_dir).exists()


def test_a_grouped_encoders_copies_that_outgrow_their_source_are_said_before_the_run(tmp_path: Path) -> None:
    """The tiny ALBERT's three layers share one group: a copy of the teacher pruned layer by layer first gets a
    group per layer, and a student of both its layers holds both copies, each larger than the
    teacher it came from (the helper run measured 10,103 -> 17,393 parameters). Said, not refused."""
    from helpers_families import make_family_dir

    teacher = make_family_dir(tmp_path / "albert", "albert")
    glue = make_tiny_glue(tmp_path / "glue", n_train=16, n_dev=8)
    students = [{"name": "pruned", "init_from": "teacher", "stages": [], "compress": [{"kind": "prune_ffn",
                                                                                      "keep": 0.5}]},
                {"name": "copied", "teacher_layers": [0, 1], "train": {"max_steps": 2}},
                {"name": "one", "teacher_layers": [1], "train": {"max_steps": 2}}]
    cfg = load_recipe(write_recipe(tmp_path / "r.yaml", tiny_recipe(tmp_path, teacher, glue, students=students)))
    notes = [n for n in preflight(cfg).notes if "group" in n]
    assert len(notes) == 2, notes
    assert notes[0].startswith("student pruned, compress step prune_ffn (prune_ffn): the albert model's 3 layers "
                               "share 1 group(s), and the step first gives each layer a copy of its own")
    assert notes[1].startswith("student copied: copies 2 layers of the albert teacher, whose 3 layers share 1 group(s)")
