"""`tinyplm predict`: every input format and head, input order kept, bad rows, atomic output,
and the same answers as `tinyplm evaluate`."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
import yaml

import helpers_warm as warm
from conftest import make_tiny_model_dir
from helpers_cli import assert_bad_input, cli
from helpers_serve import TAGS, make_sst2_run, make_tiny_head_dir, sentences, write_conll, write_squad


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    """A fake run dir (recipe with max_length 32, model/) beside tiny SST-2 and a text file."""
    root = tmp_path_factory.mktemp("predict")
    make_sst2_run(root, n_dev=64)
    (root / "reviews.txt").write_text("\n".join(sentences(50)) + "\n", encoding="utf-8")
    return root


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def test_predictions_match_tinyplm_evaluate_on_a_run_dir(world: Path) -> None:
    dev = world / "glue" / "SST-2" / "dev.tsv"
    result = cli(["predict", "run", "-i", dev, "-o", "dev.jsonl"], cwd=world)
    assert result.returncode == 0, result.output
    assert "max length 32" in result.stderr and "config.resolved.yaml" in result.stderr
    assert f"text from column 'sentence' of {dev}" in result.stderr  # the choice among known layouts, said
    preds = lines(world / "dev.jsonl")
    gold = [row.split("\t")[1] for row in dev.read_text().splitlines()[1:]]
    assert [p["line"] for p in preds] == list(range(2, 66))
    accuracy = sum(p["label"] == f"LABEL_{g}" for p, g in zip(preds, gold, strict=True)) / len(gold)
    evaluated = cli(["evaluate", "run/model", "--task", "sst2", "--data-dir", "glue", "--max-length", "32"],
                    cwd=world)
    assert evaluated.returncode == 0, evaluated.output
    assert accuracy == pytest.approx(float(re.search(r"accuracy: ([0-9.]+)", evaluated.stdout).group(1)), abs=1e-4)


def test_input_order_is_kept_whatever_the_window(world: Path) -> None:
    assert cli(["predict", "run", "-i", "reviews.txt", "-o", "whole.jsonl"], cwd=world).returncode == 0
    result = cli(["predict", "run", "-i", "reviews.txt", "-o", "small.jsonl", "--window", "7", "--batch-size", "3"],
                 cwd=world)
    assert result.returncode == 0, result.output
    whole, small = lines(world / "whole.jsonl"), lines(world / "small.jsonl")
    assert [p["line"] for p in small] == list(range(1, 51))
    assert [p["label"] for p in small] == [p["label"] for p in whole]
    # scores differ from sentence to sentence: equal lists mean each record is its own input's
    assert [p["scores"]["LABEL_0"] for p in small] == pytest.approx([p["scores"]["LABEL_0"] for p in whole], abs=1e-6)
    assert len({round(p["scores"]["LABEL_0"], 6) for p in whole}) > 30


def test_csv_and_tsv_output_and_stdin_to_stdout(world: Path) -> None:
    assert cli(["predict", "run", "-i", "reviews.txt", "-o", "out.csv"], cwd=world).returncode == 0
    rows = list(csv.DictReader((world / "out.csv").open(encoding="utf-8")))
    assert list(rows[0]) == ["line", "label", "label_id", "score_LABEL_0", "score_LABEL_1"] and len(rows) == 50
    assert cli(["predict", "run", "-i", "reviews.txt", "-o", "out.txt", "--format", "tsv"], cwd=world).returncode == 0
    assert (world / "out.txt").read_text().splitlines()[0] == "line\tlabel\tlabel_id\tscore_LABEL_0\tscore_LABEL_1"
    jsonl = world / "in.jsonl"
    jsonl.write_text('{"text": "a good film"}\n"bad plot"\n')  # an SST-2 model: one text each (see test_pairs)
    result = cli(["predict", "run", "-i", "in.jsonl"], cwd=world)
    assert result.returncode == 0, result.output
    assert [json.loads(x)["line"] for x in result.stdout.splitlines()] == [1, 2]


def test_bad_rows_stop_the_run_and_leave_no_file(world: Path) -> None:
    bad = world / "bad.txt"
    bad.write_bytes(b"good film\n\nbad \xff film\nfine\n")
    (world / "kept.jsonl").write_text("old\n")
    result = cli(["predict", "run", "-i", "bad.txt", "-o", "kept.jsonl"], cwd=world)
    assert_bad_input(result, "bad.txt:2: empty text", "--on-error skip")
    assert (world / "kept.jsonl").read_text() == "old\n"  # untouched, no temporary left
    assert not [p for p in world.iterdir() if p.name.startswith(".kept.jsonl")]

    result = cli(["predict", "run", "-i", "bad.txt", "-o", "skipped.jsonl", "--on-error", "skip"], cwd=world)
    assert result.returncode == 0, result.output
    assert [p["line"] for p in lines(world / "skipped.jsonl")] == [1, 4]
    side = lines(world / "skipped.jsonl.skipped.jsonl")
    assert [s["line"] for s in side] == [2, 3] and "not valid UTF-8 (byte 0xff" in side[1]["error"]
    assert "2 rows skipped" in result.stderr


def test_option_mistakes_are_named(world: Path) -> None:
    assert_bad_input(cli(["predict", "run", "-i", "reviews.txt", "--format", "xml"], cwd=world), "--format")
    assert_bad_input(cli(["predict", "run", "-i", "reviews.txt", "--on-error", "skip"], cwd=world), "--skipped")
    assert_bad_input(cli(["predict", "run", "-i", "missing.txt"], cwd=world), "missing.txt: input file not found")
    assert_bad_input(cli(["predict", "run", "-i", "reviews.txt", "-o", "reviews.txt"], cwd=world),
                     "would replace the input")
    assert_bad_input(cli(["predict", "nowhere", "-i", "reviews.txt"], cwd=world), "nowhere")
    before = (world / "reviews.txt").read_bytes()
    for side in ("reviews.txt", "out.jsonl"):  # the input, the output: refused before anything is written
        assert_bad_input(cli(["predict", "run", "-i", "reviews.txt", "-o", "out.jsonl", "--on-error", "skip",
                              "--skipped", side], cwd=world), f"{side}: the file of skipped rows would replace")
    assert (world / "reviews.txt").read_bytes() == before and not (world / "out.jsonl").exists()


def test_question_answering_from_official_json_and_csv(tmp_path: Path) -> None:
    make_tiny_head_dir(tmp_path / "qa", "span")
    write_squad(tmp_path / "dev.json", 6)
    result = cli(["predict", "qa", "-i", "dev.json", "-o", "answers.jsonl"], cwd=tmp_path)
    assert result.returncode == 0, result.output
    preds = lines(tmp_path / "answers.jsonl")
    doc = json.loads((tmp_path / "dev.json").read_text())
    contexts = {qa["id"]: p["context"] for p in doc["data"][0]["paragraphs"] for qa in p["qas"]}
    assert [p["id"] for p in preds] == [f"q{i}" for i in range(6)] and "line" not in preds[0]
    assert all(contexts[p["id"]][p["start"]:p["end"]] == p["answer"] for p in preds)
    (tmp_path / "q.csv").write_text("question,context\nwho,the actor was good\n")
    result = cli(["predict", "qa", "-i", "q.csv", "-o", "a.csv"], cwd=tmp_path)
    assert result.returncode == 0, result.output
    assert next(csv.DictReader((tmp_path / "a.csv").open()))["line"] == "2"
    # a window too short for the default question length names the flag to change, not a recipe key
    assert_bad_input(cli(["predict", "qa", "-i", "q.csv", "--max-length", "64"], cwd=tmp_path),
                     "max length 64 leaves -3 pieces for the context after questions of up to 64 "
                     "(--max-query-length's default); give --max-query-length 53 or less")
    result = cli(["predict", "qa", "-i", "q.csv", "-o", "b.csv", "--max-length", "64", "--max-query-length", "32"],
                 cwd=tmp_path)
    assert result.returncode == 0, result.output


def test_tagging_conll_and_plain_text(tmp_path: Path) -> None:
    make_tiny_head_dir(tmp_path / "ner", "token")
    write_conll(tmp_path / "valid.txt", 5)
    result = cli(["predict", "ner", "-i", "valid.txt", "-o", "tags.jsonl"], cwd=tmp_path)
    assert result.returncode == 0, result.output
    preds = lines(tmp_path / "tags.jsonl")
    assert len(preds) == 5 and all(len(p["tags"]) == len(p["tokens"]) and set(p["tags"]) <= set(TAGS)
                                   for p in preds)
    (tmp_path / "s.txt").write_text("the actor was good\n")
    result = cli(["predict", "ner", "-i", "s.txt", "-o", "s.tsv"], cwd=tmp_path)
    assert result.returncode == 0, result.output
    row = (tmp_path / "s.tsv").read_text().splitlines()[1].split("\t")
    assert row[:2] == ["1", "the actor was good"] and len(row[2].split()) == 4
    # JSON lines with a "text" (as serve and tables take it) are split into words; "tokens" wins when both are there
    (tmp_path / "s.jsonl").write_text('{"text": "the actor was good"}\n{"tokens": ["a", "film"], "text": "x"}\n',
                                      encoding="utf-8")
    result = cli(["predict", "ner", "-i", "s.jsonl", "-o", "j.jsonl"], cwd=tmp_path)
    assert result.returncode == 0, result.output
    assert [p["tokens"] for p in lines(tmp_path / "j.jsonl")] == [["the", "actor", "was", "good"], ["a", "film"]]


def test_a_family_student_predicts_a_headerless_tvtropes_file(tmp_path: Path) -> None:
    """A TF-IDF student of a TV Tropes run: its word vocabulary is its tokenizer, and the run's
    header-less layout (id, sentence, label) is read without losing the first row."""
    from tinyplm.models.classic.tfidf import fit_tfidf
    from tinyplm.models.io import save_model

    texts = sentences(30)
    run = tmp_path / "run"
    (run / "students").mkdir(parents=True)
    (run / "config.resolved.yaml").write_text(yaml.safe_dump({"name": "t", "task": {"name": "tvtropes_spoilers",
                                                                                     "max_length": 32}}))
    model, tok, _ = fit_tfidf(texts, [i % 2 for i in range(len(texts))], 2)
    save_model(model, tok, run / "students" / "tfidf")
    with (tmp_path / "dev.csv").open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows([i + 1, t, i % 2] for i, t in enumerate(texts))
    auto = cli(["predict", "run/students/tfidf", "-i", "dev.csv", "-o", "auto.jsonl"], cwd=tmp_path)
    assert auto.returncode == 0, auto.output
    got = lines(tmp_path / "auto.jsonl")
    assert [r["line"] for r in got] == list(range(1, len(texts) + 1))
    asked = cli(["predict", "run/students/tfidf", "-i", "dev.csv", "--no-header", "--text-column", "2",
                 "-o", "asked.jsonl"], cwd=tmp_path)
    assert asked.returncode == 0, asked.output
    assert lines(tmp_path / "asked.jsonl") == got
    assert all("text from column 'sentence' (number 2) of dev.csv" in r.stderr for r in (auto, asked))
    ids = cli(["predict", "run/students/tfidf", "-i", "dev.csv", "--no-header", "--text-column", "1",
               "-o", "ids.jsonl"], cwd=tmp_path)  # the id column, as asked: other texts, other scores
    assert ids.returncode == 0 and lines(tmp_path / "ids.jsonl") != got
    assert "text from column 'id' (number 1)" in ids.stderr
    (tmp_path / "plain.txt").write_text("a text\n", encoding="utf-8")
    assert_bad_input(cli(["predict", "run/students/tfidf", "-i", "plain.txt", "--no-header"], cwd=tmp_path),
                     "--no-header: only for CSV/TSV input")
    assert not (tmp_path / "plain.txt.jsonl").exists()


def test_goodreads_reviews_are_predicted_per_sentence_with_the_models_context(tmp_path: Path) -> None:
    """A goodreads_spoilers_reviews model trained with 1 sentence of context: its .jsonl reviews
    give one record per sentence (review_id, sentence number), each scored on (sentence, the one before)."""
    from transformers import AutoConfig

    from tinyplm.inference.predictor import Predictor
    from tinyplm.inference.records import TextInput

    model_dir = make_tiny_model_dir(tmp_path / "m")
    cfg = AutoConfig.from_pretrained(model_dir)
    cfg.tinyplm_task = {"name": "goodreads_spoilers_reviews", "max_length": 32, "context_sentences": 1}
    cfg.save_pretrained(model_dir)
    texts = sentences(5)
    reviews = [{"review_id": "a", "book_id": 1, "review_sentences": [[0, t] for t in texts[:3]]},
               {"review_id": "b", "book_id": 2, "review_sentences": [[1, t] for t in texts[3:]]}]
    (tmp_path / "reviews.jsonl").write_text("\n".join(json.dumps(r) for r in reviews) + "\n", encoding="utf-8")
    result = cli(["predict", "m", "-i", "reviews.jsonl", "-o", "out.jsonl"], cwd=tmp_path)
    assert result.returncode == 0, result.output
    got = lines(tmp_path / "out.jsonl")
    assert [(r["line"], r["review_id"], r["sentence"]) for r in got] == [(1, "a", 0), (1, "a", 1), (1, "a", 2),
                                                                           (2, "b", 0), (2, "b", 1)]
    pairs = [TextInput(texts[0]), TextInput(texts[1], texts[0]), TextInput(texts[2], texts[1]),
             TextInput(texts[3]), TextInput(texts[4], texts[3])]
    predictor = Predictor.load(model_dir)
    score = [r["scores"]["LABEL_1"] for r in got]
    assert score == pytest.approx([p.scores["LABEL_1"] for p in predictor.predict(pairs)], abs=1e-7)
    alone = [p.scores["LABEL_1"] for p in predictor.predict([TextInput(p.text) for p in pairs])]
    assert all(abs(a - b) > 1e-6 for a, b, p in zip(alone, score, pairs, strict=True) if p.text_pair)  # context counts
    as_csv = cli(["predict", "m", "-i", "reviews.jsonl", "-o", "out.csv"], cwd=tmp_path)
    assert as_csv.returncode == 0, as_csv.output
    table = list(csv.DictReader((tmp_path / "out.csv").open(encoding="utf-8")))
    assert list(table[0])[:4] == ["line", "review_id", "sentence", "label"] and table[4]["sentence"] == "1"


def test_a_tvtropes_context_model_scores_each_line_with_the_lines_before(tmp_path: Path) -> None:
    """A tvtropes_spoilers model trained with 2 sentences of context: each line of a text file is
    scored on (line, the two lines before), as the task's reader gives it in training."""
    from transformers import AutoConfig

    from tinyplm.inference.predictor import Predictor
    from tinyplm.inference.records import TextInput

    model_dir = make_tiny_model_dir(tmp_path / "m")
    cfg = AutoConfig.from_pretrained(model_dir)
    cfg.tinyplm_task = {"name": "tvtropes_spoilers", "max_length": 32, "context_sentences": 2}
    cfg.save_pretrained(model_dir)
    texts = sentences(4)
    (tmp_path / "page.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    result = cli(["predict", "m", "-i", "page.txt", "-o", "out.jsonl"], cwd=tmp_path)
    assert result.returncode == 0, result.output
    got = [r["scores"]["LABEL_1"] for r in lines(tmp_path / "out.jsonl")]
    pairs = [TextInput(texts[0]), TextInput(texts[1], texts[0]), TextInput(texts[2], f"{texts[0]} {texts[1]}"),
             TextInput(texts[3], f"{texts[1]} {texts[2]}")]
    predictor = Predictor.load(model_dir)
    assert predictor.info.context_sentences == 2
    assert got == pytest.approx([p.scores["LABEL_1"] for p in predictor.predict(pairs)], abs=1e-7)
    alone = [p.scores["LABEL_1"] for p in predictor.predict([TextInput(p.text) for p in pairs])]
    assert all(abs(a - b) > 1e-6 for a, b, p in zip(alone, got, pairs, strict=True) if p.text_pair)
    cfg.tinyplm_task = {**cfg.tinyplm_task, "context_sentences": 1, "context_after": 1}  # and the line after
    cfg.save_pretrained(model_dir)
    result = cli(["predict", "m", "-i", "page.txt", "-o", "around.jsonl"], cwd=tmp_path)
    assert result.returncode == 0, result.output
    around = [TextInput(texts[0], f"| {texts[1]}"), TextInput(texts[1], f"{texts[0]} | {texts[2]}"),
              TextInput(texts[2], f"{texts[1]} | {texts[3]}"), TextInput(texts[3], f"{texts[2]} |")]
    expected = [p.scores["LABEL_1"] for p in Predictor.load(model_dir).predict(around)]
    assert [r["scores"]["LABEL_1"] for r in lines(tmp_path / "around.jsonl")] == pytest.approx(expected, abs=1e-7)


def test_options_the_input_or_output_cannot_honour_are_refused_first(world: Path) -> None:
    """--text-column/--pair-column on an input without named fields (plain text, CoNLL) and an
    output named for a format predict does not write (``x.parquet``): refused before any work,
    not ignored (a column the user believes chosen; JSON lines under a Parquet name)."""
    for flags, said in ((["--text-column", "review"], "--text-column: only for input with named fields"),
                        (["--pair-column", "2"], "--pair-column: only for input with named fields"),
                        (["--text-column", "a", "--pair-column", "b"], "--text-column and --pair-column")):
        assert_bad_input(cli(["predict", "run", "-i", "reviews.txt", "-o", "c.jsonl", *flags], cwd=world),
                         said, "reviews.txt is read as text")
    for name, said in (("p.parquet", "Apache Parquet"), ("x.XLSX", "Excel"), ("y.jsonl.gz", "gzip")):
        assert_bad_input(cli(["predict", "run", "-i", "reviews.txt", "-o", name], cwd=world),
                         f"--output {name}: ", said, "jsonl, csv, tsv, npy")
    assert not {"c.jsonl", "p.parquet", "x.XLSX", "y.jsonl.gz"} & {p.name for p in world.iterdir()}
    done = cli(["predict", "run", "-i", "reviews.txt", "-o", "p.parquet", "--format", "jsonl"], cwd=world)
    assert done.returncode == 0, done.stderr  # asked for by name: written as asked
    assert len(lines(world / "p.parquet")) == 50
    done = cli(["predict", "run", "-i", "reviews.txt", "-o", "preds.out"], cwd=world)  # any other name: JSON lines
    assert done.returncode == 0 and len(lines(world / "preds.out")) == 50


def test_a_broken_file_is_refused_before_the_model_reads_a_row(world: Path) -> None:
    """A CSV quote never closed, a text file whose lines end in a lone ``\\r``, a bad row at the end of
    a file: each stops the run naming the line, before a prediction is made, and leaves nothing."""
    (world / "open_quote.csv").write_text('sentence\n"good movie\nbad\nfine film\n', encoding="utf-8")
    assert_bad_input(cli(["predict", "run", "-i", "open_quote.csv", "-o", "q.jsonl"], cwd=world),
                     "open_quote.csv:2: cannot split the line (a quoted field opened here is never closed)")
    (world / "old_mac.txt").write_bytes(b"good\rbad\rthe film\r")
    assert_bad_input(cli(["predict", "run", "-i", "old_mac.txt", "-o", "m.jsonl"], cwd=world),
                     "old_mac.txt:1: holds a carriage return")
    (world / "late.txt").write_text("\n".join(sentences(300)) + "\n\n", encoding="utf-8")
    result = cli(["predict", "run", "-i", "late.txt"], cwd=world)  # stdout: nothing written before the error
    assert_bad_input(result, "late.txt:301: empty text")
    assert result.stdout == ""
    assert not {"q.jsonl", "m.jsonl"} & {p.name for p in world.iterdir()}


def test_an_output_that_cannot_be_written_is_refused_first(world: Path) -> None:
    (world / "a_folder").mkdir(exist_ok=True)
    (world / "a_file").write_text("x")
    for output, said in (("a_folder", "--output a_folder: is a folder"), ("a_file/x.jsonl", "a_file is a file"),
                         ("", "expected a file name"), ("new_dir/", "expected a file name, not a folder"),
                         *((("/proc/x.jsonl", "cannot write in /proc"),) if Path("/proc/self").is_dir() else ())):
        assert_bad_input(cli(["predict", "run", "-i", "reviews.txt", "-o", output], cwd=world), said)
    assert_bad_input(cli(["predict", "run", "-i", "reviews.txt", "-o", "ok.jsonl", "--on-error", "skip",
                          "--skipped", "a_folder"], cwd=world), "--skipped a_folder: is a folder")
    assert not (world / "ok.jsonl").exists() and not (world / "new_dir").exists()


def test_sigterm_leaves_no_temporary_file(world: Path) -> None:
    """A predict stopped by SIGTERM (a scheduler, ``kill``) removes its temporary output as Ctrl-C
    does, and leaves an older output of that name as it was."""
    import os
    import signal
    import subprocess
    import sys
    import time

    (world / "many.txt").write_text("\n".join(sentences(6000, seed=2)) + "\n", encoding="utf-8")
    (world / "term.jsonl").write_text("old\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    args = ["predict", "run", "-i", "many.txt", "-o", "term.jsonl", "--window", "64"]
    proc = warm.popen([sys.executable, "-m", "tinyplm.cli", *args], cwd=world, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not [p for p in world.iterdir() if p.name.startswith(".term.jsonl")] and proc.poll() is None:
        assert time.monotonic() < deadline, "no temporary output appeared"
        time.sleep(0.05)
    assert proc.poll() is None, proc.stderr.read()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 143
    assert (world / "term.jsonl").read_text() == "old\n"
    assert not [p for p in world.iterdir() if p.name.startswith(".term.jsonl")]


def test_a_pair_column_is_refused_for_a_model_that_reads_one_text(tmp_path: Path) -> None:
    """A sentence-embedding model and a tagger read one text per example: --pair-column (even one
    naming no column of the file) was silently dropped and the first text alone predicted."""
    from helpers_embedding import make_sentence_dir

    make_sentence_dir(tmp_path / "emb")
    make_tiny_head_dir(tmp_path / "ner", "token")
    (tmp_path / "pairs.csv").write_text("text,other\na good film,the plot\n", encoding="utf-8")
    for model, kind in (("emb", "embedding"), ("ner", "token")):
        assert_bad_input(cli(["predict", model, "-i", "pairs.csv", "-o", "o.jsonl", "--pair-column", "no_such"],
                             cwd=tmp_path), f"--pair-column: the model in {model} reads one text per example "
                         f"(its {kind} head)")
    assert not (tmp_path / "o.jsonl").exists()


def test_a_file_that_does_not_fit_the_models_pairs_is_refused_before_a_row_is_read(world: Path, tmp_path: Path) -> None:
    """An SST-2 model given --pair-column, and an MRPC model given a text file (one text per line),
    would answer predictions that mean nothing: each is refused at once, naming the task."""
    (world / "two.csv").write_text("text,other\na good film,the plot\n", encoding="utf-8")
    result = cli(["predict", "run", "-i", "two.csv", "--pair-column", "other"], cwd=world)
    assert_bad_input(result, "--pair-column: the model was trained for sst2 on one text per example")
    pair_run = tmp_path / "mrpc_run"
    pair_run.mkdir()
    (pair_run / "config.resolved.yaml").write_text(yaml.safe_dump({"name": "p", "task": {"name": "mrpc"}}))
    make_tiny_model_dir(pair_run / "model")
    result = cli(["predict", pair_run, "-i", world / "reviews.txt"], cwd=world)
    assert_bad_input(result, "reviews.txt: the model was trained for mrpc on pairs of texts",
                     "give CSV/TSV/JSON lines with a column for each text")


def test_a_stream_or_a_link_as_output_is_written_into_and_the_model_is_never_replaced(world: Path,
                                                                                        tmp_path: Path) -> None:
    """The atomic write's rename put a regular file in place of a pipe (or /dev/stdout, /dev/null: in
    /dev, for every process after) and of a link, and -o MODEL/config.json replaced the model's
    config: a pipe is written into, a link's target replaced, the model's files refused."""
    import os
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.extend(fifo.read_text(encoding="utf-8").splitlines()), daemon=True)
    reader.start()
    result = cli(["predict", "run", "-i", "reviews.txt", "-o", fifo, "--skipped", tmp_path / "skipped.jsonl"],
                 cwd=world)
    reader.join(30)
    assert result.returncode == 0, result.output
    assert len(got) == 50 and fifo.is_fifo()
    result = cli(["predict", "run", "-i", "reviews.txt", "-o", fifo, "--on-error", "skip"], cwd=world)
    assert_bad_input(result, f"--on-error skip with the output on {fifo}, not a file", "--skipped FILE")

    target, link = tmp_path / "target.jsonl", tmp_path / "link.jsonl"
    target.write_text("old\n")
    link.symlink_to(target)
    assert cli(["predict", "run", "-i", "reviews.txt", "-o", link], cwd=world).returncode == 0
    assert link.is_symlink() and len(target.read_text().splitlines()) == 50

    config = world / "run" / "model" / "config.json"
    before = config.read_bytes()
    result = cli(["predict", "run", "-i", "reviews.txt", "-o", config], cwd=world)
    assert_bad_input(result, f"--output {config}: would replace config.json of the model")
    assert config.read_bytes() == before
    for _ in range(2):  # predictions kept beside the model are no file of it: written again, not refused
        assert cli(["predict", "run", "-i", "reviews.txt", "-o", world / "run" / "model" / "preds.jsonl"],
                   cwd=world).returncode == 0
    assert len((world / "run" / "model" / "preds.jsonl").read_text().splitlines()) == 50
    (world / "run" / "model" / "preds.jsonl").unlink()  # the module's other tests read this model dir
