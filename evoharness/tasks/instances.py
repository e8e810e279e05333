"""Assigning distinct detected instances to constraints on one class (pure, no I/O).

"a red car and a blue car" states two colour constraints on ``car``; a verifier that judges
each against the same best car passes at most one of them on a correct image. The rule here:
constraints of one kind on one subject class are satisfied by **distinct** instances, as in
GenEval's colour rule (it checks the detected instances of the class,
geneval/evaluation/evaluate_images.py) and T2I-CompBench's per-object attribute binding.

``match_instances`` is a maximum bipartite matching (Kuhn's augmenting paths) between
constraint *slots* and instances: constraint ``i`` has ``demands[i]`` slots (a colour of a
counted object, ``min_count`` k, needs k instances of that colour) and passes only when all
of its slots are matched. Constraints are taken in order; one whose slots cannot all be
filled (re-routing earlier assignments along augmenting paths, never dropping them) is left
unmatched and its partial slots are given back. With one slot per constraint this is a
maximum matching; with more it is maximal in constraint order. Instances are tried in the
order given, so callers list them best first (higher confidence) and the best free instance
is used (re-routing only when no fitting instance is free).
"""

from __future__ import annotations

from collections.abc import Sequence


def match_instances(
    demands: Sequence[int], fits: Sequence[Sequence[bool]]
) -> list[list[int] | None]:
    """Per constraint, the indices of the instances assigned to it (ascending, ``demands[i]``
    of them) or None when it could not get that many distinct fitting instances.

    ``demands[i]``: instances constraint ``i`` needs (>= 1); ``fits[i][j]``: whether instance
    ``j`` may serve constraint ``i`` (every row the same length, the number of instances,
    best instance first). Raises ``ValueError`` when the lengths disagree or a demand is < 1.
    """
    if len(demands) != len(fits):
        raise ValueError(f"demands: {len(demands)} constraints but fits has {len(fits)} rows")
    n = len(fits[0]) if fits else 0
    for i, (k, row) in enumerate(zip(demands, fits, strict=True)):
        if k < 1:
            raise ValueError(f"demands[{i}]: {k}, expected >= 1")
        if len(row) != n:
            raise ValueError(f"fits[{i}]: {len(row)} instances, expected {n} (as fits[0])")
    owner: list[int] = [-1] * n  # instance -> slot
    slot_of: list[int] = []  # slot -> constraint

    def augment(s: int, seen: set[int]) -> bool:
        row = fits[slot_of[s]]
        for j in range(n):  # the best free instance first, so earlier constraints keep theirs
            if row[j] and owner[j] == -1:
                owner[j] = s
                return True
        for j in range(n):
            if row[j] and j not in seen:
                seen.add(j)
                if owner[j] == -1 or augment(owner[j], seen):
                    owner[j] = s
                    return True
        return False

    for i, k in enumerate(demands):
        before = list(owner)
        for _ in range(k):
            slot_of.append(i)
            if not augment(len(slot_of) - 1, set()):
                owner[:] = before
                break
    out: list[list[int] | None] = []
    for i, k in enumerate(demands):
        got = [j for j in range(n) if owner[j] != -1 and slot_of[owner[j]] == i]
        out.append(got if len(got) == k else None)
    return out


__all__ = ["match_instances"]
