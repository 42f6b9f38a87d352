"""Derived numbers for reports: one row per stage, the best student, the headline, a markdown table.

Everything a report shows is computed here once, from a :class:`RunRecord`, so the HTML page, the
markdown summary and the model card cannot disagree. Ratios against the teacher (retention,
speed-up, compression) are ``None`` when there is no teacher stage or the divisor is zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tinyplm.report.records import RunRecord, StageKind, StageRecord

TEACHER = "teacher"
# Students below this share of the teacher's primary metric are marked in every report.
RETENTION_TARGET = 97.0


def primary(record: RunRecord, stage: StageRecord, metric: str | None = None) -> float | None:
    """The stage's value of the run's primary metric (or of ``metric``), or None when it was not measured
    or is undefined (NaN or infinite in results.json): such a stage is neither plotted nor ranked."""
    value = stage.metrics.get(metric or record.metric)
    return float(value) if value is not None and math.isfinite(value) else None


def ratio(num: float | None, den: float | None) -> float | None:
    """``num / den``, or None when either is missing or the divisor is not positive."""
    if num is None or den is None or den <= 0:
        return None
    return num / den


#: Compress steps that change only how a model runs (runtime, precision), not what it computes.
RUNTIME_STEPS = frozenset({"onnx_dynamic_int8", "onnx_static_int8", "openvino", "openvino_int8", "runtime",
                           "dynamic_int8", "bf16"})


def teacher_best(record: RunRecord) -> StageRecord | None:
    """The teacher on its fastest runtime: the fastest of the teacher and the stages made from it by
    runtime or precision steps alone (the honest reference: what a user gets without distilling)."""
    teacher = record.teacher
    if teacher is None:
        return None
    variants = [s for s in record.stages if s.parent == teacher.name and s.compress_step in RUNTIME_STEPS]
    return max([teacher, *variants], key=lambda s: s.throughput_sent_per_s)


@dataclass(frozen=True, kw_only=True)
class StageRow:
    """The derived numbers of one stage, as every report shows them (ratios are None when they
    cannot be formed: no teacher, a zero divisor, a stage not timed).

    ``name``; ``is_teacher``; ``metric``: the run's primary metric (None when not measured) and
    ``metrics`` all of them; ``retention``: % of the teacher's primary metric; ``params_m`` and
    ``params_no_emb_m``: parameters in millions (with and without embeddings); ``size_mb``: bytes on
    disk / 1e6; ``latency_p50_ms`` / ``latency_p90_ms``: batch 1; ``throughput``: sentences/s at
    batch ``throughput_batch``; ``speedup``: x the teacher's throughput as saved (fp32 PyTorch) and
    ``speedup_vs_best`` x the teacher on its fastest runtime (:func:`teacher_best`); ``compression``:
    teacher disk bytes / stage disk bytes; ``runtime`` and ``precision`` that ran; ``gflops``: useful
    GFLOP/s and ``share_of_peak`` of this CPU's peak for that precision; ``trained_m`` and
    ``trained_share``: parameters its own training updated, in millions and as a share of its
    parameters (None for a stage that did not train).
    """

    name: str
    is_teacher: bool
    metric: float | None
    metrics: dict[str, float]
    retention: float | None
    params_m: float
    params_no_emb_m: float
    size_mb: float
    latency_p50_ms: float
    latency_p90_ms: float
    throughput: float
    throughput_batch: int
    speedup: float | None
    speedup_vs_best: float | None
    compression: float | None
    runtime: str
    precision: str
    gflops: float | None
    share_of_peak: float | None
    trained_m: float | None
    trained_share: float | None


def stage_row(record: RunRecord, stage: StageRecord) -> StageRow:
    """The derived numbers of one stage (:class:`StageRow`)."""
    teacher, best = record.teacher, teacher_best(record)
    value = primary(record, stage)
    t_value = primary(record, teacher) if teacher else None
    retention = ratio(value, t_value)
    speedup = ratio(stage.throughput_sent_per_s, teacher.throughput_sent_per_s if teacher else None)
    vs_best = ratio(stage.throughput_sent_per_s, best.throughput_sent_per_s if best else None)
    compression = ratio(float(teacher.disk_bytes) if teacher else None, float(stage.disk_bytes))
    compute, trained = stage.compute or {}, stage.info.trained
    timed = stage.throughput_sent_per_s > 0
    return StageRow(
        name=stage.name, is_teacher=stage.name == TEACHER, metric=value, metrics=dict(stage.metrics),
        retention=retention * 100 if retention is not None else None,
        params_m=stage.params / 1e6, params_no_emb_m=stage.params_no_embeddings / 1e6,
        size_mb=stage.disk_bytes / 1e6,
        latency_p50_ms=stage.latency_ms_p50_b1, latency_p90_ms=stage.latency_ms_p90_b1,
        throughput=stage.throughput_sent_per_s, throughput_batch=stage.throughput_batch,
        speedup=speedup if timed else None, speedup_vs_best=vs_best if timed else None,
        compression=compression if stage.disk_bytes > 0 else None,
        runtime=stage.runtime, precision=stage.precision,
        gflops=compute.get("gflops_per_s"), share_of_peak=compute.get("share_of_peak"),
        trained_m=trained.trainable_params / 1e6 if trained is not None else None,
        trained_share=trained.trainable_share if trained is not None else None,
    )


def stage_rows(record: RunRecord) -> list[StageRow]:
    """One :class:`StageRow` per stage, in record order."""
    return [stage_row(record, s) for s in record.stages]


def best_student(record: RunRecord, metric: str | None = None) -> StageRecord | None:
    """The non-teacher stage with the highest primary metric (or ``metric``; ties: higher throughput).

    Stages without the primary metric rank last. Returns None when there is no student.
    """
    students = [s for s in record.stages if s.kind is not StageKind.TEACHER]
    if not students:
        return None

    def key(stage: StageRecord) -> tuple[bool, float, float]:
        value = primary(record, stage, metric)
        return (value is not None, value if value is not None else 0.0, stage.throughput_sent_per_s)

    return max(students, key=key)


def final_stage(record: RunRecord) -> StageRecord | None:
    """The run's final model (``info.final_model``, chosen by the recipe's rule), else the best student."""
    named = record.stage(record.info.final_model) if record.info.final_model else None
    return named if named is not None and named.kind is not StageKind.TEACHER else best_student(record)


def metric_names(record: RunRecord) -> list[str]:
    """The primary metric first, then every other metric any stage reports (sorted)."""
    others = sorted({m for s in record.stages for m in s.metrics} - {record.metric})
    return [record.metric, *others]


# ---------------------------------------------------------------------------------------------
# Formatting


def fmt_metric(value: float | None) -> str:
    """A metric value with 4 decimals, an em dash when missing, "undefined" when NaN or infinite."""
    if value is None:
        return "—"
    return f"{value:.4f}" if math.isfinite(value) else "undefined"


def fmt_num(value: float | None, digits: int = 1, suffix: str = "") -> str:
    """A number with ``digits`` decimals and an optional suffix, or an em dash when missing/zero."""
    if value is None or value == 0:
        return "—"
    return f"{value:,.{digits}f}{suffix}"


def fmt_retention(value: float | None) -> str:
    """A retention percentage, e.g. ``98.1%`` (em dash when unknown)."""
    return "—" if value is None else f"{value:.1f}%"


def fmt_seconds(seconds: float | None) -> str:
    """A duration as ``1h 02m``, ``8m 00s`` or ``12.3 s``."""
    if seconds is None:
        return "—"
    seconds = float(seconds)
    if seconds >= 3600:
        return f"{int(seconds // 3600)}h {int(seconds % 3600 // 60):02d}m"
    if seconds >= 60:
        return f"{int(seconds // 60)}m {int(seconds % 60):02d}s"
    return f"{seconds:.1f} s"


def below_target(row: StageRow) -> bool:
    """True for a student whose retention is known and below :data:`RETENTION_TARGET`."""
    retention = row.retention
    return not row.is_teacher and retention is not None and retention < RETENTION_TARGET


def table_cells(record: RunRecord, row: StageRow) -> list[str]:
    """The formatted cells of one row, in the order of :func:`table_header`."""
    extra = [fmt_metric(row.metrics.get(m)) for m in metric_names(record)[1:]]
    return [
        row.name,
        fmt_metric(row.metrics.get(record.metric)),  # "undefined" where NaN, as the others
        *extra,
        fmt_retention(row.retention),
        fmt_num(row.params_m, 2),
        *([_fmt_trained(row)] if shows_trained(record) else []),
        fmt_num(row.size_mb, 1),
        fmt_num(row.latency_p50_ms, 2),
        fmt_num(row.latency_p90_ms, 2),
        fmt_num(row.throughput, 1),
        fmt_num(row.speedup, 2, "×"),
        fmt_num(row.speedup_vs_best, 2, "×"),
        fmt_num(row.compression, 2, "×"),
        f"{row.runtime} {row.precision}",
        _fmt_compute(row),
    ]


def shows_trained(record: RunRecord) -> bool:
    """Whether the table has the trained-parameters column: some stage recorded what it trained
    (``StageInfo.trained``)."""
    return any(s.info.trained is not None for s in record.stages)


def _fmt_trained(row: StageRow) -> str:
    if row.trained_m is None:
        return "—"
    share = row.trained_share
    return f"{row.trained_m:.3g}" + (f" ({share:.1%})" if share is not None else "")


def _fmt_compute(row: StageRow) -> str:
    if row.gflops is None:
        return "—"
    share = row.share_of_peak
    return f"{row.gflops:,.1f}" + (f" ({share:.1%})" if share is not None else "")


def table_header(record: RunRecord) -> list[str]:
    """Column titles of the comparison table (extra metrics follow the primary one)."""
    return [
        "Stage",
        *metric_names(record),
        "Retention",
        "Params (M)",
        *(["Trained (M)"] if shows_trained(record) else []),
        "Size (MB)",
        "p50 ms (b1)",
        "p90 ms (b1)",
        f"Sent/s (b{_batch(record)})",
        "× teacher",
        "× teacher best",
        "Smaller",
        "Runtime",
        "GFLOP/s (% peak)",
    ]


def column_note(record: RunRecord) -> str:
    """What the ratio and compute columns mean (one sentence each), naming the reference stages."""
    best = teacher_best(record)
    ref = f" ({best.name}, {best.runtime} {best.precision})" if best is not None else ""
    return ("× teacher = throughput / the teacher's as saved (fp32 PyTorch); × teacher best = throughput / "
            f"the teacher on its fastest runtime{ref}; smaller = teacher size on disk / stage size. "
            "GFLOP/s = the encoder's useful FLOPs per sentence (from its shape, real tokens only) x sentences/s, "
            "with its share of this CPU's theoretical peak for the precision that ran."
            + (" Trained (M) = parameters the stage's own training updated (its fine-tuning method; share of its "
               "parameters); — where the stage did not train." if shows_trained(record) else ""))


def _batch(record: RunRecord) -> str:
    """The throughput batch size of the record's stages (they share one; "N" if they do not)."""
    sizes = {s.throughput_batch for s in record.stages}
    return str(sizes.pop()) if len(sizes) == 1 else "N"


def _md_cell(text: str) -> str:
    """Escape characters that would break a markdown table cell."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def markdown_table(record: RunRecord) -> str:
    """The comparison table as GitHub markdown; the best student's name is bold.

    Students below 97% retention get a trailing warning sign after their retention.
    """
    best = final_stage(record)
    header = table_header(record)
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join([":---"] + ["---:"] * (len(header) - 1)) + "|",
    ]
    for row in stage_rows(record):
        cells = [_md_cell(c) for c in table_cells(record, row)]
        if best is not None and row.name == best.name:
            cells[0] = f"**{cells[0]}**"
        if below_target(row):
            idx = header.index("Retention")
            cells[idx] += " ⚠"
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def headline(record: RunRecord) -> str:
    """One sentence on the best student vs the teacher (plain text, not escaped).

    E.g. ``Best student student-L3-H384 keeps 98.1% of the teacher's accuracy at 2.0× its
    throughput, 1.9× smaller.``
    """
    best = final_stage(record)
    teacher = record.teacher
    if best is None:
        if teacher is None:
            return "No stages were measured in this run."
        value = fmt_metric(teacher.metrics.get(record.metric))
        return f"Only the teacher was measured: {record.metric} {value}."
    row = stage_row(record, best)
    if row.retention is None:
        text = f"{_who(record, best)} {best.name} reaches {record.metric} {fmt_metric(best.metrics.get(record.metric))}"
        if row.throughput > 0:
            text += f" at {row.throughput:,.1f} sentences/s"
        if teacher is None:
            return text + " (no teacher to compare with)."
        return text + f" (the teacher's is {fmt_metric(teacher.metrics.get(record.metric))}: no share of it to give)."
    text = (f"{_who(record, best)} {best.name} keeps {row.retention:.1f}% "
            f"of the teacher's {record.metric}")
    if row.speedup is not None:
        text += f" at {row.speedup:.1f}× its throughput"
    if row.compression is not None:
        ratio = row.compression
        text += f", {ratio:.1f}× smaller" if ratio >= 1 else f", {1 / ratio:.1f}× larger"
    return text + "."


def _who(record: RunRecord, stage: StageRecord) -> str:
    return "Final model" if record.info.final_model == stage.name else "Best student"
