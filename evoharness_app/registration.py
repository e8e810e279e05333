"""The registration the main job promotes: the run's best harness in the registry, with its
real lineage (issue 27 item 2).

The stack's worker registers every harness that joins the frontier in the registry as it
joins, each with its real parent (``services.registry.registrar.RegistryResultRegistrar``,
chosen by ``workflows.worker.registrar_from_env`` from ``EVOHARNESS_WORKER__REGISTRY_ADDRESS``,
which ``services.stack`` sets); ``EvolutionResult.registrations`` maps each harness id to
that registration. The main job promotes the worker's registration of the best harness.
Only when the worker did not register it in this registry (a worker with another
registrar, e.g. ``S3ResultRegistrar``, whose references are S3 keys) does the main job
register it here, and then each unregistered ancestor first, oldest first, so that every
registration's parent is the registration of the harness it was gated against, down to
the baseline's — never the baseline as a shortcut.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from evoharness.harness import Harness, harness_id
from evoharness.harness.io import HarnessError, from_document, loads


class LineageError(RuntimeError):
    """The best harness's lineage cannot be registered: a harness of it has no known
    parent or document (the message names which)."""


@dataclass(frozen=True)
class BestRegistration:
    """The registration of the run's best harness: ``registration_id``; ``by_worker``: the
    worker registered it (else the main job did, ``registered`` lists the harness ids it
    registered, oldest first)."""

    registration_id: str
    by_worker: bool
    registered: tuple[str, ...] = ()


def parents_of(result: Any, reports: Sequence[Any] = ()) -> dict[str, tuple[str, int]]:
    """Harness id → (the parent it was gated against, the round that accepted it), for every
    candidate that passed its gate (after Holm's correction) in the round reports
    ``reports`` — every such child joins the frontier, the round's decision or not — every
    accepted step of the run's decisions (``evoharness_app.summary.accepted_steps``) and
    every entry of its final frontier (``result.frontier``)."""
    from evoharness_app.summary import accepted_steps

    out: dict[str, tuple[str, int]] = {}
    for rep in reports:
        for c in rep.candidates:
            if c.gate is not None and c.gate.accepted and rep.parent_harness_id:
                out[c.harness_id] = (rep.parent_harness_id, rep.round)
    for d in accepted_steps(list(result.decisions)):
        if d.get("harness_id") and d.get("parent_harness_id"):
            out[d["harness_id"]] = (d["parent_harness_id"], int(d.get("round") or 0))
    for e in getattr(result, "frontier", None) or []:
        if e.round > 0 and e.parent_harness_id:
            out[e.harness_id] = (e.parent_harness_id, e.round)
    return out


def worker_registration(registry: Any, result: Any, hid: str) -> str | None:
    """The registration the run's worker made of harness ``hid`` in ``registry``
    (``result.registrations[hid]``, when it names a registration of ``hid`` by workflow
    ``result.run_id`` there), else None (not registered, or registered elsewhere)."""
    ref = (getattr(result, "registrations", None) or {}).get(hid)
    if not ref:
        return None
    regs = registry.list(harness_id=hid, workflow_id=result.run_id)
    return ref if any(r.registration_id == ref for r in regs) else None


def register_best(
    registry: Any,
    result: Any,
    baseline: Harness,
    baseline_registration: str,
    *,
    reports: Sequence[Any] = (),
    store: Any = None,
    put: Callable[..., str] | None = None,
) -> BestRegistration:
    """The registration of ``result.best_harness`` in ``registry`` (a ``RegistryClient``):
    the baseline's (``baseline_registration``) when evolution kept the baseline, the
    worker's (``worker_registration``) when it made one, else one registered here. Here,
    each ancestor the worker did not register is registered first, oldest first, each with
    its parent's registration (parents from ``parents_of`` over the run's round reports
    ``reports``; documents from the final frontier, else ``harnesses/<id>.json`` in
    ``store``, where ``S3ResultRegistrar`` keeps them, else the candidate's patch in its
    round report applied to its parent). ``put(harness, parent_id=..., round_=...)``
    registers one harness and returns its registration id (the main job names it,
    describes it and records the generator).

    Raises ``LineageError`` naming the harness whose parent or document is not known."""
    base_id = harness_id(baseline)
    best_id = result.best_harness_id
    if best_id == base_id:
        return BestRegistration(baseline_registration, by_worker=False)
    rid = worker_registration(registry, result, best_id)
    if rid is not None:
        return BestRegistration(rid, by_worker=True)
    if put is None:
        raise LineageError(
            f"harness {best_id[:12]} (best of run {result.run_id}) is not registered by the "
            "worker and no registration function was given"
        )
    parents = parents_of(result, reports)
    # the chain best → … → baseline, stopping at the first ancestor the worker registered
    chain: list[str] = []
    cur = best_id
    parent_reg = baseline_registration
    parent_doc: Harness = baseline
    while cur != base_id:
        if cur in chain:
            raise LineageError(f"harness {cur[:12]}: its lineage loops")
        known = worker_registration(registry, result, cur) if cur != best_id else None
        if known is not None:
            parent_reg, parent_doc = known, registry.get(known)[1]
            break
        if cur not in parents:
            raise LineageError(
                f"harness {cur[:12]} of run {result.run_id}: its parent is in neither the "
                "round reports, the decisions nor the final frontier"
            )
        chain.append(cur)
        cur = parents[cur][0]
    docs: dict[str, Harness] = {best_id: result.best_harness}
    for e in getattr(result, "frontier", None) or []:
        docs.setdefault(e.harness_id, from_document(e.document))
    registered: list[str] = []
    for hid in reversed(chain):
        doc = docs.get(hid) or _stored(store, hid) or _patched(reports, parent_doc, hid)
        if doc is None:
            raise LineageError(
                f"harness {hid[:12]} of run {result.run_id}: its document is neither in the "
                f"final frontier, at harnesses/{hid}.json, nor derivable from its round report"
            )
        parent_reg = put(doc, parent_id=parent_reg, round_=parents[hid][1])
        parent_doc = doc
        registered.append(hid)
    return BestRegistration(parent_reg, by_worker=False, registered=tuple(registered))


def _patched(reports: Sequence[Any], parent: Harness, hid: str) -> Harness | None:
    """Harness ``hid`` as its candidate's patch (in ``reports``) applied to ``parent``, or
    None when no candidate of ``parent``'s rounds has that harness id and a patch."""
    from evoharness.harness.patch import PatchError, apply_patch

    pid = harness_id(parent)
    for rep in reports:
        if rep.parent_harness_id != pid:
            continue
        for c in rep.candidates:
            if c.harness_id == hid and c.patch is not None:
                try:
                    doc = apply_patch(parent, c.patch)
                except PatchError:
                    return None
                return doc if harness_id(doc) == hid else None
    return None


def _stored(store: Any, hid: str) -> Harness | None:
    """The document at ``harnesses/<hid>.json`` in ``store``, or None."""
    key = f"harnesses/{hid}.json"
    if store is None or not store.exists(key):
        return None
    try:
        doc = loads(store.get(key), source=key)
    except HarnessError:
        return None
    return doc if harness_id(doc) == hid else None
