"""Client adapter of ``evoharness.v1.HarnessRegistry``.

``RegistryClient(target)`` speaks gRPC to the registry service and returns the pydantic
models of ``harness_registry.registry``; a stale promotion raises
``harness_registry.StalePromotion`` (FAILED_PRECONDITION), unknown ids ``NotFound``, bad
input ``InvalidArgument``. Workflows register accepted harnesses with ``put`` and promote
with ``promote``; the runtime service resolves channels with ``resolve``.
"""

from __future__ import annotations

import builtins
import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

import grpc

from evoharness.harness.io import canonical_bytes, loads
from evoharness.harness.schema import Harness
from harness_registry.errors import InvalidArgument, NotFound, RegistryError, StalePromotion
from harness_registry.registry import HistoryEntry, Lineage, Registration
from services.protos import convert
from services.protos.evoharness.v1 import registry_pb2 as pb
from services.protos.evoharness.v1 import registry_pb2_grpc as pb_grpc


def registry_time(text: str, field: str) -> dt.datetime:
    """A registry time from the wire (RFC 3339, ``...Z`` as the server writes it) as a
    timezone-aware UTC datetime. A time without a zone is read as UTC (the registry keeps every
    time in UTC; ``harness_registry.models.UTCDateTime`` attaches the zone the same way).

    Raises ``ValueError`` naming ``field`` when ``text`` is not an ISO 8601 time.
    """
    try:
        t = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"registry {field} {text!r} is not an RFC 3339 time") from None
    return t.replace(tzinfo=dt.UTC) if t.tzinfo is None else t.astimezone(dt.UTC)


def registration_from_msg(m: pb.HarnessVersion) -> Registration:
    """``HarnessVersion`` -> ``Registration``."""
    return Registration(
        registration_id=m.registration_id,
        harness_id=m.harness_id,
        name=m.name,
        blob_key=f"harnesses/{m.harness_id}.json",
        parent_id=m.parent_id or None,
        patch=json.loads(m.patch_json) if m.patch_json else None,
        round_report_ref=m.round_report_ref,
        workflow_id=m.run_id,
        registered_by=m.registered_by,
        note=m.message,
        description=m.description,
        generator_id=m.generator_id,
        generator_capabilities=(
            convert.capabilities_from_proto(m.generator_capabilities, "generator_capabilities")
            if m.HasField("generator_capabilities")
            else None
        ),
        created_at=registry_time(m.created_at, "HarnessVersion.created_at"),
    )


def entry_from_msg(e: pb.ChannelEvent) -> HistoryEntry:
    """``ChannelEvent`` -> ``HistoryEntry``."""
    return HistoryEntry(
        channel=e.channel,
        version=e.version,
        action=e.action,
        from_registration_id=e.previous_registration_id or None,
        registration_id=e.registration_id,
        canary_registration_id=e.canary_registration_id or None,
        canary_weight=e.canary_weight,
        actor=e.actor,
        reason=e.reason,
        created_at=registry_time(e.at, "ChannelEvent.at"),
    )


@dataclass(frozen=True)
class Resolved:
    """A resolved channel: the registration (and canary) it serves, and its version."""

    channel: str
    registration_id: str
    harness_id: str
    version: int
    canary_registration_id: str | None
    canary_harness_id: str | None
    canary_weight: float
    harness: Harness | None

    def pick(self, u: float) -> str:
        """The registration for a request with uniform draw ``u`` in [0, 1)."""
        if self.canary_registration_id and u < self.canary_weight:
            return self.canary_registration_id
        return self.registration_id


class RegistryClient:
    """gRPC client of the registry. ``target``: ``host:port``; ``token``: bearer token when
    the server requires one; ``tls_ca_file``: CA of the server certificate (enables TLS);
    ``timeout``: seconds per call. Thread-safe."""

    def __init__(
        self,
        target: str,
        *,
        token: str = "",
        timeout: float = 10.0,
        tls_ca_file: str | None = None,
        channel: grpc.Channel | None = None,
    ) -> None:
        from services.common.channel import open_channel

        self.target = target
        self.channel = channel or open_channel(target, token=token or None, tls_ca_file=tls_ca_file)
        self.stub = pb_grpc.HarnessRegistryStub(self.channel)
        self.timeout = timeout
        self._metadata = None  # the token rides on the channel (services.common.channel)

    def close(self) -> None:
        """Close the channel."""
        self.channel.close()

    def __enter__(self) -> RegistryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: Any, request: Any) -> Any:
        try:
            return method(request, timeout=self.timeout, metadata=self._metadata)
        except grpc.RpcError as exc:
            code, details = exc.code(), exc.details() or ""
            if code is grpc.StatusCode.FAILED_PRECONDITION:
                raise StalePromotion(details, None, -1) from None
            if code is grpc.StatusCode.NOT_FOUND:
                raise NotFound(details) from None
            if code is grpc.StatusCode.INVALID_ARGUMENT:
                raise InvalidArgument(details) from None
            raise RegistryError(f"registry {code.name}: {details}") from exc

    def put(
        self,
        harness: Harness,
        lineage: Lineage | None = None,
        *,
        report: dict[str, Any] | None = None,
    ) -> tuple[str, str, bool]:
        """Register ``harness`` with its ``lineage`` (``harness_registry.Lineage``: parent,
        patch, report reference, run, who, note, the generator deployment it was validated on
        — the runtime service flags serving it to less — and the registration's own name and
        description; None: none); returns ``(registration_id, harness_id, created)``.
        ``report`` (JSON) is stored content-addressed and referenced instead of
        ``lineage.round_report_ref``."""
        lin = lineage or Lineage()
        caps = lin.generator_capabilities
        r = self._call(
            self.stub.Put,
            pb.PutRequest(
                **convert.lineage_to_proto_fields(lin),
                generator_capabilities=(
                    convert.capabilities_to_proto(caps) if caps is not None else None
                ),
                harness_json=canonical_bytes(harness).decode("utf-8"),
                report_json=json.dumps(report) if report is not None else "",
            ),
        )
        return r.registration_id, r.harness_id, r.created

    def get(self, ref: str) -> tuple[Registration, Harness]:
        """A registration (by registration id, or the newest of a harness id) and its
        document."""
        m = self._call(self.stub.Get, pb.GetRequest(harness_id=ref))
        return registration_from_msg(m), loads(m.harness_json, source=f"registry:{ref}")

    def list(
        self,
        *,
        workflow_id: str = "",
        harness_id: str = "",
        parent_id: str = "",
        page_size: int = 100,
    ) -> builtins.list[Registration]:
        """Every matching registration, newest first (follows page tokens)."""
        out: list[Registration] = []
        token = ""
        while True:
            r = self._call(
                self.stub.List,
                pb.ListRequest(
                    page_size=page_size,
                    page_token=token,
                    run_id=workflow_id,
                    harness_id=harness_id,
                    parent_id=parent_id,
                ),
            )
            out.extend(registration_from_msg(v) for v in r.versions)
            token = r.next_page_token
            if not token:
                return out

    def history(self, channel: str) -> builtins.list[HistoryEntry]:
        """Every move of ``channel``, newest first."""
        r = self._call(self.stub.History, pb.HistoryRequest(channel=channel))
        return [entry_from_msg(e) for e in r.events]

    def lineage(self, ref: str) -> builtins.list[Registration]:
        """A registration and its ancestors, newest first."""
        r = self._call(self.stub.History, pb.HistoryRequest(registration_id=ref))
        return [registration_from_msg(v) for v in r.lineage]

    def diff(self, a: str, b: str) -> builtins.list[dict[str, Any]]:
        """RFC 6902 ops from ``a`` to ``b`` (registration or harness ids)."""
        r = self._call(self.stub.Diff, pb.DiffRequest(from_harness_id=a, to_harness_id=b))
        ops: list[dict[str, Any]] = json.loads(r.ops_json)
        return ops

    def promote(
        self,
        channel: str,
        registration_id: str,
        *,
        expected: str | None,
        expected_version: int = 0,
        canary_registration_id: str = "",
        canary_weight: float = 0.0,
        actor: str = "",
        reason: str = "",
    ) -> HistoryEntry:
        """Compare-and-set ``channel`` to ``registration_id`` (see ``Registry.promote``);
        returns the recorded move. Raises ``StalePromotion`` when ``expected`` is stale."""
        r = self._call(
            self.stub.Promote,
            pb.PromoteRequest(
                channel=channel,
                registration_id=registration_id,
                expected_current_id=expected or "",
                expected_version=expected_version,
                canary_registration_id=canary_registration_id,
                canary_weight=canary_weight,
                actor=actor,
                reason=reason,
            ),
        )
        return entry_from_msg(r.event)

    def rollback(
        self, channel: str, *, expected: str, actor: str = "", reason: str = ""
    ) -> HistoryEntry:
        """Promote the registration served before the current one."""
        r = self._call(
            self.stub.Promote,
            pb.PromoteRequest(
                channel=channel,
                expected_current_id=expected,
                rollback=True,
                actor=actor,
                reason=reason,
            ),
        )
        return entry_from_msg(r.event)

    def resolve(self, channel: str, *, with_document: bool = True) -> Resolved:
        """What ``channel`` serves now (with the primary's document unless
        ``with_document=False``)."""
        r = self._call(
            self.stub.Resolve, pb.ResolveRequest(channel=channel, omit_document=not with_document)
        )
        return Resolved(
            channel=channel,
            registration_id=r.registration_id,
            harness_id=r.harness_id,
            version=r.version,
            canary_registration_id=r.canary_registration_id or None,
            canary_harness_id=r.canary_harness_id or None,
            canary_weight=r.canary_weight,
            harness=loads(r.harness_json, source=f"channel {channel}") if r.harness_json else None,
        )
