"""The mutation proposer (issue 31): typed random edits of a harness, derived from the
harness schema alone (``evoharness.trace.schema_levers.mutation_levers``: toggle a flag,
restore a default, step a number within its declared bounds, add or remove a list item,
widen or narrow a trigger), seeded and reproducible.

It knows the schema, not the generator and not the simulator: it reads no execution, no
verdict and no benchmark label. Its proposals are RFC 6902 patches (``Patch``), each inside
one responsibility's boundary contract, that go through the same proposal checks as any
other (``evoharness.trace.checks.check_proposal``).

Reproducibility: the edits drawn for ``(seed, harness, draw)`` depend on nothing else
(``random.Random`` seeded with a string is the same on every machine and Python process:
CPython hashes a ``str`` seed with SHA-512, not with the per-process ``hash``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from evoharness.harness.io import harness_id
from evoharness.harness.patch import Patch, apply_patch
from evoharness.harness.schema import Harness
from evoharness.trace.schema_levers import Lever, mutation_levers

#: A lever's relative chance of being drawn (``MutationProposer.propose``).
Weight = Callable[[Lever], float]


@dataclass(frozen=True)
class MutationProposer:
    """Draws ``n`` distinct schema-derived edits of a harness.

    ``seed``: the run's seed; ``max_edits``: each proposal chains 1..``max_edits`` edits
    (every one valid on the harness the previous ones made), so the search can also make
    larger moves than a single lever."""

    seed: int = 0
    max_edits: int = 1

    def __post_init__(self) -> None:
        if self.max_edits < 1:
            raise ValueError(f"MutationProposer.max_edits must be >= 1, got {self.max_edits}")

    def rng(self, harness: Harness, draw: int) -> random.Random:
        """The generator of draw ``draw`` on ``harness`` (module docstring)."""
        return random.Random(f"mutation:{self.seed}:{harness_id(harness)}:{draw}")

    def propose(
        self, harness: Harness, n: int, draw: int = 0, weight: Weight | None = None
    ) -> list[Patch]:
        """Up to ``n`` patches of ``harness``, each yielding a different child (fewer when
        the schema offers fewer distinct edits). ``draw`` numbers the call (an iteration of
        a search), so two draws on the same harness differ and each is reproducible.
        ``weight``: a lever's relative chance of being drawn (None: uniform; a feedback-guided
        search passes one, ``evoharness.search.protocols.guided_mutations``).
        Raises ``ValueError`` when ``n`` < 0."""
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        rng = self.rng(harness, draw)
        cache: dict[str, list[Lever]] = {}

        def levers_of(h: Harness) -> list[Lever]:  # the schema walk is the costly part
            hid = harness_id(h)
            if hid not in cache:
                cache[hid] = mutation_levers(h)
            return cache[hid]

        out: list[Patch] = []
        seen = {harness_id(harness)}
        for _ in range(8 * n):
            if len(out) == n:
                break
            patch = self._chain(harness, rng, weight, levers_of)
            if patch is None:
                break
            hid = harness_id(apply_patch(harness, patch))
            if hid not in seen:
                seen.add(hid)
                out.append(patch)
        return out

    def _chain(
        self,
        harness: Harness,
        rng: random.Random,
        weight: Weight | None,
        levers_of: Callable[[Harness], list[Lever]],
    ) -> Patch | None:
        """1..``max_edits`` edits in one responsibility, each drawn among the levers of the
        harness the earlier ones made; one patch (their ops in order). None when the harness
        offers no edit."""
        first = _pick(levers_of(harness), rng, weight)
        if first is None:
            return None
        ops = list(first.patch.ops)
        labels = [first.label]
        child = apply_patch(harness, first.patch)
        for _ in range(rng.randint(1, self.max_edits) - 1):
            same = [
                lv
                for lv in levers_of(child)
                if lv.patch.responsibility == first.patch.responsibility
            ]
            nxt = _pick(same, rng, weight)
            if nxt is None:
                break
            ops += nxt.patch.ops
            labels.append(nxt.label)
            child = apply_patch(child, nxt.patch)
        return Patch(
            responsibility=first.patch.responsibility,
            ops=ops,
            rationale="mutation: " + "; ".join(labels),
            expected_effect="a random schema-derived edit (no feedback read)",
        )


def _pick(levers: list[Lever], rng: random.Random, weight: Weight | None) -> Lever | None:
    if not levers:
        return None
    ws = [max(0.0, weight(lv)) for lv in levers] if weight is not None else []
    if not any(ws):  # uniform without weights, or when every weight is 0
        return rng.choice(levers)
    return rng.choices(levers, weights=ws)[0]


__all__ = ["MutationProposer", "Weight"]
