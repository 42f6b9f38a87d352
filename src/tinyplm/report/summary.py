"""summary.md: the run at a glance in markdown (headline, table, how speed was measured, links)."""

from __future__ import annotations

from tinyplm.report.notes import compression_notes, cut_notes
from tinyplm.report.records import RunRecord
from tinyplm.report.tables import RETENTION_TARGET, column_note, headline, markdown_table

MEASUREMENT_NOTE = (
    "Latency is the batch-1 p50/p90 over the dev sentences; throughput is sentences per second at "
    "batch 32 over the dev sentences. All models were measured in the same process, interleaved, "
    "after warm-up, so their numbers are comparable with each other; absolute CPU numbers depend "
    "on the machine."
)


def _compression(record: RunRecord) -> list[str]:
    notes = compression_notes(record)
    return ["## Compression", "", *[f"- {n}" for n in notes], ""] if notes else []


def render_summary(record: RunRecord) -> str:
    """The text of ``summary.md`` for ``record`` (links are relative to the run directory)."""
    name = record.info.run_name
    title = f"# tinyplm run: {name}" if name else f"# tinyplm run: {record.task}"
    machine = record.info.machine.to_dict() if record.info.machine else {}
    lines = [
        title,
        "",
        f"Task **{record.task}**, primary metric **{record.metric}** (dev split).",
        "",
        headline(record),
        "",
        *([f"How the final model ({record.info.final_model}) was chosen: {record.info.final_rule}.", ""]
          if record.info.final_model and record.info.final_rule else []),  # "no stage kept 98% ...": said here
        "## Results",
        "",
        markdown_table(record).rstrip("\n"),
        "",
        f"Bold: the final model. ⚠: below {RETENTION_TARGET:.0f}% of the teacher's {record.metric}. "
        + column_note(record),
        "",
        f"![{record.metric} vs latency](plots/accuracy_vs_latency.png)",
        "",
        *[f"⚠ {n}\n" for n in cut_notes(record)],
        *_compression(record),
        "## How speed was measured",
        "",
        MEASUREMENT_NOTE,
    ]
    if machine:
        desc = ", ".join(f"{k}: {v}" for k, v in machine.items())
        lines += ["", f"Machine: {desc}."]
    lines += [
        "",
        "## Files",
        "",
        "- [report.html](report.html): the full report with plots and per-stage details",
        "- [plots/accuracy_vs_latency.png](plots/accuracy_vs_latency.png)",
        "- [plots/throughput.png](plots/throughput.png)",
        "- [results.json](results.json): every number above, machine-readable",
        "",
    ]
    return "\n".join(lines)
