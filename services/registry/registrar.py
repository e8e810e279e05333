"""``RegistryResultRegistrar``: the workflows' "register result" port over the registry
service (replaces ``workflows.registrar.S3ResultRegistrar`` when a registry is configured).

``register(req)`` (``workflows.params.RegisterRequest``):

1. finds the parent registration: the newest registration of ``req.parent_harness_id``;
   when that content was never registered (the run's starting harness), registers
   ``req.parent_harness`` (filled by the activity) as ``workflow:<run_id>/start``;
2. takes the accepted candidate's patch (``req.patch``), else derives it from the parent
   document when exactly one responsibility changed (``patches_from_diff``), and a note
   describing the change;
3. registers the harness with lineage (parent, patch, ``report_key`` as the round report
   ref, ``run_id`` as the workflow id, ``registered_by = workflow:<run_id>/round-<n>``) and a
   name and description of its own (``evolved_name``, ``evolved_description``: the start's
   name, the run and the round; what the accepted patch changed): a retried activity
   registers nothing twice (identical lineage is a no-op);
4. when ``req.channel`` is set (promotion after approval), promotes the registration this
   run already made of the harness (or a new one) with compare-and-set against what the
   channel serves at that moment.

Returns the registration id. Registry errors surface as ``harness_registry`` exceptions
(the activity's retry policy retries transient ones).
"""

from __future__ import annotations

import os
from typing import Any

from evoharness.harness.patch import patches_from_diff
from harness_registry.errors import NotFound
from harness_registry.registry import Lineage
from services.registry.client import RegistryClient

#: Environment variable naming the registry service (``host:port``) for workers and the CLI.
TARGET_ENV = "EVOHARNESS_REGISTRY_TARGET"
#: Longest registration name the registry stores (``registrations.name``, migration 0003).
NAME_MAX = 200


def evolved_name(start_name: str, run_id: str, round_: int, branch: str = "") -> str:
    """The name of a harness evolved from ``start_name`` by run ``run_id`` in round
    ``round_``: ``<start>+<run>.r<round>`` (e.g. ``baseline+myrun.r1``), followed by
    ``.<branch>`` when given (``branch_label``: the beam parent and the candidate, e.g.
    ``baseline+myrun.r2.b1.c3``, unique within a run: a round expands up to B parents and
    admits several children of each), the start's name shortened so the whole fits
    ``NAME_MAX`` characters."""
    suffix = f"+{run_id}.r{round_}" + (f".{branch}" if branch else "")
    return (start_name or "harness")[: max(1, NAME_MAX - len(suffix))] + suffix


def branch_label(beam_index: int, candidate_id: str) -> str:
    """``b<beam index>.<candidate>`` (``candidate_id`` ``r2-c3`` → ``c3``; the round is in the
    name already): which beam parent's round admitted the harness and as which candidate;
    "" when neither is known (requests of older runs, before the beam)."""
    if not candidate_id:
        return f"b{beam_index}" if beam_index else ""
    return f"b{beam_index}.{candidate_id.rsplit('-', 1)[-1]}"


def evolved_description(run_id: str, round_: int, patch: dict[str, Any] | None) -> str:
    """What an evolved registration is: the run and round that accepted it and, when known,
    the accepted patch's responsibility and rationale (or expected effect)."""
    text = f"Evolved by run {run_id}, round {round_}"
    if not patch:
        return text + "."
    what = patch.get("rationale") or patch.get("expected_effect") or ""
    text += f": accepted a {patch.get('responsibility', 'harness')} patch"
    return text + (f" ({what})." if what else ".")


class RegistryResultRegistrar:
    """Registers accepted harnesses (and approved promotions) in the registry service."""

    def __init__(self, client: RegistryClient) -> None:
        self.client = client

    def register(self, req: Any) -> str:
        """Register ``req.harness`` with its lineage; promote when ``req.channel``."""
        from evoharness.harness.io import harness_id

        rid = self._existing(req) if req.channel else None
        if rid is None:
            rid = self._put(req)
        if req.channel:
            try:
                current: str | None = self.client.resolve(
                    req.channel, with_document=False
                ).registration_id
            except NotFound:
                current = None
            if current != rid:
                self.client.promote(
                    req.channel,
                    rid,
                    expected=current,
                    actor=f"workflow:{req.run_id}",
                    reason=f"approved after round {req.round} of {req.run_id} "
                    f"({harness_id(req.harness)[:12]})",
                )
        return rid

    def _existing(self, req: Any) -> str | None:
        """The registration this run already made of ``req.harness`` (a promotion after
        approval reuses it, keeping its lineage), or None."""
        from evoharness.harness.io import harness_id

        regs = self.client.list(harness_id=harness_id(req.harness), workflow_id=req.run_id)
        return regs[0].registration_id if regs else None

    def _parent(self, req: Any) -> str | None:
        """The parent registration: the one this run made of ``req.parent_harness_id`` (the
        workflow registers every frontier entry as it joins, so a beam parent is registered
        before its children), else the newest of that content; when that content was never
        registered (the run's starting harness) and the request carries its document, it is
        registered now (``workflow:<run_id>/start``) so the chain is whole. The same request
        finds the same parent on every attempt (a retried activity registers nothing twice)."""
        if not req.parent_harness_id:
            return None
        regs = self.client.list(harness_id=req.parent_harness_id, workflow_id=req.run_id)
        regs = regs or self.client.list(harness_id=req.parent_harness_id, page_size=1)
        if regs:
            return str(regs[0].registration_id)
        if getattr(req, "parent_harness", None) is None:
            return None
        pid, _, _ = self.client.put(
            req.parent_harness,
            Lineage(
                workflow_id=req.run_id,
                registered_by=f"workflow:{req.run_id}/start",
                note=f"starting harness of run {req.run_id}",
            ),
        )
        return pid

    def _put(self, req: Any) -> str:
        parent_id = self._parent(req)
        patch: dict[str, Any] | None = getattr(req, "patch", None)
        if patch is None and parent_id is not None:
            _, parent_doc = self.client.get(parent_id)
            patches = patches_from_diff(parent_doc, req.harness)
            if len(patches) == 1:
                patch = patches[0].model_dump(mode="json")
        note = getattr(req, "note", "") or (
            f"evolved by run {req.run_id}, round {req.round}"
            + (f": {patch.get('responsibility')} patch" if patch else "")
        )
        lineage = Lineage(
            parent_id=parent_id,
            patch=patch,
            round_report_ref=req.report_key,
            workflow_id=req.run_id,
            registered_by=f"workflow:{req.run_id}/round-{req.round}",
            note=note,
            name=evolved_name(
                req.harness.name,
                req.run_id,
                req.round,
                branch_label(getattr(req, "beam_index", 0), getattr(req, "candidate_id", "")),
            ),
            description=evolved_description(req.run_id, req.round, patch),
            # the generator it was validated on: the runtime flags serving it to less
            generator_id=getattr(req, "generator_id", "") or "",
            generator_capabilities=_capabilities(getattr(req, "generator_capabilities", None)),
        )
        rid, _, _ = self.client.put(req.harness, lineage)
        return str(rid)


def _capabilities(doc: dict[str, Any] | None) -> Any:
    """``GeneratorCapabilities`` of a request's JSON form, or None."""
    if not doc:
        return None
    from evoharness.capabilities import GeneratorCapabilities

    return GeneratorCapabilities.model_validate(doc)


def registrar_from_env(
    token: str | None = None, tls_ca_file: str | None = None
) -> RegistryResultRegistrar | None:
    """A registrar on ``$EVOHARNESS_REGISTRY_TARGET`` (else the worker's
    ``$EVOHARNESS_WORKER__REGISTRY_ADDRESS``, as ``evoharness up`` sets it), or None when
    neither is set. ``token``: the bearer token to send (default ``$EVOHARNESS_TOKEN``);
    ``tls_ca_file``: CA of the registry's certificate (TLS; default plaintext)."""
    target = os.environ.get(TARGET_ENV, "") or os.environ.get(
        "EVOHARNESS_WORKER__REGISTRY_ADDRESS", ""
    )
    if not target:
        return None
    return RegistryResultRegistrar(
        RegistryClient(
            target,
            token=token or os.environ.get("EVOHARNESS_TOKEN", ""),
            tls_ca_file=tls_ca_file,
        )
    )
