"""GLUE readers on tiny files in the real GLUE layout, plus the real files when present."""

from __future__ import annotations

from pathlib import Path

import pytest

from tinyplm import tasks
from tinyplm.tasks import Example, TaskData

MNLI_DEV_LABELS = "label1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label\n"
MNLI_COLUMNS = (
    "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
    "sentence1_parse\tsentence2_parse\tsentence1\tsentence2"
)
STSB_HEADER = (
    "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
)


def mnli_row(i: int, s1: str, s2: str, gold: str, n_labels: int) -> str:
    """One MNLI line: parses are placeholders, label1..labelN then gold_label."""
    labels = "\t".join([gold] * n_labels)
    parses = "( a )\t( b )\t(ROOT a)\t(ROOT b)"
    return f"{i}\t{i}\t{i}n\tfiction\t{parses}\t{s1}\t{s2}\t{labels}\t{gold}\n"


# task -> folder, {file: content}, (text, pair, label) of the first dev example, dev size
LAYOUT: dict[str, tuple[str, dict[str, str], tuple[str, str | None, int | float], int]] = {
    "cola": ("CoLA", {
        "train.tsv": "gj04\t1\t\tThe sailors rode the breeze clear of the rocks.\n"
                     "gj04\t0\t*\tThe more books I ask to whom he will give.\n",
        "dev.tsv": 'bc01\t0\t*\tHe said "go home.\nbc01\t1\t\tI ran.',  # no final newline
    }, ('He said "go home.', None, 0), 2),
    "sst2": ("SST-2", {
        "train.tsv": "sentence\tlabel\nhide new secretions \t0\na gem \t1\n",
        "dev.tsv": 'sentence\tlabel\nit \'s a " charming " journey . \t1\n',
    }, ('it \'s a " charming " journey . ', None, 1), 1),
    "mrpc": ("MRPC", {
        "train.tsv": "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                     "1\t702876\t702977\tAmrozi accused his brother .\tHe accused his brother .\n",
        "dev.tsv": "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                   '0\t1355540\t1355592\tHe said it .\t" The pie business .\n'
                   "1\t1\t2\tA .\tB .\n",
    }, ("He said it .", '" The pie business .', 0), 2),
    "stsb": ("STS-B", {
        "train.tsv": STSB_HEADER
        + "0\tmain-captions\tMSRvid\t2012test\t0001\tnone\tnone\tA plane.\tAn air plane.\t5.000\n",
        "dev.tsv": STSB_HEADER
        + "0\tmain-captions\tMSRvid\t2012test\t0000\tnone\tnone\tA man.\tA man dancing.\t3.800\n"
        + "1\tmain-news\theadlines\t2013\t0001\tnone\tnone\tX.\tY.\t0.000\n",
    }, ("A man.", "A man dancing.", 3.8), 2),
    "qqp": ("QQP", {
        "train.tsv": "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
                     "133273\t213221\t213222\tHow is the life?\tWhat is life like?\t0\n",
        "dev.tsv": "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
                   '201359\t303345\t303346\tWhy are "slow" cars?\tWhy do cars slow?\t1\n',
    }, ('Why are "slow" cars?', "Why do cars slow?", 1), 1),
    "mnli": ("MNLI", {
        "train.tsv": f"{MNLI_COLUMNS}\tlabel1\tgold_label\n"
        + mnli_row(0, "Conceptually cream.", "Product and geography.", "neutral", 1),
        "dev_matched.tsv": f"{MNLI_COLUMNS}\t{MNLI_DEV_LABELS}"
        + mnli_row(0, "The new rights are nice.", "Everyone loves them.", "entailment", 5),
        "dev_mismatched.tsv": f"{MNLI_COLUMNS}\t{MNLI_DEV_LABELS}"
        + mnli_row(0, "Your gift is appreciated.", "Hundreds give.", "contradiction", 5),
    }, ("The new rights are nice.", "Everyone loves them.", 1), 1),
    "qnli": ("QNLI", {
        "train.tsv": "index\tquestion\tsentence\tlabel\n0\tWhen?\tIn 1990.\tentailment\n",
        "dev.tsv": "index\tquestion\tsentence\tlabel\n"
                   "0\tWhat came?\tThe law came.\tnot_entailment\n",
    }, ("What came?", "The law came.", 1), 1),
    "rte": ("RTE", {
        "train.tsv": "index\tsentence1\tsentence2\tlabel\n"
                     "0\tNo WMD found.\tWMD found.\tnot_entailment\n",
        "dev.tsv": "index\tsentence1\tsentence2\tlabel\n0\tDana died.\tDana is dead.\tentailment\n",
    }, ("Dana died.", "Dana is dead.", 0), 1),
    "wnli": ("WNLI", {
        "train.tsv": "index\tsentence1\tsentence2\tlabel\n0\tI stuck a pin.\tIt had a hole.\t1\n",
        "dev.tsv": "index\tsentence1\tsentence2\tlabel\n0\tThe drain is clogged.\tIt is hair.\t0\n",
    }, ("The drain is clogged.", "It is hair.", 0), 1),
}


def write_glue(root: Path, task: str, crlf: bool = False) -> Path:
    """Write the tiny files of ``task`` under ``root/<Folder>/``; returns ``root``."""
    folder, files, _, _ = LAYOUT[task]
    (root / folder).mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        data = text.replace("\n", "\r\n") if crlf else text
        (root / folder / name).write_bytes(data.encode("utf-8"))
    return root


def first_eval(data: TaskData) -> Example:
    """The first example of the first eval split."""
    return next(iter(data.evals.values())).examples[0]


@pytest.mark.parametrize("crlf", [False, True], ids=["lf", "crlf"])
@pytest.mark.parametrize("name", list(LAYOUT))
def test_reads_every_glue_task(tmp_path: Path, name: str, crlf: bool) -> None:
    task = tasks.get(name, data_dir=write_glue(tmp_path, name, crlf=crlf))
    data = task.load()
    text, pair, label = LAYOUT[name][2]
    example = first_eval(data)
    assert (example.text, example.text_pair) == (text, pair)
    assert example.label == pytest.approx(label)
    assert isinstance(example.label, float if task.is_regression else int)
    assert len(next(iter(data.evals.values()))) == LAYOUT[name][3]
    assert len(data.train) >= 1
    assert data.metrics == task.metrics and data.primary_metric == task.metrics[0]
    assert not any("\r" in e.text or "\r" in (e.text_pair or "") for e in data.train.examples)


def test_cola_has_no_header_and_keeps_quotes(tmp_path: Path) -> None:
    split = tasks.get("cola", write_glue(tmp_path, "cola")).read("dev")
    assert [e.line for e in split.examples] == [1, 2]
    assert split.examples[0].text == 'He said "go home.'
    assert split.examples[1].label == 1 and split.examples[1].text == "I ran."


def test_mrpc_bom_is_stripped_and_lines_count_from_header(tmp_path: Path) -> None:
    split = tasks.get("mrpc", write_glue(tmp_path, "mrpc")).read("dev")
    assert [e.line for e in split.examples] == [2, 3]
    assert split.examples[0].text_pair == '" The pie business .'


def test_mnli_splits_and_suffix(tmp_path: Path) -> None:
    data = tasks.get("mnli", write_glue(tmp_path, "mnli")).load()
    assert data.labels == ("contradiction", "entailment", "neutral")
    assert list(data.evals) == ["dev_matched", "dev_mismatched"]
    assert data.metric_suffix == {"dev_mismatched": "_mm"}
    assert data.train.examples[0].label == 2  # neutral
    assert data.evals["dev_mismatched"].examples[0].label == 0  # contradiction
    assert data.num_labels == 3


def test_stsb_is_regression(tmp_path: Path) -> None:
    data = tasks.get("sts-b", write_glue(tmp_path, "stsb")).load()
    assert data.is_regression and data.num_labels == 1 and data.labels == ()
    assert [e.label for e in data.evals["dev"].examples] == [3.8, 0.0]


def test_data_present(tmp_path: Path) -> None:
    write_glue(tmp_path, "mnli")
    (tmp_path / "MNLI" / "dev_mismatched.tsv").unlink()
    present = tasks.get("mnli", tmp_path).data_present()
    assert present == {"train": True, "dev_matched": True, "dev_mismatched": False}


# Counts of data rows in ../shared/data/glue. MRPC train: the shared README says "3668 + header",
# but that file (sha256 f178bcc7...) has 3668 lines *including* the header: 3667 examples.
REAL_COUNTS = {
    ("sst2", "train"): 67349,
    ("sst2", "dev"): 872,
    ("cola", "train"): 8551,
    ("cola", "dev"): 1043,
    ("mrpc", "train"): 3667,
    ("mrpc", "dev"): 408,
    ("rte", "train"): 2490,
    ("rte", "dev"): 277,
    ("stsb", "train"): 5749,
    ("stsb", "dev"): 1500,
    ("wnli", "train"): 635,
    ("wnli", "dev"): 71,
    ("qnli", "dev"): 5463,
}


@pytest.mark.integration
def test_real_glue_files(shared_data: Path) -> None:
    counts = {}
    for name, split in REAL_COUNTS:
        task = tasks.get(name, data_dir=shared_data)
        if not task.data_present()[split]:
            pytest.skip(f"{task.files[split]} is absent")
        counts[name, split] = len(task.read(split))
    assert counts == REAL_COUNTS
    sst2 = tasks.get("sst2", shared_data).read("dev")
    assert sst2.examples[0].text == "it 's a charming and often affecting journey . "
    mrpc = tasks.get("mrpc", shared_data).read("dev")
    assert (mrpc.examples[0].text_pair or "").startswith('" The foodservice pie')  # quote kept
