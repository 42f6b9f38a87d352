"""``tinyplm serve``: a saved model over HTTP (the service itself: tinyplm.serve)."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Annotated

import typer

from tinyplm.cli.app import (
    DocStride,
    MaxLength,
    MaxQueryLength,
    ModelDir,
    NullThreshold,
    Threads,
    app,
    err,
    model_settings,
    set_threads,
)

Host = Annotated[str, typer.Option(help="address to listen on (loopback by default: only this machine)")]
Streams = Annotated[int, typer.Option(help="batches an OpenVINO model runs at once, each on its share of the cores "
                                       "(PyTorch models: 1)")]


WAIT_HELP = "after a batch of several requests, how long to wait for those clients to come back"
TIMEOUT_HELP = ("seconds a request may take to be answered once its body is in (504 beyond), and the longest "
                "a client may go without sending any of its body (408, connection closed; a slow but steady "
                "upload is served)")


@app.command("serve")
def serve_cmd(
    model_dir: ModelDir,
    host: Host = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port (0: any free port, printed)")] = 8000,
    max_batch: Annotated[int, typer.Option(help="most examples in one forward pass (1: no batching)")] = 32,
    max_wait_ms: Annotated[float, typer.Option(help=WAIT_HELP)] = 5.0,
    max_queue: Annotated[int, typer.Option(help="examples that may wait; beyond, 503 with Retry-After")] = 256,
    timeout: Annotated[float, typer.Option(help=TIMEOUT_HELP)] = 10.0,
    max_body_bytes: Annotated[int, typer.Option(help="largest request body (413 beyond)")] = 1_000_000,
    max_texts: Annotated[int, typer.Option(help="most examples in one request")] = 64,
    max_chars: Annotated[int, typer.Option(help="most characters in one text")] = 10_000,
    max_length: MaxLength = None,
    doc_stride: DocStride = None,
    max_query_length: MaxQueryLength = None,
    null_threshold: NullThreshold = None,
    threads: Threads = None,
    streams: Streams = 1,
    api_key: Annotated[str | None, typer.Option(
        envvar="TINYPLM_API_KEY", show_envvar=True,
        help="require 'Authorization: Bearer KEY' on every endpoint but /health, /metrics and the docs (401 "
             "otherwise); prefer --api-key-file or the environment variable: a command line shows in ps")] = None,
    api_key_file: Annotated[Path | None, typer.Option(help="read the API key from this file (its one line)")]
    = None,
    protect_metrics: Annotated[bool, typer.Option(help="require the API key on /metrics too")] = False,
) -> None:
    """Serve a saved model over HTTP: POST /predict (dynamic batching), GET /health, /ready,
    /metrics (Prometheus), docs at /docs. SIGTERM or Ctrl-C: finish what was accepted, exit 0.

    Example: tinyplm serve runs/sst2_demo --port 8000
    Example: curl -s localhost:8000/predict -H 'content-type: application/json' -d '{"text": "a gripping film"}'
    Example: TINYPLM_API_KEY=$(cat key.txt) tinyplm serve runs/sst2_demo --host 0.0.0.0
    """
    from tinyplm.inference.predictor import Predictor
    from tinyplm.serve.api import Limits
    from tinyplm.serve.app import ServeSettings, create_app
    from tinyplm.serve.auth import is_loopback, resolve_api_key
    from tinyplm.serve.server import bind, run, stack

    key = resolve_api_key(api_key, api_key_file)
    settings = ServeSettings(max_batch, max_wait_ms, max_queue, timeout, Limits(max_body_bytes, max_texts, max_chars),
                             api_key=key, protect_metrics=protect_metrics, streams=streams)
    settings.check()
    set_threads(threads)
    sock = bind(host, port)  # before the model loads: a port in use is refused before any work
    predictor = Predictor.load(model_dir, batch_size=max_batch, split_by_length=True,
                               **model_settings(max_length, doc_stride, max_query_length, null_threshold))
    asgi, state = create_app(predictor, settings)
    address = f"http://{host if ':' not in host else f'[{host}]'}:{sock.getsockname()[1]}"
    say, info = partial(err.print, markup=False, highlight=False, soft_wrap=True), predictor.info
    say(f"serving {info.path} ({info.head} head, max length {info.max_length or 'none'} from {info.max_length_from})")
    if key is None and not is_loopback(host):
        say(f"warning: serving on {host} without an API key: anyone who reaches this port can use the model; "
            "set --api-key-file or TINYPLM_API_KEY")
    guard = "no API key" if key is None else \
        f"API key required except on /health{'' if protect_metrics else ', /metrics'} and the docs"
    chosen = stack()
    run(asgi, sock, grace_s=timeout + 5, chosen=chosen,
        on_started=lambda: say(f"listening on {address} (docs: {address}/docs; {chosen}; {guard}); "
                               "SIGTERM or Ctrl-C stops"))
    err.print(f"stopped: {json.dumps(state.tally.as_dict())}", markup=False, highlight=False, soft_wrap=True)
