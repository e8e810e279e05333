"""Counterfactual attribution, the planning of probes (issue 29; moved from
``counterfactual.py``, issue 28): the probe budget (``round_call_estimate``), the order of the
levers (``responsibility_weights``), the failing pairs and the passing sample a probe runs on,
and the widening levers (``widenings``, ``toward_of``) probed when no removal is a cause.
The plan's rules are in ``evoharness.trace.counterfactual``'s docstring ("Plan").
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence

from evoharness.canonical import content_hash
from evoharness.harness.schema import Harness, Responsibility
from evoharness.trace.counterfactual_judge import CounterfactualConfig, Key, Pair, PairOutcome
from evoharness.trace.models import (
    Attribution,
    Execution,
    FailureCluster,
)
from evoharness.trace.schema_levers import (
    Lever,
    levers,
)


def round_call_estimate(
    generations_per_execution: float,
    n_seeds: int,
    n_analysis_tasks: int,
    n_validation_tasks: int,
    n_candidates: int,
) -> float:
    """The generator calls a round makes, estimated before its candidates exist: the
    parent's analysis executions (``n_analysis_tasks`` × ``n_seeds``) plus validation of the
    parent and ``n_candidates`` candidates on every split on as many fresh seeds, each at the
    parent's ``generations_per_execution``."""
    execs = n_seeds * (n_analysis_tasks + (1 + n_candidates) * n_validation_tasks)
    return max(0.0, generations_per_execution) * execs


def responsibility_weights(
    clusters: Sequence[FailureCluster], attributions: Sequence[Attribution]
) -> dict[str, float]:
    """Σ over clusters of the attribution score × the cluster's failing verdicts (at least
    1), per responsibility: the order in which counterfactual probes are run."""
    by_id = {a.cluster_id: a for a in attributions}
    out = {r.value: 0.0 for r in Responsibility}
    for c in clusters:
        a = by_id.get(c.cluster_id)
        if a is None:
            continue
        for r in out:
            out[r] += a.scores.get(r, 0.0) * max(1, c.n_failures)
    return out


def p_screen_includes_cause(n_failing: int, n_caused: int, n: int) -> float:
    """Chance that a screen of ``n`` pairs drawn without replacement from ``n_failing``
    failing pairs includes at least one of the ``n_caused`` pairs a fault caused:
    the hypergeometric ``1 − C(N−K, n) / C(N, n)`` (N = ``n_failing``, K = ``n_caused``).
    Raises ``ValueError`` when a count is negative or ``n_caused``/``n`` exceed ``n_failing``."""
    if min(n_failing, n_caused, n) < 0 or n_caused > n_failing or n > n_failing:
        raise ValueError(
            f"p_screen_includes_cause: need 0 <= n_caused, n <= n_failing, got "
            f"n_failing={n_failing}, n_caused={n_caused}, n={n}"
        )
    if n_failing == 0:
        return 0.0
    return 1.0 - math.comb(n_failing - n_caused, n) / math.comb(n_failing, n)


def screen_size(
    n_failing: int,
    n_levers: int,
    screen_budget: float,
    calls_per_pair: float,
    minimum: int = 4,
) -> int:
    """Failing pairs each of ``n_levers`` levers is screened on in the first pass: as many as
    ``screen_budget`` generator calls afford at ``calls_per_pair`` calls a pair
    (``floor(screen_budget / (n_levers · calls_per_pair))``), at least ``minimum``, at most
    ``n_failing`` (every failing pair the plan probes).

    Why not a fixed few: a fault of one parameter (a margin, a threshold, a budget) causes
    only a minority of the failing pairs — the generator's own misses make the rest — and a
    lever can only show itself as a cause on a pair it caused. With N failing pairs of which K
    were caused, a screen of n pairs drawn from them includes at least one caused pair with the
    hypergeometric probability ``P(≥1) = 1 − C(N−K, n) / C(N, n)``
    (``p_screen_includes_cause``): for N = 12, K = 3 that is 0.75 at n = 4 but 0.91 at n = 6,
    0.98 at n = 8 and 1 at n = 10. A fixed screen of 4 misses such a cause one time in four while leaving
    most of the probe budget unspent, so the screen takes what the budget affords.

    ``n_failing``/``n_levers``: counts (``n_levers`` 0 gives ``n_failing``: nothing to share
    the budget with); ``screen_budget``: generator calls (the first pass's share of the probe
    budget, ``counterfactual.SCREEN_SHARE``); ``calls_per_pair``: > 0. Returns an int in
    ``[min(minimum, n_failing), n_failing]``; raises ``ValueError`` on a negative count or
    budget, ``calls_per_pair`` <= 0 or ``minimum`` < 1."""
    if n_failing < 0 or n_levers < 0 or screen_budget < 0 or minimum < 1:
        raise ValueError(
            "screen_size: n_failing, n_levers, screen_budget must be >= 0 and minimum >= 1, got "
            f"n_failing={n_failing}, n_levers={n_levers}, screen_budget={screen_budget}, "
            f"minimum={minimum}"
        )
    if not calls_per_pair > 0:
        raise ValueError(f"screen_size: calls_per_pair must be > 0, got {calls_per_pair}")
    if n_levers == 0:
        return n_failing
    afford = math.floor(screen_budget / (n_levers * calls_per_pair))
    return max(min(minimum, n_failing), min(afford, n_failing))


def _failing_pairs(
    outcomes: Mapping[Pair, PairOutcome],
    tasks: set[str],
    rates: Mapping[Key, float],
    limit: int,
) -> list[Pair]:
    """Pairs of ``tasks`` with a failing final or first-attempt verdict, systematic failures
    first (lowest expected recovery), one pair per task per turn, at most ``limit``."""
    per_task: dict[str, list[tuple[float, Pair]]] = {}
    for pair, o in outcomes.items():
        if pair[0] not in tasks:
            continue
        bad = [cid for cid, ok in o.first.items() if not ok]
        bad += [cid for cid, ok in o.final.items() if not ok]
        if not bad:
            continue
        exp = min(rates.get((pair[0], pair[1], cid), 0.5) for cid in bad)
        per_task.setdefault(pair[0], []).append((exp, pair))
    queues = [sorted(v) for _, v in sorted(per_task.items(), key=lambda kv: min(kv[1]))]
    out: list[Pair] = []
    while len(out) < limit and any(queues):
        for q in queues:
            if q and len(out) < limit:
                out.append(q.pop(0)[1])
    return out


def _passing_pairs(outcomes: Mapping[Pair, PairOutcome], limit: int) -> list[Pair]:
    """Up to ``limit`` pairs whose final verdicts all pass, in a seeded hash order (a
    deterministic sample that does not favour task order)."""
    ok = [p for p, o in outcomes.items() if o.final and all(o.final.values())]
    return sorted(ok, key=lambda p: content_hash(["cf-passing", p[0], p[1]]))[:limit]


def widenings(
    parent: Harness,
    weights: Mapping[str, float],
    features: Sequence[str],
    toward: Mapping[str, float],
) -> list[Lever]:
    """The levers the widening pass probes when no removal is a cause (module docstring,
    "Plan"): in each responsibility, best-weighted first (``responsibility_weights``; ties in
    document order), its ``schema_levers.levers`` (with ``toward`` and ``features``) of kind
    ``widen``/``narrow`` that add one of the failing ``features`` (a trigger or a layout
    ``when`` that misses a failing feature; a skill firing everywhere narrowed to it), then
    its ``step`` levers (a number toward its default or toward what passing executions
    used). A removal cannot find a fault of a part that does too little; these can."""
    order = sorted(Responsibility, key=lambda r: -weights.get(r.value, 0.0))
    out: list[Lever] = []
    for resp in order:
        lvs = levers(parent, resp, toward, features)
        out += [lv for lv in lvs if lv.kind in {"widen", "narrow"} and lv.feature in features]
        out += [lv for lv in lvs if lv.kind == "step"]
    return out


def toward_of(
    parent: Harness,
    executions: Sequence[Execution],
    outcomes: Mapping[Pair, PairOutcome],
) -> dict[str, float]:
    """``{"/policy/params/<name>": value}``: per numeric generation parameter, the median value
    that the parent's *passing* executions (every final verdict passed, ``outcomes``) sent to
    the generator, where it differs from the median of the failing ones and from the
    policy's own value (a skill or memory that set it where prompts passed). Empty when no
    parameter separates them. The ``toward`` of ``schema_levers.levers``."""
    ok: dict[str, list[float]] = {}
    bad: dict[str, list[float]] = {}
    for e in executions:
        o = outcomes.get((e.task_id, e.seed))
        if o is None or not o.final:
            continue
        into = ok if all(o.final.values()) else bad
        for name, v in e.program.params.model_dump().items():
            if isinstance(v, int | float) and not isinstance(v, bool):
                into.setdefault(name, []).append(float(v))
    own = parent.policy.params.model_dump()
    out: dict[str, float] = {}
    for name, vals in ok.items():
        med = statistics.median(vals)
        if not bad.get(name) or med == statistics.median(bad[name]) or med == own.get(name):
            continue
        out[f"/policy/params/{name}"] = int(med) if isinstance(own.get(name), int) else med
    return out


def first_pass_screen(
    cfg: CounterfactualConfig,
    n_failing: int,
    n_levers: int,
    screen_budget: float,
    calls_per_pair: float,
) -> int:
    """Failing pairs of each first-pass screen under ``cfg.screen_sizing``: ``fixed`` (the
    default) ``cfg.screen_pairs``; ``budget`` ``screen_size`` with ``cfg.screen_pairs`` as its
    floor. Errors as ``screen_size``."""
    if cfg.screen_sizing == "budget":
        return screen_size(n_failing, n_levers, screen_budget, calls_per_pair, cfg.screen_pairs)
    return cfg.screen_pairs
