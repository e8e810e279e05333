"""``RegistryResultRegistrar``: the workflows' "register result" port over the registry
service (replaces ``workflows.activities.S3ResultRegistrar`` when a registry is configured).

``register(req)`` (``workflows.params.RegisterRequest``):

1. finds the parent registration: the newest registration of ``req.parent_harness_id``;
   when that content was never registered (the run's starting harness), nothing links it
   and the accepted harness is registered without a parent;
2. derives the patch from the parent document when exactly one responsibility changed
   (``evoharness.harness.patch.patches_from_diff``);
3. registers the harness with lineage (parent, patch, ``report_key`` as the round report
   ref, ``run_id`` as the workflow id, ``registered_by = workflow:<run_id>/round-<n>``): a
   retried activity registers nothing twice (identical lineage is a no-op);
4. when ``req.channel`` is set (promotion after approval), promotes the registration with
   compare-and-set against what the channel serves at that moment.

Returns the registration id. Registry errors surface as ``harness_registry`` exceptions
(the activity's retry policy retries transient ones).
"""

from __future__ import annotations

import os
from typing import Any

from evoharness.harness.patch import patches_from_diff
from harness_registry.errors import NotFound
from services.registry.client import RegistryClient

#: Environment variable naming the registry service (``host:port``) for workers and the CLI.
TARGET_ENV = "EVOHARNESS_REGISTRY_TARGET"


class RegistryResultRegistrar:
    """Registers accepted harnesses (and approved promotions) in the registry service."""

    def __init__(self, client: RegistryClient) -> None:
        self.client = client

    def register(self, req: Any) -> str:
        """Register ``req.harness`` with its lineage; promote when ``req.channel``."""
        parent_id: str | None = None
        patch: dict[str, Any] | None = None
        if req.parent_harness_id:
            regs = self.client.list(harness_id=req.parent_harness_id, page_size=1)
            if regs:
                parent_id = regs[0].registration_id
                _, parent_doc = self.client.get(parent_id)
                patches = patches_from_diff(parent_doc, req.harness)
                if len(patches) == 1:
                    patch = patches[0].model_dump(mode="json")
        rid, _, _ = self.client.put(
            req.harness,
            parent_id=parent_id,
            patch=patch,
            round_report_ref=req.report_key,
            workflow_id=req.run_id,
            registered_by=f"workflow:{req.run_id}/round-{req.round}",
        )
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
                    reason=f"approved after round {req.round} of {req.run_id}",
                )
        return rid


def registrar_from_env() -> RegistryResultRegistrar | None:
    """A registrar on ``$EVOHARNESS_REGISTRY_TARGET`` (else the worker's
    ``$EVOHARNESS_WORKER__REGISTRY_ADDRESS``, as ``evoharness up`` sets it; bearer token from
    ``$EVOHARNESS_TOKEN``), or None when neither is set."""
    target = os.environ.get(TARGET_ENV, "") or os.environ.get(
        "EVOHARNESS_WORKER__REGISTRY_ADDRESS", ""
    )
    if not target:
        return None
    return RegistryResultRegistrar(
        RegistryClient(target, token=os.environ.get("EVOHARNESS_TOKEN", ""))
    )
