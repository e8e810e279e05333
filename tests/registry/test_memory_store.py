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


class _NoGenerator:
    """compile() never generates; a generator is only needed to construct the runtime."""

    generator_id = "none"

    def generate(self, program):  # type: ignore[no-untyped-def]
        raise AssertionError("compile must not generate")


def _learned_bundle() -> ExperienceBundle:
    """A bundle summarised from two executions whose programs really differed: the best one
    had a negative prompt and a higher guidance scale."""
    from evoharness.program import GenerationParams

    prompt = "a photo of three dogs"
    task = Task(
        task_id="geneval/count/3",
        prompt=prompt,
        task_family="counting",
        constraints=[Constraint(constraint_id="c0", type="count", subject="dog", min_count=3)],
    )
    worst = Program(prompt=prompt, seed=1)
    best = Program(
        prompt=prompt,
        seed=2,
        negative_prompt="extra dog, cropped",
        params=GenerationParams(guidance_scale=9.5),
    )

    def ex(p: Program, status: str) -> Execution:
        return Execution(
            task_id=task.task_id,
            seed=p.seed,
            harness_id="0" * 64,
            execution_key=str(p.seed),
            program=p,
            image=ImageRef(key=f"i{p.seed}"),
            evidence=[Evidence(constraint_id="c0", status=status, confidence=1.0)],
        )

    b = summarise(task, [ex(worst, "fail"), ex(best, "pass")], [0.0, 1.0], margin=0.2)
    assert b is not None
    return b


def test_retrieved_bundle_changes_the_compiled_program(embedder) -> None:  # type: ignore[no-untyped-def]
    from evoharness.runtime import HarnessRuntime
    from harness_registry.memory_store import EmbeddingMemoryStore

    bundle = _learned_bundle()
    with_memory = Harness(memory=Memory(enabled=True, top_k=1, min_similarity=0.6))
    store = EmbeddingMemoryStore(embedder, [bundle])
    rt = HarnessRuntime(with_memory, _NoGenerator(), memory=store)
    plain = HarnessRuntime(Harness(), _NoGenerator())

    similar = "a photo of 3 dogs in a park"
    got = rt.compile(similar, seed=5)
    base = plain.compile(similar, seed=5)
    assert got.program != base.program
    assert "extra dog" in got.program.negative_prompt
    assert "extra dog" not in base.program.negative_prompt
    assert got.program.params.guidance_scale == 9.5
    step = next(t for t in got.trace if t["step"] == "retrieve")
    assert step["bundle_id"] == bundle.bundle_id and step["similarity"] >= 0.6

    unrelated = "an oil painting of a lighthouse in a storm"
    got_u = rt.compile(unrelated, seed=5)
    assert got_u.program == plain.compile(unrelated, seed=5).program
    step_u = next(t for t in got_u.trace if t["step"] == "retrieve")
    assert step_u["bundle_id"] is None
