"""``evoharness.v1.HarnessRegistry`` over ``harness_registry.Registry``.

Status codes: a stale promotion is FAILED_PRECONDITION (nothing written); unknown ids and
channels are NOT_FOUND; bad JSON or fields are INVALID_ARGUMENT naming the field; a database
that cannot be reached is UNAVAILABLE (nothing written; retry). Every
promotion outcome is counted in ``evoharness_promotions{channel, outcome}``.

Run: ``evoharness serve registry --config configs/registry.yaml``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import grpc
import jsonpatch

from evoharness.canonical import canonical_json, sha256_hex
from evoharness.harness.io import HarnessError, canonical_bytes, loads
from harness_registry import errors as rerr
from harness_registry.registry import (
    ChannelMove,
    ChannelState,
    HistoryEntry,
    Lineage,
    Registration,
    Registry,
)
from services.common import metrics
from services.common.errors import FailedPrecondition, InvalidField, NotFound, Unavailable
from services.common.server import RunningServer, ServiceRegistration, build_server
from services.protos import convert
from services.protos.evoharness.v1 import registry_pb2 as pb
from services.protos.evoharness.v1 import registry_pb2_grpc as pb_grpc
from services.registry.settings import PostPromotionSection, RegistrySettings

log = logging.getLogger("evoharness.registry")

SERVICE_NAME = "evoharness.v1.HarnessRegistry"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
T = TypeVar("T")


def _translate(fn: Callable[[], T]) -> T:
    """Run ``fn`` mapping registry errors to the shared server's status exceptions."""
    try:
        return fn()
    except rerr.StalePromotion as exc:
        raise FailedPrecondition(str(exc)) from exc
    except rerr.NotFound as exc:
        raise NotFound(str(exc)) from exc
    except HarnessError as exc:
        raise InvalidField("harness_json", str(exc)) from exc


def _rfc3339(dt: Any) -> str:
    return dt.isoformat().replace("+00:00", "Z") if dt is not None else ""


def _json_field(text: str, field: str) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidField(field, f"invalid JSON: {exc}") from None


def version_msg(reg: Registration, harness_json: str = "") -> pb.HarnessVersion:
    """A ``HarnessVersion`` message for a registration (with the generator it was validated
    on when recorded)."""
    msg = pb.HarnessVersion(
        **convert.lineage_to_proto_fields(reg),
        harness_id=reg.harness_id,
        harness_json=harness_json,
        created_at=_rfc3339(reg.created_at),
        registration_id=reg.registration_id,
    )
    if reg.generator_capabilities is not None:
        msg.generator_capabilities.CopyFrom(
            convert.capabilities_to_proto(reg.generator_capabilities)
        )
    return msg


def event_msg(e: HistoryEntry, harness_of: Callable[[str | None], str]) -> pb.ChannelEvent:
    """A ``ChannelEvent`` message for a history entry."""
    return pb.ChannelEvent(
        channel=e.channel,
        harness_id=harness_of(e.registration_id),
        previous_harness_id=harness_of(e.from_registration_id),
        registration_id=e.registration_id,
        at=_rfc3339(e.created_at),
        reason=e.reason,
        actor=e.actor,
        version=e.version,
        previous_registration_id=e.from_registration_id or "",
        canary_registration_id=e.canary_registration_id or "",
        canary_weight=e.canary_weight,
        action=e.action,
    )


class PostPromotionTrigger:
    """Starts ``PostPromotionWorkflow`` for a channel move, in a background thread (a failure
    to start is logged and never fails the promotion). ``threads`` keeps the started threads
    (tests join them)."""

    def __init__(self, registry: Registry, cfg: PostPromotionSection) -> None:
        self.registry = registry
        self.cfg = cfg
        self.threads: list[threading.Thread] = []

    def __call__(self, entry: HistoryEntry) -> None:
        t = threading.Thread(target=self._start, args=(entry,), daemon=True)
        self.threads.append(t)
        t.start()

    def _start(self, entry: HistoryEntry) -> None:
        try:
            asyncio.run(self._start_async(entry))
        except Exception:  # noqa: BLE001 - logged; the promotion itself succeeded
            log.exception(
                "post-promotion check for %s v%d not started", entry.channel, entry.version
            )

    async def _start_async(self, entry: HistoryEntry) -> None:
        from temporalio.client import Client
        from temporalio.contrib.pydantic import pydantic_data_converter

        from services.registry.postpromotion import start_by_name

        prev = entry.from_registration_id
        previous = self.registry.get_harness(prev) if prev else None
        payload = {
            "channel": entry.channel,
            "registration_id": entry.registration_id,
            "version": entry.version,
            "harness": self.registry.get_harness(entry.registration_id).model_dump(mode="json"),
            "previous_registration_id": prev,
            "previous": previous.model_dump(mode="json") if previous else None,
            "preservation": {"uri": self.cfg.preservation_uri},
            "seeds": list(self.cfg.seeds),
            "backends": {"generator": self.cfg.generator, "verifier": self.cfg.verifier},
        }
        client = await Client.connect(
            self.cfg.temporal_address,
            namespace=self.cfg.namespace,
            data_converter=pydantic_data_converter,
        )
        await start_by_name(client, payload, self.cfg.task_queue)
        log.info("post-promotion check started for %s v%d", entry.channel, entry.version)


class HarnessRegistryServicer(pb_grpc.HarnessRegistryServicer):
    """The gRPC servicer. ``registry`` does the work; this class maps messages.
    ``on_promoted`` (optional) is called with every recorded move (e.g.
    ``PostPromotionTrigger``)."""

    def __init__(
        self, registry: Registry, on_promoted: Callable[[HistoryEntry], None] | None = None
    ) -> None:
        self.registry = registry
        self.on_promoted = on_promoted

    # helpers ---------------------------------------------------------------------
    def _harness_of(self, registration_id: str | None) -> str:
        if not registration_id:
            return ""
        return self.registry.get(registration_id).harness_id

    def _registration(self, ref: str, field: str) -> Registration:
        """A registration by registration id, or the newest registration of a harness id."""
        if not ref:
            raise InvalidField(field, "is empty")
        if _HEX64.match(ref):
            regs = self.registry.list(harness_id=ref, limit=1)
            if not regs:
                raise NotFound(f"{field}: no registration of harness {ref}")
            return regs[0]
        return _translate(lambda: self.registry.get(ref))

    def _doc(self, reg: Registration) -> str:
        h = _translate(lambda: self.registry.get_harness(reg.registration_id))
        return canonical_bytes(h).decode("utf-8")

    # RPCs --------------------------------------------------------------------------
    def Put(self, request: pb.PutRequest, context: grpc.ServicerContext) -> pb.PutResponse:
        if not request.harness_json:
            raise InvalidField("harness_json", "is empty")
        try:
            harness = loads(request.harness_json, source="harness_json")
        except HarnessError as exc:
            raise InvalidField("harness_json", str(exc)) from None
        report_ref = request.round_report_ref
        if request.report_json:
            report = _json_field(request.report_json, "report_json")
            data = canonical_json(report)
            report_ref = f"reports/{sha256_hex(data)}.json"
            self.registry.store.put(report_ref, data, "application/json")
        patch = _json_field(request.patch_json, "patch_json")
        lineage = Lineage(
            parent_id=request.parent_id or None,
            patch=patch,
            round_report_ref=report_ref,
            workflow_id=request.run_id,
            registered_by=request.registered_by,
            note=request.message,
            name=request.name,
            description=request.description,
            generator_id=request.generator_id,
            generator_capabilities=(
                convert.capabilities_from_proto(
                    request.generator_capabilities, "generator_capabilities"
                )
                if request.HasField("generator_capabilities")
                else None
            ),
        )
        res = _translate(lambda: self.registry.put(harness, lineage))
        return pb.PutResponse(
            harness_id=res.registration.harness_id,
            created=res.created,
            registration_id=res.registration.registration_id,
        )

    def Get(self, request: pb.GetRequest, context: grpc.ServicerContext) -> pb.HarnessVersion:
        ref = request.registration_id or request.harness_id
        reg = self._registration(
            ref, "registration_id" if request.registration_id else "harness_id"
        )
        return version_msg(reg, self._doc(reg))

    def List(self, request: pb.ListRequest, context: grpc.ServicerContext) -> pb.ListResponse:
        size = request.page_size or 100
        if size < 0 or size > 1000:
            raise InvalidField("page_size", f"{size} is outside 1..1000")
        try:
            offset = int(request.page_token or "0")
        except ValueError:
            raise InvalidField("page_token", f"{request.page_token!r} is not a token") from None
        regs = self.registry.list(
            harness_id=request.harness_id or None,
            parent_id=request.parent_id or None,
            workflow_id=request.run_id or None,
            limit=size + 1,
            offset=offset,
        )
        more = len(regs) > size
        return pb.ListResponse(
            versions=[version_msg(r) for r in regs[:size]],
            next_page_token=str(offset + size) if more else "",
        )

    def History(
        self, request: pb.HistoryRequest, context: grpc.ServicerContext
    ) -> pb.HistoryResponse:
        if request.channel:
            entries = _translate(lambda: self.registry.history(request.channel))
            cache: dict[str | None, str] = {}

            def harness_of(rid: str | None) -> str:
                if rid not in cache:
                    cache[rid] = self._harness_of(rid)
                return cache[rid]

            return pb.HistoryResponse(events=[event_msg(e, harness_of) for e in entries])
        ref = request.registration_id or request.harness_id
        reg: Registration | None = self._registration(ref, "registration_id")
        lineage = []
        seen: set[str] = set()
        while reg is not None and reg.registration_id not in seen:
            seen.add(reg.registration_id)
            lineage.append(version_msg(reg))
            parent = reg.parent_id
            reg = _translate(partial(self.registry.get, parent)) if parent else None
        return pb.HistoryResponse(lineage=lineage)

    def Diff(self, request: pb.DiffRequest, context: grpc.ServicerContext) -> pb.DiffResponse:
        a = self._registration(request.from_harness_id, "from_harness_id")
        b = self._registration(request.to_harness_id, "to_harness_id")
        ha = _translate(lambda: self.registry.get_harness(a.registration_id))
        hb = _translate(lambda: self.registry.get_harness(b.registration_id))
        ops = jsonpatch.make_patch(ha.to_document(), hb.to_document()).patch
        return pb.DiffResponse(ops_json=json.dumps(ops))

    def Promote(
        self, request: pb.PromoteRequest, context: grpc.ServicerContext
    ) -> pb.PromoteResponse:
        channel = request.channel
        outcome = "error"
        try:
            if request.rollback:
                state = _translate(
                    lambda: self.registry.rollback(
                        channel,
                        expected_registration_id=self._expected(channel, request),
                        actor=request.actor,
                        reason=request.reason,
                    )
                )
            else:
                target = self._registration(
                    request.registration_id or request.harness_id,
                    "registration_id" if request.registration_id else "harness_id",
                )
                canary = (
                    self._registration(request.canary_registration_id, "canary_registration_id")
                    if request.canary_registration_id
                    else None
                )
                state = _translate(
                    lambda: self.registry.promote(
                        channel,
                        target.registration_id,
                        expected_registration_id=self._expected(channel, request),
                        expected_version=request.expected_version or None,
                        canary_registration_id=canary.registration_id if canary else None,
                        canary_weight=request.canary_weight,
                        move=ChannelMove(actor=request.actor, reason=request.reason),
                    )
                )
            outcome = "promoted"
        except FailedPrecondition:
            outcome = "stale"
            raise
        except (InvalidField, ValueError):
            outcome = "invalid"
            raise
        finally:
            if re.match(r"^[a-z0-9][a-z0-9._\-]{0,63}$", channel or ""):
                metrics.PROMOTIONS.labels(channel, outcome).inc()
        entry = self.registry.history(channel, limit=1)[0]
        if entry.version != state.version:  # a later move already happened; report ours
            entry = next(e for e in self.registry.history(channel) if e.version == state.version)
        if self.on_promoted is not None:
            self.on_promoted(entry)
        return pb.PromoteResponse(event=event_msg(entry, self._harness_of))

    def _expected(self, channel: str, request: pb.PromoteRequest) -> str | None:
        """The expected registration id: a harness id is mapped to the channel's current
        registration when that registration has this content (else stale)."""
        exp = request.expected_current_id
        if not exp:
            return None
        if _HEX64.match(exp):
            try:
                cur = self.registry.resolve(channel)
            except rerr.NotFound:
                return exp  # cannot match: the promotion reports it stale
            if self._harness_of(cur.registration_id) == exp:
                return cur.registration_id
        return exp

    def Resolve(
        self, request: pb.ResolveRequest, context: grpc.ServicerContext
    ) -> pb.ResolveResponse:
        state: ChannelState = _translate(lambda: self.registry.resolve(request.channel))
        reg = _translate(lambda: self.registry.get(state.registration_id))
        out = pb.ResolveResponse(
            harness_id=reg.harness_id,
            registration_id=reg.registration_id,
            version=state.version,
            canary_registration_id=state.canary_registration_id or "",
            canary_harness_id=self._harness_of(state.canary_registration_id),
            canary_weight=state.canary_weight,
            updated_at=_rfc3339(state.updated_at),
        )
        if not request.omit_document:
            out.harness_json = self._doc(reg)
        return out


def _database_errors_unavailable(fn: Callable[..., T]) -> Callable[..., T]:
    """Wrap an RPC method so a database that cannot be reached (SQLAlchemy
    ``OperationalError``/``InterfaceError``, or a connection invalidated mid-call) answers
    UNAVAILABLE naming the database and the driver's reason, instead of INTERNAL: callers
    (the workflows' registrar, the CLI) then retry. The transaction was rolled back by
    SQLAlchemy, so nothing was written (found by tests/chaos: a promotion while the
    database was away)."""
    import functools

    import sqlalchemy.exc

    @functools.wraps(fn)
    def wrapper(self: Any, request: Any, context: grpc.ServicerContext) -> T:
        try:
            return fn(self, request, context)
        except sqlalchemy.exc.DBAPIError as exc:
            lost = isinstance(
                exc, sqlalchemy.exc.OperationalError | sqlalchemy.exc.InterfaceError
            ) or bool(exc.connection_invalidated)
            if not lost:
                raise
            reason = (str(exc.orig or exc).strip().splitlines() or [type(exc).__name__])[0]
            raise Unavailable(
                f"the registry database is unreachable ({type(exc.orig or exc).__name__}: "
                f"{reason}); nothing was written, retry later"
            ) from exc

    return wrapper


for _rpc in [n for n in vars(pb_grpc.HarnessRegistryServicer) if n[:1].isupper()]:
    setattr(
        HarnessRegistryServicer,
        _rpc,
        _database_errors_unavailable(getattr(HarnessRegistryServicer, _rpc)),
    )


def build_registry(settings: RegistrySettings) -> Registry:
    """The ``Registry`` the settings describe (database and blob store)."""
    import sqlalchemy.exc

    from evoharness.local_store import LocalArtifactStore
    from harness_registry.db import DEFAULT_HOME, make_engine, upgrade

    try:
        engine = make_engine(settings.registry.database_url or None)
        if settings.registry.migrate:
            upgrade(engine)
    except sqlalchemy.exc.ArgumentError as exc:
        raise ValueError(f"registry.database_url: {exc}") from None
    except sqlalchemy.exc.OperationalError as exc:
        raw = settings.registry.database_url
        url = sqlalchemy.make_url(raw).render_as_string(hide_password=True) if raw else "(SQLite)"
        reason = str(exc.orig or exc).splitlines()[0]
        raise ConnectionError(f"registry.database_url {url}: cannot connect: {reason}") from None
    store: Any
    if settings.registry.blob_store == "s3":
        from services.storage.s3 import S3ArtifactStore

        store = S3ArtifactStore.from_settings(settings.s3)
        store.ensure_bucket()
    else:
        store = LocalArtifactStore(settings.registry.local_root or DEFAULT_HOME / "blobs")
    return Registry(engine, store)


#: The settings class ``evoharness serve registry`` loads.
Settings = RegistrySettings


def build(settings: RegistrySettings, registry: Registry | None = None) -> RunningServer:
    """Start the registry service (returns at once; ``stop()`` the result)."""
    registry = registry or build_registry(settings)
    pp = settings.registry.postpromotion
    servicer = HarnessRegistryServicer(
        registry, PostPromotionTrigger(registry, pp) if pp.enabled else None
    )
    return build_server(
        settings.server,
        [
            ServiceRegistration(
                servicer, pb_grpc.add_HarnessRegistryServicer_to_server, SERVICE_NAME
            )
        ],
    )


def serve(settings: RegistrySettings) -> None:
    """Run the registry service until SIGTERM/SIGINT (``evoharness serve registry``)."""
    from services.common.server import serve_until_signal

    serve_until_signal(build(settings))


if __name__ == "__main__":  # python -m services.registry.server --config ...
    import sys

    from services.common.main import service_main

    sys.exit(service_main("registry", Settings, serve))
