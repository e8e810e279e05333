"""Experience memory (the Memory responsibility), pure parts.

- ``summarise``: one experience bundle from the best-vs-worst comparison of a task's K
  executions (GenEvolve's visual experience, as described in the seeds' design).
- ``admit``: slots with a capacity, trimmed by reward gap, then recency.
- ``mine`` / ``memory_patch``: bundles mined from best-vs-worst executions of failing tasks
  and the Memory candidate that stores them (the TRACE round proposes it, ``trace.round``).
- ``rank``: cosine-similarity retrieval over precomputed embeddings.

Embedding the prompts (MiniLM, heavy I/O) happens outside ``evoharness``:
``harness_registry.memory_store.EmbeddingMemoryStore`` implements
``evoharness.ports.MemoryStore`` with these functions.
"""

from evoharness.memory.bundles import (
    ACTION_KEYS,
    GUIDANCE_LISTS,
    STANDARD_PREFIX,
    admit,
    bundle_actions,
    guidance_text,
    is_protocol_failure,
    memory_patch,
    mine,
    rank,
    reward,
    source_prompt_summary,
    summarise,
)

__all__ = [
    "ACTION_KEYS",
    "GUIDANCE_LISTS",
    "STANDARD_PREFIX",
    "admit",
    "bundle_actions",
    "guidance_text",
    "is_protocol_failure",
    "memory_patch",
    "mine",
    "rank",
    "reward",
    "source_prompt_summary",
    "summarise",
]
