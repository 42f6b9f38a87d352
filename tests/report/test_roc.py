"""The ROC and floor plots: ROC curves from the record's stages, metric vs latency with the TF-IDF floor."""

from __future__ import annotations

from pathlib import Path

from tinyplm.evaluate.roc import RocCurve
from tinyplm.report.info import StageInfo
from tinyplm.report.records import RunRecord, StageKind, StageRecord
from tinyplm.report.roc import floor_stage, roc_floor_plots


def _stage(name: str, auc: float, p50: float, arch: str | None, roc: bool = True) -> StageRecord:
    info = StageInfo(roc=RocCurve(split="dev", fpr=[0.0, 0.5, 1.0], tpr=[0.0, auc, 1.0], auc=auc) if roc else None)
    return StageRecord(name=name, metrics={"roc_auc": auc}, params=10, params_no_embeddings=5, disk_bytes=1000,
                       latency_ms_p50_b1=p50, latency_ms_p90_b1=p50, throughput_sent_per_s=100.0, model_dir=name,
                       kind=StageKind.TEACHER if name == "teacher" else StageKind.STUDENT,
                       shape={"arch": arch} if arch else {"layers": 6}, info=info)


def test_family_plots_are_drawn_from_the_record(tmp_path: Path):
    record = RunRecord(task="goodreads_spoilers", metric="roc_auc",
                       stages=[_stage("teacher", 0.75, 20.0, None), _stage("tfidf", 0.6, 0.3, "tfidf_lr"),
                               _stage("bilstm", 0.65, 2.0, "bilstm", roc=False)])
    assert floor_stage(record).name == "tfidf"
    made = roc_floor_plots(record, tmp_path)
    assert set(made) == {"roc", "metric_vs_latency"}
    for path in made.values():
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_curves_no_roc_plot(tmp_path: Path):
    record = RunRecord(task="sst2", metric="roc_auc", stages=[_stage("teacher", 0.9, 5.0, None, roc=False)])
    assert set(roc_floor_plots(record, tmp_path)) == {"metric_vs_latency"}
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
    roc_floor_plots(RunRecord(task="tvtropes_spoilers", metric="roc_auc", stages=stages), tmp_path)
    labels = {label: tpr for tpr, label in drawn if label}
    assert "bilstm-kd, 3 seeds: AUC 0.720 (0.700-0.740)" in labels
    assert labels["bilstm-kd, 3 seeds: AUC 0.720 (0.700-0.740)"] == [0.0, 0.72, 1.0]  # median seed
    assert sum("bilstm-kd" in label for label in labels) == 1


def test_spread_labels_stacks_overlapping_boxes_and_leaves_the_rest():
    from tinyplm.report.roc import spread_labels

    boxes = [(0, 0, 50, 10), (5, 2, 60, 12), (200, 0, 250, 10), (0, 100, 40, 110)]
    shifts = spread_labels(boxes, gap=1.0)
    # the higher of the first two stays; the other goes 1 below its bottom (2 - 1 - 10); the rest stay
    assert shifts == [-9.0, 0.0, 0.0, 0.0]
    moved = [(x0, y0 + d, x1, y1 + d) for (x0, y0, x1, y1), d in zip(boxes, shifts, strict=True)]
    for i, a in enumerate(moved):
        for b in moved[i + 1:]:
            assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]), (a, b)
    # three at one spot stack under the top one
    assert spread_labels([(0, 0, 10, 10)] * 3, gap=0.0) == [0.0, -10.0, -20.0]


def test_labels_of_models_at_one_spot_do_not_overlap(tmp_path: Path, monkeypatch):
    import tinyplm.report.roc as roc

    boxes: dict = {}
    real_save = roc.save_figure

    def save(fig, path):  # the label boxes as drawn, before save_figure releases the figure
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        boxes.update({t.get_text(): t.get_window_extent(renderer) for t in fig.axes[0].texts})
        return real_save(fig, path)

    monkeypatch.setattr(roc, "save_figure", save)
    stages = [_stage("teacher", 0.80, 20.0, None), _stage("bilstm-kd", 0.712, 4.4, "bilstm"),
              _stage("bilstm-kd-aug", 0.711, 4.5, "bilstm"), _stage("tfidf", 0.6, 0.3, "tfidf_lr")]
    roc.metric_latency_plot(RunRecord(task="tvtropes_spoilers", metric="roc_auc", stages=stages),
                            tmp_path / "m.png")
    assert {"bilstm-kd", "bilstm-kd-aug"} <= set(boxes), set(boxes)
    assert not boxes["bilstm-kd"].overlaps(boxes["bilstm-kd-aug"])
