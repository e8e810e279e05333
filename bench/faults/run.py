"""The fault suite: does one TRACE round attribute, patch and repair injected harness faults,
and decline to patch clean harnesses? (Definitions: ``bench/faults/README.md``.)

For each case (``bench/faults/case.py``), in-process, through the functions the workflows
run (``evoharness.trace.round_driver.run_round`` over ``workflows.backends.TracePorts``, sim generator
of the case's profile, sim inspector, rule-based proposer):

1. one TRACE round on the faulted harness (K seeds ``0..K-1``);
2. validity: base vs faulted on target + held-out (same seeds): first-attempt pass rate,
   final pass rate, generations per request, with task-level paired bootstrap 95% intervals;
3. repair: base, faulted and the accepted child on held-out with fresh seeds
   (``FRESH_SEED + i``);
4. the record: localizer's top responsibility, attributed responsibility, decision, patch,
   repaired, preservation regression, generator calls and cost.

Then the summary figures with Wilson 95% intervals beside three baselines on the same cases.

Run: ``python bench/faults/run.py [--cases DIR ...] [--quick] [--jobs N] [--out FILE]``
(default ``--cases bench/faults/cases``, results ``bench/results/faults-<UTC date>.json``);
``python bench/faults/run.py --summarize FILE [--out NEW]`` re-summarises a results JSON
without running anything.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as dt
import json
import os
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from bench.faults.case import (  # noqa: E402
    CaseError,
    LoadedCase,
    Sizes,
    case_files,
    case_harnesses,
    case_id_of,
    load_case,
    parse_case,
)
from evoharness.evidence import EvidenceStatus  # noqa: E402
from evoharness.harness.patch import apply_patch  # noqa: E402
from evoharness.harness.schema import Harness, Responsibility  # noqa: E402
from evoharness.sim import SimGenerator, SimParams  # noqa: E402
from evoharness.tasks.models import Task  # noqa: E402
from evoharness.trace.aggregate import wilson_interval  # noqa: E402
from evoharness.trace.attribution import NO_PATCH  # noqa: E402
from evoharness.trace.checks import widens_resampling  # noqa: E402
from evoharness.trace.models import Candidate, DecisionKind, Execution, RoundReport  # noqa: E402
from evoharness.trace.round import RoundConfig, execute_all  # noqa: E402
from evoharness.trace.round_driver import RoundResult, run_round  # noqa: E402

RESPONSIBILITIES = tuple(r.value for r in Responsibility)
#: Where a case of a results JSON is looked up when ``--summarize`` rebuilds its parent
#: harness (records written before ``parent_middleware`` was kept): the shipped and the
#: retired cases.
FAULTS_DIR = Path(__file__).resolve().parent
SUMMARIZE_CASES = (FAULTS_DIR / "cases", FAULTS_DIR / "retired")
#: First seed of the fresh held-out seeds the repair is measured on (never a round seed).
FRESH_SEED = 100_000
#: Validity thresholds (issue 17): first-attempt (or final) pass rate drop >= 5 pp, or
#: generations per request up >= 10%, each with its 95% interval excluding 0.
MIN_DROP = 0.05
MIN_GEN_RISE = 0.10
#: A patch "repairs" when it recovers at least this share of the fault's held-out drop.
REPAIR_SHARE = 0.5
N_BOOTSTRAP = 2000

#: The "most common failure type" baseline: failing constraint type → the responsibility
#: a text-to-image practitioner reaches for first (rationale in bench/faults/README.md).
FAILURE_TYPE_RESPONSIBILITY: dict[str, str] = {
    "count": "tools",  # layout / box conditioning (GLIGEN, LLM-grounded diffusion)
    "position": "tools",  # same: spatial relations need a layout
    "color": "policy",  # attribute binding through prompt structure
    "attribute": "policy",
    "negative": "policy",  # "no X" belongs in the negative prompt
    "vqa": "policy",
    "text": "skills",  # text-rendering know-how (quoting, short strings, glyph panels)
    "object": "middleware",  # dropped objects are mostly sampling misses: verify and retry
}


# ----------------------------------------------------------------------------- world


def generator_params(profile: str) -> tuple[SimParams, bool]:
    """The sim parameters of generator ``profile`` and whether the profile was found.

    Uses ``evoharness.sim.profiles.load_profile`` (world-gen, issue 15) when it exists;
    until it is merged, falls back to the default ``SimParams()`` and returns
    ``available=False`` (printed and recorded in the results). One place to drop the
    fallback after the merge."""
    try:
        from evoharness.sim.profiles import load_profile  # type: ignore[import-not-found]
    except ImportError:
        return SimParams(), False
    return load_profile(profile), True


_PORTS: dict[str, Any] = {}


def ports_for(profile: str, store_dir: str) -> tuple[Any, bool]:
    """``(TracePorts, profile_available)`` for ``profile`` over the local store
    ``store_dir`` (one per process and profile; the store is shared by every process of a
    run, writes are atomic)."""
    from workflows.backends import CachingGenerator, TracePorts, WorkerSection, WorkerSettings

    params, available = generator_params(profile)
    key = f"{params.digest()}|{store_dir}"
    if key not in _PORTS:
        ports = TracePorts(WorkerSettings(worker=WorkerSection(store="local", local_dir=store_dir)))
        ports.generator = CachingGenerator(SimGenerator(params), ports.store)
        _PORTS[key] = ports
    return _PORTS[key], available


# --------------------------------------------------------------------------- measures


def first_attempt_passes(ports: Any, e: Execution, task: Task) -> list[bool]:
    """Verdicts of the request's first generated image (before repair / best-of-N) on the
    task's constraints: the execution's own evidence when one image was made, else the
    first program re-served from the content-addressed cache and inspected."""
    if len(e.programs) <= 1:
        return [ev.status is EvidenceStatus.passed for ev in e.evidence]
    img = ports.generator.generate(e.programs[0])
    ev = ports.verifier.verify(img.png, task.constraints, task.prompt)
    return [x.status is EvidenceStatus.passed for x in ev]


def per_task(ports: Any, execs: Sequence[Execution], tasks: Sequence[Task]) -> np.ndarray:
    """``(T, 5)`` array per task (task order): verdicts, first-attempt passes, final passes,
    generations, requests."""
    by_id = {t.task_id: i for i, t in enumerate(tasks)}
    out = np.zeros((len(tasks), 5))
    for e in execs:
        row = out[by_id[e.task_id]]
        first = first_attempt_passes(ports, e, tasks[by_id[e.task_id]])
        row[0] += len(e.evidence)
        row[1] += sum(first)
        row[2] += sum(ev.status is EvidenceStatus.passed for ev in e.evidence)
        row[3] += max(len(e.programs), 1)
        row[4] += 1
    return out


def rates(a: np.ndarray) -> dict[str, float]:
    """First-attempt and final pass rate, generations per request of a ``per_task`` array."""
    n, r = a[:, 0].sum(), a[:, 4].sum()
    return {
        "first_attempt_pass": float(a[:, 1].sum() / n) if n else 0.0,
        "final_pass": float(a[:, 2].sum() / n) if n else 0.0,
        "generations_per_request": float(a[:, 3].sum() / r) if r else 0.0,
    }


def paired_bootstrap(base: np.ndarray, other: np.ndarray, seed: int = 0) -> dict[str, Any]:
    """Differences base − other of the three ``rates`` with task-level paired bootstrap 95%
    percentile intervals (tasks resampled with replacement, ``N_BOOTSTRAP`` draws; Efron &
    Tibshirani 1993). Returns ``{metric: {"delta", "ci95"}}``; generations also give
    ``relative`` = (other − base) / base."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(base), size=(N_BOOTSTRAP, len(base)))
    b, o = base[idx].sum(axis=1), other[idx].sum(axis=1)  # (B, 5)
    with np.errstate(invalid="ignore", divide="ignore"):
        d_first = (b[:, 1] - o[:, 1]) / b[:, 0]
        d_final = (b[:, 2] - o[:, 2]) / b[:, 0]
        d_gen = o[:, 3] / o[:, 4] - b[:, 3] / b[:, 4]
    rb, ro = rates(base), rates(other)

    def ci(x: np.ndarray) -> list[float]:
        lo, hi = np.nanpercentile(x, [2.5, 97.5])
        return [float(lo), float(hi)]

    g0 = rb["generations_per_request"]
    return {
        "first_attempt_drop": {
            "delta": rb["first_attempt_pass"] - ro["first_attempt_pass"],
            "ci95": ci(d_first),
        },
        "final_drop": {"delta": rb["final_pass"] - ro["final_pass"], "ci95": ci(d_final)},
        "generations_rise": {
            "delta": ro["generations_per_request"] - g0,
            "relative": (ro["generations_per_request"] - g0) / g0 if g0 else 0.0,
            "ci95": ci(d_gen),
        },
    }


def validity(diff: dict[str, Any]) -> tuple[bool, str | None]:
    """``(valid, primary metric)``: valid when the first-attempt pass rate drops by
    ``MIN_DROP`` (interval above 0), else the final pass rate does, else generations per
    request rise by ``MIN_GEN_RISE`` (interval above 0); the first that holds is the metric
    the repair is judged on."""
    fa, fi, ge = diff["first_attempt_drop"], diff["final_drop"], diff["generations_rise"]
    if fa["delta"] >= MIN_DROP and fa["ci95"][0] > 0:
        return True, "first_attempt_pass"
    if fi["delta"] >= MIN_DROP and fi["ci95"][0] > 0:
        return True, "final_pass"
    if ge["relative"] >= MIN_GEN_RISE and ge["ci95"][0] > 0:
        return True, "generations_per_request"
    return False, None


def top_responsibility(rr: RoundResult) -> str | None:
    """The localizer's top responsibility over the round: attribution scores summed over
    clusters weighted by each cluster's failing verdicts, ``no_patch`` left out; None when
    the target split had no failure."""
    tot: dict[str, float] = defaultdict(float)
    size = {c.cluster_id: max(c.n_failures, 1) for c in rr.report.clusters}
    for a in rr.report.attributions:
        for r, s in a.scores.items():
            if r != NO_PATCH:
                tot[r] += s * size.get(a.cluster_id, 1)
    return max(sorted(tot), key=lambda r: tot[r]) if tot else None


def most_common_failure_type(execs: Sequence[Execution], tasks: Sequence[Task]) -> str | None:
    """The constraint type with most failing verdicts (ties: alphabetical), or None."""
    types = {(t.task_id, c.constraint_id): c.type.value for t in tasks for c in t.constraints}
    n: Counter[str] = Counter()
    for e in execs:
        for ev in e.evidence:
            if ev.status is EvidenceStatus.failed:
                n[types.get((e.task_id, ev.constraint_id), "object")] += 1
    return min(n, key=lambda k: (-n[k], k)) if n else None


def round_spend(rr: RoundResult) -> dict[str, float]:
    """Generator calls the round needed (every generated program of every execution, cache
    or not), calls actually made in this run, and nominal generator-seconds."""
    seen: set[tuple[str, str, int]] = set()
    needed = secs = 0.0
    for execs in rr.executions.values():
        for e in execs:
            k = (e.harness_id, e.task_id, e.seed)
            if k in seen:
                continue
            seen.add(k)
            needed += max(len(e.programs), 1)
            secs += e.nominal_generator_seconds or e.generator_seconds
    return {
        "generator_calls": needed,
        "generator_calls_made": rr.report.cost.get("generator_calls", 0.0),
        "generator_seconds": secs,
    }


# ------------------------------------------------------------------------------ a case


def candidate_record(c: Candidate) -> dict[str, Any]:
    """One candidate of a round as the results JSON keeps it (``cases[].candidates[]``): id,
    cluster, source, the patch (responsibility, RFC 6902 ``ops``, rationale; None without a
    parsed patch), status, reject reason, utility and the gate record (``_gate_record``)."""
    return {
        "id": c.candidate_id,
        "cluster": c.cluster_id,
        "source": c.source,
        "responsibility": c.patch.responsibility.value if c.patch else None,
        "ops": c.patch.ops if c.patch else None,
        "rationale": c.patch.rationale if c.patch else None,
        "status": c.status.value,
        "reject_reason": c.reject_reason or None,
        "utility": c.gate.utility if c.gate else None,
        "gate": _gate_record(c.gate),
    }


def analysis_record(report: RoundReport) -> dict[str, Any]:
    """The round's attribution record for the results JSON: ``attributions`` (per cluster:
    scores, chosen responsibility, reasons — counterfactual evidence first) and
    ``counterfactual`` (the probes, causes, budget and spend; None when it did not run)."""
    cf = report.counterfactual
    return {
        "attributions": [a.model_dump(mode="json") for a in report.attributions],
        "counterfactual": cf.model_dump(mode="json") if cf is not None else None,
    }


def run_case(
    path: str, store_dir: str, sizes: Sizes | None = None, mode: str = "round"
) -> dict[str, Any]:
    """Run one case file and return its record (``status`` ``ok``, ``invalid_fault`` or
    ``error`` with the message; never raises). ``sizes``: replaces the case's
    ``tasks.sizes`` (builder specs only; a split folder keeps its tasks). ``mode``:
    ``round`` (the suite), ``validity`` (base vs faulted only, no TRACE round: is the fault
    seen by the world?) or ``certify`` (the clean-case oracle, ``certify_clean``)."""
    t0 = time.perf_counter()
    cid = case_id_of(Path(path))
    try:
        lc = load_case(path, sizes)
    except CaseError as exc:
        return {"case": cid, "file": path, "status": "error", "error": str(exc)}
    try:
        if mode == "validity":
            return _validity_only(lc, store_dir, t0)
        if mode == "certify":
            return certify_clean(lc, store_dir, t0)
        return _run_loaded(lc, store_dir, t0)
    except Exception as exc:  # noqa: BLE001 - a crashing case is an error record, not a pass
        return {
            "case": cid,
            "file": path,
            "status": "error",
            "error": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(limit=6),
        }


def _run_loaded(lc: LoadedCase, store_dir: str, t0: float) -> dict[str, Any]:
    case = lc.case
    ports, available = ports_for(case.profile, store_dir)
    seeds = list(range(case.seeds))
    fresh = [FRESH_SEED + i for i in range(case.seeds)]
    cfg = RoundConfig(run_id=f"faults-{lc.case_id}", seeds=seeds, concurrency=1)
    rr = run_round(ports.round_ports(), lc.faulted, lc.splits, cfg)
    rep = rr.report
    dec = rep.decision
    accepted = next((c for c in rep.candidates if c.candidate_id == dec.candidate_id), None)
    top = top_responsibility(rr)
    patch_resp = accepted.patch.responsibility.value if accepted and accepted.patch else None
    attributed = patch_resp if dec.kind is DecisionKind.accepted else top
    parent_target = rr.executions[(rep.parent_harness_id, "target")]
    mcft = most_common_failure_type(parent_target, lc.splits["target"])
    rec: dict[str, Any] = {
        "case": lc.case_id,
        "file": str(lc.path),
        "kind": case.kind,
        "profile": case.profile,
        "profile_available": available,
        "generator_id": ports.generator.generator_id,
        "base": case.base,
        "expected": case.expected(),
        "acceptable": sorted(case.acceptable()),
        "faults": [f.responsibility.value for f in case.faults],
        "parent_middleware": lc.faulted.middleware.model_dump(mode="json"),
        "seeds": case.seeds,
        "tasks": {k: len(v) for k, v in lc.splits.items()},
        "decision": dec.kind.value,
        "decision_reason": dec.reason,
        "top_attribution": top,
        "attributed": attributed,
        "patch": (
            {"responsibility": patch_resp, "ops": accepted.patch.ops}
            if accepted is not None and accepted.patch is not None
            else None
        ),
        "candidates": [candidate_record(c) for c in rep.candidates],
        **analysis_record(rep),
        "clusters": len(rep.clusters),
        "most_common_failure_type": mcft,
        "preservation_regression": (
            max(0.0, -accepted.gate.delta_preservation)
            if accepted is not None and accepted.gate is not None
            else 0.0
        ),
        **round_spend(rr),
    }
    rec["correct"] = (
        dec.kind is DecisionKind.no_patch
        if case.kind == "clean"
        else attributed is not None and attributed in case.acceptable()
    )
    rec["patched_right"] = (
        case.kind != "clean"
        and dec.kind is DecisionKind.accepted
        and patch_resp in case.acceptable()
    )
    if case.kind != "clean":
        rec["validity"] = fault_validity(ports, lc, seeds)
        valid, metric = rec["validity"]["valid"], rec["validity"]["metric"]
        rec["status"] = "ok" if valid else "invalid_fault"
        rec["repaired"] = False
        if valid and rr.child is not None:
            rec["repair"] = _repair(ports, lc, rr.child, fresh, str(metric))
            rec["repaired"] = rec["repair"]["repaired"]
    else:
        rec["status"] = "ok"
    rec["seconds"] = time.perf_counter() - t0
    return rec


def fault_validity(ports: Any, lc: LoadedCase, seeds: list[int]) -> dict[str, Any]:
    """Base vs faulted harness on target + held-out with ``seeds``: ``{valid, metric,
    first_attempt_drop, final_drop, generations_rise}`` (``paired_bootstrap``, ``validity``)."""
    val_tasks = lc.splits["target"] + lc.splits["heldout"]
    base_ex = execute_all(ports.execute, lc.base, val_tasks, seeds, 1)
    fault_ex = execute_all(ports.execute, lc.faulted, val_tasks, seeds, 1)
    diff = paired_bootstrap(
        per_task(ports, base_ex, val_tasks), per_task(ports, fault_ex, val_tasks)
    )
    valid, metric = validity(diff)
    return {"valid": valid, "metric": metric, **diff}


def _validity_only(lc: LoadedCase, store_dir: str, t0: float) -> dict[str, Any]:
    """``--validity-only``: the case's validity record without a TRACE round (clean cases
    are ``ok`` with no measure)."""
    ports, available = ports_for(lc.case.profile, store_dir)
    rec: dict[str, Any] = {
        "case": lc.case_id,
        "file": str(lc.path),
        "kind": lc.case.kind,
        "profile": lc.case.profile,
        "profile_available": available,
        "generator_id": ports.generator.generator_id,
        "status": "ok",
    }
    if lc.case.kind != "clean":
        rec["validity"] = fault_validity(ports, lc, list(range(lc.case.seeds)))
        rec["status"] = "ok" if rec["validity"]["valid"] else "invalid_fault"
    rec["seconds"] = time.perf_counter() - t0
    return rec


#: The clean-case oracle (issue 29): matched seeds of its round, and enough clusters and
#: candidates per cluster that every one-step candidate the proposer offers is gated.
ORACLE_SEEDS = 32
ORACLE_MAX_CLUSTERS = 50
ORACLE_CANDIDATES = 20


def certify_clean(lc: LoadedCase, store_dir: str, t0: float) -> dict[str, Any]:
    """The clean-case oracle: one TRACE round on the case's (unfaulted) harness with
    ``ORACLE_SEEDS`` matched seeds, every failure cluster not localized to No-Patch and up to
    ``ORACLE_CANDIDATES`` candidates per cluster, each through the default gate (its alpha
    bounds the false accepts). ``certified``: no candidate was accepted, i.e. no one-step
    candidate shows a significant positive utility. Clusters the localizer attributes to
    No-Patch get no candidate (what the proposer offers is all the oracle can try).
    Raises ``CaseError`` for a faulty case."""
    if lc.case.kind != "clean":
        raise CaseError(f"{lc.path}: --certify is for clean cases (expect: no_patch)")
    ports, available = ports_for(lc.case.profile, store_dir)
    cfg = RoundConfig(
        run_id=f"oracle-{lc.case_id}",
        seeds=list(range(ORACLE_SEEDS)),
        max_clusters=ORACLE_MAX_CLUSTERS,
        candidates_per_cluster=ORACLE_CANDIDATES,
        concurrency=1,
    )
    rr = run_round(ports.round_ports(), lc.faulted, lc.splits, cfg)
    rep = rr.report
    gated = [c for c in rep.candidates if c.gate is not None]
    best = max(gated, key=lambda c: c.gate.utility if c.gate else 0.0, default=None)
    return {
        "case": lc.case_id,
        "file": str(lc.path),
        "kind": "clean",
        "profile": lc.case.profile,
        "profile_available": available,
        "generator_id": ports.generator.generator_id,
        "status": "ok",
        "certified": rep.decision.kind is DecisionKind.no_patch,
        "decision_reason": rep.decision.reason,
        "seeds": ORACLE_SEEDS,
        "clusters": len(rep.clusters),
        "candidates_proposed": len(rep.candidates),
        "candidates_gated": len(gated),
        "best": (
            {"id": best.candidate_id, "gate": _gate_record(best.gate)} if best is not None else None
        ),
        "candidates": [candidate_record(c) for c in rep.candidates],
        **analysis_record(rep),
        **round_spend(rr),
        "seconds": time.perf_counter() - t0,
    }


def _gate_record(g: Any) -> dict[str, Any] | None:
    """What the gate said about one candidate (None when it was not gated): accepted, its
    reasons and notes, utility, deltas, p-values."""
    if g is None:
        return None
    return {
        "accepted": g.accepted,
        "reasons": list(g.reasons),
        "notes": list(g.notes),
        "utility": g.utility,
        "delta_target": g.delta_target,
        "delta_heldout": g.delta_heldout,
        "delta_preservation": g.delta_preservation,
        "delta_cost": g.delta_cost,
        "p_value": g.p_value,
        "p_holm": g.p_holm,
        "look": g.look,
    }


def _repair(
    ports: Any, lc: LoadedCase, child: Harness, fresh: list[int], metric: str
) -> dict[str, Any]:
    """Held-out tasks on fresh seeds: does the child recover ``REPAIR_SHARE`` of the fault's
    drop on ``metric`` (for generations per request, a drop is a rise)?"""
    tasks = lc.splits["heldout"]
    r = {
        name: rates(per_task(ports, execute_all(ports.execute, h, tasks, fresh, 1), tasks))
        for name, h in (("base", lc.base), ("faulted", lc.faulted), ("child", child))
    }
    sign = -1.0 if metric == "generations_per_request" else 1.0
    drop = sign * (r["base"][metric] - r["faulted"][metric])
    gain = sign * (r["child"][metric] - r["faulted"][metric])
    return {
        "metric": metric,
        "heldout_fresh": r,
        "drop": drop,
        "gain": gain,
        "heldout_drop_observed": drop > 0,
        "repaired": gain >= REPAIR_SHARE * max(drop, 0.0) and (drop <= 0 or gain > 0),
    }


# --------------------------------------------------------------------------- summary


def _prop(k: float, n: int, interval: bool = True) -> dict[str, Any]:
    """A proportion ``k/n`` with its Wilson 95% interval; ``interval=False`` for an
    expectation (the uniform-random baseline), whose ``ci95`` is None."""
    if not interval:
        return {"k": k, "n": n, "rate": (k / n) if n else None, "ci95": None}
    lo, hi = wilson_interval(int(k), n) if n else (0.0, 1.0)
    return {"k": k, "n": n, "rate": (k / n) if n else None, "ci95": [lo, hi]}


# ------------------------------------------------------------------------- resampling

_MIDDLEWARE = Responsibility.middleware.value


def patch_widens_resampling(parent: Harness, patch: dict[str, Any]) -> bool:
    """Whether ``patch`` (``{"responsibility", "ops"}``, RFC 6902 ops as the results JSON keeps
    them) applied to ``parent`` adds or widens run-time resampling: a best-of-N stage added or
    its ``n`` raised, a verify-and-repair stage added with a budget above 0 or its
    ``repair_budget`` raised (``evoharness.trace.checks.widens_resampling``). A lowered N or
    budget, or any change that leaves both as they were, is not. Raises
    ``evoharness.harness.patch.PatchError`` when the ops do not apply to ``parent``."""
    return widens_resampling(parent, apply_patch(parent, patch))


def record_adds_resampling(rec: dict[str, Any]) -> bool:
    """Whether the accepted patch of results record ``rec`` adds or widens resampling
    (``patch_widens_resampling`` against the parent's ``parent_middleware``); False without a
    patch. Resampling lives only under ``/middleware``, which only a Middleware patch may
    write (the boundary contract), so any other patch is False without its parent. Raises
    ``ValueError`` naming the case when a Middleware patch's record has no
    ``parent_middleware`` (records written before it was kept: ``run.py --summarize``
    rebuilds it from the case file, ``rebuild_parents``)."""
    patch = rec.get("patch")
    if not patch or patch.get("responsibility") != _MIDDLEWARE:
        return False
    if rec.get("parent_middleware") is None:
        raise ValueError(
            f"case {rec.get('case')}: the record has no parent_middleware (the faulted "
            "harness's middleware), so its Middleware patch cannot be classified; "
            "re-summarise with `run.py --summarize FILE`, which rebuilds it from the case file"
        )
    parent = Harness.model_validate({"middleware": rec["parent_middleware"]})
    return patch_widens_resampling(parent, patch)


def resampling_for_fault_elsewhere(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Accepted patches that add or widen resampling (``record_adds_resampling``) while no
    injected fault of the case is in Middleware (clean cases included: nothing is broken),
    over every accepted patch of a case whose round ran (``ok`` and ``invalid_fault``).
    Returns ``_prop``'s ``{k, n, rate, ci95}`` (Wilson 95%) plus ``cases``, the names counted
    in ``k``. Raises ``ValueError`` naming the case when a record that adds resampling has no
    ``faults`` (the injected responsibilities) or no ``parent_middleware``."""
    accepted = [
        r
        for r in records
        if r["status"] in ("ok", "invalid_fault")
        and r.get("decision") == DecisionKind.accepted.value
        and r.get("patch")
    ]
    hits: list[str] = []
    for r in accepted:
        if not record_adds_resampling(r):
            continue
        if "faults" not in r:
            raise ValueError(
                f"case {r['case']}: the record has no 'faults' (the injected "
                "responsibilities); re-summarise with `run.py --summarize FILE`"
            )
        if _MIDDLEWARE not in r["faults"]:
            hits.append(r["case"])
    return {**_prop(len(hits), len(accepted)), "cases": sorted(hits)}


def _case_file(rec: dict[str, Any], folders: Sequence[str | Path]) -> Path:
    """The case file of results record ``rec``: its ``file`` when that still exists, else
    the case of the same name in ``folders``. Raises ``CaseError`` naming the case and the
    folders when there is none."""
    recorded = Path(str(rec.get("file", "")))
    if rec.get("file") and recorded.is_file():
        return recorded
    for folder in folders:
        if not Path(folder).is_dir():
            continue
        for path in case_files(folder):
            if case_id_of(path) == rec["case"]:
                return path
    raise CaseError(
        f"case {rec['case']}: {rec.get('file')} does not exist and no case of that name is in "
        f"{[str(f) for f in folders]}; its parent harness cannot be rebuilt"
    )


def rebuild_parents(records: list[dict[str, Any]], folders: Sequence[str | Path]) -> list[str]:
    """Give each record whose accepted Middleware patch lacks ``parent_middleware`` or
    ``faults`` (results written before they were kept) both, rebuilt from its case file
    (``_case_file``: the base harness with the case's faults applied, no task built); sets
    ``parent_rebuilt_from`` to that file. Returns the names of the records rebuilt. Raises
    ``CaseError`` when a case file is missing or no longer builds. The case file is read as it
    is now: the figure is right only while the case and its base are as they were when the
    results were taken."""
    done: list[str] = []
    for r in records:
        patch = r.get("patch")
        if r.get("status") == "error" or not patch or patch.get("responsibility") != _MIDDLEWARE:
            continue
        if r.get("parent_middleware") is not None and "faults" in r:
            continue
        path = _case_file(r, folders)
        case = parse_case(path)
        _, faulted = case_harnesses(case, path)
        r["parent_middleware"] = faulted.middleware.model_dump(mode="json")
        r["faults"] = [f.responsibility.value for f in case.faults]
        r["parent_rebuilt_from"] = str(path)
        done.append(r["case"])
    return done


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The suite's figures (README definitions) for TRACE and the three baselines."""
    ok = [r for r in records if r["status"] == "ok"]
    faulty = [r for r in ok if r["kind"] != "clean"]
    single = [r for r in faulty if r["kind"] == "single"]
    clean = [r for r in ok if r["kind"] == "clean"]

    def recall(pick: Any, rows: list[dict[str, Any]], interval: bool = True) -> dict[str, Any]:
        return _prop(sum(pick(r) for r in rows), len(rows), interval)

    def methods() -> dict[str, Any]:
        return {
            "trace": lambda r: float(r["correct"]),
            "always_policy": lambda r: float("policy" in r["acceptable"]),
            "uniform_random": lambda r: len(set(r["acceptable"]) & set(RESPONSIBILITIES)) / 5,
            "most_common_failure_type": lambda r: float(
                FAILURE_TYPE_RESPONSIBILITY.get(r["most_common_failure_type"] or "", "")
                in r["acceptable"]
            ),
        }

    attribution: dict[str, Any] = {}
    for name, pick in methods().items():
        exact = name != "uniform_random"
        per = {
            resp: recall(pick, [r for r in single if r["expected"] == [resp]], exact)
            for resp in RESPONSIBILITIES
        }
        attribution[name] = {
            "overall_single": recall(pick, single, exact),
            "compound": recall(pick, [r for r in faulty if r["kind"] == "compound"], exact),
            "per_responsibility": per,
        }
    regs = [r["preservation_regression"] for r in ok]
    calls = [r["generator_calls"] for r in ok]
    secs = [r["generator_seconds"] for r in ok]
    return {
        "cases": len(records),
        "scored": len(ok),
        "invalid_fault": sorted(r["case"] for r in records if r["status"] == "invalid_fault"),
        "errors": sorted(r["case"] for r in records if r["status"] == "error"),
        "attribution_recall": attribution,
        "no_patch_accuracy": {
            "trace": _prop(sum(r["decision"] == "no_patch" for r in clean), len(clean)),
            "always_policy": _prop(0, len(clean)),
            "uniform_random": _prop(0, len(clean)),
            "most_common_failure_type": _prop(
                sum(r["most_common_failure_type"] is None for r in clean), len(clean)
            ),
        },
        "patched_right_responsibility": _prop(
            sum(bool(r.get("patched_right")) for r in faulty), len(faulty)
        ),
        "invalid_fault_share": _prop(
            sum(r["status"] == "invalid_fault" for r in records),
            sum(r["status"] != "error" and r.get("kind") != "clean" for r in records),
        ),
        "false_no_patch_rate": _prop(sum(r["decision"] == "no_patch" for r in faulty), len(faulty)),
        "repair_rate": _prop(sum(bool(r.get("repaired")) for r in faulty), len(faulty)),
        "resampling_for_fault_elsewhere": resampling_for_fault_elsewhere(records),
        "preservation_regression": {
            "mean": float(np.mean(regs)) if regs else None,
            "worst": float(max(regs)) if regs else None,
        },
        "per_decision": {
            "generator_calls_mean": float(np.mean(calls)) if calls else None,
            "generator_seconds_mean": float(np.mean(secs)) if secs else None,
        },
    }


def _fmt(p: dict[str, Any]) -> str:
    if p["n"] == 0:
        return "   n/a (0 cases)      "
    if p["ci95"] is None:
        return f"{p['rate']:6.1%} (expected)      n={p['n']:<3d}"
    return f"{p['rate']:6.1%} [{p['ci95'][0]:5.1%}, {p['ci95'][1]:5.1%}] n={p['n']:<3d}"


def resampling_line(p: dict[str, Any]) -> str:
    """The summary line of ``resampling_for_fault_elsewhere``'s figure ``p``:
    ``accepted patches adding resampling for a fault elsewhere: k of n (x% [lo%, hi%])``."""
    head = f"accepted patches adding resampling for a fault elsewhere: {p['k']} of {p['n']}"
    if not p["n"]:
        return f"{head} (n/a)"
    lo, hi = p["ci95"]
    return f"{head} ({p['rate']:.1%} [{lo:.1%}, {hi:.1%}])"


def print_report(
    records: list[dict[str, Any]], summary: dict[str, Any], meta: dict[str, Any]
) -> None:
    """The per-case table and the summary figures beside the baselines."""
    if not meta["profile_available"]:
        print(
            "NOTE: evoharness.sim.profiles is not available: every case ran on the default "
            "SimParams() (profile_available: false)"
        )
    print(
        f"{'case':34s} {'kind':8s} {'expected':18s} {'top attr':10s} {'decision':9s} "
        f"{'attributed':10s} {'ok':3s} {'repaired':8s} {'regr':5s} {'calls':>6s} status"
    )
    for r in records:
        if r["status"] == "error":
            print(f"{r['case']:34s} ERROR {r['error'][:150]}")
            continue
        print(
            f"{r['case']:34s} {r['kind']:8s} {'+'.join(r['expected']):18s} "
            f"{str(r['top_attribution']):10s} {r['decision']:9s} {str(r['attributed']):10s} "
            f"{'yes' if r['correct'] else 'no':3s} {str(r.get('repaired', '-')):8s} "
            f"{r['preservation_regression']:.3f} {r['generator_calls']:6.0f} {r['status']}"
        )
    s = summary
    print(
        f"\n{s['cases']} cases: {s['scored']} scored, {len(s['invalid_fault'])} invalid_fault, "
        f"{len(s['errors'])} errors"
    )
    ar = s["attribution_recall"]
    print(
        f"\nattribution recall (top-1)   {'TRACE':30s} {'always-Policy':30s} "
        f"{'uniform random (expected)':30s} most-common-failure-type"
    )
    rows = [("single, overall", "overall_single"), ("compound", "compound")]
    for label, key in rows:
        print(f"  {label:26s} " + " ".join(f"{_fmt(ar[m][key]):30s}" for m in ar))
    for resp in RESPONSIBILITIES:
        print(
            f"  {resp:26s} "
            + " ".join(f"{_fmt(ar[m]['per_responsibility'][resp]):30s}" for m in ar)
        )
    npa = s["no_patch_accuracy"]
    print("  No-Patch accuracy (clean)  " + " ".join(f"{_fmt(npa[m]):30s}" for m in npa))
    print(f"patched in right resp.       {_fmt(s['patched_right_responsibility'])}")
    print(f"invalid_fault share (faulty)  {_fmt(s['invalid_fault_share'])}")
    print(f"false No-Patch rate (faulty)  {_fmt(s['false_no_patch_rate'])}")
    print(f"repair rate (held-out, fresh) {_fmt(s['repair_rate'])}")
    rs = s["resampling_for_fault_elsewhere"]
    print(resampling_line(rs))
    if rs["cases"]:
        print(f"  those cases: {', '.join(rs['cases'])}")
    pr = s["preservation_regression"]
    if pr["mean"] is not None:
        print(f"preservation regression       mean {pr['mean']:.4f}, worst {pr['worst']:.4f}")
    pd = s["per_decision"]
    if pd["generator_calls_mean"] is not None:
        print(
            f"per decision                  {pd['generator_calls_mean']:.0f} generator calls, "
            f"{pd['generator_seconds_mean']:.1f} generator-seconds (nominal)"
        )


# ------------------------------------------------------------------------------- main


def stratum(path: Path) -> str:
    """``clean``, ``compound`` or the injected responsibility (``error`` when unparsable)."""
    try:
        c = parse_case(path)
    except CaseError:
        return "error"
    return c.kind if c.kind != "single" else c.expected()[0]


def quick_subset(paths: list[Path]) -> list[Path]:
    """A stratified third: every third case (by path) of each stratum, starting with the
    first."""
    by: dict[str, list[Path]] = defaultdict(list)
    for p in paths:
        by[stratum(p)].append(p)
    return sorted(p for group in by.values() for p in sorted(group)[::3])


def parse_sizes(text: str) -> Sizes:
    """``"24/12/12"`` → ``Sizes(target=24, held_out=12, preservation=12)``. Raises
    ``argparse.ArgumentTypeError`` naming the text for anything else."""
    parts = text.split("/")
    try:
        t, h, pres = (int(x) for x in parts)
        return Sizes(target=t, held_out=h, preservation=pres)
    except (ValueError, TypeError) as exc:
        raise argparse.ArgumentTypeError(
            f"--sizes {text!r}: expected TARGET/HELD_OUT/PRESERVATION, e.g. 24/12/12 ({exc})"
        ) from None


def summarize_mode(records: list[dict[str, Any]], mode: str) -> dict[str, Any]:
    """Summary of a ``--validity-only`` run (invalid faults and their share) or a
    ``--certify`` run (certified clean cases)."""
    done = [r for r in records if r["status"] != "error"]
    out: dict[str, Any] = {
        "cases": len(records),
        "errors": sorted(r["case"] for r in records if r["status"] == "error"),
    }
    if mode == "validity":
        faulty = [r for r in done if r["kind"] != "clean"]
        bad = [r for r in faulty if r["status"] == "invalid_fault"]
        out["invalid_fault"] = sorted(r["case"] for r in bad)
        out["invalid_fault_share"] = _prop(len(bad), len(faulty))
    else:
        out["certified"] = sorted(r["case"] for r in done if r["certified"])
        out["not_certified"] = sorted(r["case"] for r in done if not r["certified"])
        out["certified_share"] = _prop(len(out["certified"]), len(done))
    return out


def print_mode_report(records: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    """One row per case and the summary of a ``--validity-only`` or ``--certify`` run."""
    for r in records:
        if r["status"] == "error":
            print(f"{r['case']:44s} ERROR {r['error'][:150]}")
        elif "certified" in r:
            best = r["best"]["gate"] if r["best"] else None
            util = f"best utility {best['utility']:+.3f} p {best['p_value']:.3f}" if best else ""
            print(
                f"{r['case']:44s} certified={r['certified']!s:5s} "
                f"gated {r['candidates_gated']}/{r['candidates_proposed']} {util}"
            )
        elif "validity" in r:
            v = r["validity"]
            fa, fi, ge = v["first_attempt_drop"], v["final_drop"], v["generations_rise"]
            print(
                f"{r['case']:44s} {r['status']:13s} first {fa['delta']:+.3f} "
                f"[{fa['ci95'][0]:+.3f}, {fa['ci95'][1]:+.3f}] final {fi['delta']:+.3f} "
                f"gen {ge['relative']:+.1%}"
            )
    print(json.dumps({k: v for k, v in summary.items()}, indent=1))


def _progress_line(done: int, total: int, r: dict[str, Any]) -> str:
    """One line per finished case: its count, name, decision (or status) and seconds."""
    what = r.get("decision") or r.get("status", "?")
    if r.get("status") == "error":
        what = f"ERROR {str(r.get('error', ''))[:80]}"
    secs = r.get("seconds")
    took = f"{secs:6.0f} s" if isinstance(secs, int | float) else "      ?"
    return f"[{done:>3}/{total}] {r.get('case', '?'):44s} {what:12s} {took}"


def _run_all(
    paths: Sequence[Path], store: str, sizes: Any, run_mode: str, jobs: int
) -> list[dict[str, Any]]:
    """``run_case`` over ``paths`` (in ``jobs`` processes when > 1), printing one line per
    finished case (``_progress_line``) under a rich progress bar; records in ``paths`` order."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    n = len(paths)
    out: list[dict[str, Any] | None] = [None] * n
    cols = ("{task.description}", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*cols, transient=True) as bar:
        task = bar.add_task("fault cases", total=n)

        def done(i: int, r: dict[str, Any]) -> None:
            out[i] = r
            bar.advance(task)
            bar.console.print(_progress_line(sum(x is not None for x in out), n, r))

        if jobs <= 1:
            for i, p in enumerate(paths):
                done(i, run_case(str(p), store, sizes, run_mode))
        else:
            with concurrent.futures.ProcessPoolExecutor(max_workers=jobs) as pool:
                futs = {
                    pool.submit(run_case, str(p), store, sizes, run_mode): i
                    for i, p in enumerate(paths)
                }
                for f in concurrent.futures.as_completed(futs):
                    done(futs[f], f.result())
    return [r for r in out if r is not None]


def summarize_file(path: Path, folders: Sequence[str | Path], out: str | None = None) -> int:
    """``--summarize``: read results JSON ``path`` (``{meta, summary, cases}``), recompute its
    summary with this code and print the report as a run would. Records of a round run that
    predate ``parent_middleware`` get it rebuilt from their case files (``rebuild_parents``,
    looked up in ``folders``; printed). ``out``: also write ``{meta, summary, cases}`` there
    (``meta.summarized_from`` names ``path``); never ``path`` itself. Returns 1 when a case
    is an error (as a run does), else 0. Raises ``ValueError`` naming the file when it is not
    a results JSON or ``out`` is ``path``, ``CaseError`` when a parent cannot be rebuilt."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        meta, records = doc["meta"], doc["cases"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"--summarize {path}: not a fault-suite results JSON: {exc}") from None
    if out and Path(out).resolve() == path.resolve():
        raise ValueError(f"--summarize {path} --out {out}: would overwrite the input")
    mode = meta.get("mode", "round")
    if mode == "round":
        rebuilt = rebuild_parents(records, folders)
        if rebuilt:
            print(
                f"NOTE: {len(rebuilt)} record(s) predate parent_middleware; their parent's "
                f"middleware was rebuilt from the case files as they are now: {', '.join(rebuilt)}"
            )
        summary = summarize(records)
        print_report(records, summary, meta)
    else:
        summary = summarize_mode(records, mode)
        print_mode_report(records, summary)
    print(f"summarised from {path}")
    if out:
        dest = Path(out)
        dest.parent.mkdir(parents=True, exist_ok=True)
        meta = {**meta, "summarized_from": str(path)}
        payload = {"meta": meta, "summary": summary, "cases": records}
        dest.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        print(f"results: {dest}")
    return 1 if summary["errors"] else 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--cases", action="append", help="case folder or file (repeatable)")
    ap.add_argument("--quick", action="store_true", help="a stratified third of the cases")
    ap.add_argument("--jobs", type=int, default=2, help="cases in parallel processes")
    ap.add_argument("--out", help="results JSON (default bench/results/faults-<date>.json)")
    ap.add_argument("--store", help="execution cache folder (default: a temporary one)")
    ap.add_argument(
        "--sizes",
        type=parse_sizes,
        help="TARGET/HELD_OUT/PRESERVATION tasks for every case with a builder spec "
        "(e.g. 24/12/12; default: each case's own sizes)",
    )
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument(
        "--validity-only",
        action="store_true",
        help="only base vs faulted (no TRACE round): which faults the world reacts to",
    )
    mode.add_argument(
        "--certify",
        action="store_true",
        help=f"the clean-case oracle on the clean cases ({ORACLE_SEEDS} seeds, every "
        "one-step candidate through the gate)",
    )
    ap.add_argument(
        "--summarize",
        metavar="FILE",
        help="re-summarise a results JSON without running anything: print its table and "
        "summary (recomputed with this code); writes a JSON only with --out (never FILE)",
    )
    a = ap.parse_args(argv)
    if a.summarize:
        used = [
            o
            for o, v in (
                ("--quick", a.quick),
                ("--sizes", a.sizes),
                ("--store", a.store),
                ("--validity-only", a.validity_only),
                ("--certify", a.certify),
            )
            if v
        ]
        if used:
            ap.error(f"--summarize runs nothing: drop {', '.join(used)}")
        return summarize_file(Path(a.summarize), a.cases or list(SUMMARIZE_CASES), a.out)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    folders = a.cases or [str(Path(__file__).resolve().parent / "cases")]
    paths: list[Path] = []
    records: list[dict[str, Any]] = []
    for f in folders:
        try:
            paths += case_files(f)
        except CaseError as exc:
            records.append({"case": str(f), "file": str(f), "status": "error", "error": str(exc)})
    if a.quick:
        paths = quick_subset(paths)
    run_mode = "validity" if a.validity_only else "certify" if a.certify else "round"
    if a.certify:
        paths = [p for p in paths if stratum(p) == "clean"]
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="faults-store-") as tmp:
        store = a.store or tmp
        records += _run_all(paths, store, a.sizes, run_mode, a.jobs)
    wall = time.perf_counter() - t0
    summary = summarize(records) if run_mode == "round" else summarize_mode(records, run_mode)
    available = all(r.get("profile_available", True) for r in records if r["status"] != "error")
    meta = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d"),
        "cases_folders": folders,
        "quick": a.quick,
        "mode": run_mode,
        "sizes": a.sizes.model_dump() if a.sizes else None,
        "jobs": a.jobs,
        "proposer": "rule",
        "verifier": "sim",
        "profile_available": available,
        "profiles": sorted({r["profile"] for r in records if "profile" in r}),
        "wall_seconds": wall,
        "cpus": os.cpu_count(),
    }
    if run_mode == "round":
        print_report(records, summary, meta)
    else:
        print_mode_report(records, summary)
    print(f"wall {wall:.0f} s for {len(paths)} cases, --jobs {a.jobs}")
    out = Path(a.out) if a.out else ROOT / "bench" / "results" / f"faults-{meta['date']}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp_out = out.with_name(f".{out.name}.tmp")
    tmp_out.write_text(
        json.dumps({"meta": meta, "summary": summary, "cases": records}, indent=2) + "\n",
        encoding="utf-8",
    )
    tmp_out.replace(out)
    print(f"results: {out}")
    return 1 if summary["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
