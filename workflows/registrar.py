"""The "register result" port: where a run's accepted harnesses (and promotions) go.
``ResultRegistrar`` is the port; ``S3ResultRegistrar`` the default (documents and lineage in
the artifact store); ``services.registry.registrar.RegistryResultRegistrar`` the registry
service's. The ``register_result`` activity calls it."""

from __future__ import annotations

from typing import Any, Protocol

from evoharness.canonical import canonical_json
from evoharness.harness.io import harness_id
from workflows.params import RegisterRequest


class ResultRegistrar(Protocol):
    """Where accepted harnesses go. ``register`` returns a reference (registry version id or
    S3 key). ``channel`` set = promote after human approval."""

    def register(self, req: RegisterRequest) -> str: ...


class S3ResultRegistrar:
    """Default registrar: writes ``harnesses/<harness_id>.json`` (canonical JSON) plus a
    lineage record ``runs/<run_id>/registered/<harness_id>.json``; a promotion writes
    ``channels/<channel>.json`` pointing at the harness."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def register(self, req: RegisterRequest) -> str:
        """Store the document and lineage; return the document's key."""
        hid = harness_id(req.harness)
        key = f"harnesses/{hid}.json"
        self.store.put(key, canonical_json(req.harness.to_document()), "application/json")
        lineage = {
            "harness_id": hid,
            "parent_harness_id": req.parent_harness_id,
            "run_id": req.run_id,
            "round": req.round,
            "report_key": req.report_key,
            "patch": req.patch,
            "note": req.note,
        }
        self.store.put(
            f"runs/{req.run_id}/registered/{hid}.json", canonical_json(lineage), "application/json"
        )
        if req.channel:
            self.store.put(
                f"channels/{req.channel}.json",
                canonical_json({**lineage, "channel": req.channel, "key": key}),
                "application/json",
            )
        return key
