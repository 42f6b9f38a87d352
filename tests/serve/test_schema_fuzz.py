"""The OpenAPI document of ``tinyplm serve`` is its behaviour: schemathesis, with all of its checks
(server errors, status codes, content types, response schemas and headers, schema-valid bodies
accepted, schema-invalid ones refused, methods not allowed, auth ignored), runs generated requests
against a live tiny server (each head) built from its ``/openapi.json`` and finds no failure. Bounded: a few
examples per operation and mode (positive and negative) plus schemathesis's coverage cases, so
each server takes seconds; the hypothesis database is off (no files written) and the seed fixed."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import schemathesis

from conftest import make_tiny_model_dir
from helpers_embedding import make_sentence_dir, make_static_dir
from helpers_live import LiveServer
from helpers_serve import make_tiny_head_dir

pytestmark = pytest.mark.slow

KEY = "fuzz-key-7f3a9c"
#: Small limits, so a schema-valid body stays far below the byte limit (413 is not acceptance).
LIMITS = ("--max-texts", "3", "--max-chars", "40", "--max-wait-ms", "0")


def _config(auth: bool) -> schemathesis.Config:
    config = {"seed": 41, "generation": {"max-examples": 40, "mode": "all", "database": "none"},
              "phases": {"stateful": {"enabled": False}}, "checks": {"enabled": True}}
    if auth:
        config["auth"] = {"openapi": {"bearerAuth": {"bearer": KEY}}}
    return schemathesis.Config.from_dict(config)


@dataclass
class Outcome:
    """What one schemathesis run found: check results by name, and every failure in words."""

    passed: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)


def fuzz(url: str, auth: bool) -> Outcome:
    """Run schemathesis's engine (what its CLI runs: examples, coverage and fuzzing phases; every
    check enabled) against the live server at ``url``."""
    from schemathesis.engine import Status, events

    schema = schemathesis.openapi.from_url(url + "/openapi.json", config=_config(auth))
    out = Outcome()
    for event in schemathesis.engine.from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            for checks in event.recorder.checks.values():
                for check in checks:
                    if check.status == Status.SUCCESS:
                        out.passed[check.name] += 1
                    elif check.failure_info is not None:
                        failure = check.failure_info.failure
                        out.failures.append(f"{event.label}: {check.name}: {failure.title}: {failure.message}\n"
                                            f"{check.failure_info.code_sample}")
                    else:
                        out.failures.append(f"{event.label}: {check.name}: {check.status}")
        elif isinstance(event, events.NonFatalError | events.FatalError):
            out.failures.append(f"schemathesis error: {getattr(event, 'info', None) or event.exception!r}")
        elif isinstance(event, events.EngineFinished):
            out.failures += [f"{f.title}: {f.message}" for f in event.failures]
    return out


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return make_tiny_model_dir(tmp_path_factory.mktemp("fuzz") / "m")


#: Checks that must have run (and passed) on every fuzzed server, so a vacuous run fails too.
CORE_CHECKS = {"not_a_server_error", "status_code_conformance", "content_type_conformance",
               "response_schema_conformance", "response_headers_conformance", "positive_data_acceptance",
               "negative_data_rejection", "unsupported_method"}


@pytest.mark.parametrize("head", ["sequence", "span", "token"])
def test_the_server_does_what_its_schema_says(model_dir: Path, tmp_path: Path, head: str) -> None:
    served = model_dir if head == "sequence" else make_tiny_head_dir(tmp_path / head, head)
    with LiveServer(served, *LIMITS) as server:
        server.wait_ready()
        outcome = fuzz(server.url, auth=False)
    assert not outcome.failures, "\n\n".join(outcome.failures[:10])
    assert CORE_CHECKS <= set(outcome.passed), outcome.passed
    assert outcome.passed["positive_data_acceptance"] > 50, outcome.passed


@pytest.mark.parametrize("kind", ["sentence", "static"])
def test_an_embedding_server_does_what_its_schema_says(tmp_path: Path, kind: str) -> None:
    """/predict, /embed and /v1/embeddings; 40 characters stay under the sentence model's 48 tokens."""
    served = (make_sentence_dir if kind == "sentence" else make_static_dir)(tmp_path / kind)
    with LiveServer(served, *LIMITS) as server:
        server.wait_ready()
        outcome = fuzz(server.url, auth=False)
    assert not outcome.failures, "\n\n".join(outcome.failures[:10])
    assert CORE_CHECKS <= set(outcome.passed), outcome.passed
    assert outcome.passed["positive_data_acceptance"] > 80, outcome.passed


def test_the_server_with_a_key_does_what_its_schema_says(model_dir: Path) -> None:
    with LiveServer(model_dir, *LIMITS, "--protect-metrics", env={"TINYPLM_API_KEY": KEY}) as server:
        server.wait_ready(headers={"Authorization": f"Bearer {KEY}"})
        outcome = fuzz(server.url, auth=True)
    assert not outcome.failures, "\n\n".join(outcome.failures[:10])
    assert CORE_CHECKS | {"ignored_auth"} <= set(outcome.passed), outcome.passed
