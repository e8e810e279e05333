"""The verification service's ``Judge`` RPC (the KScore-style rubric, issue 32) through real
gRPC channels and the ``evoharness serve verification`` process: the inspector judge's levels
equal ``evoharness.kscore``'s mapping of the in-process sim inspector's verdicts, aesthetics
not measured and the score renormalised, inline and by S3 reference; the VLM judge against
the scripted chat server (a valid answer's four levels and score; invalid answers: no score,
the failures); a referring prompt's lookup resolved before its constraints are read (with a
note); bad requests refused with INVALID_ARGUMENT naming the field; metrics."""

from __future__ import annotations

import json

import grpc
import numpy as np
import pytest

from evoharness.kscore import kscore_from_evidence
from evoharness.program import ImageRef, LayoutItem, Program
from evoharness.sim import SimGenerator, SimInspector
from evoharness.sim.generator import encode_png
from evoharness.tasks.models import Constraint
from services.common.errors import InvalidField, NotFound
from services.protos import convert
from services.protos.evoharness.v1 import verification_pb2, verification_pb2_grpc
from services.storage.s3 import S3ArtifactStore
from services.verification.client import VerificationClient

PROGRAM = Program(
    prompt="a photo of a blue car left of a yellow bus",
    seed=7,
    layout=[
        LayoutItem(label="car", box=(0.05, 0.4, 0.35, 0.7), color="blue"),
        LayoutItem(label="bus", box=(0.6, 0.35, 0.95, 0.75), color="yellow"),
    ],
)
# faithfulness: position (pass) + giraffe (absent: fail) -> 0.5; visual correctness: the
# bus's colour (the layout-pasted bus loses its yellow in this world: fail) -> 0
NO_TEXT = [
    Constraint(constraint_id="p0", type="position", subject="car", relation="left of", value="bus"),
    Constraint(constraint_id="p1", type="color", subject="bus", value="yellow"),
    Constraint(constraint_id="p2", type="object", subject="giraffe"),
]
SIGN = Program(prompt='a photo of a sign that says "open"', seed=1)
# faithfulness: no giraffe (pass) -> 1; text accuracy: "open" (pass), "closed" (fail) -> 0.5
WITH_TEXT = [
    Constraint(constraint_id="n", type="negative", subject="giraffe"),
    Constraint(constraint_id="t", type="text", subject="text", value="open"),
    Constraint(constraint_id="t2", type="text", subject="text", value="closed"),
]
DIMS = ("faithfulness", "visual_correctness", "text_accuracy", "aesthetics")


@pytest.fixture(scope="module")
def sim_service(services_stack):
    """The session stack's verification service (sim backend, its S3 bucket)."""
    return services_stack["verification"]


@pytest.fixture(scope="module")
def store(services_stack):
    return S3ArtifactStore.from_settings(services_stack["_s3"])


@pytest.fixture(scope="module")
def images():
    gen = SimGenerator()
    return {"car": gen.generate(PROGRAM).png, "sign": gen.generate(SIGN).png}


def _levels(resp: verification_pb2.JudgeResponse) -> dict[str, float | None]:
    return {d: getattr(resp, d) if resp.HasField(d) else None for d in DIMS}


def test_inspector_levels_match_the_in_process_mapping(sim_service, images):
    stub = verification_pb2_grpc.VerificationServiceStub(sim_service.channel())
    local = SimInspector()
    for png, prompt, cs in (
        (images["car"], PROGRAM.prompt, NO_TEXT),
        (images["sign"], SIGN.prompt, WITH_TEXT),
    ):
        want = kscore_from_evidence(cs, local.verify(png, cs))
        resp = stub.Judge(
            verification_pb2.JudgeRequest(
                png=png, prompt=prompt, constraints=[convert.constraint_to_proto(c) for c in cs]
            ),
            timeout=60,
        )
        assert resp.judged and resp.judge == "inspector" and resp.judge_id == "sim"
        assert not resp.HasField("aesthetics")  # not measured, not 0
        got = _levels(resp)
        assert got == {
            "faithfulness": want.faithfulness,
            "visual_correctness": want.visual_correctness,
            "text_accuracy": want.text_accuracy,
            "aesthetics": None,
        }
        assert resp.needs_text == want.needs_text == (cs is WITH_TEXT)
        assert [e.constraint_id for e in resp.evidence] == [c.constraint_id for c in cs]
        # the renormalised weighting by hand (KScore weights 0.1 / 0.4 / 0.4, aesthetics out)
        f, v, t = got["faithfulness"], got["visual_correctness"], got["text_accuracy"]
        if cs is NO_TEXT:
            assert (f, v, t) == (0.5, 0.0, None)
            hand = (0.1 * 0.5 + 0.4 * 0.0) / (0.1 + 0.4)
        else:
            assert (f, v, t) == (1.0, None, 0.5)
            hand = (0.1 * 1.0 + 0.4 * 0.5) / (0.1 + 0.4)
        assert resp.score == pytest.approx(hand) == want.overall
        assert not resp.failures


def test_client_judge_reads_the_rubric_and_extracts_constraints(sim_service, store, images):
    with VerificationClient(sim_service.address, None) as inline:
        by_png = inline.judge(images["car"], PROGRAM.prompt, NO_TEXT)
    ref = store.put_content(images["car"], prefix="executions", suffix=".png")
    with VerificationClient(sim_service.address, store) as client:
        j = client.judge_ref(ref, PROGRAM.prompt, NO_TEXT)  # by reference, as Verify takes it
        assert (j.kscore, j.score, j.evidence) == (by_png.kscore, by_png.score, by_png.evidence)
        assert j.kscore is not None and j.kscore.aesthetics is None
        assert j.score == pytest.approx(j.kscore.overall) and j.score == pytest.approx(0.1)
        assert j.cost.verifier_calls == 1 and j.cost.llm_calls == 0
        # no constraints: read from the prompt by the rule extractor
        j = client.judge(images["car"], PROGRAM.prompt)
        assert {(c.type.value, c.subject) for c in j.constraints} >= {("color", "car")}
        assert j.kscore is not None and j.score is not None
        assert j.notes == [] and by_png.notes == []  # no lookup; given constraints as they are
        # a referring prompt: its lookup resolved with the embedded knowledge base first
        # (the bus is no wanted object; the car must be red)
        j = client.judge(images["car"], "a car in the colour of a London bus")
        assert {(c.type.value, c.subject, c.value) for c in j.constraints} == {
            ("object", "car", None),
            ("color", "car", "red"),
        }
        assert j.notes == [
            "colour of 'a London bus': 'a car in the colour of a London bus' read as 'a red car'"
        ]
        assert j.kscore is not None and j.kscore.visual_correctness == 0.0  # the car is blue
        # nothing checkable in the prompt: a rubric with no level and no score, and why
        j = client.judge(images["car"], "something pleasant")
        assert j.kscore is not None and j.score is None and not j.kscore.measured
        assert [f.reason for f in j.failures] == ["nothing_measured"]
    text = sim_service.metrics_text()
    assert 'evoharness_judge_latency_seconds_count{backend="inspector"}' in text
    assert 'evoharness_judgements_total{backend="inspector",outcome="unscored"} 1.0' in text
    assert (
        'evoharness_judge_levels_total{backend="inspector",dimension="aesthetics",'
        'level="not_measured"}' in text
    )


def test_bad_requests_name_the_field(sim_service, store, images):
    stub = verification_pb2_grpc.VerificationServiceStub(sim_service.channel())

    def refused(req: verification_pb2.JudgeRequest) -> str:
        with pytest.raises(grpc.RpcError) as err:
            stub.Judge(req, timeout=30)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
        return str(err.value.details())

    assert refused(verification_pb2.JudgeRequest(png=images["car"])).startswith("prompt")
    assert refused(verification_pb2.JudgeRequest(png=images["car"], prompt="  ")).startswith(
        "prompt"
    )
    assert refused(verification_pb2.JudgeRequest(prompt="a car")).startswith("image")
    assert refused(verification_pb2.JudgeRequest(png=b"not an image", prompt="a car")).startswith(
        "png"
    )
    tiny = encode_png(np.zeros((4, 4, 3), np.uint8))
    assert "too small" in refused(verification_pb2.JudgeRequest(png=tiny, prompt="a car"))
    bad = verification_pb2.JudgeRequest(png=images["car"], prompt="two cats")
    bad.constraints.add(constraint_id="x", type="count", subject="cat")  # no min_count
    assert refused(bad).startswith("constraints.0")
    with VerificationClient(sim_service.address, None) as client:
        with pytest.raises(InvalidField) as exc:
            client.judge_ref(ImageRef(bucket="other-bucket", key="x.png"), "a car")
        assert exc.value.field == "image.bucket"
        with pytest.raises(NotFound):
            client.judge_ref(ImageRef(bucket=store.bucket, key="nope/missing.png"), "a car")
        with pytest.raises(InvalidField) as exc:
            client.judge(images["car"], "")
        assert exc.value.field == "prompt"


# ------------------------------------------------------------------ the VLM judge


@pytest.fixture
def kscore_service(service_factory, fake_openai_server):
    chat = {
        "model": "judge-vlm",
        "base_url": fake_openai_server.base_url,
        "timeout_s": 5,
        "max_attempts": 2,
        "backoff_s": 0,
    }
    return service_factory(
        "verification",
        {"backend": "sim", "judge": {"backend": "kscore", "vlm": {"chat": chat}}},
        env={"EVOHARNESS_LLM_API_KEY": "sk-judge"},
    )


def _answer(**kw: object) -> dict[str, object]:
    base = {"faithfulness": 1, "visual_correctness": 0.5, "text_accuracy": None, "aesthetics": 1}
    return {"content": json.dumps({**base, **kw}), "prompt_tokens": 900, "completion_tokens": 40}


def test_vlm_judge_over_grpc(kscore_service, fake_openai, images):
    with VerificationClient(kscore_service.address, None) as client:
        fake_openai.script(_answer())
        j = client.judge(images["car"], PROGRAM.prompt)
        assert (j.judge, j.judge_id) == ("kscore", "kscore@judge-vlm")
        assert j.kscore is not None and not j.needs_text
        assert (j.kscore.faithfulness, j.kscore.visual_correctness) == (1.0, 0.5)
        assert (j.kscore.text_accuracy, j.kscore.aesthetics) == (None, 1.0)
        assert j.score == pytest.approx((0.1 * 1 + 0.4 * 0.5 + 0.1 * 1) / 0.6)
        assert (j.cost.llm_calls, j.cost.llm_prompt_tokens) == (1, 900)
        (req,) = fake_openai.requests()
        assert req["authorization"] == "Bearer sk-judge"
        user = req["body"]["messages"][1]["content"]
        assert json.loads(user[0]["text"])["prompt_needs_text"] is False
        # the task's constraints say text is needed: scored over four
        fake_openai.reset()
        fake_openai.script(_answer(text_accuracy=0, aesthetics=0.5))
        j = client.judge(images["sign"], "a shop front", WITH_TEXT)
        assert j.needs_text and j.kscore is not None and j.kscore.text_accuracy == 0.0
        assert j.score == pytest.approx(0.1 * 1 + 0.4 * 0.5 + 0.4 * 0 + 0.1 * 0.5)
        (req,) = fake_openai.requests()
        user = req["body"]["messages"][1]["content"]
        assert json.loads(user[0]["text"])["prompt_needs_text"] is True
        # an invalid answer twice (max_attempts 2): no rubric, no score, the failures
        fake_openai.reset()
        fake_openai.script({"content": "looks great"}, _answer(faithfulness=0.7))
        j = client.judge(images["car"], PROGRAM.prompt)
        assert j.kscore is None and j.score is None
        assert [(f.role, f.reason) for f in j.failures] == [("judge", "schema")]
        assert "faithfulness" in j.failures[0].detail
        assert len(fake_openai.requests()) == 2
        resp = client.last_judge_response
        assert resp is not None and not resp.judged
        assert not any(resp.HasField(d) for d in (*DIMS, "score"))
    text = kscore_service.metrics_text()
    assert 'evoharness_judgements_total{backend="kscore",outcome="scored"} 2.0' in text
    assert 'evoharness_judgements_total{backend="kscore",outcome="failed"} 1.0' in text
    assert 'evoharness_llm_calls_total{backend="kscore",outcome="invalid",role="judge"} 2.0' in text
