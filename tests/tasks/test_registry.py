"""Task registry: names, aliases, unknown names, and where the GLUE folder is found."""

from __future__ import annotations

from pathlib import Path

import pytest

from tinyplm import tasks
from tinyplm.errors import TinyplmError
from tinyplm.tasks import paths

GLUE = ["cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli"]


def test_names_are_the_nine_glue_tasks_then_squad_and_conll() -> None:
    assert tasks.names() == GLUE + ["squad", "squad_v2", "conll2003"]


@pytest.mark.parametrize(("alias", "name", "head"), [("SQuAD", "squad", "span"), ("squad-v1.1", "squad", "span"),
                                                     ("SQuAD-v2", "squad_v2", "span"), ("CoNLL-2003", "conll2003", "token"),
                                                     ("ner", "conll2003", "token")])
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


def test_data_dir_explicit_beats_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env_dir, explicit = tmp_path / "env", tmp_path / "explicit"
    env_dir.mkdir()
    explicit.mkdir()
    monkeypatch.setenv("TINYPLM_DATA", str(env_dir))
    assert paths.resolve_glue_dir(explicit) == explicit.resolve()
    assert tasks.get("rte", str(explicit)).files["dev"] == explicit.resolve() / "RTE" / "dev.tsv"


def test_data_dir_env_beats_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINYPLM_DATA", str(tmp_path))
    assert paths.resolve_glue_dir(None) == tmp_path.resolve()
    assert tasks.get("rte").files["train"] == tmp_path.resolve() / "RTE" / "train.tsv"


def test_data_dir_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TINYPLM_DATA", raising=False)
    repo = Path(paths.__file__).resolve().parents[3]
    assert paths.REPO_ROOT == repo and (repo / "pyproject.toml").is_file()
    expected = repo.parent / "shared" / "data" / "glue"
    if expected.is_dir():
        assert paths.resolve_glue_dir().resolve() == expected.resolve()  # ../shared may be a symlink


def test_default_falls_back_to_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TINYPLM_DATA", raising=False)
    monkeypatch.setattr(paths, "REPO_ROOT", tmp_path / "nowhere" / "repo")
    glue = tmp_path / "shared" / "data" / "glue"
    glue.mkdir(parents=True)
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    assert paths.resolve_glue_dir() == glue.resolve()


def test_glue_subfolder_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "glue").mkdir()
    assert paths.resolve_glue_dir(tmp_path) == (tmp_path / "glue").resolve()
    monkeypatch.setenv("TINYPLM_DATA", str(tmp_path))
    assert paths.resolve_glue_dir() == (tmp_path / "glue").resolve()
