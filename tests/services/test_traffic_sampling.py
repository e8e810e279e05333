"""Sampled traffic end to end (issue 34) over real gRPC and a real S3 server: a runtime with
sampling on for one channel serves 131 Render requests whose distribution shifts
from single objects to counting prompts; the records land in S3 by day with their verdicts,
the drift gauge on the runtime's metrics endpoint rises past the alert threshold once the
shift fills its window, and ``evoharness tasks from-traffic`` builds a deduplicated
label-free task set from the stored records. The alert rule itself is evaluated on synthetic
series by promtool (tests/chart/test_metrics.py)."""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from evoharness.harness.io import load_dir
from evoharness.harness.patch import apply_patch
from evoharness.tasks.io import load_tasks
from evoharness.traffic.records import read_window
from harness_registry import Lineage
from services.protos.evoharness.v1 import runtime_pb2 as pb
from services.protos.evoharness.v1 import runtime_pb2_grpc as pb_grpc
from services.registry.client import RegistryClient
from services.storage.s3 import S3ArtifactStore
from tests.fixtures.oip import metric_value
from tests.fixtures.services import ServiceHandle, s3_config
from tests.fixtures.traffic import sampled

CHANNEL = "traffic-test"
SMALL = [
    {"op": "replace", "path": "/policy/params/width", "value": 128},
    {"op": "replace", "path": "/policy/params/height", "value": 128},
    {"op": "replace", "path": "/policy/params/steps", "value": 8},
]
CLASSES = ("dog", "cat", "cup", "car", "apple", "clock", "bench", "bird", "horse", "boat")
NUMBERS = ("two", "three", "four")


@pytest.fixture(scope="module")
def bucket(services_stack: dict[str, Any]) -> str:
    """The session stack's bucket (tests/services/conftest.py)."""
    return str(services_stack["_s3"].bucket)


@pytest.fixture(scope="module")
def stack(
    services_stack: dict[str, ServiceHandle], service_factory: Any, s3_server: Any, bucket: str
) -> dict[str, ServiceHandle]:
    """The session stack's registry, generation and verification services, and a runtime of
    this module's that samples ``CHANNEL``."""
    s3, env = s3_config(s3_server, bucket)
    runtime_cfg: dict[str, Any] = {
        "registry_address": services_stack["registry"].address,
        "generation_address": services_stack["generation"].address,
        "verification_address": services_stack["verification"].address,
        "resolve_ttl_seconds": 0,
        "traffic": {
            "channels": [CHANNEL],
            "rate": 1.0,
            "flush_seconds": 0.5,
            "drift_window": 40,
            "reference_ttl_seconds": 0,
        },
    }
    rt = service_factory("runtime", {"runtime": runtime_cfg, "s3": s3}, env=env)
    return {**services_stack, "runtime": rt}


def _cli(args: list[str], s3_server: Any, bucket: str) -> Any:
    from evoharness_app.cli import app

    env = {
        "EVOHARNESS_S3__ENDPOINT": s3_server.endpoint,
        "EVOHARNESS_S3__SECURE": "false",
        "EVOHARNESS_S3__BUCKET": bucket,
        "EVOHARNESS_S3__ACCESS_KEY": s3_server.access_key,
        "EVOHARNESS_S3__SECRET_KEY": s3_server.secret_key,
    }
    return CliRunner().invoke(app, args, env=env)


def _drift(runtime: ServiceHandle) -> float:
    labels = {"channel": CHANNEL, "distribution": "kinds"}
    return metric_value(runtime.metrics_text(), "evoharness_traffic_drift", labels)


def _wait_window(runtime: ServiceHandle, n: int) -> None:
    """Wait (bounded) until the sampler's window holds ``n`` records: it writes off the
    request path, a moment after the Render returned."""
    deadline = time.monotonic() + 30
    got = 0.0
    while time.monotonic() < deadline:
        text = runtime.metrics_text()
        got = metric_value(text, "evoharness_traffic_window_records", {"channel": CHANNEL})
        if got >= n:
            return
        time.sleep(0.1)
    raise AssertionError(f"the drift window holds {got} records, expected {n}")


def test_shifting_traffic_is_sampled_drifts_and_becomes_tasks(
    stack: dict[str, ServiceHandle], s3_server: Any, bucket: str, repo_root: Path, tmp_path: Path
) -> None:
    base = apply_patch(
        load_dir(repo_root / "harnesses" / "baseline"),
        {
            "responsibility": "policy",
            "ops": SMALL,
        },
    )
    with RegistryClient(stack["registry"].address) as client:
        reg_id, _, _ = client.put(base, Lineage(registered_by="traffic-test"))
        client.promote(CHANNEL, reg_id, expected=None, actor="test")
    # the harness was evolved on single-object prompts: that is the channel's reference
    ref_tasks = tmp_path / "evolved-on.jsonl"
    lines = [
        json.dumps(
            {
                "task_id": f"t{i}",
                "prompt": f"a photo of a {c}",
                "task_family": "single_object",
                "constraints": [
                    {"constraint_id": "o0", "type": "object", "subject": c},
                ],
            }
        )
        for i, c in enumerate(CLASSES)
    ]
    ref_tasks.write_text("\n".join(lines) + "\n")
    out = _cli(
        ["traffic", "reference", "--channel", CHANNEL, "--tasks", str(ref_tasks)], s3_server, bucket
    )
    assert out.exit_code == 0, out.output

    stub = pb_grpc.RuntimeStub(stack["runtime"].channel())
    sent = 0

    def render(prompt: str, seed: int) -> None:
        nonlocal sent
        stub.Render(
            pb.RenderRequest(
                prompt=prompt, channel=CHANNEL, seed=seed, options=pb.RenderOptions(verify=True)
            ),
            timeout=60,
        )
        sent += 1

    # phase 1: what the harness was evolved on
    for i in range(40):
        render(f"a photo of a {CLASSES[i % len(CLASSES)]}", i)
    _wait_window(stack["runtime"], 40)
    before = _drift(stack["runtime"])
    # a request carrying personal data is served but never stored
    render("a photo of a dog for jane.doe@example.com", 999)
    # phase 2: counting prompts (a few repeated)
    for i in range(90):
        n, c = NUMBERS[i % 3], CLASSES[(i // 3) % len(CLASSES)]
        render(f"a photo of {n} {c}s", 1000 + i)
    deadline = time.monotonic() + 30
    after = before
    while time.monotonic() < deadline and after <= 0.3:
        after = _drift(stack["runtime"])
        time.sleep(0.1)
    assert before < 0.1, before
    assert after > 0.3, after  # past the chart's default alert threshold (values.yaml)
    text = stack["runtime"].metrics_text()
    assert (
        metric_value(
            text, "evoharness_traffic_dropped_total", {"channel": CHANNEL, "reason": "redacted"}
        )
        == 1
    )
    assert metric_value(text, "evoharness_traffic_sampled_total", {"channel": CHANNEL}) == sent - 1

    stored = 0.0
    deadline = time.monotonic() + 30  # the writer stores a moment after the last Render
    while time.monotonic() < deadline and stored < sent - 1:
        labels = {"channel": CHANNEL}
        stored = metric_value(
            stack["runtime"].metrics_text(), "evoharness_traffic_stored_total", labels
        )
        time.sleep(0.1)
    assert stored == sent - 1
    store = S3ArtifactStore.from_settings(s3_server.settings, bucket=bucket)
    today = dt.datetime.now(dt.UTC).date()
    records, batches = read_window(store, "traffic", CHANNEL, today - dt.timedelta(days=1), today)
    assert len(records) == sent - 1 and batches >= 2
    assert all("@" not in r.prompt for r in records)
    assert all(r.registration_id == reg_id and r.verdicts for r in records)
    counting = [r for r in records if "photo of a " not in r.prompt]
    assert {v.type for r in counting for v in r.verdicts} >= {"count"}

    tasks_file = tmp_path / "from-traffic.jsonl"
    since = (today - dt.timedelta(days=1)).isoformat()
    out = _cli(
        [
            "tasks",
            "from-traffic",
            "--channel",
            CHANNEL,
            "--since",
            since,
            "--output",
            str(tasks_file),
        ],
        s3_server,
        bucket,
    )
    assert out.exit_code == 0, out.output
    tasks = load_tasks(tasks_file)
    assert len(tasks) == len(CLASSES) + 30  # 10 single-object prompts, 30 distinct counting ones
    manifest = json.loads((tmp_path / "from-traffic.jsonl.manifest.json").read_text())
    assert manifest["channel"] == CHANNEL and manifest["records"] == sent - 1
    assert manifest["families"]["count"] == 30 and manifest["families"]["single_object"] == 10
    assert all(t.metadata["source"] == f"traffic:{CHANNEL}" for t in tasks)

    drift = _cli(
        ["traffic", "drift", "--channel", CHANNEL, "--since", since, "--json"], s3_server, bucket
    )
    assert drift.exit_code == 0, drift.output
    assert json.loads(drift.output)["drift"]["kinds"] > 0.3


@pytest.mark.parametrize(("canary_pass", "worse"), [(20, True), (44, False)])
def test_canary_check_rolls_back_a_worse_canary_only(
    stack: dict[str, ServiceHandle],
    s3_server: Any,
    bucket: str,
    repo_root: Path,
    canary_pass: int,
    worse: bool,
) -> None:
    """``traffic canary-check --rollback`` against the real registry service and S3: a canary
    that passes 20 of 60 sampled requests against the stable's 45 of 60 is taken off the
    channel (compare-and-set, with the evidence as the reason); one at 44 of 60 stays."""
    from evoharness.traffic.records import batch_key, dump_batch

    channel = f"canary-{canary_pass}"
    base = load_dir(repo_root / "harnesses" / "baseline")
    variant = apply_patch(base, {"responsibility": "policy", "ops": SMALL})
    with RegistryClient(stack["registry"].address) as client:
        stable, _, _ = client.put(base, Lineage(registered_by="canary-test"))
        canary, _, _ = client.put(variant, Lineage(registered_by="canary-test"))
        client.promote(
            channel, stable, expected=None, canary_registration_id=canary, canary_weight=0.5
        )
    store = S3ArtifactStore.from_settings(s3_server.settings, bucket=bucket)
    recs = sampled(canary, canary_pass, 60 - canary_pass, channel) + sampled(
        stable, 45, 15, channel
    )
    store.put(batch_key("traffic", channel, dt.datetime.now(dt.UTC)), dump_batch(recs))
    today = dt.datetime.now(dt.UTC).date().isoformat()
    args = ["traffic", "canary-check", "--channel", channel, "--since", today]
    args += ["--target", stack["registry"].address, "--json"]
    dry = _cli(args, s3_server, bucket)
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.output)["worse"] is worse
    out = _cli([*args, "--rollback"], s3_server, bucket)
    assert out.exit_code == 0, out.output
    got = json.loads(out.output)
    assert got["rolled_back"] is worse and got["n_canary"] == got["n_stable"] == 60
    with RegistryClient(stack["registry"].address) as client:
        res = client.resolve(channel, with_document=False)
        history = client.history(channel)
    assert res.registration_id == stable
    assert (res.canary_registration_id is None) is worse
    if worse:
        last = max(history, key=lambda e: e.version)
        assert "Fisher" in last.reason and last.actor == "traffic canary-check"
        assert last.version == 2 and last.canary_registration_id is None
