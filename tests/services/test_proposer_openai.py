"""The OpenAI-compatible chat backend against a real local HTTP server speaking the
chat-completions protocol (tests/fixtures/fake_openai.py): valid answers, 429, 500, timeouts,
invalid JSON, unsupported structured outputs; usage, cost and metrics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from evoharness.harness.schema import Harness
from evoharness.trace.answers import ANSWER_SCHEMAS
from evoharness.trace.models import Attribution, FailureCluster
from services.proposer.backends.openai_chat import (
    ChatClient,
    ChatSettings,
    OpenAIChatBackend,
    grammar_schema,
    role_schema,
)
from services.proposer.prices import PriceTable

ROOT = Path(__file__).resolve().parents[2]
H = Harness()
CLUSTER = FailureCluster(
    cluster_id="policy/negative/negation_drawn",
    responsibility_hint="policy",
    constraint_type="negative",
    symptom="negation_drawn",
    members=[("t1", "c1")],
    n_failures=3,
    failure_rate=0.75,
)
ATT = Attribution(
    cluster_id=CLUSTER.cluster_id,
    scores={"policy": 1.0, "tools": 0, "skills": 0, "middleware": 0, "memory": 0, "no_patch": 0},
    chosen="policy",
)
GOOD = json.dumps(
    {
        "patches": [
            {
                "responsibility": "policy",
                "ops": [
                    {"op": "add", "path": "/policy/rewrites/-", "value": {"kind": "move_negations"}}
                ],
                "rationale": "no X draws X",
                "expected_effect": "negations respected",
            }
        ]
    }
)


def _calls(outcome: str, role: str = "proposer") -> float:
    return (
        REGISTRY.get_sample_value(
            "evoharness_llm_calls_total", {"role": role, "backend": "openai", "outcome": outcome}
        )
        or 0.0
    )


def _failures(reason: str) -> float:
    return (
        REGISTRY.get_sample_value("evoharness_proposal_failures_total", {"reason": reason}) or 0.0
    )


@pytest.fixture
def backend(fake_openai, monkeypatch):
    monkeypatch.setenv("EVOHARNESS_LLM_API_KEY", "sk-test-123")
    settings = ChatSettings(
        model="gpt-4o-mini-2024-07-18",
        base_url=fake_openai.base_url,
        temperature=0.3,
        max_tokens=777,
        timeout_s=1.0,
        max_attempts=3,
        backoff_s=0.0,
    )
    prices = PriceTable.load(ROOT / "configs" / "prices.yaml")
    return OpenAIChatBackend(ChatClient(settings, prices))


def test_valid_answer_request_shape_usage_and_cost(fake_openai, backend):
    fake_openai.script({"content": GOOD, "prompt_tokens": 1000, "completion_tokens": 200})
    before = _calls("ok")
    res = backend.propose(CLUSTER, ATT, H, 3)
    assert [p.ops for p in res.items] == [
        [{"op": "add", "path": "/policy/rewrites/-", "value": {"kind": "move_negations"}}]
    ]
    assert res.failures == []
    assert (res.usage.calls, res.usage.prompt_tokens, res.usage.completion_tokens) == (1, 1000, 200)
    # gpt-4o-mini list price: $0.15 / $0.60 per 1M tokens (configs/prices.yaml)
    assert res.usage.cost_usd == pytest.approx((1000 * 0.15 + 200 * 0.60) / 1e6)
    assert _calls("ok") == before + 1
    (req,) = fake_openai.requests()
    body = req["body"]
    assert req["authorization"] == "Bearer sk-test-123"
    assert (body["model"], body["temperature"], body["max_tokens"]) == (
        "gpt-4o-mini-2024-07-18",
        0.3,
        777,
    )
    assert body["response_format"]["type"] == "json_schema"
    # the role's schema, narrowed to the responsibility asked for
    sent = body["response_format"]["json_schema"]["schema"]
    assert sent == role_schema("proposer", responsibilities=["policy"])
    assert sent["$defs"]["PatchItem"]["properties"]["responsibility"]["enum"] == ["policy"]
    assert {k: v for k, v in sent["$defs"].items() if k != "PatchItem"} == {
        k: v for k, v in ANSWER_SCHEMAS["proposer"]["$defs"].items() if k != "PatchItem"
    }
    assert "seed" not in body  # not configured: not sent
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    assert 'responsibility "policy"' in system and "/policy" in system
    assert user.startswith('Current "policy" section: ')
    assert CLUSTER.cluster_id in user and "negation_drawn" in user


def test_429_then_500_then_answer(fake_openai, backend):
    fake_openai.script(
        {"status": 429, "headers": {"retry-after": "0"}},
        {"status": 500},
        {"content": GOOD},
    )
    rl, se = _calls("rate_limited"), _calls("server_error")
    res = backend.propose(CLUSTER, ATT, H, 2)
    assert len(res.items) == 1 and res.usage.calls == 3
    assert (_calls("rate_limited"), _calls("server_error")) == (rl + 1, se + 1)
    reqs = fake_openai.requests()
    assert len(reqs) == 3
    # a 500 that does not mention the format is a server error, not a downgrade
    assert reqs[2]["body"]["response_format"]["type"] == "json_schema"


def test_timeout_then_answer(fake_openai, backend):
    fake_openai.script({"delay": 2.5, "content": GOOD}, {"content": GOOD})
    before = _calls("timeout")
    res = backend.propose(CLUSTER, ATT, H, 2)
    assert len(res.items) == 1
    assert _calls("timeout") == before + 1


def test_rate_limited_every_time_is_a_failed_proposal(fake_openai, backend):
    fake_openai.script(*[{"status": 429, "headers": {"retry-after": "0"}}] * 3)
    before = _failures("backend_error")
    res = backend.propose(CLUSTER, ATT, H, 2)
    assert res.items == []
    assert [f.reason for f in res.failures] == ["backend_error"]
    assert "rate_limited" in res.failures[0].detail and res.usage.calls == 3
    assert _failures("backend_error") == before + 1


def test_invalid_json_is_retried_with_reasons_then_reported(fake_openai, backend):
    fake_openai.script(
        {"content": '{"patches": [{"responsibility": "policy", "ops": ['},
        {"content": "Sure! I think you should add a layout tool."},
        {
            "content": json.dumps(
                {
                    "patches": [
                        {
                            "responsibility": "policy",
                            "ops": [{"op": "add", "path": "/tools/tools/-", "value": {}}],
                            "rationale": "IGNORE THE CONTRACT",
                        }
                    ]
                }
            )
        },
    )
    inv = _calls("invalid")
    res = backend.propose(CLUSTER, ATT, H, 2)
    assert res.items == []
    assert [f.reason for f in res.failures] == ["contract"]
    assert _calls("invalid") == inv + 3 and res.usage.calls == 3
    reqs = fake_openai.requests()
    assert "invalid_json" in reqs[1]["body"]["messages"][-1]["content"]
    assert reqs[1]["body"]["messages"][-2]["role"] == "assistant"


def test_non_json_http_body_is_a_server_error(fake_openai, backend):
    fake_openai.script({"raw_body": "<html>bad gateway</html>"}, {"content": GOOD})
    res = backend.propose(CLUSTER, ATT, H, 2)
    assert len(res.items) == 1 and res.usage.calls == 2


def test_unsupported_json_schema_downgrades_to_json_object(fake_openai, backend):
    fake_openai.script({"reject_format": "json_schema", "content": GOOD})
    res = backend.propose(CLUSTER, ATT, H, 2)
    assert len(res.items) == 1
    formats = [r["body"].get("response_format", {}).get("type") for r in fake_openai.requests()]
    assert formats == ["json_schema", "json_object"]


def test_500_saying_the_schema_is_unsupported_downgrades(fake_openai, backend):
    # llama.cpp's server answers a json_schema response_format it cannot take with HTTP 500
    fake_openai.script(
        {"status": 500, "message": "'json_schema' response_format is not supported"},
        {"content": GOOD},
    )
    bad = _calls("bad_request")
    res = backend.propose(CLUSTER, ATT, H, 2)
    assert len(res.items) == 1 and res.usage.calls == 2
    assert _calls("bad_request") == bad + 1
    first, second = (r["body"]["response_format"] for r in fake_openai.requests())
    assert first["type"] == "json_schema"
    # next: llama.cpp's own form, the schema compiled to a decoding grammar
    assert second == {
        "type": "json_object",
        "schema": grammar_schema(role_schema("proposer", responsibilities=["policy"])),
    }
    # the grammar's subset: no length bounds, any value spelled out; the rest is validated
    text = json.dumps(second["schema"])
    assert "maxLength" not in text and '"value": {"anyOf"' in text


def test_seed_and_answer_cache_make_reruns_identical(fake_openai, monkeypatch, tmp_path):
    monkeypatch.setenv("EVOHARNESS_LLM_API_KEY", "sk-test-123")
    settings = ChatSettings(
        base_url=fake_openai.base_url,
        temperature=0.0,
        seed=7,
        cache_dir=str(tmp_path / "cache"),
        backoff_s=0.0,
    )
    fake_openai.script({"content": GOOD, "prompt_tokens": 900, "completion_tokens": 90})
    first = OpenAIChatBackend(ChatClient(settings)).propose(CLUSTER, ATT, H, 2)
    (req,) = fake_openai.requests()
    assert (req["body"]["seed"], req["body"]["temperature"]) == (7, 0.0)
    assert first.usage.prompt_tokens == 900 and len(list((tmp_path / "cache").iterdir())) == 1
    # a fresh client (a re-run): the same request is answered from the cache, nothing is sent
    cached = _calls("cached_ok")
    again = OpenAIChatBackend(ChatClient(settings)).propose(CLUSTER, ATT, H, 2)
    assert len(fake_openai.requests()) == 1
    assert [p.ops for p in again.items] == [p.ops for p in first.items]
    assert (again.usage.calls, again.usage.prompt_tokens) == (0, 0)  # cost nothing this time
    assert _calls("cached_ok") == cached + 1
    # another seed is another request: not served from the cache
    other = settings.model_copy(update={"seed": 8})
    fake_openai.script({"content": GOOD})
    OpenAIChatBackend(ChatClient(other)).propose(CLUSTER, ATT, H, 2)
    assert len(fake_openai.requests()) == 2


def test_prompt_over_the_budget_is_never_sent(fake_openai, monkeypatch):
    monkeypatch.setenv("EVOHARNESS_LLM_API_KEY", "sk-test-123")
    tiny = ChatSettings(base_url=fake_openai.base_url, context_tokens=400, max_tokens=100)
    res = OpenAIChatBackend(ChatClient(tiny)).propose(CLUSTER, ATT, H, 2)
    assert res.items == [] and [f.reason for f in res.failures] == ["too_large"]
    assert "budget of 300" in res.failures[0].detail
    assert fake_openai.requests() == []
    with pytest.raises(ValueError, match="leaves 56 of context_tokens 312"):
        ChatSettings(context_tokens=312, max_tokens=256)


def test_auth_error_is_not_retried(fake_openai, backend):
    fake_openai.script({"status": 401}, {"content": GOOD})
    res = backend.propose(CLUSTER, ATT, H, 2)
    assert res.items == [] and res.usage.calls == 1
    assert res.failures[0].reason == "backend_error" and "401" in res.failures[0].detail


def test_wrong_responsibility_and_no_patch(fake_openai, backend):
    fake_openai.script({"content": GOOD})
    res = backend.propose(CLUSTER, ATT, H, 2, responsibility="memory")
    # one answer, invalid for memory; retried until the bound (script runs dry → 503s)
    assert res.items == []
    no = Attribution(cluster_id="x", scores=dict(ATT.scores), chosen="no_patch")
    assert backend.propose(CLUSTER, no, H, 2).usage.calls == 0


def test_extractor_and_localizer(fake_openai, backend):
    prompt = 'a photo of two cats and a sign saying "open"'
    fake_openai.script(
        {
            "content": json.dumps(
                {
                    "constraints": [
                        {"type": "count", "subject": "cat", "min_count": 2, "max_count": 2},
                        {"type": "text", "subject": "text", "value": "open"},
                        {"type": "text", "subject": "text", "value": "closed"},
                    ]
                }
            )
        },
        {
            "content": json.dumps(
                {
                    "attributions": [
                        {
                            "cluster_id": CLUSTER.cluster_id,
                            "scores": {
                                "policy": 2,
                                "tools": 1,
                                "skills": 0,
                                "middleware": 0,
                                "memory": 0,
                                "no_patch": 1,
                            },
                            "reasons": ["moves negations"],
                        },
                    ]
                }
            )
        },
    )
    ex = backend.extract(prompt)
    assert [(c.type.value, c.subject) for c in ex.items] == [("count", "cat"), ("text", "text")]
    assert [f.reason for f in ex.failures] == ["ungrounded"]
    loc = backend.localize([CLUSTER], H)
    assert loc.items[0].chosen == "policy" and loc.items[0].scores["policy"] == pytest.approx(0.5)


def test_missing_api_key_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("EVOHARNESS_LLM_API_KEY", raising=False)
    with pytest.raises(ValueError, match="EVOHARNESS_LLM_API_KEY"):
        ChatClient(ChatSettings(base_url="http://127.0.0.1:9/v1"))


def test_price_table(tmp_path):
    table = PriceTable.load(ROOT / "configs" / "prices.yaml")
    assert table.price("gpt-4o-mini-2024-07-18").prompt_per_1m == 0.15  # longest prefix
    assert table.price("gpt-4o-2024-08-06").completion_per_1m == 10.0
    assert table.cost("some-unknown-model", 1000, 1000) == pytest.approx((0.15 + 0.60) / 1000)
    bad = tmp_path / "prices.yaml"
    bad.write_text("llm_models:\n  m: {prompt_per_1m: -1, completion_per_1m: 0}\n")
    with pytest.raises(ValueError, match=r"llm_models\.m\.prompt_per_1m"):
        PriceTable.load(bad)
    with pytest.raises(ValueError, match="does not exist"):
        PriceTable.load(tmp_path / "missing.yaml")
