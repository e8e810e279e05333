"""The MiniLM-backed experience-memory store (the real packaged model, offline)."""

from __future__ import annotations

import pytest

from evoharness.evidence import Evidence
from evoharness.harness.schema import ExperienceBundle, Harness, Memory
from evoharness.memory import summarise
from evoharness.ports import MemoryStore
from evoharness.program import ImageRef, Program
from evoharness.tasks.models import Constraint, Task
from evoharness.trace.models import Execution


@pytest.fixture(scope="module")
def embedder():  # type: ignore[no-untyped-def]
    from harness_registry.memory_store import default_embedder

    return default_embedder()


def bundle_for(prompt: str, gap: float = 0.5, rnd: int = 0) -> ExperienceBundle:
    task = Task(
        task_id=f"t/{abs(hash(prompt))}",
        prompt=prompt,
        task_family="counting",
        constraints=[Constraint(constraint_id="c0", type="count", subject="dog", min_count=3)],
    )

    def ex(seed: int, status: str) -> Execution:
        return Execution(
            task_id=task.task_id,
            seed=seed,
            harness_id="0" * 64,
            execution_key=str(seed),
            program=Program(prompt=prompt, seed=seed),
            image=ImageRef(key=f"i{seed}"),
            evidence=[Evidence(constraint_id="c0", status=status, confidence=1.0)],
        )

    b = summarise(task, [ex(0, "pass"), ex(1, "fail")], [1.0, 1.0 - gap], created_round=rnd)
    assert b is not None
    return b


def test_retrieves_whole_bundle_for_similar_prompt_only(embedder) -> None:  # type: ignore[no-untyped-def]
    from harness_registry.memory_store import EmbeddingMemoryStore

    stored = bundle_for("a photo of three dogs")
    store = EmbeddingMemoryStore(embedder, [stored, bundle_for("a red stop sign")], capacity=8)
    assert isinstance(store, MemoryStore)
    hits = store.retrieve("a photo of 3 dogs on the grass", top_k=1, min_similarity=0.6)
    assert len(hits) == 1
    assert hits[0].bundle == stored.model_dump(mode="json")
    assert 0.6 <= hits[0].similarity <= 1.0
    exact = store.retrieve("A photo of three dogs.", top_k=2, min_similarity=0.0)
    assert exact[0].similarity == pytest.approx(1.0, abs=1e-5)
    assert exact[0].similarity >= exact[1].similarity
    assert store.retrieve("an oil painting of a lighthouse in a storm", 1, 0.6) == []


def test_capacity_and_from_harness(embedder) -> None:  # type: ignore[no-untyped-def]
    from harness_registry.memory_store import EmbeddingMemoryStore

    bundles = [
        bundle_for(f"a photo of {n} cats", gap=g, rnd=i)
        for i, (n, g) in enumerate([("two", 0.2), ("three", 0.9), ("four", 0.5)])
    ]
    h = Harness(memory=Memory(enabled=True, capacity=2, bundles=bundles))
    store = EmbeddingMemoryStore.from_harness(h, embedder)
    kept = [b.retrieval_key["source_prompt_summary"] for b in store.bundles]
    assert kept == ["a photo of three cats", "a photo of four cats"]
    hits = store.retrieve("a photo of two cats", top_k=2, min_similarity=0.0)
    assert {h.bundle["bundle_id"] for h in hits} == {bundles[1].bundle_id, bundles[2].bundle_id}
