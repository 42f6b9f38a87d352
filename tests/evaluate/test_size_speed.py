"""Size (parameter counts, bytes of the saved artefact) and speed (latency, throughput)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import BertConfig, BertForMaskedLM, BertForSequenceClassification, BertTokenizerFast

from tinyplm.config import MeasureSpec
from tinyplm.evaluate.size import count_params, disk_bytes
from tinyplm.evaluate.speed import SpeedResult, measure_speed
from tinyplm.models import save_model
from tinyplm.tasks.encoding import Encoded

FAST = MeasureSpec(latency_sentences=4, throughput_batch=2, throughput_sentences=5, warmup=1, rounds=2, threads=1)


def tiny_config(layers: int = 2, num_labels: int = 2) -> BertConfig:
    """The DESIGN.md tiny BERT shape with ``layers`` layers."""
    return BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=layers, num_attention_heads=4,
                      intermediate_size=37, max_position_embeddings=64, num_labels=num_labels)


def tiny_encoded(n: int = 5) -> Encoded:
    """``n`` examples of lengths 3..n+2 made of ids below 99."""
    ids = [[2] + [10 + j for j in range(i + 1)] + [3] for i in range(n)]
    return Encoded(ids, [[0] * len(x) for x in ids], torch.zeros(n, dtype=torch.long), 0)


def embedding_numel(model: torch.nn.Module) -> int:
    """Elements of every distinct nn.Embedding weight in ``model``."""
    seen = {id(m.weight): m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    return sum(seen.values())


@pytest.mark.parametrize("layers", [1, 2])
def test_count_params_matches_numel(layers: int) -> None:
    torch.manual_seed(0)
    model = BertForSequenceClassification(tiny_config(layers))
    total, no_emb = count_params(model)
    assert total == sum(p.numel() for p in model.parameters())
    assert no_emb == total - embedding_numel(model)
    assert total - no_emb == (99 + 64 + 2) * 32  # word + position + token-type tables


def test_count_params_counts_tied_weights_once() -> None:
    model = BertForMaskedLM(tiny_config(1))
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
    unique = {id(p): p.numel() for p in model.parameters()}
    total, no_emb = count_params(model)
    assert total == sum(unique.values())
    assert no_emb == total - embedding_numel(model)


def test_disk_bytes_counts_config_and_weights_only(tmp_path: Path) -> None:
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(94)]) + "\n")
    tok = BertTokenizerFast(vocab=str(vocab))
    model_dir = save_model(BertForSequenceClassification(tiny_config()), tok, tmp_path / "model")
    (model_dir / "README.md").write_text("# a model card that is not part of the model\n" * 20)
    names = {p.name for p in model_dir.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= names
    expected = (model_dir / "config.json").stat().st_size + (model_dir / "model.safetensors").stat().st_size
    assert disk_bytes(model_dir) == expected
    # fp32 weights: at least 4 bytes per parameter.
    assert disk_bytes(model_dir) > 4 * count_params(BertForSequenceClassification(tiny_config()))[0]


def test_disk_bytes_of_an_exported_onnx_file(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_bytes(b"{}")
    (tmp_path / "model.onnx").write_bytes(b"\0" * 1000)
    (tmp_path / "tokenizer.json").write_bytes(b"\0" * 300)
    (tmp_path / "special_tokens_map.json").write_bytes(b"{}")
    assert disk_bytes(tmp_path) == 1002


def test_measure_speed_two_models() -> None:
    """measure_speed under 2 threads: results, thread restore, call count, eval mode."""
    torch.manual_seed(0)
    models = {name: BertForSequenceClassification(tiny_config(n)) for name, n in (("one", 1), ("two", 2))}
    models["two"].train()
    original = torch.get_num_threads()
    torch.set_num_threads(2)  # differs from FAST.threads = 1, so a restore is visible
    try:
        seen_threads: list[int] = []
        models["one"].register_forward_hook(lambda *_: seen_threads.append(torch.get_num_threads()))
        results = measure_speed(models, tiny_encoded(5), FAST)
        assert set(results) == {"one", "two"}
        for r in results.values():
            assert isinstance(r, SpeedResult)
            assert r.latency_ms_p50_b1 > 0 and r.latency_ms_p90_b1 >= r.latency_ms_p50_b1
            assert r.throughput_sent_per_s > 0 and r.throughput_batch == FAST.throughput_batch
        assert torch.get_num_threads() == 2  # restored
        assert seen_threads and set(seen_threads) == {1}  # measured under spec.threads
        # warm-up 1 single + 1 group, then per round 4 singles + 3 groups (5 sentences by 2): 2 + 2 * 7.
        assert len(seen_threads) == 2 + FAST.rounds * 7
        assert not models["two"].training  # measured in eval mode
    finally:
        torch.set_num_threads(original)


def test_measure_speed_on_empty_data_raises() -> None:
    empty = Encoded([], [], torch.zeros(0, dtype=torch.long), 0)
    with pytest.raises(ValueError, match="no sentences"):
        measure_speed({"m": BertForSequenceClassification(tiny_config(1))}, empty, FAST)


class Broken(torch.nn.Module):
    """A model whose forward always fails."""

    def forward(self, **_inputs: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("boom")


def test_measure_speed_restores_threads_when_a_model_fails() -> None:
    original = torch.get_num_threads()
    torch.set_num_threads(2)  # differs from FAST.threads = 1
    try:
        with pytest.raises(RuntimeError, match="boom"):
            measure_speed({"bad": Broken()}, tiny_encoded(2), FAST)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(original)


def test_the_protocol_says_how_many_sentences_were_timed_not_asked_for() -> None:
    """A dev split of 30 sentences under a spec asking for 1,000 and 5,000: 30 were timed, and the
    report says so (it said 1,000 and 5,000)."""
    from tinyplm.config.schema import MeasureSpec
    from tinyplm.evaluate.speed import protocol

    spec = MeasureSpec(latency_sentences=1000, throughput_sentences=5000)
    said = protocol(spec, 2, available=30)
    assert said.latency.startswith("batch 1, 30 dev sentences") and ", 30 dev sentences per round" in said.throughput
    assert "1000 dev sentences" in protocol(spec, 2, available=2000).latency
