"""The run-level payload of a run record (:class:`RunInfo`): where and when it ran, on what, how
speed was measured, which model became ``model/``, and what a benchmark or ``tinyplm bench`` adds.

Written and read like :mod:`tinyplm.report.info`'s records (``to_dict`` / ``from_dict``; a schema-1
or -2 ``info`` dict through :meth:`RunInfo.from_v2`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, fields
from typing import Any

from tinyplm.evaluate.speed import Measurement
from tinyplm.report.info import from_plain, to_plain


@dataclass(kw_only=True)
class Machine:
    """Where the run ran: the CPU, its ``kind`` (:mod:`tinyplm.evaluate.cpu_kind`: which of the
    results pages' kinds it is, and ``int8_note`` where int8 gains little on it), torch's threads
    and version, whether the CPU has native bf16, the ``TINYPLM_BF16`` switch as set, and what
    training's ``auto`` precision means here."""

    cpu: str | None = None
    kind: str | None = None
    int8_note: str | None = None
    threads: int | None = None
    torch: str | None = None
    bf16_native: bool | None = None
    bf16_switch: str | None = None
    auto_means: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Machine:
        return from_plain(cls, data)


@dataclass(kw_only=True)
class RunPrecision:
    """The precisions the run measured in: ``metrics`` (the stages' scores) and ``teacher_logits``
    (the distillation targets: the PyTorch teacher's precision, or the name of the stage that
    computed them, ``teacher.logits_from``; None for ``tinyplm bench``, which computes none)."""

    metrics: str
    teacher_logits: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunPrecision:
        return from_plain(cls, data)


@dataclass(kw_only=True)
class FastestRuntime:
    """``tinyplm bench --runtimes``, per model: the ``fastest`` of its runtime variants whose primary
    metric is within ``tolerance`` of its first runtime's, that variant's ``runtime`` and
    precision, and every variant's ``candidates`` entry (sentences/s and the metric)."""

    fastest: str
    runtime: str
    tolerance: float
    candidates: dict[str, dict[str, float | None]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FastestRuntime:
        return from_plain(cls, data)


@dataclass(kw_only=True)
class BenchmarkInfo:
    """A record a benchmark script made (``benchmarks/``): its ``name``, the ``recipe`` and the
    ``overrides`` it ran with, and its own ``settings`` (its command-line options)."""

    name: str
    recipe: str | None = None
    overrides: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchmarkInfo:
        return from_plain(cls, data)


@dataclass(kw_only=True)
class CutTexts:
    """How many of a split's ``examples`` (``split``: train, or an eval split's name) are longer
    than the ``width`` of word pieces the run reads (``task.max_length``; an embedding task's eval
    sets: ``task.eval_max_length``): ``cut`` of them lose their pieces past it, and ``longest`` is
    the longest's length in pieces (special tokens included)."""

    split: str
    cut: int
    examples: int
    width: int
    longest: int

    def sentence(self) -> str:
        """The count in words."""
        return (f"{self.cut:,} of {self.examples:,} {self.split} examples ({self.cut / max(self.examples, 1):.1%}) "
                f"are longer than {self.width} pieces and are cut there (the longest: {self.longest:,})")

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CutTexts:
        return from_plain(cls, data)


@dataclass(kw_only=True)
class RunInfo:
    """What a run records about itself.

    ``run_name``, ``run_dir``, ``created`` (local time) and ``started_unix``; ``seconds``: the whole
    run; ``machine``; ``precision``: what it measured in; ``processes``: training processes;
    ``teacher_fingerprint``: sha256 of the teacher's weights as read (what makes a finished run
    reusable); ``measurement``: how speed was measured; ``final_model`` and ``final_rule``: the
    stage copied to ``model/`` and why (``run.final``); ``selection_metric``: the metric key those
    choices (and each stage's kept checkpoint) read when it is not the primary dev metric
    (``accuracy_holdout``: on ``holdout`` training examples held out, ``tasks.holdout``), None
    when they read dev; ``guard_metrics``: other held-out metric keys the final model must keep
    ``final.guard_retention`` of the teacher's value of (``TaskData.guard_metrics``); ``bench``: the
    model dirs ``tinyplm bench`` measured and ``fastest`` its choice per model; ``benchmark``: the
    script that made the record; ``cut``: the splits of which ``task.max_length`` cuts some examples
    (:class:`CutTexts`; None where none or not counted).
    """

    run_name: str | None = None
    run_dir: str | None = None
    created: str | None = None
    started_unix: float | None = None
    seconds: float | None = None
    machine: Machine | None = None
    precision: RunPrecision | None = None
    processes: int | None = None
    teacher_fingerprint: str | None = None
    measurement: Measurement | None = None
    final_model: str | None = None
    final_rule: str | None = None
    selection_metric: str | None = None
    holdout: int | None = None
    guard_metrics: list[str] | None = None
    bench: list[str] | None = None
    fastest: dict[str, FastestRuntime] | None = None
    benchmark: BenchmarkInfo | None = None
    cut: list[CutTexts] | None = None

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunInfo:
        return from_plain(cls, data, {
            "machine": Machine.from_dict, "precision": RunPrecision.from_dict, "measurement": Measurement.from_dict,
            "fastest": lambda d: {k: FastestRuntime.from_dict(v) for k, v in d.items()},
            "benchmark": BenchmarkInfo.from_dict, "cut": lambda rows: [CutTexts.from_dict(r) for r in rows]})

    @classmethod
    def from_v2(cls, data: dict[str, Any]) -> RunInfo:
        """A schema-1 or -2 run ``info`` dict. Its keys map to fields; a benchmark's other keys are
        its settings (``distill_ablation`` wrote its options flat beside ``benchmark``); any other
        key (none that tinyplm wrote) is left out with a ``UserWarning`` naming it."""
        rest = dict(data)
        machine, precision = rest.pop("machine", None), rest.pop("precision", None)
        measurement, fastest = rest.pop("measurement", None), rest.pop("fastest", None)
        bench_name, recipe, overrides = rest.pop("benchmark", None), rest.pop("recipe", None), rest.pop("overrides", [])
        flat = {f.name for f in fields(cls)} - {"machine", "precision", "measurement", "fastest", "benchmark"}
        known = {k: rest.pop(k) for k in flat if k in rest}
        benchmark = None
        if bench_name is not None or recipe is not None:
            benchmark = BenchmarkInfo(name=bench_name or "", recipe=recipe, overrides=list(overrides), settings=rest)
            rest = {}
        if rest:
            warnings.warn(f"results.json: run info keys {sorted(rest)} are not part of any schema; left out",
                          stacklevel=2)
        return cls(
            **known, benchmark=benchmark,
            machine=Machine(cpu=machine) if isinstance(machine, str) else
            Machine.from_dict(machine) if machine else None,
            precision=RunPrecision(metrics=precision) if isinstance(precision, str) else
            RunPrecision.from_dict(precision) if precision else None,
            measurement=Measurement.from_v2(measurement) if measurement else None,
            fastest={k: FastestRuntime.from_dict(v) for k, v in fastest.items()} if fastest else None)
