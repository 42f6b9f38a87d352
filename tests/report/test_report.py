"""Reports built from hand-made RunRecords: derived numbers, files, escaping, rebuild, cards."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

from tinyplm.errors import TinyplmError
from tinyplm.report import (
    RunRecord,
    StageRecord,
    best_student,
    headline,
    markdown_table,
    rebuild,
    render_html,
    render_model_card,
    render_summary,
    stage_rows,
    write_all,
    write_model_card,
)
from tinyplm.report.info import StageInfo, TrainingInfo
from tinyplm.report.plots import accuracy_vs_latency, throughput_bar
from tinyplm.report.records import StageKind
from tinyplm.report.run_info import BenchmarkInfo, Machine, RunInfo, RunPrecision

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def stage(
    name: str, acc: float, throughput: float, disk: int, p50: float, model_dir: str | None = None,
    shape: dict | None = None, info: StageInfo | None = None
) -> StageRecord:
    """A stage with made-up numbers; params scale with disk size."""
    kind = StageKind.TEACHER if name == "teacher" else StageKind.STUDENT
    return StageRecord(name=name, metrics={"accuracy": acc}, params=disk // 4,
                       params_no_embeddings=disk // 16, disk_bytes=disk, latency_ms_p50_b1=p50,
                       latency_ms_p90_b1=p50 * 1.3, throughput_sent_per_s=throughput, model_dir=model_dir,
                       kind=kind, shape=shape, info=info or StageInfo())


def make_record() -> RunRecord:
    """Teacher 0.90; student A 0.882 (98.0%, 2x, 2x smaller); student B 0.855 (95.0%, 4x, 4x)."""
    return RunRecord(
        task="sst2",
        metric="accuracy",
        stages=[
            stage("teacher", 0.90, 100.0, 88_000_000, 20.0, model_dir="teacher"),
            stage("student-L4-H312", 0.882, 200.0, 44_000_000, 9.0, model_dir="students/a",
                  shape={"layers": 4, "hidden": 312, "heads": 12, "ffn": 1200}, info=StageInfo(
                      init="random", training=[TrainingInfo(train_seconds=480.0,
                                                            objective={"kd": "logits", "temperature": 2.0})])),
            stage("student-L2-H128", 0.855, 400.0, 22_000_000, 1.5),
        ],
        info=RunInfo(run_name="demo", created="2025-01-02T03:04:05",
                     machine=Machine(cpu="Test CPU", threads=2, torch="2.13.0"),
                     precision=RunPrecision(metrics="fp32")),
    )


class TagChecker(HTMLParser):
    """Collects start tags and fails on unbalanced non-void tags."""

    VOID = {"meta", "img", "br", "hr", "link", "input"}

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, f"unexpected </{tag}>, open: {self.stack}"
        self.stack.pop()


def check_html(text: str) -> TagChecker:
    parser = TagChecker()
    parser.feed(text)
    parser.close()
    assert parser.stack == [], f"unclosed tags {parser.stack}"
    return parser


# --- derived numbers -------------------------------------------------------------------------


def test_stage_rows_retention_speedup_compression() -> None:
    rows = {r.name: r for r in stage_rows(make_record())}
    a, b, t = rows["student-L4-H312"], rows["student-L2-H128"], rows["teacher"]
    assert a.retention == pytest.approx(98.0)
    assert b.retention == pytest.approx(95.0)
    assert t.retention == pytest.approx(100.0) and t.is_teacher
    assert a.speedup == pytest.approx(2.0) and b.speedup == pytest.approx(4.0)
    assert a.compression == pytest.approx(2.0) and b.compression == pytest.approx(4.0)
    assert a.size_mb == pytest.approx(44.0) and a.params_m == pytest.approx(11.0)
    assert a.latency_p90_ms == pytest.approx(9.0 * 1.3)
    assert a.metric == pytest.approx(0.882) and a.metrics == {"accuracy": 0.882}


def test_ratios_are_none_without_teacher_or_zero_divisor() -> None:
    record = make_record()
    record.stages[0].metrics["accuracy"] = 0.0
    record.stages[0].throughput_sent_per_s = 0.0
    rows = stage_rows(record)
    assert rows[1].retention is None and rows[1].speedup is None
    no_teacher = RunRecord("sst2", "accuracy", make_record().stages[1:])
    assert all(r.retention is None and r.compression is None for r in stage_rows(no_teacher))


def test_best_student_highest_metric_then_throughput() -> None:
    record = make_record()
    assert best_student(record).name == "student-L4-H312"  # type: ignore[union-attr]
    record.stages[2].metrics["accuracy"] = 0.882  # tie: the faster one wins
    assert best_student(record).name == "student-L2-H128"  # type: ignore[union-attr]
    record.stages[0].metrics["accuracy"] = 0.99  # the teacher never counts
    assert best_student(record).name == "student-L2-H128"  # type: ignore[union-attr]
    assert best_student(RunRecord("sst2", "accuracy", record.stages[:1])) is None


def test_markdown_table_and_headline() -> None:
    record = make_record()
    table = markdown_table(record)
    lines = table.strip().splitlines()
    assert len(lines) == 2 + 3
    for name in ("teacher", "student-L4-H312", "student-L2-H128"):
        assert name in table
    assert "**student-L4-H312**" in table  # best student in bold
    a_line = next(line for line in lines if "student-L4-H312" in line)
    b_line = next(line for line in lines if "student-L2-H128" in line)
    assert "98.0%" in a_line and "2.00×" in a_line and "⚠" not in a_line
    assert "95.0% ⚠" in b_line and "4.00×" in b_line
    assert headline(record) == ("Best student student-L4-H312 keeps 98.0% of the teacher's "
                                "accuracy at 2.0× its throughput, 2.0× smaller.")


def test_summary_has_table_note_and_links() -> None:
    text = render_summary(make_record())
    assert text.startswith("# tinyplm run: demo")
    assert markdown_table(make_record()).strip() in text
    assert "batch-1 p50/p90" in text and "batch 32" in text and "warm-up" in text
    assert "(report.html)" in text and "(plots/accuracy_vs_latency.png)" in text


# --- files -----------------------------------------------------------------------------------


def test_plots_are_png(tmp_path: Path) -> None:
    record = make_record()
    a = accuracy_vs_latency(record, tmp_path / "p" / "a.png")
    b = throughput_bar(record, tmp_path / "p" / "b.png")
    for path in (a, b):
        assert path.read_bytes()[:8] == PNG_MAGIC
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == ["a.png", "b.png"]  # no temp left


def test_write_all_writes_every_file(tmp_path: Path) -> None:
    record = make_record()
    (tmp_path / "model").mkdir()
    (tmp_path / "students" / "a").mkdir(parents=True)
    out = write_all(record, tmp_path)
    expected = {"results.json", "summary.md", "report.html", "plots/accuracy_vs_latency.png",
                "plots/throughput.png", "model/README.md", "students/a/README.md"}
    written = {p.relative_to(tmp_path).as_posix() for p in out.values()}
    assert written == expected
    assert all((tmp_path / rel).is_file() for rel in expected)
    assert not list(tmp_path.rglob("*.tmp"))
    assert RunRecord.load(tmp_path / "results.json") == record
    assert (tmp_path / "plots" / "throughput.png").read_bytes()[:8] == PNG_MAGIC
    assert "# student-L4-H312" in (tmp_path / "model" / "README.md").read_text(encoding="utf-8")
    assert not (tmp_path / "teacher").exists()  # cards only go into folders that exist


def test_results_json_is_written_last_so_a_run_killed_writing_its_reports_is_not_finished(
        tmp_path: Path, monkeypatch) -> None:
    import tinyplm.report as report

    def killed(*args):
        raise KeyboardInterrupt  # the process dies while writing the model cards

    monkeypatch.setattr(report, "_write_cards", killed)
    with pytest.raises(KeyboardInterrupt):
        write_all(make_record(), tmp_path)
    assert (tmp_path / "report.html").is_file() and not (tmp_path / "results.json").exists()


def test_html_is_self_contained_and_valid(tmp_path: Path) -> None:
    out = write_all(make_record(), tmp_path)
    text = out["report"].read_text(encoding="utf-8")
    parser = check_html(text)
    imgs = [attrs["src"] for tag, attrs in parser.tags if tag == "img"]
    assert len(imgs) == 2 and all(s and s.startswith("data:image/png;base64,") for s in imgs)
    srcs = [attrs.get("src") or attrs.get("href") for _, attrs in parser.tags]
    assert not [s for s in srcs if s and not s.startswith("data:")]  # no external resources
    for name in ("teacher", "student-L4-H312", "student-L2-H128"):
        assert name in text
    assert 'class="best"' in text and 'class="low"' in text
    assert "Best student student-L4-H312 keeps 98.0%" in text
    assert "4 layers, hidden 312, 12 heads, FFN 1200" in text and "8m 00s" in text
    assert "Test CPU" in text and "2.13.0" in text and "fp32" in text and "2025-01-02" in text


def test_text_is_escaped() -> None:
    record = make_record()
    record.stages[2].name = "<b>x</b>"
    record.info.benchmark = BenchmarkInfo(name="b", recipe="<script>alert(1)</script>")
    text = render_html(record, {})
    check_html(text)
    assert "&lt;b&gt;x&lt;/b&gt;" in text and "<b>x</b>" not in text
    assert "<script>" not in text


def test_no_teacher_and_mnli_metrics_render(tmp_path: Path) -> None:
    no_teacher = RunRecord("sst2", "accuracy", make_record().stages[1:])
    out = write_all(no_teacher, tmp_path / "a")
    check_html(out["report"].read_text(encoding="utf-8"))
    assert "no teacher" in headline(no_teacher)
    assert all(line.count("| — |") >= 1 for line in markdown_table(no_teacher).splitlines()[2:])

    mnli = make_record()
    mnli.task = "mnli"
    for s, mm in zip(mnli.stages, (0.91, 0.87, 0.86), strict=True):
        s.metrics["accuracy_mm"] = mm
    out = write_all(mnli, tmp_path / "b")
    table = markdown_table(mnli)
    assert "| accuracy | accuracy_mm |" in table and "0.8700" in table
    assert "accuracy_mm" in out["report"].read_text(encoding="utf-8")
    card = render_model_card(mnli, "student-L4-H312")
    assert "accuracy_mm" in card and "0.8700" in card


def test_empty_record_renders(tmp_path: Path) -> None:
    out = write_all(RunRecord("sst2", "accuracy"), tmp_path)
    assert out["accuracy_vs_latency"].read_bytes()[:8] == PNG_MAGIC
    check_html(out["report"].read_text(encoding="utf-8"))


# --- rebuild ---------------------------------------------------------------------------------


def test_rebuild_regenerates_reports(tmp_path: Path) -> None:
    make_record().save(tmp_path / "results.json")
    out = rebuild(tmp_path)
    assert out["report"].is_file() and out["summary"].is_file()
    assert "student-L2-H128" in (tmp_path / "summary.md").read_text(encoding="utf-8")
    (tmp_path / "report.html").unlink()
    rebuild(tmp_path)
    assert (tmp_path / "report.html").is_file()


def test_rebuild_reads_results_json_and_never_rewrites_it(tmp_path: Path) -> None:
    """An older schema or keys this version does not know (a user's note, a newer tinyplm's field)
    were dropped for good when ``report`` saved the record it had read."""
    data = make_record().to_dict()
    data["my_note"] = "kept"
    data["stages"][0]["reviewer"] = "kept too"
    text = json.dumps(data, indent=1)
    (tmp_path / "results.json").write_text(text, encoding="utf-8")
    out = rebuild(tmp_path)
    assert out["summary"].is_file()
    assert (tmp_path / "results.json").read_text(encoding="utf-8") == text


def test_rebuild_missing_results_names_file(tmp_path: Path) -> None:
    with pytest.raises(TinyplmError, match="results.json") as err:
        rebuild(tmp_path)
    assert str(tmp_path / "results.json") in str(err.value)


@pytest.mark.parametrize("content", [
    "{not json",
    "[1, 2]",
    json.dumps({"task": "sst2", "metric": "accuracy"}),
    json.dumps({"task": "sst2", "metric": "accuracy", "stages": [{"name": "teacher"}]}),
    json.dumps({"task": "sst2", "metric": "accuracy", "stages": [
        {**stage("t", 0.9, 1.0, 1, 1.0).to_dict(), "metrics": "high"}]}),
])
def test_rebuild_invalid_results_raises(tmp_path: Path, content: str) -> None:
    (tmp_path / "results.json").write_text(content, encoding="utf-8")
    with pytest.raises(TinyplmError) as err:
        rebuild(tmp_path)
    assert str(tmp_path / "results.json") in str(err.value)
    assert "expected" in str(err.value)


# --- model card ------------------------------------------------------------------------------


def test_model_card_contents(tmp_path: Path) -> None:
    record = make_record()
    card = render_model_card(record, "student-L4-H312")
    assert card.startswith("---\nlibrary_name: transformers\n")
    meta = yaml.safe_load(card.split("---\n")[1])
    assert meta["library_name"] == "transformers"
    assert meta["tags"] == ["tinyplm", "distillation", "text-classification"]
    assert meta["datasets"] == ["nyu-mll/glue"] and meta["metrics"] == ["accuracy"]
    result = meta["model-index"][0]["results"][0]
    assert result["metrics"][0] == {"type": "accuracy", "value": 0.882, "name": "dev accuracy"}
    assert "AutoModelForSequenceClassification.from_pretrained(model_dir)" in card
    assert "AutoTokenizer.from_pretrained(model_dir)" in card
    assert "0.8820" in card and "98.0%" in card and "0.9000" in card  # vs the teacher
    assert "4 layers, hidden 312" in card and "random" in card
    assert "temperature:** 2" in card and "8m 00s" in card
    assert "Test CPU" in card and "dev split" in card and "English" in card
    path = write_model_card(tmp_path, record, "student-L4-H312")
    assert path == tmp_path / "README.md" and path.read_text(encoding="utf-8") == card


def test_model_card_errors(tmp_path: Path) -> None:
    with pytest.raises(TinyplmError, match="student-L4-H31"):
        render_model_card(make_record(), "student-L4-H31")
    with pytest.raises(TinyplmError, match="not a model directory"):
        write_model_card(tmp_path / "missing", make_record(), "teacher")


def test_nan_and_inf_metrics_are_said_undefined_not_printed_or_plotted(tmp_path: Path) -> None:
    """A results.json whose metrics hold NaN or Infinity (hand-edited, another tool's) crashed
    ``tinyplm report`` in the latency plot; now they read "undefined" and are neither plotted,
    ranked nor written into the card's model-index."""
    record = make_record()
    record.stages[0].metrics["accuracy"] = float("nan")
    record.stages[1].metrics["accuracy"] = float("inf")
    rebuilt = rebuild(_saved(record, tmp_path))
    summary = rebuilt["summary"].read_text(encoding="utf-8")
    assert "| teacher | undefined |" in summary and "| student-L4-H312 | undefined |" in summary
    assert "nan" not in summary.lower() and "inf |" not in summary
    assert best_student(record).name == "student-L2-H128"  # the one with a number
    assert rebuilt["accuracy_vs_latency"].read_bytes().startswith(PNG_MAGIC)
    assert "accuracy undefined" in rebuilt["report"].read_text(encoding="utf-8")
    card = yaml.safe_load(render_model_card(record, "student-L4-H312").split("---")[1])
    values = [m["value"] for r in card["model-index"][0]["results"] for m in r["metrics"]]
    assert all(isinstance(v, float) and v == v and abs(v) != float("inf") for v in values)


def _saved(record: RunRecord, run_dir: Path) -> Path:
    """``run_dir`` holding ``record`` as a finished run's results.json (NaN written as JSON does)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "results.json").write_text(json.dumps(record.to_dict()), encoding="utf-8")
    return run_dir


def test_a_run_whose_final_model_is_the_teacher_gets_a_card_in_model(tmp_path: Path) -> None:
    """A ``finetune`` run (or one without students) copies its teacher into model/ as the final
    model; model/ had no README.md, unlike every other model folder of the run."""
    record = make_record()
    record.stages = record.stages[:1]
    record.info.final_model = "teacher"
    (tmp_path / "model").mkdir()
    out = write_all(record, tmp_path)
    assert out["model_card"] == tmp_path / "model" / "README.md"
    assert "# teacher" in out["model_card"].read_text(encoding="utf-8")


def test_the_card_shows_label_names_of_html_as_text(tmp_path: Path) -> None:
    """A head note naming the task's labels (``<script>...``, ``a|b``) went into the card's markdown
    raw, where a markdown viewer that passes HTML through (mkdocs, an editor's preview) runs it."""
    record = make_record()
    record.stages[0].info.init = "m: the task needs 3 outputs (<script>alert(1)</script>, a|b, c)"
    card = render_model_card(record, "teacher")
    assert "<script>" not in card
    assert "(&lt;script&gt;alert(1)&lt;/script&gt;, a|b, c)" in card


def test_the_summary_says_how_the_final_model_was_chosen(tmp_path: Path) -> None:
    """When no stage kept the recipe's share of the teacher's metric, the final model is the most
    accurate one: report.html said so, summary.md (the page most read) only gave its retention."""
    record = make_record()
    record.info.final_model = "student-L2-H128"
    record.info.final_rule = "no stage kept 98% of the teacher's accuracy: the most accurate one"
    assert ("How the final model (student-L2-H128) was chosen: no stage kept 98% of the teacher's accuracy: "
            "the most accurate one.") in render_summary(record)
    assert "How the final model" not in render_summary(make_record())  # a record without a choice


def test_bench_leaves_the_model_cards_of_the_models_it_measures_alone(tmp_path: Path) -> None:
    """``tinyplm bench MINE OTHER --out X`` records MINE as the teacher by its absolute path, and
    the report wrote its generated card over MINE/README.md (the user's own model card)."""
    from conftest import make_tiny_glue, make_tiny_model_dir
    from tinyplm.config.schema import TaskSpec
    from tinyplm.run.measure import bench

    mine = make_tiny_model_dir(tmp_path / "mine")
    (mine / "README.md").write_text("my own card\n", encoding="utf-8")
    glue = make_tiny_glue(tmp_path / "glue", n_train=8, n_dev=8)
    record = bench([mine, make_tiny_model_dir(tmp_path / "other")],
                   TaskSpec(name="sst2", data_dir=str(glue), max_length=16), rounds=1)
    written = write_all(record, tmp_path / "out")
    assert (mine / "README.md").read_text(encoding="utf-8") == "my own card\n"
    assert not (tmp_path / "other" / "README.md").exists()
    assert not [k for k in written if k.startswith("card:")]
