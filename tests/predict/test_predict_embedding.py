"""`tinyplm predict` on embedding models (both kinds): vectors as JSON lines, or a float32 .npy with
its row ids beside it (both atomic), equal to the embedder's; CSV/TSV refused, naming what works."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from conftest import make_tiny_model_dir
from helpers_cli import assert_bad_input, cli
from helpers_embedding import make_sentence_dir, make_static_dir
from helpers_serve import sentences
from tinyplm.models.embedder import load_embedder
from tinyplm.predict.writers import ids_path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

MAKERS = {"sentence": make_sentence_dir, "static": make_static_dir}


@pytest.fixture(scope="module", params=sorted(MAKERS))
def world(request, tmp_path_factory) -> Path:
    """An embedding model ``m`` beside a text file, a CSV and a JSON-lines file of the same texts."""
    root = tmp_path_factory.mktemp(f"embed-{request.param}")
    MAKERS[request.param](root / "m")
    texts = sentences(17)
    (root / "texts.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    (root / "texts.csv").write_text("id,sentence\n" + "".join(f"{i},{t}\n" for i, t in enumerate(texts)),
                                    encoding="utf-8")
    (root / "texts.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    return root


def _texts(world: Path) -> list[str]:
    return (world / "texts.txt").read_text(encoding="utf-8").splitlines()


def test_json_lines_hold_each_lines_vector(world: Path) -> None:
    result = cli(["predict", "m", "-i", "texts.txt", "-o", "out.jsonl", "--window", "5"], cwd=world)
    assert result.returncode == 0, result.output
    records = [json.loads(x) for x in (world / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["line"] for r in records] == list(range(1, 18)) and set(records[0]) == {"line", "vector"}
    np.testing.assert_allclose(np.array([r["vector"] for r in records]),
                               load_embedder(world / "m").embed(_texts(world)), atol=1e-6)


@pytest.mark.parametrize(("source", "extra", "first_line"),
                         [("texts.txt", [], 1), ("texts.csv", ["--text-column", "sentence"], 2),
                          ("texts.jsonl", [], 1)])
def test_npy_holds_the_vectors_and_ids_json_their_lines(world: Path, source: str, extra: list[str],
                                                        first_line: int) -> None:
    out = world / f"{source}.npy"
    result = cli(["predict", "m", "-i", source, "-o", out.name, "--batch-size", "4", *extra], cwd=world)
    assert result.returncode == 0, result.output
    array = np.load(out)
    assert array.dtype == np.float32 and array.shape[0] == 17
    np.testing.assert_allclose(array, load_embedder(world / "m").embed(_texts(world)), atol=1e-6)
    ids = json.loads(ids_path(out).read_text(encoding="utf-8"))
    assert ids_path(out).name == f"{source}.ids.json"
    assert [i["line"] for i in ids] == list(range(first_line, first_line + 17))


def test_a_failed_run_leaves_no_array(world: Path) -> None:
    (world / "bad.txt").write_text("fine\n\nalso fine\n", encoding="utf-8")
    result = cli(["predict", "m", "-i", "bad.txt", "-o", "bad.npy"], cwd=world)
    assert result.returncode != 0
    assert not (world / "bad.npy").exists() and not (world / "bad.ids.json").exists()


def test_csv_and_tsv_are_refused_naming_what_works(world: Path) -> None:
    for args in (["-o", "out.csv"], ["--format", "tsv"]):
        result = cli(["predict", "m", "-i", "texts.txt", *args], cwd=world)
        assert_bad_input(result, "vectors", ".jsonl", ".npy")
    assert not (world / "out.csv").exists()
    assert_bad_input(cli(["predict", "m", "-i", "texts.txt", "--format", "npy"], cwd=world), "--output")


def test_npy_is_refused_for_a_classifier(tmp_path: Path) -> None:
    make_tiny_model_dir(tmp_path / "clf")
    (tmp_path / "t.txt").write_text("a b\n", encoding="utf-8")
    assert_bad_input(cli(["predict", "clf", "-i", "t.txt", "-o", "x.npy"], cwd=tmp_path), "embedding", "jsonl")


def test_an_input_without_examples_gives_an_array_of_the_models_width(world: Path) -> None:
    """An empty input writes a (0, dim) array (before: (0, 0), which no caller stacking arrays can
    use) and says that the input held no examples."""
    (world / "empty.txt").write_text("", encoding="utf-8")
    result = cli(["predict", "m", "-i", "empty.txt", "-o", "empty.npy"], cwd=world)
    assert result.returncode == 0, result.output
    assert "0 predictions" in result.stderr and "empty.txt holds no examples" in result.stderr
    assert np.load(world / "empty.npy").shape == (0, load_embedder(world / "m").dim)
