"""The HarnessRegistry gRPC service over a real channel, with documents in a real S3
(SeaweedFS) and metadata on SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator

import grpc
import pytest

from evoharness.harness.io import harness_id, load_dir
from evoharness.harness.patch import apply_patch
from harness_registry import InvalidArgument, Lineage, NotFound, Registry, StalePromotion
from harness_registry.db import make_engine, upgrade
from services.common.server import ServiceRegistration, build_server
from services.common.settings import ServerSettings
from services.protos.evoharness.v1 import registry_pb2 as pb
from services.protos.evoharness.v1 import registry_pb2_grpc as pb_grpc
from services.registry.client import RegistryClient, registry_time
from services.registry.server import SERVICE_NAME, HarnessRegistryServicer

PATCH = {
    "responsibility": "policy",
    "ops": [{"op": "replace", "path": "/policy/params/guidance_scale", "value": 9.0}],
}


@pytest.fixture
def registry_service(db_url: str, s3_store) -> Iterator[tuple[RegistryClient, Registry]]:  # type: ignore[no-untyped-def]
    engine = make_engine(db_url)
    upgrade(engine)
    reg = Registry(engine, s3_store)
    running = build_server(
        ServerSettings(port=0, metrics_port=-1),
        [
            ServiceRegistration(
                HarnessRegistryServicer(reg),
                pb_grpc.add_HarnessRegistryServicer_to_server,
                SERVICE_NAME,
            )
        ],
    )
    client = RegistryClient(f"127.0.0.1:{running.port}")
    try:
        yield client, reg
    finally:
        client.close()
        running.stop(0)
        engine.dispose()


def test_put_get_list_diff_lineage(registry_service, repo_root) -> None:  # type: ignore[no-untyped-def]
    client, reg = registry_service
    base = load_dir(repo_root / "harnesses" / "baseline")
    rid, hid, created = client.put(base, Lineage(registered_by="test"))
    assert created and hid == harness_id(base)
    assert reg.store.exists(f"harnesses/{hid}.json")  # the document is in S3
    assert client.put(base, Lineage(registered_by="test")) == (rid, hid, False)

    child = apply_patch(base, PATCH)
    report = {"decision": "accept", "delta_target": 0.12}
    cid, chid, created = client.put(
        child,
        Lineage(parent_id=rid, patch=PATCH, workflow_id="wf-1", registered_by="wf"),
        report=report,
    )
    assert created and chid != hid
    got, doc = client.get(cid)
    assert doc == child and got.parent_id == rid and got.workflow_id == "wf-1"
    assert got.patch == PATCH
    assert json.loads(reg.store.get(got.round_report_ref)) == report
    assert [r.registration_id for r in client.lineage(cid)] == [cid, rid]
    assert client.diff(rid, cid) == PATCH["ops"]
    assert client.diff(hid, chid) == PATCH["ops"]  # harness ids work too
    assert [r.registration_id for r in client.list(page_size=1)] == [cid, rid]
    assert [r.registration_id for r in client.list(workflow_id="wf-1")] == [cid]
    # same content, new lineage -> a new registration of the same document
    rid2, hid2, created = client.put(base, Lineage(registered_by="someone else"))
    assert created and hid2 == hid and rid2 != rid


def test_promote_resolve_canary_and_stale(registry_service, repo_root) -> None:  # type: ignore[no-untyped-def]
    client, _ = registry_service
    base = load_dir(repo_root / "harnesses" / "baseline")
    a, ha, _ = client.put(base)
    b, hb, _ = client.put(apply_patch(base, PATCH), Lineage(parent_id=a))
    with pytest.raises(NotFound):
        client.resolve("prod")
    e1 = client.promote("prod", a, expected=None, actor="t")
    assert (e1.version, e1.registration_id, e1.from_registration_id) == (1, a, None)
    res = client.resolve("prod")
    assert (res.registration_id, res.harness_id, res.version) == (a, ha, 1)
    assert res.harness == base

    with pytest.raises(StalePromotion, match="stale promotion"):
        client.promote("prod", b, expected=None)
    # raw status code: FAILED_PRECONDITION
    stub = pb_grpc.HarnessRegistryStub(client.channel)
    with pytest.raises(grpc.RpcError) as exc:
        stub.Promote(pb.PromoteRequest(channel="prod", registration_id=b, expected_current_id=b))
    assert exc.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert client.resolve("prod", with_document=False).registration_id == a

    e2 = client.promote("prod", a, expected=ha, canary_registration_id=b, canary_weight=0.1)
    assert e2.canary_registration_id == b and e2.canary_weight == pytest.approx(0.1)
    res = client.resolve("prod", with_document=False)
    assert res.harness is None and res.canary_harness_id == hb and res.version == 2
    e3 = client.promote("prod", b, expected=a, expected_version=2, reason="canary good")
    assert e3.registration_id == b and e3.canary_registration_id is None
    e4 = client.rollback("prod", expected=b, actor="oncall")
    assert (e4.action, e4.registration_id, e4.version) == ("rollback", a, 4)
    assert [h.version for h in client.history("prod")] == [4, 3, 2, 1]


def test_times_read_back_are_aware_utc_and_equal_what_was_written(
    registry_service, repo_root
) -> None:  # type: ignore[no-untyped-def]
    client, reg = registry_service
    before = dt.datetime.now(dt.UTC)
    rid, _, _ = client.put(load_dir(repo_root / "harnesses" / "baseline"))
    entry = client.promote("prod", rid, expected=None, actor="t")
    after = dt.datetime.now(dt.UTC)
    got, _ = client.get(rid)
    (event,) = client.history("prod")
    for read, written in (
        (got.created_at, reg.get(rid).created_at),
        (entry.created_at, reg.history("prod")[0].created_at),
        (event.created_at, reg.history("prod")[0].created_at),
    ):
        assert read.utcoffset() == dt.timedelta(0)
        assert read == written  # the registry's own row, to the microsecond
        assert before <= read <= after  # a naive time would raise TypeError here


def test_registry_time_reads_every_zone_as_utc() -> None:
    utc = registry_time("2026-12-06T22:30:01.250000Z", "f")
    assert utc == dt.datetime(2026, 12, 6, 22, 30, 1, 250000, tzinfo=dt.UTC)
    assert utc.tzinfo is dt.UTC
    shifted = registry_time("2026-12-07T00:30:01.250000+02:00", "f")
    assert shifted == utc and shifted.tzinfo is dt.UTC
    zoneless = registry_time("2026-12-06T22:30:01.250000", "f")
    assert zoneless == utc and zoneless.tzinfo is dt.UTC
    with pytest.raises(ValueError, match="ChannelEvent.at '' is not an RFC 3339 time"):
        registry_time("", "ChannelEvent.at")


def test_bad_input_is_named(registry_service) -> None:  # type: ignore[no-untyped-def]
    client, _ = registry_service
    stub = pb_grpc.HarnessRegistryStub(client.channel)
    with pytest.raises(grpc.RpcError) as exc:
        stub.Put(pb.PutRequest(harness_json='{"schema_version": 1, "policy": {"bogus": 1}}'))
    assert exc.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "policy.bogus" in (exc.value.details() or "")
    with pytest.raises(grpc.RpcError) as exc:
        stub.Put(pb.PutRequest(harness_json="{}", patch_json="{oops"))
    assert exc.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(NotFound, match="reg-nope"):
        client.get("reg-nope")
    with pytest.raises(InvalidArgument, match="channel"):
        client.resolve("NOT A CHANNEL")


def test_workflow_registrar_records_lineage_and_promotes(registry_service, repo_root) -> None:  # type: ignore[no-untyped-def]
    from services.registry.registrar import RegistryResultRegistrar
    from workflows.params import RegisterRequest

    client, _ = registry_service
    base = load_dir(repo_root / "harnesses" / "baseline")
    parent, _, _ = client.put(base, Lineage(registered_by="seed"))
    child = apply_patch(base, PATCH)
    registrar = RegistryResultRegistrar(client)
    req = RegisterRequest(
        run_id="evo-7",
        round=2,
        harness=child,
        parent_harness_id=harness_id(base),
        report_key="runs/evo-7/round-2.json",
    )
    rid = registrar.register(req)
    assert registrar.register(req) == rid  # a retried activity is a no-op
    reg, doc = client.get(rid)
    assert doc == child and reg.parent_id == parent
    assert reg.patch is not None and reg.patch["ops"] == PATCH["ops"]
    assert reg.workflow_id == "evo-7" and reg.registered_by == "workflow:evo-7/round-2"
    assert reg.round_report_ref == "runs/evo-7/round-2.json"
    assert len(client.list(workflow_id="evo-7")) == 1
    # approved promotion: channel "staging" created, then moved by compare-and-set
    registrar.register(req.model_copy(update={"channel": "staging"}))
    assert client.resolve("staging", with_document=False).registration_id == rid
    assert [h.actor for h in client.history("staging")] == ["workflow:evo-7"]


def test_registrar_links_an_unregistered_starting_harness(registry_service, repo_root) -> None:  # type: ignore[no-untyped-def]
    """A hand-started run's starting harness was never registered: the registrar registers
    it (as the run's start) so the accepted harness keeps parent_id and patch (item 6)."""
    from services.registry.registrar import RegistryResultRegistrar
    from workflows.params import RegisterRequest

    client, _ = registry_service
    base = load_dir(repo_root / "harnesses" / "baseline").model_copy(
        update={"description": f"never registered {uuid.uuid4().hex}"}
    )
    child = apply_patch(base, PATCH)
    patch = {**PATCH, "rationale": "guidance for colour fidelity"}
    req = RegisterRequest(
        run_id="evo-lineage",
        round=1,
        harness=child,
        parent_harness_id=harness_id(base),
        parent_harness=base,
        patch=patch,
        report_key="runs/evo-lineage/round-001.json",
    )
    registrar = RegistryResultRegistrar(client)
    rid = registrar.register(req)
    reg, _ = client.get(rid)
    assert reg.parent_id is not None and reg.patch == patch
    assert "evo-lineage" in reg.note and "round 1" in reg.note
    # a name and description of its own, not the starting harness's (item 10)
    assert child.name == base.name == "baseline"
    assert reg.name == "baseline+evo-lineage.r1"
    assert reg.description == (
        "Evolved by run evo-lineage, round 1: accepted a policy patch "
        "(guidance for colour fidelity)."
    )
    parent, parent_doc = client.get(reg.parent_id)
    assert parent_doc == base and parent.registered_by == "workflow:evo-lineage/start"
    assert parent.name == "baseline" and parent.description == ""
    # the promotion after approval promotes that registration, lineage intact
    promoted = registrar.register(
        req.model_copy(update={"channel": f"lin-{uuid.uuid4().hex[:6]}", "round": 3})
    )
    assert promoted == rid
    assert len(client.list(workflow_id="evo-lineage", harness_id=harness_id(child))) == 1


def test_cli_against_the_service(registry_service, repo_root, capsys) -> None:  # type: ignore[no-untyped-def]
    from evoharness_app.cli import main

    client, _ = registry_service
    target = ["--target", client.target]

    def run(*args: str):  # type: ignore[no-untyped-def]
        code = main(list(args))
        out = capsys.readouterr()
        return code, (json.loads(out.out) if code == 0 else out.err)

    code, a = run("registry", "put", str(repo_root / "harnesses" / "baseline"), *target)
    assert code == 0 and a["created"]
    code, ev = run("registry", "promote", "dev", a["registration_id"], *target)
    assert code == 0 and ev["version"] == 1
    code, res = run("registry", "resolve", "dev", *target)
    assert res["registration_id"] == a["registration_id"] and res["harness_id"] == a["harness_id"]
    code, err = run("registry", "promote", "dev", a["registration_id"], "--expect", "none", *target)
    assert code == 1 and "StalePromotion" in err
    code, hist = run("registry", "history", "dev", *target)
    assert [h["version"] for h in hist] == [1]
    child = apply_patch(load_dir(repo_root / "harnesses" / "baseline"), PATCH)
    b, _, _ = client.put(child, Lineage(parent_id=a["registration_id"]))
    code, d = run("registry", "diff", a["registration_id"], b, *target)
    assert d == {"policy": PATCH["ops"]}
