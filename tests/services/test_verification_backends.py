"""The real verifier backends: RapidOCR on rendered text; OWLv2 with a tiny randomly initialised
``Owlv2ForObjectDetection`` saved to a temporary folder (and to S3) and loaded from there; the
VLM against a local chat-completions server; and the composite's routing per constraint type
through a real ``evoharness serve verification`` process."""

from __future__ import annotations

import base64
import io
import json
import string
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageDraw, ImageFont

from evoharness.evidence import EvidenceStatus
from evoharness.tasks.models import Constraint
from services.verification.backends.ocr import OcrBackend
from services.verification.backends.owlv2 import Owlv2Backend, Owlv2Settings
from services.verification.backends.vlm import (
    ANSWER_LIMITS,
    VlmAnswer,
    VlmBackend,
    VlmSettings,
    read_answer,
)
from services.verification.client import VerificationClient
from tests.fixtures.services import s3_config

OBJ = Constraint(constraint_id="o", type="object", subject="dog")
CNT = Constraint(constraint_id="n", type="count", subject="cat", min_count=2, max_count=2)
POS = Constraint(constraint_id="p", type="position", subject="dog", relation="left of", value="cat")
NEG = Constraint(constraint_id="x", type="negative", subject="car")
COL = Constraint(constraint_id="c", type="color", subject="dog", value="red")
TXT = Constraint(constraint_id="t", type="text", subject="text", value="bakery")


def text_png(text: str, size: tuple[int, int] = (512, 256)) -> bytes:
    im = Image.new("RGB", size, (255, 255, 255))
    draw = ImageDraw.Draw(im)
    draw.text((40, 80), text, fill=(0, 0, 0), font=ImageFont.load_default(size=72))
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return buf.getvalue()


def make_tiny_owlv2(path: Path) -> Path:
    """A tiny random OWLv2 (2 layers of width 32, 64-px images, a character-level CLIP BPE
    vocabulary) saved with its processor in ``save_pretrained`` layout."""
    import torch
    from transformers import CLIPTokenizer, Owlv2Config, Owlv2ForObjectDetection, Owlv2Processor

    try:
        from transformers import Owlv2ImageProcessorPil as ImageProcessor
    except ImportError:  # older transformers
        from transformers import Owlv2ImageProcessor as ImageProcessor

    path.mkdir(parents=True, exist_ok=True)
    chars = list(string.ascii_lowercase + string.digits)
    tokens = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + chars + [c + "</w>" for c in chars]
    tokens += ["<|startoftext|>", "<|endoftext|>"]  # OWL's query mask needs a non-zero start id
    vocab = {t: i for i, t in enumerate(dict.fromkeys(tokens))}
    (path / "vocab.json").write_text(json.dumps(vocab))
    (path / "merges.txt").write_text("#version: 0.2\n")
    tok = CLIPTokenizer(
        str(path / "vocab.json"), str(path / "merges.txt"), pad_token="!", model_max_length=16
    )
    cfg = Owlv2Config(
        text_config={
            "vocab_size": len(vocab),
            "hidden_size": 32,
            "intermediate_size": 37,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "max_position_embeddings": 16,
            "bos_token_id": vocab["<|startoftext|>"],
            "eos_token_id": vocab["<|endoftext|>"],
            "pad_token_id": 0,
        },
        vision_config={
            "hidden_size": 32,
            "intermediate_size": 37,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "image_size": 64,
            "patch_size": 16,
        },
        projection_dim=32,
    )
    torch.manual_seed(0)
    Owlv2ForObjectDetection(cfg).eval().save_pretrained(path)
    Owlv2Processor(
        image_processor=ImageProcessor(size={"height": 64, "width": 64}), tokenizer=tok
    ).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def tiny_owlv2(tmp_path_factory) -> Path:
    return make_tiny_owlv2(tmp_path_factory.mktemp("owlv2") / "tiny-owlv2")


# --------------------------------------------------------------------------------- OCR


def test_ocr_reads_rendered_text():
    png = text_png("BAKERY")
    near = Constraint(constraint_id="t2", type="text", subject="text", value="bakary")
    other = Constraint(constraint_id="t3", type="text", subject="text", value="pharmacy")
    ev = OcrBackend().verify(png, [TXT, near, other, OBJ])
    assert [e.status for e in ev] == [
        EvidenceStatus.passed,
        EvidenceStatus.uncertain,
        EvidenceStatus.failed,
        EvidenceStatus.uncertain,
    ]
    assert ev[0].decided_by == "ocr" and ev[0].confidence > 0.5 and ev[0].boxes
    assert all(0.0 <= v <= 1.0 for v in ev[0].boxes[0])
    assert "bakery" in json.dumps(ev[0].observed).lower()
    assert "cannot judge object" in ev[3].note


# ------------------------------------------------------------------------------- OWLv2


def test_owlv2_tiny_model_from_local_path(tiny_owlv2):
    backend = Owlv2Backend(Owlv2Settings(model_path=str(tiny_owlv2)))
    png = text_png("x", (96, 64))
    ev = backend.verify(png, [OBJ, CNT, POS, NEG, COL])
    assert [e.constraint_id for e in ev] == ["o", "n", "p", "x", "c"]
    assert all(e.decided_by == "owlv2" for e in ev)
    assert ev[4].status is EvidenceStatus.uncertain and "cannot judge color" in ev[4].note
    for e in ev[:4]:
        assert e.note and all(0.0 <= v <= 1.0 for b in e.boxes for v in b)
    assert "best_score" in ev[0].observed and "count" in ev[1].observed
    for e in ev[:4]:  # which detector judged, and with which thresholds
        assert e.observed["detector"] == f"owlv2:{tiny_owlv2}"
    assert ev[0].observed["thresholds"] == {"pass_score": 0.3, "reject_score": 0.1}
    assert ev[1].observed["thresholds"] == {"pass_score": 0.9, "reject_score": 0.9}
    assert backend.verify(png, [OBJ, CNT, POS, NEG, COL]) == ev  # deterministic


def test_owlv2_weights_from_s3(tiny_owlv2, s3_store, tmp_path):
    for f in tiny_owlv2.iterdir():
        s3_store.put(f"models/tiny-owlv2/{f.name}", f.read_bytes())
    local = Owlv2Backend(Owlv2Settings(model_path=str(tiny_owlv2)))
    remote = Owlv2Backend(
        Owlv2Settings(s3_prefix="models/tiny-owlv2", cache_dir=str(tmp_path)), s3_store
    )
    png = text_png("y", (64, 96))

    def judged(backend: Owlv2Backend) -> list[dict[str, Any]]:
        out = [e.model_dump(mode="json") for e in backend.verify(png, [OBJ, CNT, POS])]
        for e in out:
            assert e["observed"].pop("detector").startswith("owlv2:")
        return out

    assert judged(remote) == judged(local)
    assert remote.detector_id == f"owlv2:s3://{s3_store.bucket}/models/tiny-owlv2"
    assert (tmp_path / "evoharness-owlv2" / "models_tiny-owlv2" / ".complete").is_file()
    with pytest.raises(FileNotFoundError, match="no config.json"):
        Owlv2Backend(
            Owlv2Settings(s3_prefix="models/none", cache_dir=str(tmp_path)), s3_store
        ).load()
    with pytest.raises(ValueError, match="never fetched from a hub"):
        Owlv2Backend(Owlv2Settings())


# --------------------------------------------------------------------------------- VLM


@pytest.fixture
def vlm(fake_openai, monkeypatch):
    monkeypatch.setenv("EVOHARNESS_LLM_API_KEY", "sk-vlm")
    return VlmBackend(
        VlmSettings.model_validate(
            {
                "chat": {
                    "model": "local-vlm",
                    "base_url": fake_openai.base_url,
                    "timeout_s": 2,
                    "backoff_s": 0,
                    "max_attempts": 2,
                },
                "min_confidence": 0.7,
            }
        )
    )


def test_vlm_verdicts_and_request(fake_openai, vlm):
    png = text_png("dog")
    answer = {
        "verdicts": [
            {"constraint_id": "c", "answer": "yes", "confidence": 0.9, "reason": "red fur"},
            {
                "constraint_id": "x",
                "answer": "yes",
                "confidence": 0.95,
                "reason": "a car is parked",
            },
            {"constraint_id": "o", "answer": "no", "confidence": 0.5, "reason": "hard to tell"},
            {
                "constraint_id": "zzz",
                "answer": "yes",
                "confidence": 1.0,
                "reason": "ignore the others",
            },
        ]
    }
    fake_openai.script({"content": json.dumps(answer)})
    ev = vlm.verify(png, [COL, NEG, OBJ, CNT])
    assert [e.status for e in ev] == [
        EvidenceStatus.passed,
        EvidenceStatus.failed,
        EvidenceStatus.uncertain,
        EvidenceStatus.uncertain,
    ]
    assert ev[0].decided_by == "vlm" and ev[0].confidence == pytest.approx(0.9)
    assert "no verdict" in ev[3].note
    (req,) = fake_openai.requests()
    parts = req["body"]["messages"][1]["content"]
    url = next(p["image_url"]["url"] for p in parts if p["type"] == "image_url")
    assert base64.b64decode(url.split(",", 1)[1]) == png
    questions = json.loads(next(p["text"] for p in parts if p["type"] == "text"))["questions"]
    assert [q["constraint_id"] for q in questions] == ["c", "x", "o", "n"]
    assert "exactly 2 cat" in questions[3]["question"]


def test_vlm_invalid_answers_are_uncertain(fake_openai, vlm):
    fake_openai.script(
        {"content": "The dog is red."}, {"content": '{"verdicts": [{"constraint_id": "c"'}
    )
    ev = vlm.verify(text_png("dog"), [COL])
    assert ev[0].status is EvidenceStatus.uncertain and "invalid_json" in ev[0].note
    assert len(fake_openai.requests()) == 2


VERDICTS = {"verdicts": [{"constraint_id": "c", "answer": "yes", "confidence": 0.9}]}


@pytest.mark.parametrize(
    "content",
    [
        json.dumps(VERDICTS),
        "```json\n" + json.dumps(VERDICTS, indent=2) + "\n```",
        "```JSON\n" + json.dumps(VERDICTS) + "\n```",
        "```" + json.dumps(VERDICTS) + "```",
    ],
)
def test_read_answer_reads_plain_and_fenced_json(content: str) -> None:
    ans = read_answer(content, "verifier", VlmAnswer.model_validate)
    assert isinstance(ans, VlmAnswer), ans
    assert [(v.constraint_id, v.answer, v.confidence) for v in ans.verdicts] == [("c", "yes", 0.9)]


def test_read_answer_failures_name_the_reason() -> None:
    def read(content: str) -> Any:
        return read_answer(content, "judge", VlmAnswer.model_validate)

    big = json.dumps(VERDICTS) + " " * ANSWER_LIMITS.max_raw_chars
    too_large = read(big)
    assert (too_large.role, too_large.reason) == ("judge", "too_large")
    assert str(ANSWER_LIMITS.max_raw_chars) in too_large.detail and len(too_large.excerpt) <= 200
    assert read('{"verdicts": [').reason == "invalid_json"
    assert read('{"verdicts": [1, 2], "seed": 3}').reason == "schema"
    schema = read('{"verdicts": [{"constraint_id": "c", "answer": "maybe", "confidence": 2}]}')
    assert schema.reason == "schema"
    assert schema.detail.startswith("verdicts.0.answer:") and "(+1 more)" in schema.detail
    assert read("[]").reason == "schema"
    assert "\x1b" not in read('\x1b[31m{"verdicts": 1}').excerpt


# ---------------------------------------------------------- composite through the service


def test_composite_routing_through_grpc(service_factory, s3_server, tiny_owlv2, fake_openai):
    s3, env = s3_config(s3_server, "verify-composite")
    env["EVOHARNESS_LLM_API_KEY"] = "sk-vlm"
    svc = service_factory(
        "verification",
        {
            "backend": "composite",
            "s3": s3,
            "owlv2": {"model_path": str(tiny_owlv2)},
            "vlm": {
                "chat": {
                    "model": "local-vlm",
                    "base_url": fake_openai.base_url,
                    "timeout_s": 5,
                    "backoff_s": 0,
                }
            },
            "composite": {
                "routes": {
                    "object": ["owlv2"],
                    "count": ["owlv2"],
                    "position": ["owlv2"],
                    "text": ["ocr"],
                    "color": ["vlm"],
                    "negative": ["sim"],
                },
                "fallbacks": {},
            },
        },
        env=env,
    )
    fake_openai.script(
        {
            "content": json.dumps(
                {
                    "verdicts": [
                        {"constraint_id": "c", "answer": "yes", "confidence": 0.9, "reason": "red"}
                    ]
                }
            )
        }
    )
    constraints = [OBJ, CNT, POS, TXT, COL, NEG]
    with VerificationClient(svc.address, None) as client:
        ev = client.verify(text_png("BAKERY"), constraints)
    route = {"o": "owlv2", "n": "owlv2", "p": "owlv2", "t": "ocr", "c": "vlm", "x": "sim"}
    for c, e in zip(constraints, ev, strict=True):
        assert e.constraint_id == c.constraint_id
        assert e.note.startswith(f"routed {c.type.value} → {route[c.constraint_id]}"), e.note
        assert e.decided_by in ("composite", f"composite/{route[c.constraint_id]}")
    by = {e.constraint_id: e for e in ev}
    assert by["t"].status is EvidenceStatus.passed and by["t"].decided_by == "composite/ocr"
    assert by["c"].status is EvidenceStatus.passed and by["c"].decided_by == "composite/vlm"
    # the VLM saw only the constraint routed to it
    (req,) = fake_openai.requests()
    parts = req["body"]["messages"][1]["content"]
    assert [q["constraint_id"] for q in json.loads(parts[0]["text"])["questions"]] == ["c"]
    text = svc.metrics_text()
    for backend in ("composite", "owlv2", "ocr", "vlm", "sim"):
        assert f'evoharness_verifier_latency_seconds_count{{backend="{backend}"}} 1.0' in text
    assert 'evoharness_verdicts_total{backend="vlm",status="pass"} 1.0' in text
    assert 'evoharness_llm_calls_total{backend="vlm",outcome="ok",role="verifier"} 1.0' in text
