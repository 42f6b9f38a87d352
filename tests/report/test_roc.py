"""The family plots: ROC curves from the record's stages, metric vs latency with the TF-IDF floor."""

from __future__ import annotations

from pathlib import Path

from tinyplm.report.records import RunRecord, StageKind, StageRecord
from tinyplm.report.roc import family_plots, floor_stage


def _stage(name: str, auc: float, p50: float, arch: str | None, roc: bool = True) -> StageRecord:
    info = {"roc": {"split": "dev", "fpr": [0.0, 0.5, 1.0], "tpr": [0.0, auc, 1.0], "auc": auc}} if roc else {}
    return StageRecord(name=name, metrics={"roc_auc": auc}, params=10, params_no_embeddings=5, disk_bytes=1000,
                       latency_ms_p50_b1=p50, latency_ms_p90_b1=p50, throughput_sent_per_s=100.0, model_dir=name,
                       kind=StageKind.TEACHER if name == "teacher" else StageKind.STUDENT,
                       shape={"arch": arch} if arch else {"layers": 6}, info=info)


def test_family_plots_are_drawn_from_the_record(tmp_path: Path):
    record = RunRecord(task="goodreads_spoilers", metric="roc_auc",
                       stages=[_stage("teacher", 0.75, 20.0, None), _stage("tfidf", 0.6, 0.3, "tfidf_lr"),
                               _stage("bilstm", 0.65, 2.0, "bilstm", roc=False)])
    assert floor_stage(record).name == "tfidf"
    made = family_plots(record, tmp_path)
    assert set(made) == {"roc", "metric_vs_latency"}
    for path in made.values():
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_curves_no_roc_plot(tmp_path: Path):
    record = RunRecord(task="sst2", metric="roc_auc", stages=[_stage("teacher", 0.9, 5.0, None, roc=False)])
    assert set(family_plots(record, tmp_path)) == {"metric_vs_latency"}
    assert not (tmp_path / "plots" / "roc.png").exists()


def test_report_html_shows_the_roc_section_only_when_there_is_something_to_show(tmp_path: Path):
    from tinyplm.report import write_all

    with_curves = RunRecord(task="goodreads_spoilers", metric="roc_auc",
                            stages=[_stage("teacher", 0.75, 20.0, None), _stage("tfidf", 0.6, 0.3, "tfidf_lr")])
    made = write_all(with_curves, tmp_path / "a")
    html = (tmp_path / "a" / "report.html").read_text()
    assert "ROC curves and the TF-IDF floor" in html and html.count("data:image/png;base64") >= 4
    assert made["roc"] == tmp_path / "a" / "plots" / "roc.png" and made["roc"].is_file()
    plain = RunRecord(task="sst2", metric="roc_auc", stages=[_stage("teacher", 0.9, 5.0, None, roc=False)])
    made = write_all(plain, tmp_path / "b")
    assert "ROC curves" not in (tmp_path / "b" / "report.html").read_text()
    assert "roc" not in made and not (tmp_path / "b" / "plots" / "metric_vs_latency.png").exists()


def test_seeded_stages_are_drawn_as_one_model(tmp_path: Path, monkeypatch):
    from tinyplm.report.roc import plot_groups

    stages = [_stage("teacher", 0.8, 20.0, None), _stage("bilstm-kd-s1", 0.70, 1.0, "bilstm"),
              _stage("tfidf", 0.6, 0.3, "tfidf_lr"), _stage("bilstm-kd-s2", 0.74, 1.2, "bilstm"),
              _stage("bilstm-kd-s3", 0.72, 0.9, "bilstm"), _stage("elmo-s1", 0.55, 3.0, "elmo_bilstm")]
    groups = plot_groups(stages)
    assert [g.name for g in groups] == ["teacher", "bilstm-kd", "tfidf", "elmo-s1"]  # a lone seed stays itself
    kd = groups[1]
    assert [s.name for s in kd.stages] == ["bilstm-kd-s1", "bilstm-kd-s2", "bilstm-kd-s3"]
    assert kd.label == "bilstm-kd, 3 seeds" and groups[0].teacher and not kd.teacher

    # one legend entry for the group: its mean area and the seeds' range, with the median seed's curve
    import matplotlib.axes

    drawn: list = []
    real_plot = matplotlib.axes.Axes.plot

    def spy(self, *args, **kwargs):
        drawn.append((list(args[1]) if len(args) > 1 else None, kwargs.get("label")))
        return real_plot(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "plot", spy)
    family_plots(RunRecord(task="tvtropes_spoilers", metric="roc_auc", stages=stages), tmp_path)
    labels = {label: tpr for tpr, label in drawn if label}
    assert "bilstm-kd, 3 seeds: AUC 0.720 (0.700-0.740)" in labels
    assert labels["bilstm-kd, 3 seeds: AUC 0.720 (0.700-0.740)"] == [0.0, 0.72, 1.0]  # median seed
    assert sum("bilstm-kd" in label for label in labels) == 1
