"""The policy extractor on a real small model (slow): SmolLM2-135M-Instruct behind llama.cpp's
OpenAI-compatible server, reached through the proposer service configured exactly as
``evoharness up --llm local`` configures it (``services.llm_local.proposer_env``).

Asserted is what does not depend on the model being clever: every answer is validated (what
comes back is grounded in the prompt; what was dropped carries a known reason code), token
usage reaches the service's metrics, the prompt-token estimate used for budgets errs high
against the server's own count, and a re-run with the answer cache makes the same decisions
without calling the model. How good the answers are is measured by ``bench/llm_bench.py``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from evoharness.tasks.builders import build_geneval
from evoharness.tasks.models import ConstraintType
from evoharness.trace.answers import REASONS
from services.llm_local import LOCAL_MAX_TOKENS, LOCAL_N_CTX, proposer_env
from services.proposer.client import ProposerClient
from services.proposer.prompting import render_extractor
from tests.fixtures.services import ServiceHandle, start_service

pytestmark = pytest.mark.slow

#: prompts of the extractor test (issue 20: the policy extractor on 50 prompts)
N_PROMPTS = 50


def extractor_prompts(shared_dir: Path, n: int = N_PROMPTS) -> list[str]:
    """``n`` GenEval prompts spread over every family (round-robin, file order)."""
    tasks = build_geneval(shared_dir / "data" / "geneval" / "evaluation_metadata.jsonl")
    by_family: dict[str, list[str]] = {}
    for t in tasks:
        by_family.setdefault(t.task_family, []).append(t.prompt)
    out: list[str] = []
    i = 0
    while len(out) < n:
        for fam in sorted(by_family):
            if i < len(by_family[fam]) and len(out) < n:
                out.append(by_family[fam][i])
        i += 1
    return out


def _metric(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                total += s.value
    return total


def _proposer(local_llm: Any, cache: Path) -> ServiceHandle:
    return start_service("proposer", {}, env=proposer_env(local_llm.base_url, cache_dir=cache))


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("llm-cache")


@pytest.fixture(scope="module")
def extracted(
    local_llm: Any, shared_dir: Path, cache_dir: Path
) -> Iterator[tuple[list[str], list[Any], str]]:
    """Every prompt through ``ExtractPolicy`` once: (prompts, results, metrics text after)."""
    prompts = extractor_prompts(shared_dir)
    svc = _proposer(local_llm, cache_dir)
    try:
        with ProposerClient(svc.address, timeout=600) as client:
            results = [client.extract(p) for p in prompts]
        yield prompts, results, svc.metrics_text()
    finally:
        svc.stop()


def test_every_answer_is_validated(extracted: Any) -> None:
    prompts, results, _ = extracted
    assert len(results) == N_PROMPTS
    for prompt, res in zip(prompts, results, strict=True):
        assert res.usage.calls >= 1 and res.usage.prompt_tokens > 0, prompt
        assert res.usage.model == "smollm2-135m-instruct-q4_1"
        for c in res.items:
            assert isinstance(c.type, ConstraintType) and c.subject.strip()
            if c.type is ConstraintType.text:  # grounded: quoted text is in the prompt
                assert str(c.value).lower() in prompt.lower()
        for f in res.failures:
            assert f.reason in REASONS and f.role == "extractor" and f.detail
        # an empty answer ({"constraints": []}) is valid; how often: bench/llm_bench.py


def test_tokens_reach_the_metrics(extracted: Any) -> None:
    _, results, metrics = extracted
    prompt_tokens = sum(r.usage.prompt_tokens for r in results)
    completion_tokens = sum(r.usage.completion_tokens for r in results)
    calls = sum(r.usage.calls for r in results)
    name = "evoharness_llm_tokens_total"
    assert _metric(metrics, name, role="extractor", kind="prompt") == prompt_tokens
    assert _metric(metrics, name, role="extractor", kind="completion") == completion_tokens
    assert _metric(metrics, "evoharness_llm_calls_total", role="extractor") == calls
    assert completion_tokens > 0


def test_token_estimate_errs_high(extracted: Any) -> None:
    """The budget estimate (no model needed) is at least the server's own prompt-token count
    on every single-call answer, so a prompt that passes the budget check fits the context."""
    prompts, results, _ = extracted
    checked = 0
    for prompt, res in zip(prompts, results, strict=True):
        if res.usage.calls == 1:
            est = render_extractor(prompt, LOCAL_N_CTX - LOCAL_MAX_TOKENS).est_tokens
            assert est >= res.usage.prompt_tokens, (prompt, est, res.usage.prompt_tokens)
            checked += 1
    assert checked > 0


def test_rerun_from_the_cache_makes_the_same_decisions(
    extracted: Any, local_llm: Any, cache_dir: Path
) -> None:
    prompts, results, _ = extracted
    svc = _proposer(local_llm, cache_dir)
    try:
        with ProposerClient(svc.address, timeout=600) as client:
            again = [client.extract(p) for p in prompts[:10]]
        metrics = svc.metrics_text()
    finally:
        svc.stop()
    for first, second in zip(results[:10], again, strict=True):
        assert [c.model_dump() for c in second.items] == [c.model_dump() for c in first.items]
        assert [(f.reason, f.detail) for f in second.failures] == [
            (f.reason, f.detail) for f in first.failures
        ]
        assert second.usage.calls == 0 and second.usage.prompt_tokens == 0
    assert _metric(metrics, "evoharness_llm_tokens_total", role="extractor") == 0


def test_role_schemas_compile_to_small_llama_cpp_grammars() -> None:
    """llama.cpp's server silently falls back to plain JSON when its converter refuses a
    schema; every role's grammar schema must compile, to a grammar of modest size."""
    import json
    import subprocess

    from services import llm_local
    from services.proposer.backends.openai_chat import grammar_schema, role_schema
    from tests.conftest import require

    try:
        python = llm_local.llm_python()
        llm_local.local_model_path(python)
        missing = ""
    except llm_local.LocalLlmMissing as exc:
        missing = str(exc)
    require(not missing, missing)
    schemas = {
        "extractor": grammar_schema(role_schema("extractor")),
        "localizer": grammar_schema(role_schema("localizer", cluster_ids=["a/b/c", "d/e/f"])),
        "proposer": grammar_schema(role_schema("proposer", responsibilities=["policy"])),
    }
    code = (
        "import json, sys\n"
        "from llama_cpp.llama_grammar import json_schema_to_gbnf\n"
        "schemas = json.load(sys.stdin)\n"
        "print(json.dumps({k: len(json_schema_to_gbnf(json.dumps(v))) for k, v in schemas.items()}))\n"
    )
    done = subprocess.run(
        [python, "-c", code],
        input=json.dumps(schemas),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    sizes = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(sizes) == set(schemas)
    assert all(0 < n < 20_000 for n in sizes.values()), sizes
