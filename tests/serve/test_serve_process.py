"""The real server process (and the load benchmark's checks on it): SIGTERM mid-load answers every
accepted request and exits 0; a flood past the queue gets only 2xx and 503; a port in use is named."""

from __future__ import annotations

import argparse
import socket
from pathlib import Path

import pytest

import serve_load as bench
from conftest import make_tiny_model_dir
from helpers_cli import assert_bad_input, cli
from helpers_serve import sentences

pytestmark = pytest.mark.slow


ARGS = argparse.Namespace(max_batch=8, max_wait_ms=2.0, max_queue=64, threads=1)


def test_sigterm_mid_load_answers_every_accepted_request_and_exits_0(tmp_path: Path) -> None:
    model = make_tiny_model_dir(tmp_path / "m")
    result = bench.sigterm(str(model), sentences(64), count=400, concurrency=8, after=40, args=ARGS)
    assert result["exit_code_0"], result
    assert result["all_accepted_answered"], result
    summary = result["server"]["summary"]
    assert summary["accepted"] >= 40 and result["answered"] + result["not_accepted"] == 400


def test_flood_gets_only_2xx_or_503(tmp_path: Path) -> None:
    model = make_tiny_model_dir(tmp_path / "m")
    result = bench.flood(str(model), sentences(64), count=120, queue=4, args=ARGS)
    assert result["all_2xx_or_503"] and result["no_answer"] == 0, result
    assert result["answered_503"] > 0 and result["answered_2xx"] > 0, result
    assert result["server"]["exit_code"] == 0


def test_a_port_in_use_is_named(tmp_path: Path) -> None:
    model = make_tiny_model_dir(tmp_path / "m")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = cli(["serve", model, "--port", str(port)], cwd=tmp_path)
    assert_bad_input(result, f"cannot listen on 127.0.0.1:{port}", "--port")


def test_serve_runs_measure_both_servers_in_alternating_rounds(tmp_path: Path) -> None:
    """Both servers are up at once and each level is measured on both in alternating rounds: each
    run's level pools its rounds' requests, keeps each round's sentences/s, and both servers stop
    with exit 0; serve's labels cover every text once."""
    model = make_tiny_model_dir(tmp_path / "m")
    texts = sentences(24)
    args = argparse.Namespace(**vars(ARGS), levels=[1, 4], requests=30, rounds=3, api_key=None, streams=None)
    runs, labels = bench.serve_runs("model", str(model), texts, args)
    assert [r["batching"] for r in runs] == [True, False] and [r["max_batch"] for r in runs] == [8, 1]
    for run in runs:
        assert run["stop"]["exit_code"] == 0
        assert [lv["concurrency"] for lv in run["levels"]] == [1, 4]
        for level in run["levels"]:
            assert level["requests"] == 30 and level["non_2xx"] == 0 and level["no_answer"] == 0
            assert len(level["round_sentences_per_s"]) == 3 and min(level["round_sentences_per_s"]) > 0
    assert len(labels) == len(texts) and all(label is not None for label in labels)


@pytest.mark.parametrize("port", ["-1", "65536"])
def test_a_port_out_of_range_is_refused_before_the_model_loads(tmp_path: Path, port: str) -> None:
    """The port is checked and bound before the model loads: a folder that holds no model is not
    even read (its error would come from loading it)."""
    result = cli(["serve", str(tmp_path / "no_model"), "--port", port], cwd=tmp_path)
    assert_bad_input(result, f"--port: expected a TCP port from 0 to 65535 (0: any free port), got {port}")


def test_a_port_in_use_is_named_before_the_model_loads(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = cli(["serve", str(tmp_path / "no_model"), "--port", str(port)], cwd=tmp_path)
    assert_bad_input(result, f"cannot listen on 127.0.0.1:{port}")
