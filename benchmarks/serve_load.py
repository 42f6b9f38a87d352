"""Load test of ``tinyplm serve``: dynamic batching against one forward pass per request, measured.

    python benchmarks/serve_load.py runs/sst2_demo/model runs/sst2_demo/teacher --requests 2000

For the served model (and the teacher, when a second MODEL_DIR is given), two servers at once:
with batching (``--max-batch 32``; adaptive: a request that finds the model free runs at once, see
:mod:`tinyplm.serve.batcher`) and without (``--max-batch 1``: one forward pass per request, the
naive baseline). Each server is a ``tinyplm serve`` subprocess on a free loopback port; the script
waits for ``/ready`` on both, then drives them with ``--requests`` requests per level and server
(one SST-2 dev sentence each, read with the sst2 task reader) from 1, 8, 32 and 128 concurrent
clients, in ``--rounds`` alternating rounds (batched, unbatched, unbatched, batched, ...: both sides
see the same drift of this shared machine; each round's sentences/s are kept), and reports per
level, over its rounds: requests/s, sentences/s, p50/p95/p99 latency, non-2xx responses,
requests without an answer, and the CPU the server and this load generator used (in cores: they
share this machine). For the served model, each request's time is split (from the server's
``Server-Timing`` header) into queueing, inference of its batch, the rest of its time in the app
(parsing, validation, serialising) and outside the app (HTTP on both ends, this client).
Beside them: each model's in-process batch throughput (``tinyplm.evaluate.speed.measure_speed``,
batches of ``--max-batch`` sorted by length) and the agreement of serve's and predict's labels
with ``tinyplm evaluate``'s on all of SST-2 dev.

Then two robustness checks on the served model: a flood (``--flood-requests`` at once against a
queue of ``--flood-queue`` examples: every request must get a 2xx or a 503, none lost or hanging)
and SIGTERM in the middle of a load (the server must exit 0 having answered every request it
accepted, and every such answer must reach its client).

The load generator is a plain asyncio client (keep-alive HTTP/1.1 connections, one write per
request), not locust: one process with bounded counts, exact per-request records (status, latency,
timing headers, errors) and the SIGTERM choreography in plain code, where locust would add a gevent
runtime and aggregate away what is checked here; and not httpx for the load itself, whose ~2 ms of
client CPU per request would be taken from the server on this 2-core machine (httpx only polls
``/ready``).
Prints the JSON; its last output line is the JSON's path.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import _harness as harness
from _serving import Record, Server, drive

# --------------------------------------------------------------------------- the load test


def level_stats(records: list[Record], seconds: float, server_cpu: float, client_cpu: float,
                breakdown: bool) -> dict:
    """One concurrency level's figures (see the module docstring)."""
    ok = [r for r in records if r.status is not None and 200 <= r.status < 300]
    lat = np.array([r.latency_s * 1000 for r in ok]) if ok else np.zeros(1)
    out = {"requests": len(records), "seconds": round(seconds, 3), "requests_per_s": round(len(ok) / seconds, 1),
           "sentences_per_s": round(len(ok) / seconds, 1),
           "latency_ms": {f"p{q}": round(float(np.percentile(lat, q)), 2) for q in (50, 95, 99)},
           "non_2xx": sum(1 for r in records if r.status is not None and not 200 <= r.status < 300),
           "no_answer": sum(1 for r in records if r.status is None),
           "mean_batch": round(float(np.mean([r.batch for r in ok])), 2) if ok else 0.0,
           "server_cpu_cores": round(server_cpu / seconds, 2), "client_cpu_cores": round(client_cpu / seconds, 2)}
    if breakdown and ok:
        queue = np.mean([r.timing.get("queue", 0) for r in ok])
        infer = np.mean([r.timing.get("infer", 0) for r in ok])
        app = np.mean([r.timing.get("app", 0) for r in ok])
        out["breakdown_mean_ms"] = {"queue": round(float(queue), 2), "inference": round(float(infer), 2),
                                    "app_http_validation": round(float(app - queue - infer), 2),
                                    "outside_app_http_and_client": round(float(lat.mean() - app), 2),
                                    "total": round(float(lat.mean()), 2)}
    return out


@dataclass
class Round:
    """One round of one server at one concurrency level: its records and what it cost."""

    records: list[Record]
    seconds: float
    server_cpu: float
    client_cpu: float


def timed_round(server: Server, texts: list[str], requests: int, concurrency: int) -> Round:
    """``requests`` requests from ``concurrency`` clients, after an untimed warm-up of a few requests
    per connection."""
    marks: dict = {}

    def mark() -> None:  # after the warm-up: the timed part starts here
        marks.update(cpu=server.cpu_seconds(), client=time.process_time(), start=time.perf_counter())

    records = asyncio.run(drive(server.url, texts, requests, concurrency, warm_up=4 * concurrency,
                                on_start=mark, api_key=server.api_key))
    return Round(records, time.perf_counter() - marks["start"], server.cpu_seconds() - marks["cpu"],
                 time.process_time() - marks["client"])


def paired_levels(servers: dict[bool, Server], texts: list[str], levels: list[int], requests: int,
                  rounds: int) -> dict[bool, list[dict]]:
    """Each concurrency level on every server in ``rounds`` alternating rounds (batched then
    unbatched, then the other way round, ...), ``requests`` in all per server and level: the two
    servers share this machine's cores with whatever else runs on it, so a drift of its speed falls
    on both sides alike instead of on whichever server happened to run then. A level's figures pool
    its rounds; ``round_sentences_per_s`` keeps each round's."""
    out: dict[bool, list[dict]] = {b: [] for b in servers}
    each = -(-requests // rounds)
    for concurrency in levels:
        done: dict[bool, list[Round]] = {b: [] for b in servers}
        for r in range(rounds):
            for batching in (list(servers) if r % 2 == 0 else list(servers)[::-1]):
                done[batching].append(timed_round(servers[batching], texts, each, concurrency))
        for batching, parts in done.items():
            stats = level_stats([x for p in parts for x in p.records], sum(p.seconds for p in parts),
                                sum(p.server_cpu for p in parts), sum(p.client_cpu for p in parts), breakdown=True)
            stats["round_sentences_per_s"] = [round(len(p.records) / p.seconds, 1) for p in parts]
            print(json.dumps({"batching": batching, "concurrency": concurrency, **stats}), file=sys.stderr, flush=True)
            out[batching].append({"concurrency": concurrency, **stats})
    return out


# --------------------------------------------------------------------------- side checks


def sst2_dev(data_dir: str | None):
    """The SST-2 dev split, read by the sst2 task reader."""
    from tinyplm import tasks

    return tasks.get("sst2", data_dir).read("dev")


def agreement(model_dir: str, split, served: list[str | None]) -> dict:
    """Share of SST-2 dev where serve's and predict's labels equal ``tinyplm evaluate``'s (its
    code path: encode the split, ``predict_logits`` in batches of 64, arg-max)."""
    import tempfile

    from tinyplm.inference.model_info import model_info
    from tinyplm.inference.predictor import Predictor
    from tinyplm.models import load_classifier
    from tinyplm.models.infer import logits_to_predictions, predict_logits
    from tinyplm.predict.predict import PredictJob, predict_file
    from tinyplm.predict.sources import Source
    from tinyplm.tasks.encoding import encode_split

    info = model_info(Path(model_dir))
    model, tok = load_classifier(info.path, info.labels, info.is_regression, info.head)
    evaluated = logits_to_predictions(predict_logits(model, encode_split(split, tok, info.max_length)), False)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "predictions.jsonl"
        predict_file(Predictor.load(Path(model_dir)), PredictJob(Source(str(split.source), "tsv", info.head,
                                                                        task="sst2"), str(out)))
        predicted = [json.loads(line)["label"] for line in out.read_text().splitlines()]
    index = {label: i for i, label in enumerate(info.labels)}
    n = len(evaluated)
    return {"examples": n, "max_length": info.max_length, "max_length_from": info.max_length_from,
            "serve_vs_evaluate": sum(index.get(s) == e for s, e in zip(served, evaluated, strict=True)) / n,
            "predict_vs_evaluate": sum(index[p] == e for p, e in zip(predicted, evaluated, strict=True)) / n}


def in_process_speed(model_dir: str, split, batch: int) -> dict:
    """The model's batch throughput in this process (``measure_speed``, batches sorted by length)."""
    from tinyplm.config import MeasureSpec
    from tinyplm.evaluate.speed import measure_speed
    from tinyplm.inference.model_info import model_info
    from tinyplm.models import load_classifier
    from tinyplm.tasks.encoding import encode_split

    info = model_info(Path(model_dir))
    model, tok = load_classifier(info.path, info.labels, info.is_regression, info.head)
    enc = encode_split(split, tok, info.max_length)
    spec = MeasureSpec(throughput_batch=batch, throughput_sentences=len(enc), latency_sentences=min(200, len(enc)),
                       rounds=3, warmup=5)
    speed = measure_speed({"m": model}, enc, spec)["m"]
    return {"throughput_sent_per_s": round(speed.throughput_sent_per_s, 1), "batch": batch,
            "latency_ms_p50_b1": round(speed.latency_ms_p50_b1, 2)}


def flood(model: str, texts: list[str], count: int, queue: int, args) -> dict:
    """``count`` requests at once against a queue of ``queue`` examples: each must get 2xx or 503."""
    server = Server(model, [*server_args(args, args.max_batch), "--max-queue", str(queue),
                            "--max-texts", str(min(queue, 64))], getattr(args, "api_key", None))
    server.wait_ready()
    records = asyncio.run(drive(server.url, texts, count, concurrency=count, timeout=120, api_key=server.api_key))
    stopped = server.stop()
    ok = sum(1 for r in records if r.status is not None and 200 <= r.status < 300)
    busy = sum(1 for r in records if r.status == 503)
    return {"requests": count, "concurrency": count, "max_queue": queue, "answered_2xx": ok, "answered_503": busy,
            "other_status": sum(1 for r in records if r.status is not None) - ok - busy,
            "no_answer": sum(1 for r in records if r.status is None), "all_2xx_or_503": ok + busy == count,
            "server": stopped}


def sigterm(model: str, texts: list[str], count: int, concurrency: int, after: int, args) -> dict:
    """SIGTERM after ``after`` answers of a ``count``-request load: every request the server accepted
    must be answered, every answer must reach its client, and the server must exit 0."""
    server = Server(model, server_args(args, args.max_batch), getattr(args, "api_key", None))
    server.wait_ready()
    records = asyncio.run(drive(server.url, texts, count, concurrency, stop_at=after,
                                on_stop=server.terminate, api_key=server.api_key))
    stopped = server.stop()
    received = sum(1 for r in records if r.status is not None) + server.polls
    summary = stopped["summary"] or {}
    return {"requests": count, "concurrency": concurrency, "sigterm_after_answers": after,
            "answered": sum(1 for r in records if r.status is not None),
            "answered_2xx": sum(1 for r in records if r.status is not None and 200 <= r.status < 300),
            "not_accepted": sum(1 for r in records if r.status is None),
            "server": stopped, "exit_code_0": stopped["exit_code"] == 0,
            "all_accepted_answered": bool(summary) and summary.get("accepted") == summary.get("answered") == received}


# --------------------------------------------------------------------------- main


def server_args(args, max_batch: int) -> list[str]:
    out = ["--max-batch", str(max_batch), "--max-queue", str(args.max_queue)]
    out += ["--threads", str(args.threads)] if args.threads else []
    streams = getattr(args, "streams", None)
    return out + (["--streams", str(streams)] if streams else [])


def serve_runs(name: str, model: str, texts: list[str], args) -> tuple[list[dict], list[str | None]]:
    """The model served with and without batching, both servers up at once and every level measured
    on them in alternating rounds (:func:`paired_levels`); -> (runs, serve's dev labels)."""
    print(f"# {name}: {model}, max batch {args.max_batch} and 1, {args.rounds} alternating rounds", file=sys.stderr,
          flush=True)
    servers = {batching: Server(model, server_args(args, args.max_batch if batching else 1), args.api_key)
               for batching in (True, False)}
    try:
        for server in servers.values():
            server.wait_ready()
        levels = paired_levels(servers, texts, args.levels, args.requests, args.rounds)
        # every dev sentence once through the batching server, to compare serve's labels with evaluate's
        labels = [r.label for r in asyncio.run(drive(servers[True].url, texts, len(texts), 32,
                                                     api_key=servers[True].api_key))]
    finally:
        stopped = {batching: server.stop() for batching, server in servers.items()}
    runs = [{"model": name, "model_dir": model, "batching": batching, "max_batch": args.max_batch if batching else 1,
             "levels": levels[batching], "stop": stopped[batching]} for batching in (True, False)]
    return runs, labels


def at_level(run: dict, concurrency: int) -> dict:
    return next((lv for lv in run["levels"] if lv["concurrency"] == concurrency), {})


def checks(runs: list[dict], result: dict) -> dict:
    """The acceptance figures: at concurrency 1, batched over unbatched sentences/s and p50 (adaptive
    batching should cost a lone client nothing); at 32, batched over unbatched sentences/s, batched
    served over in-process batch throughput, p99; non-2xx at every level."""
    out = {}
    for name in dict.fromkeys(r["model"] for r in runs):
        batched = next(r for r in runs if r["model"] == name and r["batching"])
        unbatched = next(r for r in runs if r["model"] == name and not r["batching"])
        figures = {}
        on, off = at_level(batched, 1), at_level(unbatched, 1)
        if on and off:
            figures["batched_over_unbatched_sent_per_s_at_1"] = round(on["sentences_per_s"] / off["sentences_per_s"], 3)
            figures["batched_over_unbatched_p50_at_1"] = round(on["latency_ms"]["p50"] / off["latency_ms"]["p50"], 3)
        on, off = at_level(batched, 32), at_level(unbatched, 32)
        if on and off:
            in_process = result["in_process"][name]["throughput_sent_per_s"]
            figures |= {"speedup_sent_per_s_at_32": round(on["sentences_per_s"] / off["sentences_per_s"], 2),
                        "served_share_of_in_process_at_32": round(on["sentences_per_s"] / in_process, 3),
                        "p99_ms_batched_at_32": on["latency_ms"]["p99"]}
        figures["non_2xx_below_queue_limit"] = sum(lv["non_2xx"] + lv["no_answer"] for r in (batched, unbatched)
                                                   for lv in r["levels"])
        out[name] = figures
    out["flood_all_2xx_or_503"] = result["flood"]["all_2xx_or_503"]
    out["sigterm_all_accepted_answered"] = result["sigterm"]["all_accepted_answered"]
    out["sigterm_exit_0"] = result["sigterm"]["exit_code_0"]
    return out


def main() -> None:
    p = harness.parser(__doc__, out=harness.REPO / "runs" / "serve_load")
    p.add_argument("model_dirs", nargs="+", help="the served model, then optionally the teacher (model or run dirs)")
    p.add_argument("--requests", type=int, default=3000, help="requests per concurrency level and server")
    p.add_argument("--rounds", type=int, default=3,
                   help="alternating rounds per level that share the requests (batched and unbatched in turn)")
    p.add_argument("--levels", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8, 32, 128],
                   help="concurrency levels, comma-separated (default 1,8,32,128)")
    p.add_argument("--max-batch", type=int, default=32)
    p.add_argument("--max-queue", type=int, default=256, help="the servers' queue (examples)")
    p.add_argument("--threads", type=int, default=None, help="the servers' torch threads (default: all cores)")
    p.add_argument("--streams", type=int, default=None,
                   help="the servers' --streams (OpenVINO models: batches run at once; default 1)")
    p.add_argument("--api-key", default=None, help="serve with this API key and send it (measures the auth check)")
    p.add_argument("--flood-requests", type=int, default=400)
    p.add_argument("--flood-queue", type=int, default=32)
    p.add_argument("--sigterm-requests", type=int, default=2000)
    p.add_argument("--data-dir", default=None, help="GLUE folder (default TINYPLM_DATA or ../shared/data/glue)")
    args = p.parse_args()
    if len(args.model_dirs) > 2:
        p.error("give the served model and at most one teacher")
    split = sst2_dev(args.data_dir)
    texts = [ex.text for ex in split.examples]
    names = ["model", "teacher"][: len(args.model_dirs)]
    result: dict = {"machine": {"cpus": os.cpu_count(), "loadavg_at_start": os.getloadavg(),
                                "note": "every server and this load generator share this machine's cores; "
                                        "server_cpu_cores and client_cpu_cores say how much each used"},
                    "data": {"task": "sst2", "split": str(split.source), "sentences": len(texts)},
                    "settings": {k: v for k, v in vars(args).items() if k not in ("out", "api_key")}
                    | {"out": str(args.out), "api_key": bool(args.api_key)},
                    "in_process": {}, "runs": [], "agreement": {}}
    for name, model in zip(names, args.model_dirs, strict=True):
        result["in_process"][name] = in_process_speed(model, split, args.max_batch)
        runs, served = serve_runs(name, model, texts, args)
        result["runs"] += runs
        result["agreement"][name] = agreement(model, split, served)
    result["flood"] = flood(args.model_dirs[0], texts, args.flood_requests, args.flood_queue, args)
    result["sigterm"] = sigterm(args.model_dirs[0], texts, args.sigterm_requests, 32, args.sigterm_requests // 10, args)
    result["checks"] = checks(result["runs"], result)
    path = harness.save(harness.prepare_out(args.out) / "serve_load.json", result)
    print(json.dumps(result, indent=1))
    harness.finish(path)

if __name__ == "__main__":
    main()
