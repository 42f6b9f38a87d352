"""Damaged model files through the command line: one ``error:`` line naming the file, exit 2.

Each case copies a tiny random model dir (or its ONNX or quantized form), damages one file (cut
short, a non-UTF-8 byte, a wrong type, a value that no longer fits the weights) and runs
``tinyplm evaluate MODEL_DIR --task sst2 --data-dir GLUE`` in-process. The undamaged copies
evaluate fine, so every refusal below is the damage's doing.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import make_tiny_glue, make_tiny_model_dir
from helpers_cli import Result, assert_bad_input, cli

Damage = Callable[[Path], None]


@pytest.fixture(scope="module")
def glue(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_glue(tmp_path_factory.mktemp("glue") / "glue", n_train=8, n_dev=8)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model_dir(tmp_path_factory.mktemp("model") / "tiny-bert")


@pytest.fixture(scope="module")
def onnx_dir(tmp_path_factory: pytest.TempPathFactory, model_dir: Path) -> Path:
    """The tiny model as tinyplm saves an ONNX stage: model.onnx, config.json, the tokenizer."""
    from tinyplm.compress.onnx_quant import onnx_fp32
    from tinyplm.models import load_classifier, save_model

    model, tok = load_classifier(model_dir, ("0", "1"), is_regression=False)
    work = tmp_path_factory.mktemp("onnx-work")
    return save_model(onnx_fp32(model, work), tok, tmp_path_factory.mktemp("onnx") / "model")


@pytest.fixture(scope="module")
def int8_dir(tmp_path_factory: pytest.TempPathFactory, model_dir: Path) -> Path:
    """The tiny model with int8 weights, saved at their true size (its own safetensors layout)."""
    from tinyplm.models import load_classifier, save_model
    from tinyplm.models.quantized import quantize_int8_dynamic

    model, tok = load_classifier(model_dir, ("0", "1"), is_regression=False)
    quantize_int8_dynamic(model)
    return save_model(model, tok, tmp_path_factory.mktemp("int8") / "model")


def evaluate(model: Path, glue: Path, cwd: Path) -> Result:
    return cli(["evaluate", model, "--task", "sst2", "--data-dir", glue], cwd)


def damaged(src: Path, dst: Path, damage: Damage) -> Path:
    copy = Path(shutil.copytree(src, dst))
    damage(copy)
    return copy


def cut(name: str, keep: float | int) -> Damage:
    """Keep the first ``keep`` bytes of ``name`` (a float: that share of them)."""
    def damage(folder: Path) -> None:
        data = (folder / name).read_bytes()
        (folder / name).write_bytes(data[: int(len(data) * keep) if isinstance(keep, float) else keep])
    return damage


def splice(name: str, at: int, new: bytes, drop: int = 0) -> Damage:
    """Put ``new`` at byte ``at`` of ``name`` (a negative ``at`` counts from the end), replacing ``drop`` bytes."""
    def damage(folder: Path) -> None:
        data = (folder / name).read_bytes()
        i = at % (len(data) + 1)
        (folder / name).write_bytes(data[:i] + new + data[i + drop :])
    return damage


def rewrite_json(name: str, change: Callable[[dict], object]) -> Damage:
    """Replace the JSON file ``name`` with what ``change`` returns for its content."""
    def damage(folder: Path) -> None:
        doc = json.loads((folder / name).read_text(encoding="utf-8"))
        (folder / name).write_text(json.dumps(change(doc)), encoding="utf-8")
    return damage


def set_key(name: str, key: str, value: object) -> Damage:
    return rewrite_json(name, lambda doc: {**doc, key: value})


def del_key(name: str, key: str) -> Damage:
    return rewrite_json(name, lambda doc: {k: v for k, v in doc.items() if k != key})


def cut_vocab_mid_token(folder: Path) -> None:
    """vocab.txt cut inside a token of three or more characters (no line break at its end)."""
    data = (folder / "vocab.txt").read_bytes()
    start = next(i + 1 for i in range(len(data) // 2, len(data)) if data[i : i + 1] == b"\n"
                 and b"\n" not in data[i + 1 : i + 4])
    (folder / "vocab.txt").write_bytes(data[: start + 2])


def cut_vocab_at_line(folder: Path) -> None:
    """vocab.txt cut after a whole line: every line has its break, but tokens are missing."""
    data = (folder / "vocab.txt").read_bytes()
    (folder / "vocab.txt").write_bytes(data[: data.index(b"\n", len(data) // 2) + 1])


def without_tokenizer_json(damage: Damage) -> Damage:
    def both(folder: Path) -> None:
        (folder / "tokenizer.json").unlink()
        damage(folder)
    return both


CASES: dict[str, tuple[Damage, str, str]] = {
    # case: (damage, the file the error starts with, what it says after that ("<file>:" + line:column, or ": "))
    "weights-cut-in-half": (cut("model.safetensors", 0.5), "model.safetensors", ": truncated: "),
    "weights-cut-in-header": (cut("model.safetensors", 100), "model.safetensors",
                              ": truncated or not a safetensors file (100 bytes"),
    "weights-empty": (cut("model.safetensors", 0), "model.safetensors",
                      ": truncated or not a safetensors file (0 bytes"),
    "weights-header-byte": (splice("model.safetensors", 12, b"\xff", drop=1), "model.safetensors",
                            ": damaged safetensors header (not UTF-8 JSON)"),
    "weights-extra-bytes": (splice("model.safetensors", -1, b"\0" * 64), "model.safetensors",
                            ": longer than its header says"),
    "tokenizer-json-cut": (cut("tokenizer.json", 0.5), "tokenizer.json", ": not valid JSON ("),
    "tokenizer-json-not-utf8": (splice("tokenizer.json", 40, b"\xc3\x28"), "tokenizer.json",
                                ":3: not valid UTF-8 (byte 0xc3"),
    "tokenizer-json-a-list": (rewrite_json("tokenizer.json", lambda doc: [doc]), "tokenizer.json",
                              ": expected a JSON object, got a list of 1"),
    "tokenizer-config-cut": (cut("tokenizer_config.json", 0.5), "tokenizer_config.json", ": not valid JSON ("),
    "vocab-cut-mid-token": (cut_vocab_mid_token, "vocab.txt", ": the last line has no line break"),
    "vocab-cut-at-line": (cut_vocab_at_line, "vocab.txt", " tokens but tokenizer.json's vocabulary has 99"),
    "vocab-alone-cut": (without_tokenizer_json(cut_vocab_mid_token), "vocab.txt", ": the last line has no line break"),
    "vocab-alone-not-utf8": (without_tokenizer_json(splice("vocab.txt", 30, b"\xe9")), "vocab.txt",
                             ": not valid UTF-8 (byte 0xe9"),
    "config-missing": (lambda folder: (folder / "config.json").unlink(), "", ": no config.json (expected a Hugging "
                       "Face checkpoint directory)"),
    "config-cut": (cut("config.json", 0.5), "config.json", ": not valid JSON ("),
    "config-empty": (cut("config.json", 0), "config.json", ":1:1: not valid JSON (Expecting value)"),
    "config-not-utf8": (splice("config.json", 5, b"\xff"), "config.json", ": not valid UTF-8 (byte 0xff"),
    "config-a-list": (rewrite_json("config.json", lambda cfg: [cfg]), "config.json",
                      ": top level: expected an object, got a list of 1"),
    "config-vocab-size-string": (set_key("config.json", "vocab_size", "99"), "config.json",
                                 ": vocab_size: expected an integer, got a string ('99')"),
    "config-vocab-size-zero": (set_key("config.json", "vocab_size", 0), "config.json",
                               ": vocab_size: expected a number greater than 0, got a number (0)"),
    "config-no-model-type": (del_key("config.json", "model_type"), "config.json",
                             ": top level: missing key 'model_type'"),
    "config-unknown-model-type": (set_key("config.json", "model_type", "bort"), "config.json",
                                  ": model_type 'bort' is not a family tinyplm reads; it reads bert, roberta"),
    "config-architectures-number": (set_key("config.json", "architectures", 3), "config.json",
                                    ": architectures: expected a list, got a number (3)"),
    "config-hidden-size-changed": (set_key("config.json", "hidden_size", 16), "model.safetensors", ": does not fit "),
}


@pytest.mark.parametrize("case", list(CASES))
def test_damaged_file_gives_one_line_naming_it(case: str, tmp_path: Path, model_dir: Path, glue: Path) -> None:
    damage, name, says = CASES[case]
    model = damaged(model_dir, tmp_path / "model", damage)
    result = evaluate(model, glue, tmp_path)
    assert_bad_input(result, says)
    assert result.stderr.startswith(f"error: {model / name}:"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_hidden_size_mismatch_names_the_tensor_and_both_files(tmp_path: Path, model_dir: Path, glue: Path) -> None:
    model = damaged(model_dir, tmp_path / "model", set_key("config.json", "hidden_size", 16))
    result = evaluate(model, glue, tmp_path)
    assert_bad_input(result, f"{model / 'model.safetensors'}: does not fit {model / 'config.json'}: tensor ",
                     "is [32] in the file but [16] by the config")


def test_undamaged_copies_evaluate(tmp_path: Path, model_dir: Path, onnx_dir: Path, int8_dir: Path,
                                   glue: Path) -> None:
    for source in (model_dir, onnx_dir, int8_dir):
        result = evaluate(damaged(source, tmp_path / source.parent.name, lambda folder: None), glue, tmp_path)
        assert result.returncode == 0, result.output
        assert "accuracy:" in result.stdout


@pytest.mark.parametrize("keep", [0.5, 0.02, 0], ids=["half", "header", "empty"])
def test_onnx_model_cut_short(keep: float, tmp_path: Path, onnx_dir: Path, glue: Path) -> None:
    model = damaged(onnx_dir, tmp_path / "onnx", cut("model.onnx", keep))
    assert_bad_input(evaluate(model, glue, tmp_path), f"error: {model / 'model.onnx'}: onnxruntime cannot load it")


def test_onnx_dir_without_its_graph(tmp_path: Path, onnx_dir: Path, glue: Path) -> None:
    model = damaged(onnx_dir, tmp_path / "onnx", lambda folder: (folder / "model.onnx").unlink())
    # with no weight file of any kind left, the dir check says so first
    assert_bad_input(evaluate(model, glue, tmp_path), f"error: {model}: no weights (expected one of")
    (model / "model.safetensors").write_bytes(b"")  # a stray weight file does not stand in for the graph
    assert_bad_input(evaluate(model, glue, tmp_path), f"error: {model / 'model.safetensors'}: truncated")


@pytest.mark.parametrize("keep", [0.5, 8], ids=["half", "header"])
def test_quantized_weights_cut_short(keep: float | int, tmp_path: Path, int8_dir: Path, glue: Path) -> None:
    model = damaged(int8_dir, tmp_path / "int8", cut("model.safetensors", keep))
    assert_bad_input(evaluate(model, glue, tmp_path), f"error: {model / 'model.safetensors'}: truncated")


def test_pytorch_bin_cut_short(tmp_path: Path, model_dir: Path, glue: Path) -> None:
    """An old-style checkpoint (pytorch_model.bin, no safetensors) cut short."""
    import torch
    from safetensors.torch import load_file

    def to_bin(folder: Path) -> None:
        state = load_file(str(folder / "model.safetensors"))
        (folder / "model.safetensors").unlink()
        torch.save(state, folder / "pytorch_model.bin")
        cut("pytorch_model.bin", 0.5)(folder)

    model = damaged(model_dir, tmp_path / "bin", to_bin)
    assert_bad_input(evaluate(model, glue, tmp_path), f"error: {model / 'pytorch_model.bin'}: cannot load weights (")
