"""benchmarks/predict_ray.py: the corpus it cuts into shards and the figures it reports (no Ray here;
the benchmark's own run compares the labels of plain predict and predict --ray)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import predict_ray as pr


def test_the_shards_hold_the_whole_corpus_in_order(tmp_path: Path) -> None:
    texts = ["a fine film", "dull", "it works", "not at all", "yes"]
    whole, folder, n = pr.write_corpus(texts, repeat=3, shards=4, out=tmp_path)
    assert n == 15
    read = [json.loads(line)["text"] for line in whole.read_text().splitlines()]
    parts = sorted(folder.glob("part-*.jsonl"))
    assert len(parts) == 4
    assert [json.loads(line)["text"] for p in parts for line in p.read_text().splitlines() if line] == read
    assert read == texts * 3


def test_labels_are_read_in_file_order(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"label": "positive"}\n{"label": "negative"}\n')
    (tmp_path / "b.jsonl").write_text('{"label": "negative"}\n')
    assert pr.labels([tmp_path / "a.jsonl", tmp_path / "b.jsonl"]) == ["positive", "negative", "negative"]


def test_summary_takes_medians_and_both_ratios() -> None:
    plain = [{"wall_s": 10.0, "predict_s": 5.0, "per_s": 200.0}, {"wall_s": 12.0, "predict_s": 6.0, "per_s": 180.0},
             {"wall_s": 11.0, "predict_s": 5.5, "per_s": 190.0}]
    ray = [{"wall_s": 20.0, "start_s": 6.0, "predict_s": 8.0}, {"wall_s": 22.0, "start_s": 7.0, "predict_s": 10.0},
           {"wall_s": 21.0, "start_s": 6.5, "predict_s": 9.0}]
    s = pr.summary(1000, plain, ray, workers=2, threads=1)
    assert s["plain"] == {"wall_s": 11.0, "predict_s": 5.5, "per_s": 190.0}
    assert s["ray"]["pool_per_s"] == pytest.approx(1000 / 9.0, abs=0.1)
    assert s["ratio"]["end_to_end"] == pytest.approx(11.0 / 21.0, abs=1e-3)
    assert s["ratio"]["pool"] == pytest.approx((1000 / 9.0) / 190.0, abs=1e-3)
    assert s["ray_overhead_s"] == pytest.approx(10.0)


def test_plain_predict_rate_is_read_as_the_cli_prints_it() -> None:
    line = "17440 predictions -> out.jsonl (6.2 s, 2813 examples/s); sequence head, max length 64 (run)"
    found = pr.PLAIN_RATE.search(line)
    assert found and (float(found.group(1)), float(found.group(2))) == (6.2, 2813.0)


def test_a_ray_round_joins_the_cluster_it_is_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []

    def fake(args):
        calls.append([str(a) for a in args])
        out = Path(calls[-1][calls[-1].index("--output") + 1])
        out.mkdir(parents=True, exist_ok=True)
        (out / "_manifest.json").write_text(json.dumps({"timing": {"start_s": 0.5, "predict_s": 3.0}}))
        return 4.0, ""

    monkeypatch.setattr(pr, "_tinyplm", fake)
    got = pr.ray_round(Path("m"), tmp_path / "shards", tmp_path / "ray-0", 1, 2, address="auto")
    assert got == {"wall_s": 4.0, "start_s": 0.5, "predict_s": 3.0}
    assert calls[0][-2:] == ["--address", "auto"] and calls[0][calls[0].index("--workers") + 1] == "1"
    pr.ray_round(Path("m"), tmp_path / "shards", tmp_path / "ray-1", 2, 1)
    assert "--address" not in calls[1]
    with pr.local_cluster(False) as address:  # no head started: each job starts its own Ray
        assert address is None
