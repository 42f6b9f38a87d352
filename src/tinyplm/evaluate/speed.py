"""CPU speed: batch-1 latency percentiles and batch-N throughput, models measured side by side.

All models run in the same process on the same pre-tokenised dev sentences, interleaved round by
round (the order rotates each round) after a warm-up, so machine noise hits them alike. Models
run as saved (PyTorch eager under ``torch.inference_mode``, or their ONNX Runtime / OpenVINO
graph) with the same number of threads. Throughput batches are as deployed: by default the
measured sentences sorted by length and cut into batches (``tinyplm predict`` and ``serve`` batch
by length too), so padding is what a deployment pays; ``MeasureSpec.sort_by_length: false`` keeps
dev order. :func:`protocol` states all of it for the report.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import numpy as np
import torch

from tinyplm.config.schema import MeasureSpec
from tinyplm.tasks.encoding import Encoded, collate, model_inputs


@dataclass(frozen=True)
class SpeedResult:
    """Latency in milliseconds (batch 1) and throughput in sentences per second at batch
    ``throughput_batch``."""

    latency_ms_p50_b1: float
    latency_ms_p90_b1: float
    throughput_sent_per_s: float
    throughput_batch: int


def _batches(enc: Encoded, count: int, batch_size: int, by_length: bool = False) -> list[dict[str, torch.Tensor]]:
    """The first ``count`` sentences in batches, sorted by length first when ``by_length``."""
    n = min(count, len(enc))
    order = sorted(range(n), key=lambda i: (len(enc.input_ids[i]), i)) if by_length else list(range(n))
    return [model_inputs(collate(enc, order[i:i + batch_size])) for i in range(0, n, batch_size)]


@dataclass(frozen=True, kw_only=True)
class Measurement:
    """How speed was measured, for the report: what ``latency`` and ``throughput`` timed, the
    ``threads``, ``warmup_batches`` and ``rounds``, how the models shared their batches
    (``same_batches``) and the ``statistic`` reported."""

    latency: str
    throughput: str
    threads: int
    warmup_batches: int
    rounds: int
    same_batches: str
    statistic: str

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> Measurement:
        return cls(**data)

    @classmethod
    def from_v2(cls, data: dict[str, object]) -> Measurement:
        """The dict results.json schema 2 held (``same batches`` with a space)."""
        return cls(**{k.replace(" ", "_"): v for k, v in data.items()})


def protocol(spec: MeasureSpec, threads: int, available: int | None = None) -> Measurement:
    """How speed was measured, for the report; ``available``: the dev sentences there were to time
    (fewer than the spec asks for are all that was timed, and are what the report says)."""
    def timed(asked: int) -> int:
        return asked if available is None else min(asked, available)

    return Measurement(
        latency=f"batch 1, {timed(spec.latency_sentences)} dev sentences per round, p50 and p90",
        throughput=f"batches of {spec.throughput_batch}, {timed(spec.throughput_sentences)} dev sentences per round"
                   + (", sorted by length (as deployed)" if spec.sort_by_length else ", in dev order"),
        threads=threads, warmup_batches=spec.warmup, rounds=spec.rounds,
        same_batches="every model is timed on the same sentences, interleaved, order rotating each round",
        statistic="median over rounds (throughput), percentiles over all timed sentences (latency)")


@torch.inference_mode()
def _time_batches(model: torch.nn.Module, batches: list[dict[str, torch.Tensor]]) -> list[float]:
    out = []
    for b in batches:
        t0 = time.perf_counter()
        model(**b)
        out.append(time.perf_counter() - t0)
    return out


def measure_speed(models: dict[str, torch.nn.Module], enc: Encoded, spec: MeasureSpec,
                  per_model: dict[str, Encoded] | None = None) -> dict[str, SpeedResult]:
    """Measure every model in ``models`` on the sentences of ``enc`` (see module docstring);
    ``per_model`` gives a model its own encoding of the same sentences (another tokenizer's ids).

    Raises ``ValueError`` when ``enc`` is empty.
    """
    if len(enc) == 0:
        raise ValueError("no sentences to measure speed on")
    previous_threads = torch.get_num_threads()
    if spec.threads:
        torch.set_num_threads(spec.threads)
    try:
        return _measure(models, enc, spec, per_model or {})
    finally:
        torch.set_num_threads(previous_threads)


def _measure(models: dict[str, torch.nn.Module], enc: Encoded, spec: MeasureSpec,
             per_model: dict[str, Encoded]) -> dict[str, SpeedResult]:
    sets = {name: (_batches(e, spec.latency_sentences, 1),
                   _batches(e, spec.throughput_sentences, spec.throughput_batch, spec.sort_by_length))
            for name, e in {name: per_model.get(name, enc) for name in models}.items()}
    n_sent = sum(int(b["input_ids"].shape[0]) for b in next(iter(sets.values()))[1])
    for name, model in models.items():
        model.eval()
        singles, groups = sets[name]
        _time_batches(model, singles[: spec.warmup] + groups[: max(1, spec.warmup // 4)])
    lat: dict[str, list[float]] = {k: [] for k in models}
    thr: dict[str, list[float]] = {k: [] for k in models}
    names = list(models)
    for r in range(spec.rounds):
        for name in names[r % len(names):] + names[: r % len(names)]:
            singles, groups = sets[name]
            lat[name] += _time_batches(models[name], singles)
            thr[name].append(n_sent / sum(_time_batches(models[name], groups)))
    return {
        k: SpeedResult(
            latency_ms_p50_b1=float(np.percentile(lat[k], 50) * 1000),
            latency_ms_p90_b1=float(np.percentile(lat[k], 90) * 1000),
            throughput_sent_per_s=float(np.median(thr[k])),
            throughput_batch=spec.throughput_batch,
        )
        for k in models
    }
