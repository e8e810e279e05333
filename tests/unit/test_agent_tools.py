"""The agent's tools: the embedded knowledge base (TF-IDF and, when the packaged model
loads, MiniLM), ``query_knowledge`` over a harness's skills, and the HTTP search provider
against a real HTTP server started here on a free port."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from evoharness.agent.loop import Toolbox
from evoharness.agent.search import EmbeddedKnowledgeBase, load_facts
from evoharness.harness.io import load_dir
from evoharness.harness.patch import apply_patch
from evoharness.runtime.harness_checks import check_harness
from services.runtime.search import (
    HttpSearchProvider,
    SearchError,
    SearchSection,
    build_providers,
)

QUERIES = {
    "colour of a London bus": "London bus is red",
    "colour of a school bus": "school bus in North America is yellow",
    "how many legs does a spider have": "spider has eight legs",
    "number of wheels of a tricycle": "tricycle has three wheels",
    "object used with a tennis racket": "tennis racket is used with a tennis ball",
}


def test_fact_file_holds_enough_distinct_facts() -> None:
    facts = load_facts()
    texts = [t for _, t in facts]
    assert len(texts) >= 150
    assert len(set(texts)) == len(texts)


def test_tfidf_ranks_the_right_fact_first() -> None:
    kb = EmbeddedKnowledgeBase()
    assert kb.name == "embedded:tfidf"
    for query, want in QUERIES.items():
        hits = kb.search(query, 3)
        assert want in hits[0].text, (query, [h.text for h in hits])
        assert hits[0].source.startswith("kb:")
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


@pytest.mark.slow
def test_minilm_ranks_the_right_fact_first() -> None:
    try:
        from harness_registry.memory_store import MiniLMEmbedder

        embedder = MiniLMEmbedder()
    except RuntimeError as exc:  # the model package is an optional install
        pytest.skip(str(exc))
    kb = EmbeddedKnowledgeBase(embed=embedder.embed)
    assert kb.name == "embedded:minilm"
    for query, want in QUERIES.items():
        assert want in kb.search(query, 2)[0].text, query


def test_search_refuses_bad_arguments() -> None:
    kb = EmbeddedKnowledgeBase(facts=[(1, "Grass is green.")])
    with pytest.raises(ValueError, match="empty"):
        kb.search("  ", 2)
    with pytest.raises(ValueError, match="top_k"):
        kb.search("grass", 0)
    assert kb.search("quantum chromodynamics", 3) == []  # nothing shares a term


def test_ranked_gives_positions_and_scores_that_search_shows() -> None:
    """``ranked`` indexes ``facts`` by position, whatever line numbers the facts carry."""
    facts = [(7, "Grass is green."), (42, "A London bus is red."), (99, "A red hat.")]
    kb = EmbeddedKnowledgeBase(facts=facts)
    ranked = kb.ranked("colour of a London bus", 3)
    assert ranked[0][0] == 1 and facts[ranked[0][0]][1] == "A London bus is red."
    assert all(facts[i][1] != "Grass is green." for i, _ in ranked)  # below min_score
    hits = kb.search("colour of a London bus", 3)
    assert [(h.text, h.score, h.source) for h in hits] == [
        (facts[i][1], score, f"kb:{facts[i][0]}") for i, score in ranked
    ]


def test_query_knowledge_returns_a_skill_or_says_it_is_unknown(repo_root: Path) -> None:
    h = load_dir(repo_root / "harnesses" / "reference")
    box = Toolbox(None, skills=h.skills.skills)
    assert [s.name for s in box.specs] == ["query_knowledge"]
    name = h.skills.skills[0].name
    obs, cost, failure = box.call("query_knowledge", {"name": name})
    assert failure is None and cost == 0.0
    assert obs["name"] == name and obs["body"] == h.skills.skills[0].body
    obs, _, failure = box.call("query_knowledge", {"name": "no-such-skill"})
    assert failure is not None and failure.kind == "unknown_skill"
    assert "no-such-skill" in obs["error"] and name in obs["error"]
    obs, _, failure = box.call("search", {"query": "x"})  # not offered by this toolbox
    assert failure is not None and failure.kind == "unknown_tool"
    _, _, failure = box.call("query_knowledge", "not json")
    assert failure is not None and failure.kind == "bad_tool_arguments"


AGENT_TOOLS = [
    {"name": "facts", "kind": "search", "provider": "embedded", "top_k": 3},
    {"name": "know-how", "kind": "query_knowledge"},
    {"name": "refs", "kind": "image_search", "top_k": 4},
    {"name": "agent", "kind": "agent", "backend": "rule", "max_turns": 11, "max_cost": 20.0},
]


@pytest.mark.parametrize("name", ["baseline", "reference"])
def test_every_shipped_harness_accepts_the_agent_tools(repo_root: Path, name: str) -> None:
    h = load_dir(repo_root / "harnesses" / name)
    ops = [{"op": "add", "path": "/tools/tools/-", "value": t} for t in AGENT_TOOLS]
    patched = apply_patch(h, {"responsibility": "tools", "ops": ops})
    check_harness(patched)
    kinds = [t.kind for t in patched.tools.tools][-4:]
    assert kinds == ["search", "query_knowledge", "image_search", "agent"]
    bad = [{"op": "add", "path": "/tools/tools/-", "value": {**AGENT_TOOLS[3], "name": "b2"}}]
    with pytest.raises(ValueError, match="agent"):
        apply_patch(patched, {"responsibility": "tools", "ops": bad})
    unknown = [
        {"op": "add", "path": "/tools/tools/-", "value": {**AGENT_TOOLS[0], "provider": "bing"}}
    ]
    with pytest.raises(ValueError):
        apply_patch(h, {"responsibility": "tools", "ops": unknown})


# ------------------------------------------------------------------- HTTP search provider


class _SearchApi(BaseHTTPRequestHandler):
    calls: list[dict[str, Any]] = []
    status = 200
    body: Any = None

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        url = urlparse(self.path)
        q = parse_qs(url.query)
        type(self).calls.append(
            {
                "path": url.path,
                "q": q.get("q", [""])[0],
                "count": q.get("count", [""])[0],
                "auth": self.headers.get("authorization"),
            }
        )
        body = type(self).body
        if body is None:
            body = {
                "results": [
                    {
                        "title": "t",
                        "snippet": f"Result {i} for {q['q'][0]}",
                        "url": f"https://x/{i}",
                    }
                    for i in range(int(q["count"][0]) + 2)
                ]
                + [{"title": "no text"}]
            }
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(type(self).status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_embedded_provider_charges_the_configured_cost() -> None:
    """``runtime.search.cost_per_call`` prices the embedded base as it does the HTTP API."""
    providers = build_providers(SearchSection(embeddings="tfidf", cost_per_call=2.5))
    kb = providers["embedded"]
    assert kb.cost_per_call == 2.5  # before the base is built
    obs, cost, failure = Toolbox(kb).call("search", {"query": "colour of a London bus"})
    assert failure is None and cost == 2.5 and "London bus is red" in obs[0]["text"]
    assert kb.cost_per_call == 2.5 and kb.name == "embedded:tfidf"  # and after


@pytest.fixture
def search_api() -> Iterator[str]:
    from services.common.process import free_port

    _SearchApi.calls, _SearchApi.status, _SearchApi.body = [], 200, None
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), _SearchApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/search"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_http_provider_sends_query_key_and_count(
    search_api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_SEARCH_KEY", "k-123")
    p = HttpSearchProvider(SearchSection(endpoint=search_api, api_key_env="TEST_SEARCH_KEY"))
    hits = p.search("colour of a London bus", 2)
    assert [h.text for h in hits] == [
        "Result 0 for colour of a London bus",
        "Result 1 for colour of a London bus",
    ]
    assert hits[0].source == "https://x/0" and hits[0].score > hits[1].score
    call = _SearchApi.calls[-1]
    assert call == {
        "path": "/search",
        "q": "colour of a London bus",
        "count": "2",
        "auth": "Bearer k-123",
    }
    # through the toolbox the agent sees the hits as an observation
    obs, cost, failure = Toolbox(p, search_top_k=1).call("search", {"query": "grass"})
    assert failure is None and cost == 1.0 and obs[0]["text"] == "Result 0 for grass"
    p.close()


@pytest.mark.parametrize(
    ("status", "body", "match"),
    [
        (500, {"error": "x"}, "HTTP 500"),
        (200, b"<html>", "not JSON"),
        (200, {"items": []}, "results"),
    ],
)
def test_http_provider_failures_are_errors_and_observations(
    search_api: str, status: int, body: Any, match: str
) -> None:
    _SearchApi.status, _SearchApi.body = status, body
    p = HttpSearchProvider(SearchSection(endpoint=search_api))
    with pytest.raises(SearchError, match=match):
        p.search("grass", 2)
    obs, _, failure = Toolbox(p).call("search", {"query": "grass"})
    assert failure is not None and failure.kind == "tool_error" and match in obs["error"]
    p.close()


def test_http_provider_needs_an_endpoint() -> None:
    with pytest.raises(ValueError, match="endpoint"):
        HttpSearchProvider(SearchSection())
