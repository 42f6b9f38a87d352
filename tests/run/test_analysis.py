"""tinyplm probe / heads on a run dir and on a model dir: tiny random BERTs, tiny SST-2; the report shows them."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from conftest import make_tiny_glue, make_tiny_model_dir
from helpers_cli import cli
from tinyplm.evaluate.encoder import open_model
from tinyplm.evaluate.head_run import HeadSettings
from tinyplm.evaluate.probe import ProbeSettings
from tinyplm.evaluate.probe_data import probe_task
from tinyplm.models import roles
from tinyplm.models.io import save_model
from tinyplm.models.shape import head_size, keep_heads
from tinyplm.report import write_all
from tinyplm.report.analysis import analysis_path, read_heads, read_probe
from tinyplm.report.analysis_plots import _grid
from tinyplm.report.info import CompressInfo, StageInfo
from tinyplm.report.records import RunRecord, StageKind, StageRecord
from tinyplm.run.analysis import head_lineage, heads_target, probe_target, resolve_target

KEPT = [[0, 2, 3], [1, 3]]  # heads the tiny student kept per layer


def tiny_run(tmp: Path) -> Path:
    """A run dir with a teacher and a head-pruned copy of it (heads 1 of layer 1, 0 and 2 of layer 2 gone)."""
    run = tmp / "run"
    make_tiny_model_dir(run / "teacher")
    opened = open_model(run / "teacher")
    size = head_size(opened.model)
    for layer, kept in zip(roles.layers(opened.model), KEPT, strict=True):
        keep_heads(layer, kept, size)  # as the prune_heads compress step does
    save_model(opened.model, opened.tokenizer, run / "students" / "pruned")
    shape = {"layers": 2, "hidden": 32, "heads": 4, "ffn": 37}
    record = RunRecord("sst2", "accuracy", [
        StageRecord("teacher", {"accuracy": 0.5}, model_dir="teacher", kind=StageKind.TEACHER, shape=shape),
        StageRecord("pruned", {"accuracy": 0.5}, model_dir="students/pruned", kind=StageKind.COMPRESSED,
                    parent="teacher", compress_step="prune_heads", shape={**shape, "heads_per_layer": [3, 2]},
                    info=StageInfo(compress=CompressInfo(kept=KEPT))),
    ])
    write_all(record, run)
    return run


def test_heads_of_a_pruned_stage_keep_their_original_index(tmp_path: Path) -> None:
    run = tiny_run(tmp_path)
    target = resolve_target(run)
    assert [n for n, _ in target.models] == ["teacher", "pruned"]
    assert head_lineage(target.record, "pruned") == (KEPT, [4, 4])
    assert head_lineage(target.record, "teacher") is None
    glue = make_tiny_glue(tmp_path / "glue", 40, 12)
    report, page = heads_target(target, probe_task("sst2"), HeadSettings(sentences=12, max_length=24),
                                str(glue), say=lambda _: None)
    stored = read_heads(analysis_path(run, "heads", "sst2"))
    pruned = stored.stages[1]
    assert pruned.heads_per_layer == [3, 2] and pruned.original == KEPT and pruned.original_heads == [4, 4]
    assert pruned.head_name(1, 1) == "L2H1 (was 3)" and stored.stages[0].head_name(1, 1) == "L2H1"
    grid, removed = _grid(pruned, pruned.stats["entropy"])
    assert removed.tolist() == [[False, True, False, False], [True, False, True, False]]
    assert torch.isnan(torch.tensor(grid))[removed].all()
    teacher = stored.stages[0]
    for stat, rows in teacher.stats.items():
        assert [len(r) for r in rows] == [4, 4], stat
    assert "importance" in teacher.stats  # the tiny model's SST-2 head fits the task
    assert all(0 <= v <= 1 for r in teacher.stats["argmax_prev"] for v in r)
    maps = teacher.example.maps
    n = len(teacher.example.tokens)
    assert maps and all(torch.tensor(m["weights"]).shape == (n, n) for m in maps)
    assert torch.tensor(maps[0]["weights"]).sum(-1) == pytest.approx(torch.ones(n), abs=1e-3)
    html = page.read_text(encoding="utf-8")
    assert page == run / "report.html" and "Looking inside" in html and "Positional heads" in html
    assert "removed by pruning are crossed out" in html
    assert (run / "plots" / "analysis" / "heads-sst2-pruned.png").is_file()


def test_probe_of_a_run_merges_stages_and_the_report_shows_one_plot(tmp_path: Path) -> None:
    run = tiny_run(tmp_path)
    glue = str(make_tiny_glue(tmp_path / "glue", 40, 12))
    settings = ProbeSettings(train_sentences=40, dev_sentences=12, max_length=24)
    probe_target(resolve_target(run, stages=["teacher"]), probe_task("sst2"), settings, glue, say=lambda _: None)
    report, page = probe_target(resolve_target(run, stages=["pruned"]), probe_task("sst2"), settings, glue,
                                say=lambda _: None)
    assert [c.name for c in read_probe(analysis_path(run, "probe", "sst2")).curves] == ["teacher", "pruned"]
    html = page.read_text(encoding="utf-8")
    assert html.count("<h3>Probe: sst2</h3>") == 1 and "random encoder" in html
    assert (run / "plots" / "analysis" / "probe-sst2.png").is_file()


def test_the_cli_on_a_model_dir(tmp_path: Path) -> None:
    model = make_tiny_model_dir(tmp_path / "m")
    glue = make_tiny_glue(tmp_path / "glue", 40, 12)
    out = tmp_path / "out"
    args = ["--data-dir", glue, "--out", out, "--max-length", "24"]
    probe = cli(["probe", model, "--task", "sst2", "--train-sentences", "40", *args], tmp_path)
    assert probe.returncode == 0, probe.output
    assert "best layer" in probe.stdout and (out / "analysis" / "probe-sst2.json").is_file()
    heads = cli(["heads", model, "--task", "sst2", "--sentences", "8", "--show", "1:0,2:3", *args], tmp_path)
    assert heads.returncode == 0, heads.output
    assert "positional heads" in heads.stdout and (out / "analysis.html").is_file()
    shown = read_heads(out / "analysis" / "heads-sst2.json").stages[0].example.maps
    assert [(m["layer"], m["head"]) for m in shown] == [(0, 0), (1, 3)]
    bad = cli(["heads", model, "--task", "sst2", "--show", "0:9", *args], tmp_path)
    assert bad.returncode == 2 and "LAYER:HEAD" in bad.stderr and "Traceback" not in bad.stderr
    missing = cli(["heads", model, "--task", "sst2", "--show", "3:0", *args], tmp_path)
    assert missing.returncode == 2 and "head 3:0 does not exist: the model has layers 1..2" in missing.stderr
    stages = cli(["probe", model, "--task", "sst2", "--stages", "teacher", *args], tmp_path)
    assert stages.returncode == 2 and "--stages" in stages.stderr


def test_options_and_an_out_no_analysis_can_use_are_refused_naming_them(tmp_path: Path) -> None:
    """--train-sentences 0 was an IndexError, --max-length 2 a message naming no option, and an --out
    under a file a traceback once the model had been analysed."""
    model = make_tiny_model_dir(tmp_path / "m")
    glue = make_tiny_glue(tmp_path / "glue", 40, 12)
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    common = [model, "--task", "sst2", "--data-dir", glue]
    for flag, value in (("--train-sentences", "0"), ("--dev-sentences", "-5"), ("--max-length", "2"),
                        ("--out", tmp_path / "afile" / "x")):
        bad = cli(["probe", *common, flag, value], tmp_path)
        assert bad.returncode == 2 and flag in bad.stderr and "Traceback" not in bad.stderr, bad.output
    heads = cli(["heads", *common, "--sentences", "4", "--out", tmp_path / "afile" / "x"], tmp_path)
    assert heads.returncode == 2 and "--out" in heads.stderr and "is a file" in heads.stderr, heads.output
    assert "heads of" not in heads.output  # refused before the model is read


def test_heads_of_a_run_merge_stages_and_a_models_out_is_never_a_run_dir(tmp_path: Path) -> None:
    """heads' settings were compared as written (a tuple) against as read back (a list), so each
    call replaced the stages analysed before; a model dir's --out naming a run dir replaced that
    run's own stage results; a classic student of a run was a traceback for heads."""
    from tinyplm.errors import TinyplmError

    run = tiny_run(tmp_path)
    glue = str(make_tiny_glue(tmp_path / "glue", 40, 12))
    settings = HeadSettings(sentences=4, max_length=24)
    quiet = lambda _: None  # noqa: E731
    heads_target(resolve_target(run, stages=["teacher"]), probe_task("sst2"), settings, glue, say=quiet)
    heads_target(resolve_target(run, stages=["pruned"]), probe_task("sst2"), settings, glue, say=quiet)
    assert [s.name for s in read_heads(analysis_path(run, "heads", "sst2")).stages] == ["teacher", "pruned"]
    with pytest.raises(TinyplmError, match=rf"--out {run} is a run dir"):
        resolve_target(run / "teacher", out=run)
    import json

    from tinyplm.models.classic.io import MODEL_TYPE
    from tinyplm.report import load_record

    (run / "students" / "tfidf").mkdir(parents=True)
    (run / "students" / "tfidf" / "config.json").write_text(json.dumps({"model_type": MODEL_TYPE}))
    record = load_record(run / "results.json")
    record.stages.append(StageRecord("tfidf", {"accuracy": 0.5}, model_dir="students/tfidf"))
    record.save(run / "results.json")
    target = resolve_target(run)
    assert ("tfidf", "a classic student: no transformer layers") in target.skipped
    assert [name for name, _ in target.models] == ["teacher", "pruned"]
