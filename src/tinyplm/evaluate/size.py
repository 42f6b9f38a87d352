"""Model size: parameter counts and bytes of the saved artefact (measured, never estimated)."""

from __future__ import annotations

from pathlib import Path

from transformers import PreTrainedModel

# Files that hold a model's weights and shape; tokenizer files and READMEs are not counted.
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".onnx", ".pt", ".xml")  # .xml + .bin: OpenVINO IR


def count_params(model: PreTrainedModel) -> tuple[int, int]:
    """(total parameters, parameters outside the embedding tables); shared tensors count once.

    Quantized models hold their weights as buffers (int8, packed int4) or in an ONNX graph: their
    count is the one their config describes (quantization changes bytes, not the number of weights).
    """
    from tinyplm.models.quantized import is_quantized
    from tinyplm.models.shape import embedding_params, params_from_config

    if is_quantized(model):
        total = params_from_config(model.config)
        return total, total - embedding_params(model.config)
    return model.num_parameters(), model.num_parameters(exclude_embeddings=True)


def disk_bytes(model_dir: Path) -> int:
    """Bytes on disk of the weight files and config.json in ``model_dir`` (not the tokenizer)."""
    model_dir = Path(model_dir)
    total = 0
    for f in model_dir.iterdir():
        if f.is_file() and (f.suffix in WEIGHT_SUFFIXES or f.name == "config.json"):
            total += f.stat().st_size
    return total
