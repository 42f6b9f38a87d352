"""A runtime choice in the report: summary.md (and the report page's notes) say which candidate
was kept, on which examples, and why each refused one was refused."""

from __future__ import annotations

import torch

from helpers_runtime import Table
from tinyplm.compress.runtime import choose_fastest
from tinyplm.config.compress import FastestRuntime
from tinyplm.report import RunRecord, StageRecord
from tinyplm.report.info import CompressInfo, StageInfo
from tinyplm.report.notes import RuntimeChoice, compression_notes
from tinyplm.report.records import StageKind
from tinyplm.report.summary import render_summary
from tinyplm.tasks.encoding import Encoded


def _record(chosen_by: dict) -> RunRecord:
    def stage(name, **kw):
        base = dict(metrics={"accuracy": 0.9}, params=10, params_no_embeddings=5, disk_bytes=4_000_000,
                    latency_ms_p50_b1=1.0, latency_ms_p90_b1=1.2, throughput_sent_per_s=100.0)
        return StageRecord(name=name, **{**base, **kw})

    made = CompressInfo(step={"kind": "runtime"}, details={"runtime": "openvino", "chosen_by": chosen_by})
    return RunRecord(task="sst2", metric="accuracy", stages=[
        stage("teacher"), stage("cnn"),
        stage("cnn.runtime", throughput_sent_per_s=300.0, kind=StageKind.COMPRESSED, parent="cnn",
              compress_step="runtime", info=StageInfo(compress=made))])


def _choice(n: int, flipped: int, step: FastestRuntime) -> dict:
    labels = [i % 2 for i in range(n)]
    flips = [1 - y if i < flipped else y for i, y in enumerate(labels)]
    enc = Encoded([[i, 1] for i in range(n)], [[0, 0]] * n, torch.tensor(labels), 0)
    speeds = {"openvino_int8": 900.0, "openvino": 300.0}
    return choose_fastest(Table(labels), {"openvino_int8": Table(flips), "openvino": Table(labels)}, enc,
                          lambda models, _: {k: speeds[k] for k in models}, step, 0, False, held_out=enc).to_dict()


def test_summary_names_the_refused_candidate_and_why() -> None:
    record = _record(_choice(2000, 60, FastestRuntime(kind="runtime")))
    note = compression_notes(record)[0]
    assert "Kept `openvino` on 2000 held-out examples." in note
    assert "Refused `openvino_int8`: flips 60 of 2000 predictions of its parent (3.00%; up to" in note
    assert "more than max_flip 1.00%" in note and "more than max_drop 0.005" in note
    assert note in render_summary(record)


def test_a_choice_outside_the_limits_says_so() -> None:
    record = _record(_choice(40, 2, FastestRuntime(kind="runtime")))
    note = compression_notes(record)[0]
    assert "No candidate was shown within the limits on 40 held-out examples; kept `openvino`" in note
    assert "`openvino`: flips none of 40 predictions, but 40 examples cannot show" in note


def test_a_choice_recorded_before_refusals_were_reads_as_a_plain_choice() -> None:
    old = {"chosen": "openvino_int8", "reference_accuracy": 0.95, "max_drop": 0.005, "examples": 500,
           "candidates": {"openvino_int8": {"accuracy": 0.95, "sent_per_s": 900.0}}}
    assert RuntimeChoice.from_details({"chosen_by": old}) == RuntimeChoice("openvino_int8", 500)
    assert "Kept `openvino_int8` on 500 examples." in compression_notes(_record(old))[0]
    assert RuntimeChoice.from_details({"runtime": "openvino"}) is None
