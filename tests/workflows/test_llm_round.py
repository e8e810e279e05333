"""One TRACE round through Temporal with a real small model as localizer and patch proposer
(slow): SmolLM2-135M-Instruct behind llama.cpp's OpenAI-compatible server, the proposer service
configured as ``evoharness up --llm local`` configures it, generation and verification on the
simulator behind their gRPC services.

Asserted is what does not depend on the model being clever: every LLM answer is validated and
an invalid one is dropped with its reason in the round report; a valid one goes through the
proposal checks and, when it passes them, the gate; the harness changes only through an
accepted candidate, never through a rejected answer; token usage reaches the proposer's
metrics and the round report's cost, equal to each other."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from evoharness.harness.io import harness_id, load_dir
from evoharness.trace.answers import REASONS
from evoharness.trace.models import CandidateStatus, DecisionKind, RoundReport
from services.llm_local import proposer_env
from tests.fixtures.services import s3_config
from tests.workflows.conftest import ROOT, make_params, run_in_process
from workflows.backends import WorkerSection, WorkerSettings
from workflows.params import Backends
from workflows.store_keys import report_key

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="session")]

#: reason codes a candidate may be rejected with: the proposer's answer validator's and the
#: round's own proposal checks (``evoharness.trace.checks``) and de-duplication
CHECK_REASONS = {"duplicate", "unsupported_by_generator", "scope_regression"}
#: a proposer-service call that failed outright (deadline, unavailable): ``<role>_error``
CALL_REASONS = {"error"}


def _code(reject_reason: str) -> str:
    """The reason code of a rejected candidate: the proposer service's answers carry their
    role as a prefix (``proposer_invalid_json``), the round's own checks do not."""
    code = reject_reason.split(":")[0]
    for role in ("extractor_", "localizer_", "proposer_"):
        if code.startswith(role):
            return code.removeprefix(role)
    return code


def _metric(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                total += s.value
    return total


@pytest.mark.timeout(3600)  # the model answers at ~25 tokens/s on 2 shared cores
async def test_round_with_the_local_model(
    local_llm: Any,
    temporal_env: Any,
    s3_server: Any,
    service_factory: Any,
    split: Any,
    tmp_path: Path,
) -> None:
    bucket = f"evo-llm-{uuid.uuid4().hex[:8]}"
    s3, env = s3_config(s3_server, bucket)
    gen = service_factory("generation", {"backend": "sim", "s3": s3}, env=env)
    ver = service_factory("verification", {"backend": "sim", "s3": s3}, env=env)
    prop = service_factory(
        "proposer", {}, env=proposer_env(local_llm.base_url, cache_dir=tmp_path / "cache")
    )
    settings = WorkerSettings(
        s3=s3_server.settings.model_copy(update={"bucket": bucket}),
        worker=WorkerSection(
            store="s3",
            generation_address=gen.address,
            verification_address=ver.address,
            proposer_address=prop.address,
            proposer_timeout_s=900,  # as `evoharness up --llm local` sets it
        ),
    )
    run_id = f"llm-{uuid.uuid4().hex[:6]}"
    params = make_params(
        run_id,
        split,
        max_rounds=1,
        max_clusters=1,
        candidates_per_cluster=2,
        activity_timeout_s=1800,
        heartbeat_timeout_s=600,
        backends=Backends(generator="grpc", verifier="grpc", proposer="grpc"),
    )
    _, result = await run_in_process(temporal_env.client, settings, params)

    from services.storage.s3 import S3ArtifactStore

    store = S3ArtifactStore.from_settings(settings.s3)
    report = RoundReport.model_validate_json(store.get(report_key(run_id, 1)))
    assert report.clusters, "the round must have failures for the model to work on"

    # every answer validated: rejected candidates carry a known reason; nothing rejected
    # has a child harness or a gate
    for cand in report.candidates:
        if cand.status is CandidateStatus.rejected:
            reason = _code(cand.reject_reason)
            assert reason in set(REASONS) | CHECK_REASONS | CALL_REASONS, cand.reject_reason
            assert cand.gate is None and (cand.harness_id == "" or reason in CHECK_REASONS)
        else:  # valid answers went through the checks to the gate
            assert cand.patch is not None and cand.gate is not None and cand.harness_id
        if cand.source != "memory":  # every proposed patch here came from the model
            assert cand.source == "llm", cand
    # the harness changes only through an accepted candidate
    baseline_id = harness_id(load_dir(ROOT / "harnesses" / "baseline"))
    accepted = [c for c in report.candidates if c.status is CandidateStatus.accepted]
    if report.decision.kind is DecisionKind.accepted:
        assert [c.harness_id for c in accepted] == [harness_id(result.best_harness)]
    else:
        assert accepted == [] and harness_id(result.best_harness) == baseline_id

    # token usage: proposer metrics == round report cost, and not zero
    metrics = prop.metrics_text()
    name = "evoharness_llm_tokens_total"
    prompt_tokens = _metric(metrics, name, kind="prompt")
    completion_tokens = _metric(metrics, name, kind="completion")
    assert prompt_tokens > 0 and completion_tokens > 0
    assert report.cost["llm_prompt_tokens"] == prompt_tokens
    assert report.cost["llm_completion_tokens"] == completion_tokens
    calls = _metric(metrics, "evoharness_llm_calls_total")
    cached = sum(
        _metric(metrics, "evoharness_llm_calls_total", outcome=o)
        for o in ("cached_ok", "cached_invalid")
    )
    assert report.cost["llm_calls"] == calls - cached  # a cached answer is no call
    assert _metric(metrics, name, role="localizer", kind="prompt") > 0
