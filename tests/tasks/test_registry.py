"""Task registry: names, aliases, unknown names, and where the GLUE folder is found."""

from __future__ import annotations

from pathlib import Path

import pytest

from tinyplm import tasks
from tinyplm.errors import TinyplmError
from tinyplm.tasks import paths

GLUE = ["cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli"]


def test_names_are_the_nine_glue_tasks_then_squad_conll_and_spoilers() -> None:
    assert tasks.names() == GLUE + ["squad", "squad_v2", "conll2003", "goodreads_spoilers",
                                    "goodreads_spoilers_reviews", "tvtropes_spoilers"]


@pytest.mark.parametrize(("alias", "name", "head"), [
    ("SQuAD", "squad", "span"), ("squad-v1.1", "squad", "span"), ("SQuAD-v2", "squad_v2", "span"),
    ("CoNLL-2003", "conll2003", "token"), ("ner", "conll2003", "token")])
def test_span_and_token_tasks_by_name(tmp_path: Path, alias: str, name: str, head: str) -> None:
    task = tasks.get(alias, tmp_path)
    assert (task.name, task.head) == (name, head)


@pytest.mark.parametrize(
    ("alias", "name"),
    [("SST-2", "sst2"), ("sst_2", "sst2"), ("sts-b", "stsb"), ("STS-B", "stsb"),
     ("CoLA", "cola"), (" mnli ", "mnli"), ("MNLI-MM", "mnli"), ("qqp", "qqp")],
)
def test_aliases(tmp_path: Path, alias: str, name: str) -> None:
    assert tasks.get(alias, tmp_path).name == name


def test_unknown_task_suggests_nearest() -> None:
    with pytest.raises(TinyplmError) as info:
        tasks.get("sst3")
    message = str(info.value)
    assert message.startswith("unknown task 'sst3'; did you mean 'sst2'? Known tasks: cola, sst2")
    assert "wnli" in message


def test_unknown_task_without_close_match() -> None:
    with pytest.raises(TinyplmError, match=r"unknown task 'zzzzzz'\. Known tasks: cola"):
        tasks.get("zzzzzz")


def test_task_files_and_metadata(tmp_path: Path) -> None:
    mnli = tasks.get("mnli", tmp_path)
    assert mnli.files["dev_mismatched"] == tmp_path.resolve() / "MNLI" / "dev_mismatched.tsv"
    assert mnli.eval_splits == ("dev_matched", "dev_mismatched")
    metrics = {name: tasks.get(name, tmp_path).metrics for name in GLUE}
    assert metrics["cola"] == ("mcc",) and metrics["mrpc"] == ("f1", "accuracy")
    assert metrics["stsb"] == ("pearson", "spearman") and metrics["qqp"] == ("accuracy", "f1")
    assert all(m in tasks.METRIC_NAMES for ms in metrics.values() for m in ms)
    assert tasks.get("qnli", tmp_path).labels == ("entailment", "not_entailment")


def sst2_dev(root: Path, sentence: str) -> Path:
    """A GLUE folder at ``root`` whose SST-2 dev split holds one example, ``sentence``."""
    (root / "SST-2").mkdir(parents=True)
    (root / "SST-2" / "dev.tsv").write_text(f"sentence\tlabel\n{sentence}\t1\n", encoding="utf-8")
    return root


def dev_sentence(data_dir: Path | str | None = None) -> str:
    """The one sentence of the SST-2 dev split the registry finds for ``data_dir``."""
    split = tasks.get("sst2", data_dir).read("dev")
    assert len(split.examples) == 1, split.source
    return split.examples[0].text


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """No TINYPLM_DATA, the repo root moved into ``tmp_path/work/repo`` and the working directory
    elsewhere, so only folders this test makes can be found."""
    monkeypatch.delenv("TINYPLM_DATA", raising=False)
    monkeypatch.setattr(paths, "REPO_ROOT", tmp_path / "work" / "repo")
    (tmp_path / "elsewhere" / "cwd").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "elsewhere" / "cwd")
    return monkeypatch


def test_default_reads_shared_data_beside_the_repo(no_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    sst2_dev(tmp_path / "work" / "shared" / "data" / "glue", "from beside the repo")
    conll = tmp_path / "work" / "shared" / "data" / "conll2003"
    conll.mkdir()
    (conll / "valid.txt").write_text("Bonn NNP B-NP B-LOC\n", encoding="utf-8")
    assert dev_sentence() == "from beside the repo"
    split = tasks.get("conll2003").read("dev")
    assert split.source == conll / "valid.txt" and split.examples[0].tokens == ("Bonn",)


def test_default_falls_back_to_cwd(no_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No shared data beside the repo: ``<cwd>/../shared/data/glue`` is read instead."""
    sst2_dev(tmp_path / "elsewhere" / "shared" / "data" / "glue", "beside the working directory")
    assert dev_sentence() == "beside the working directory"


def test_default_beside_the_repo_wins_over_cwd(no_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    sst2_dev(tmp_path / "elsewhere" / "shared" / "data" / "glue", "beside the working directory")
    sst2_dev(tmp_path / "work" / "shared" / "data" / "glue", "from beside the repo")
    assert dev_sentence() == "from beside the repo"


def test_missing_default_names_the_file_beside_the_repo(no_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    expected = tmp_path / "work" / "shared" / "data" / "glue" / "SST-2" / "dev.tsv"
    with pytest.raises(TinyplmError) as info:
        dev_sentence()
    assert str(info.value).startswith(f"{expected}: file not found")


def test_env_beats_default(no_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    sst2_dev(tmp_path / "work" / "shared" / "data" / "glue", "from beside the repo")
    no_env.setenv("TINYPLM_DATA", str(sst2_dev(tmp_path / "env", "from the environment")))
    assert dev_sentence() == "from the environment"


def test_explicit_beats_env(no_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    no_env.setenv("TINYPLM_DATA", str(sst2_dev(tmp_path / "env", "from the environment")))
    explicit = sst2_dev(tmp_path / "explicit", "given explicitly")
    assert dev_sentence(explicit) == "given explicitly"
    assert dev_sentence(str(explicit)) == "given explicitly"
    assert dev_sentence("") == "from the environment"  # an empty data_dir is no choice


def test_glue_subfolder_of_the_data_root_is_used(no_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    sst2_dev(tmp_path / "root" / "glue", "in the glue subfolder")
    assert dev_sentence(tmp_path / "root") == "in the glue subfolder"
    assert dev_sentence(tmp_path / "root" / "glue") == "in the glue subfolder"
    no_env.setenv("TINYPLM_DATA", str(tmp_path / "root"))
    assert dev_sentence() == "in the glue subfolder"


def test_repo_root_is_this_checkout() -> None:
    assert (paths.REPO_ROOT / "pyproject.toml").is_file()
    assert (paths.REPO_ROOT / "src" / "tinyplm" / "tasks" / "paths.py").is_file()
